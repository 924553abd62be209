"""The one rule for numbers on the wire (±∞ as strings, NaN as null) and ``jsonable``.

Kept apart from :mod:`monitor.contracts`, which re-exports it, so that writing ``--json`` does
not import pydantic; the contract's ``WireFloat`` applies the same two functions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def wire_float(value: Any) -> float | str | None:
    """The one rule for numbers on the wire: JSON has no infinity and no NaN.

    A finite number is written as itself, +∞ and −∞ as the strings ``"inf"`` and ``"-inf"``,
    and NaN (a figure that is undefined, e.g. a correlation with a constant column) as
    ``null``. Every JSON the project writes — change events, HTTP responses, ``--json`` output
    — follows it.

    Examples
    --------
    >>> wire_float(0.5), wire_float(float("inf")), wire_float(float("nan"))
    (0.5, 'inf', None)
    """
    f = float(value)
    if math.isnan(f):
        return None
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def read_wire_float(value: Any) -> Any:
    """The inverse of :func:`wire_float`: ``"inf"``/``"-inf"`` back to floats, the rest as is.

    Examples
    --------
    >>> read_wire_float("inf"), read_wire_float(2.5), read_wire_float(None)
    (inf, 2.5, None)
    """
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    return value


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and arrays made plain and every float passed through
    :func:`wire_float` (so ``json.dumps(..., allow_nan=False)`` always succeeds).

    Examples
    --------
    >>> jsonable({"q": np.float64(2.0), "n_star": float("inf"), "rho": [float("nan")]})
    {'q': 2.0, 'n_star': 'inf', 'rho': [None]}
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
        return wire_float(value)
    return value
