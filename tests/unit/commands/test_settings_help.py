"""The --help of every command that sets the live monitor's Settings shows the defaults that
Settings holds: read from it when the help is drawn, never typed a second time."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.core
import typer.main
from typer.testing import CliRunner

from monitor.cli import build_app
from monitor.runners.settings import Settings

#: Commands whose options set Settings fields (an option named as a field sets that field).
COMMANDS = ("run", "demo", "worker", "produce")
#: Options that set a field of another name.
ALIASES = {"exclude_flag": "exclude_flags"}
_DEFAULT = re.compile(r"\(default: (.*?)\)\s*│?\s*$")


def _options(name: str) -> list[typer.core.TyperOption]:
    group = typer.main.get_command(build_app(name))
    assert isinstance(group, typer.core.TyperGroup)
    return [p for p in group.commands[name].params if isinstance(p, typer.core.TyperOption)]


def _shown_defaults(name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Long option → the default its row of ``llm-monitor NAME --help`` states."""
    # Wide enough that no row wraps: each option's help, default included, on one line.
    monkeypatch.setenv("COLUMNS", "400")
    got = CliRunner().invoke(build_app(name), [name, "--help"])
    assert got.exit_code == 0, got.output
    shown = {}
    for line in got.output.splitlines():
        opt = re.match(r"[│\s]*(--[a-z][a-z0-9-]*)", line)
        m = _DEFAULT.search(line)
        if opt and m:
            # One default per option: a second, typed into the help text, would go stale.
            assert line.count("default:") == 1, line
            shown[opt.group(1)] = m.group(1)
    return shown


def _matches(shown: str, default: Any, param: typer.core.TyperOption) -> bool:
    if isinstance(default, bool):
        assert param.secondary_opts, param.name
        return shown == (param.opts[0] if default else param.secondary_opts[0])
    if isinstance(default, tuple):
        return tuple(shown.split(", ")) == default
    if isinstance(default, Path):
        return Path(shown) == default
    return bool(type(default)(shown) == default)


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_the_defaults_settings_holds(name: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    shown = _shown_defaults(name, monkeypatch)
    checked = set()
    for param in _options(name):
        field = ALIASES.get(param.name or "", param.name or "")
        if field not in Settings.model_fields:
            continue
        default = Settings.model_fields[field].default
        # Not given on the command line means: the environment, the --config file, or this.
        assert param.default is None, f"{name} --{field}: a default of its own, {param.default!r}"
        long = param.opts[0]
        assert long in shown, f"{name} {long}: no default in --help"
        assert _matches(shown[long], default, param), (
            f"{name} {long}: --help says {shown[long]!r}, Settings holds {default!r}")
        checked.add(field)
    expected = {"run": {"alpha", "port", "db", "exclude_flags", "include_leak_suspect", "view",
                        "max_body_bytes", "snapshot_interval"},
                "demo": {"host", "port"},
                "worker": {"batch_size", "broker", "partitions", "checkpoint_interval",
                           "engine", "alpha", "eval_interval"},
                "produce": {"broker", "partitions"}}[name]
    assert expected <= checked, expected - checked
