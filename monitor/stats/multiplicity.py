"""Multiplicity over a family of pairs: Bonferroni, Holm (FWER) and Benjamini–Hochberg (FDR).

A *family* is the set of pair comparisons read together (by default the adjacent pairs of one
benchmark's ranking). Adjusted p-values equal statsmodels' ``multipletests(...)[1]`` for the
methods ``bonferroni``, ``holm`` and ``fdr_bh``; the per-comparison level used to size N* is
α/m under the FWER corrections.
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.power import check_unit_vector

Method = Literal["none", "bonferroni", "holm", "bh"]
METHODS: tuple[str, ...] = get_args(Method)


def check_method(method: str) -> Method:
    """Validate a correction name; raise ValueError naming ``method`` otherwise."""
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {', '.join(METHODS)}, got {method!r}")
    return method  # type: ignore[return-value]


def adjust_pvalues(p: ArrayLike, *, method: str = "holm") -> NDArray[np.float64]:
    """Adjusted p-values of one family, in the input order.

    Parameters
    ----------
    p : array_like, shape (m,)
        Raw p-values in [0, 1]; NaN is rejected (a degenerate pair has p = 1, not NaN).
    method : {"none", "bonferroni", "holm", "bh"}
        ``bonferroni``: min(1, m p). ``holm``: step-down, running maximum of (m − k + 1) p_(k).
        ``bh``: Benjamini–Hochberg step-up, running minimum from the top of m p_(k) / k.

    Returns
    -------
    ndarray, shape (m,)
        Adjusted p-values; reject comparison i at family level α iff ``adjusted[i] <= α``.

    Examples
    --------
    >>> adjust_pvalues([0.01, 0.04, 0.03], method="holm").round(3).tolist()
    [0.03, 0.06, 0.06]
    >>> adjust_pvalues([0.01, 0.04, 0.03], method="bh").round(3).tolist()
    [0.03, 0.04, 0.04]
    """
    method = check_method(method)
    arr = check_unit_vector("p", p, what="p-values")
    m = arr.size
    if m == 0 or method == "none":
        return arr.copy()
    if method == "bonferroni":
        return np.minimum(arr * m, 1.0)
    order = np.argsort(arr, kind="stable")
    ranked = arr[order]
    if method == "holm":
        # Ties are harmless: a tied value earlier in the order has the larger multiplier,
        # and the running maximum carries it to the later ones.
        adj = np.maximum.accumulate(ranked * np.arange(m, 0, -1))
    else:  # bh
        adj = np.minimum.accumulate((ranked * m / np.arange(1, m + 1))[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adj, 1.0)
    return out


def reject(p: ArrayLike, *, alpha: float = 0.05, method: str = "holm") -> NDArray[np.bool_]:
    """Boolean rejections of one family at family level ``alpha``.

    Examples
    --------
    >>> reject([0.01, 0.04, 0.03], alpha=0.05, method="bh").tolist()
    [True, True, True]
    """
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    return adjust_pvalues(p, method=method) <= alpha


def family_alpha(alpha: float, m: int, *, method: str = "holm") -> float:
    """Per-comparison level used to size N* in a family of ``m`` comparisons.

    Bonferroni and Holm guarantee FWER ≤ α when every comparison is planned at α/m (Holm's
    first step is Bonferroni's test, so a design powered for Holm must be powered at α/m).
    BH controls the FDR, whose per-comparison level depends on how many nulls are false, so
    the plan uses α (and ``none`` is uncorrected).

    Examples
    --------
    >>> family_alpha(0.05, 9, method="bonferroni")
    0.005555555555555556
    >>> family_alpha(0.05, 9, method="bh")
    0.05
    """
    method = check_method(method)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    if int(m) != m or m < 1:
        raise ValueError(f"`m` must be a positive integer, got {m}")
    if method in ("bonferroni", "holm"):
        return alpha / int(m)
    return alpha
