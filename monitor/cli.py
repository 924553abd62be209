"""The one entry point, ``llm-monitor``: subcommands registered from monitor.commands."""

from __future__ import annotations

import sys

import typer
from typer._click.exceptions import ClickException

from monitor.errors import MonitorError

app = typer.Typer(
    name="llm-monitor",
    help="Is the gap between two language models resolved? Offline reports and a live monitor.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Is the gap between two language models resolved? Offline reports and a live monitor."""


def _register() -> None:
    from monitor.commands import (
        calibrate,
        compare,
        leakage,
        power,
        report,
        run,
        schemas,
        stability,
        verdict,
        worker,
    )

    for module in (power, leakage, report, stability, run, calibrate, compare, verdict, schemas,
                   worker):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a MonitorError becomes a one-line message and exit status 2, no traceback."""
    try:
        app(args=argv, standalone_mode=False)
    except MonitorError as exc:
        typer.echo(f"llm-monitor: error: {exc}", err=True)
        return 2
    except ValueError as exc:
        typer.echo(f"llm-monitor: error: {exc}", err=True)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        return 1
    except ClickException as exc:  # usage errors carry their own exit codes
        exc.show()
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
