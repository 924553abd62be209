"""Shared output helpers: --json prints stable machine-readable keys, otherwise rich tables."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from monitor.offline.progress import StartTask, Tick

console = Console()
err_console = Console(stderr=True)


def emit(data: dict[str, Any], *, as_json: bool, human: Callable[[Console], None]) -> None:
    """Print ``data`` as JSON when asked, else call ``human`` with the console."""
    if as_json:
        from monitor.contracts import jsonable  # pydantic: only when JSON is asked for

        print(json.dumps(jsonable(data), indent=2, allow_nan=False))
    else:
        human(console)


def titled_table(title: str, console: Console, **kwargs: Any) -> Table:
    """A rich Table wide enough for its title, so the title does not wrap over a narrow table."""
    return Table(title=title, min_width=min(len(title) + 4, console.width), **kwargs)


@contextmanager
def progress_tasks(*, enabled: bool = True, remaining: bool = False) -> Iterator[StartTask | None]:
    """Progress bars on stderr, shown from the first task on (so an input error raised before
    any work leaves stderr clean) and removed when done; elapsed or remaining time."""
    if not enabled:
        yield None
        return
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn() if remaining else TimeElapsedColumn(),
                   console=err_console, transient=True)

    def start(label: str, total: int) -> Tick:
        if not bar.live.is_started:
            bar.start()
        task = bar.add_task(label, total=total)
        return lambda k: bar.advance(task, k)

    try:
        yield start
    finally:
        if bar.live.is_started:
            bar.stop()
