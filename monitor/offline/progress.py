"""How long-running drivers report progress without depending on any display."""

from __future__ import annotations

from collections.abc import Callable

Tick = Callable[[int], None]
"""Advances one task by a number of finished units."""

StartTask = Callable[[str, int], Tick]
"""Starts a task ``(label, total units)`` and returns the function that advances it."""


def no_progress(label: str, total: int) -> Tick:
    """A StartTask that shows nothing."""
    return lambda k: None
