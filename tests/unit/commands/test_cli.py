"""The entry point registers only the subcommand a command line names; nothing else changes."""

from __future__ import annotations

import pytest
import typer.core
import typer.main
from typer.testing import CliRunner

from monitor.cli import _COMMAND_MODULES, build_app

NAMES = list(_COMMAND_MODULES)


def _commands(app: typer.Typer) -> set[str]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    return set(group.commands)


def test_every_registered_command_has_its_module() -> None:
    # A command added to a module but not to the table would only run through the full CLI;
    # one in the table but gone from its module would be an unknown command.
    assert _commands(build_app()) == set(NAMES)
    assert _commands(build_app("power")) == {"power"}
    assert _commands(build_app("run")) == {"run", "demo"}


@pytest.mark.parametrize("name", NAMES)
def test_a_named_command_has_the_same_help_as_in_the_whole_cli(name: str) -> None:
    runner = CliRunner()
    whole = runner.invoke(build_app(), [name, "--help"])
    alone = runner.invoke(build_app(name), [name, "--help"])
    assert whole.exit_code == alone.exit_code == 0
    assert alone.output == whole.output
    assert name in alone.output


@pytest.mark.parametrize("args", [["--help"], [], ["nonesuch"], ["--version"]])
def test_a_line_without_a_known_command_gets_the_whole_cli(args: list[str]) -> None:
    runner = CliRunner()
    got = runner.invoke(build_app(args[0] if args else None), args)
    assert got.output == runner.invoke(build_app(), args).output
    if args == ["--help"]:
        assert all(name in got.output for name in NAMES)
