"""Shared output helpers: --json prints stable machine-readable keys, otherwise rich tables."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def jsonable(value: Any) -> Any:
    """Convert numpy scalars/arrays and non-finite floats into JSON-safe values.

    Infinity is written as the string "inf" (JSON has no infinity), NaN as null.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if math.isnan(f):
            return None
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    return value


def emit(data: dict[str, Any], *, as_json: bool, human: Callable[[Console], None]) -> None:
    """Print ``data`` as JSON when asked, else call ``human`` with the console."""
    if as_json:
        print(json.dumps(jsonable(data), indent=2, allow_nan=False))
    else:
        human(console)


def titled_table(title: str, console: Console, **kwargs: Any) -> Table:
    """A rich Table wide enough for its title, so the title does not wrap over a narrow table."""
    return Table(title=title, min_width=min(len(title) + 4, console.width), **kwargs)
