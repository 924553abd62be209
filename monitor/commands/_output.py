"""Shared output helpers: --json prints stable machine-readable keys, otherwise rich tables."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from monitor.contracts import jsonable

console = Console()
err_console = Console(stderr=True)


def emit(data: dict[str, Any], *, as_json: bool, human: Callable[[Console], None]) -> None:
    """Print ``data`` as JSON when asked, else call ``human`` with the console."""
    if as_json:
        print(json.dumps(jsonable(data), indent=2, allow_nan=False))
    else:
        human(console)


def titled_table(title: str, console: Console, **kwargs: Any) -> Table:
    """A rich Table wide enough for its title, so the title does not wrap over a narrow table."""
    return Table(title=title, min_width=min(len(title) + 4, console.width), **kwargs)
