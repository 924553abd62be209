"""The one entry point, ``llm-monitor``: subcommands registered from monitor.commands."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import typer
from typer._click.exceptions import ClickException

from monitor.errors import MonitorError

_HELP = "Is the gap between two language models resolved? Offline reports and a live monitor."


def _root() -> None:
    """Is the gap between two language models resolved? Offline reports and a live monitor."""


#: The module that registers each subcommand, in the order of the help (run and worker
#: register two commands each).
_COMMAND_MODULES = {"power": "power", "leakage": "leakage", "report": "report",
                    "stability": "stability", "run": "run", "demo": "run",
                    "post": "post", "watch": "watch", "plan": "plan",
                    "evaluate-until-resolved": "until_resolved",
                    "calibrate": "calibrate", "compare": "compare", "verdict": "verdict",
                    "schemas": "schemas", "worker": "worker", "produce": "worker"}


def build_app(command: str | None = None) -> typer.Typer:
    """The CLI with every subcommand, or only with the module of ``command`` when it names one.

    typer builds the options of every registered command before it parses a command line, and
    each command module imports what its command needs: a line that names its subcommand
    imports and registers that one alone. Its help and behaviour are the same.
    """
    app = typer.Typer(name="llm-monitor", help=_HELP, no_args_is_help=True,
                      add_completion=False, pretty_exceptions_enable=False)
    app.callback()(_root)
    names = ([_COMMAND_MODULES[command]] if command in _COMMAND_MODULES
             else _COMMAND_MODULES.values())
    for name in dict.fromkeys(names):
        module: ModuleType = importlib.import_module(f"monitor.commands.{name}")
        module.register(app)
    return app


def __getattr__(name: str) -> typer.Typer:
    """``monitor.cli.app``: the whole CLI (every subcommand), for tests and tools that drive
    typer directly — built on first use, since importing every command module costs the
    start-up of a command line that names one."""
    if name == "app":
        return build_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a MonitorError becomes a one-line message and exit status 2, no traceback."""
    args = sys.argv[1:] if argv is None else argv
    try:
        # Without standalone mode, click returns a command's typer.Exit code instead of raising.
        status = build_app(args[0] if args else None)(args=args, standalone_mode=False)
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
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
