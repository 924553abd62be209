"""Shared output helpers: --json prints stable machine-readable keys, otherwise rich tables.

rich is imported where a table or a progress bar is drawn, not at the top: every command
module imports this one, and ``--json`` output should not pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from monitor.offline.progress import StartTask, Tick

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def emit(data: dict[str, Any], *, as_json: bool, human: Callable[[Console], None]) -> None:
    """Print ``data`` as JSON when asked, else call ``human`` with a console on stdout."""
    if as_json:
        from monitor.wire import jsonable  # numpy: only when JSON is asked for

        print(json.dumps(jsonable(data), indent=2, allow_nan=False))
    else:
        from rich.console import Console

        human(Console())


def titled_table(title: str, console: Console, **kwargs: Any) -> Table:
    """A rich Table wide enough for its title, so the title does not wrap over a narrow table."""
    from rich.table import Table

    return Table(title=title, min_width=min(len(title) + 4, console.width), **kwargs)


@contextmanager
def progress_tasks(*, enabled: bool = True, remaining: bool = False) -> Iterator[StartTask | None]:
    """Progress bars on stderr, shown from the first task on (so an input error raised before
    any work leaves stderr clean) and removed when done; elapsed or remaining time."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn() if remaining else TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)

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
