"""Runs of equal keys in an array grouped by key (each key's entries consecutive), the layout
the sequential pass keeps its items in (:func:`monitor.stats.sequential.advance`).

The live core calls these a few dozen times per batch on arrays of a few thousand entries,
so they are written with plain array operations (``np.r_``'s index parsing costs ~30 µs a
call, more than the arithmetic at those sizes).

>>> keys = np.array([3, 3, 5, 7, 7, 7])
>>> starts = run_starts(keys)
>>> starts.tolist(), run_sizes(starts, keys.size).tolist(), first_in_run(keys).tolist()
([0, 2, 3], [2, 1, 3], [True, False, True, True, False, False])
>>> with_zero(np.array([1.5, 2.0])).tolist()
[0.0, 1.5, 2.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]


def first_in_run(keys: NDArray[Any]) -> NDArray[np.bool_]:
    """Whether each entry starts a run of equal keys (the first entry always does; an empty
    ``keys`` gives ``[True]``, as ``np.r_[True, keys[1:] != keys[:-1]]`` would)."""
    out = np.empty(max(keys.size, 1), dtype=bool)
    out[0] = True
    np.not_equal(keys[1:], keys[:-1], out=out[1:])
    return out


def run_starts(keys: NDArray[Any]) -> IntArray:
    """Positions where a run of equal keys starts (``[0]`` for an empty ``keys``)."""
    return np.flatnonzero(first_in_run(keys))


def run_sizes(starts: IntArray, size: int) -> IntArray:
    """Lengths of the runs starting at ``starts`` (ascending, the first 0) of an array of
    ``size`` entries."""
    out = np.empty(starts.size, dtype=np.int64)
    np.subtract(starts[1:], starts[:-1], out=out[:-1])
    out[-1:] = size - starts[-1:]
    return out


def with_zero(x: NDArray[Any]) -> NDArray[Any]:
    """``x`` with a 0 before its first entry (a cumulative sum's value before any entry)."""
    out = np.empty(x.size + 1, dtype=x.dtype)
    out[0] = 0
    out[1:] = x
    return out
