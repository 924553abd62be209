"""Multiplicity with e-values: e-BH (FDR) over a family of pairs (the board's FWER rule is
the online Bonferroni of :mod:`monitor.stats.sequential`).

Both are valid under arbitrary dependence between the e-values (Wang & Ramdas 2022), and,
applied to e-processes, at any stopping time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["e_bh"]


def _check(e: ArrayLike, alpha: float) -> np.ndarray:
    if not (0.0 < alpha < 1.0) or not np.isfinite(alpha):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    arr = np.asarray(e, dtype=float)
    if np.any(np.isnan(arr)) or np.any(arr < 0):
        raise ValueError("`e` must hold nonnegative e-values without NaN")
    return arr


def e_bh(e: ArrayLike, *, alpha: float = 0.05) -> Any:
    """e-BH (Wang & Ramdas 2022): reject the k* largest e-values, k* = max{k : e_(k) ≥ m/(αk)}.

    e_(k) is the k-th largest. Controls the false discovery rate at α.

    Examples
    --------
    >>> e_bh([100.0, 50.0, 1.0], alpha=0.05).tolist()
    [True, True, False]
    """
    arr = _check(e, alpha)
    flat = arr.ravel()
    m = flat.size
    out = np.zeros(m, dtype=bool)
    if m == 0:
        return out.reshape(arr.shape)
    order = np.argsort(-flat, kind="stable")
    k = np.arange(1, m + 1)
    ok = flat[order] >= m / (alpha * k)
    if ok.any():
        k_star = int(np.flatnonzero(ok).max()) + 1
        out[order[:k_star]] = True
    return out.reshape(arr.shape)
