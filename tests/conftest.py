"""Shared fixtures: where the real per-item data lives, and the terminal every test sees."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: The terminal of every test and of every process it starts. rich (the CLI's tables, typer's
#: --help) takes its size from COLUMNS and LINES, else from whichever of stdin, stdout and
#: stderr is a terminal, so a test run from a wide xterm, ``pytest -s`` or a CI runner would
#: otherwise read other layouts than the ones its assertions were written for.
TERMINAL = {"COLUMNS": "80", "LINES": "24"}
#: Variables that make rich or typer draw for a terminal (colours, other widths) on a pipe:
#: CI services set some of them (GitHub Actions: typer forces its terminal on GITHUB_ACTIONS).
TERMINAL_FORCING = ("FORCE_COLOR", "PY_COLORS", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                    "TERMINAL_WIDTH", "JUPYTER_COLUMNS", "JUPYTER_LINES", "GITHUB_ACTIONS")
_terminal = pytest.MonkeyPatch()


def pytest_configure(config: pytest.Config) -> None:
    # Before collection: test modules import the CLI, and typer reads its variables on import.
    for name, value in TERMINAL.items():
        _terminal.setenv(name, value)
    for name in TERMINAL_FORCING:
        _terminal.delenv(name, raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every test under tests/integration runs the CLI, a server or a broker as a process:
    # integration, whether or not the module says so (make test-fast leaves them out).
    integration = REPO / "tests" / "integration"
    for item in items:
        if item.path.is_relative_to(integration):
            item.add_marker(pytest.mark.integration)


def pytest_unconfigure(config: pytest.Config) -> None:
    _terminal.undo()


def terminal_env(columns: int, lines: int = 24) -> dict[str, str]:
    """The environment of a subprocess drawing for a ``columns`` × ``lines`` terminal."""
    env = {k: v for k, v in os.environ.items() if k not in TERMINAL_FORCING}
    return {**env, "COLUMNS": str(columns), "LINES": str(lines)}


@pytest.fixture(params=[80, 200], ids=lambda w: f"COLUMNS={w}")
def columns(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """A terminal width the test must pass at: 80 (the pinned default) and a wide 200."""
    width = int(request.param)
    monkeypatch.setenv("COLUMNS", str(width))
    return width


def _data_dir() -> Path:
    env = os.environ.get("LLM_MONITOR_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real MMLU-Pro and GSM8K tables (../shared/data); fail loudly when absent."""
    path = _data_dir()
    if not (path / "mmlu_pro_item_correctness_wide.csv").is_file():
        pytest.fail(f"real data not found at {path}; set LLM_MONITOR_DATA to ../shared/data")
    return path
