"""Paired summary of two models' item-level scores: δ̂, σ̂_D², ρ̂ and the cell counts.

The caller pairs the two columns on the items both models have; everything here works on two
equal-length arrays of scores in [0, 1] (0/1 or continuous).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import norm

from monitor.stats import power as pw


@dataclass(frozen=True)
class PairedSummary:
    """Sufficient figures of one pair on its N shared items.

    Attributes
    ----------
    n : int
        Shared items.
    mean_a, mean_b, delta : float
        Mean scores and δ̂ = mean_a − mean_b.
    sigma_d2 : float
        Plug-in (ddof = 0) variance of D = x_A − x_B; for 0/1 data this equals
        p̂A q̂A + p̂B q̂B − 2ρ̂ √(p̂A q̂A p̂B q̂B).
    rho : float
        Pearson correlation of the two columns (the phi coefficient for 0/1 data); NaN when
        a column is constant.
    binary : bool
        Every score is 0 or 1.
    n11, n10, n01, n00 : int or None
        Cell counts (A right and B right, A only, B only, neither) for 0/1 data.
    """

    n: int
    mean_a: float
    mean_b: float
    delta: float
    sigma_d2: float
    rho: float
    binary: bool
    n11: int | None = None
    n10: int | None = None
    n01: int | None = None
    n00: int | None = None

    def n_star(self, *, alpha: float = 0.05, power: float = 0.8) -> float:
        """Unrounded N* = z² σ̂_D² / δ̂² (``inf`` when δ̂ = 0)."""
        return float(pw.n_star(self.delta, self.sigma_d2, alpha=alpha, power=power))

    def q(self, *, alpha: float = 0.05, power: float = 0.8) -> float:
        """Resolution ratio q = N / N* (0 when N* is infinite)."""
        return float(pw.resolution_ratio(self.n, self.n_star(alpha=alpha, power=power)))

    def mde(self, *, alpha: float = 0.05, power: float = 0.8) -> float:
        """Minimum detectable effect z σ̂_D / √N at these N items."""
        return float(pw.mde(self.sigma_d2, self.n, alpha=alpha, power=power))

    def z(self) -> float:
        """Wald statistic δ̂ / √(σ̂_D² / N) of the paired z-test (±inf when σ̂_D² = 0 ≠ δ̂)."""
        if self.sigma_d2 <= 0:
            return 0.0 if self.delta == 0 else math.copysign(math.inf, self.delta)
        return self.delta / math.sqrt(self.sigma_d2 / self.n)

    def p_value(self) -> float:
        """Two-sided p-value of the paired z-test on D̄, the test that N* is sized for."""
        return float(2.0 * norm.sf(abs(self.z())))


def paired_summary(x_a: ArrayLike, x_b: ArrayLike) -> PairedSummary:
    """Summarise two paired score columns.

    Parameters
    ----------
    x_a, x_b : array_like, shape (N,)
        Scores of models A and B on the same N items, in [0, 1], no NaN.

    Examples
    --------
    >>> s = paired_summary([1, 1, 0, 1, 0], [1, 0, 0, 0, 1])
    >>> round(s.delta, 4), s.n10, s.n01
    (0.2, 2, 1)
    >>> round(s.sigma_d2, 4)
    0.56
    """
    a = pw.check_unit_vector("x_a", x_a, what="scores")
    b = pw.check_unit_vector("x_b", x_b, what="scores")
    if a.shape != b.shape:
        raise ValueError(f"`x_a` and `x_b` must have equal length, got {a.size} and {b.size}")
    n = a.size
    if n == 0:
        raise ValueError("`x_a` and `x_b` must share at least one item")
    d = a - b
    mean_a, mean_b = float(a.mean()), float(b.mean())
    sigma2 = float(np.var(d))
    va, vb = float(np.var(a)), float(np.var(b))
    if va > 0 and vb > 0:
        cov = float(np.mean((a - mean_a) * (b - mean_b)))
        rho = min(1.0, max(-1.0, cov / math.sqrt(va * vb)))
    else:
        rho = math.nan
    binary = bool(np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1)))
    cells: dict[str, int | None] = dict.fromkeys(("n11", "n10", "n01", "n00"))
    if binary:
        ia, ib = a.astype(bool), b.astype(bool)
        cells = {
            "n11": int(np.count_nonzero(ia & ib)),
            "n10": int(np.count_nonzero(ia & ~ib)),
            "n01": int(np.count_nonzero(~ia & ib)),
            "n00": int(np.count_nonzero(~ia & ~ib)),
        }
    return PairedSummary(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        delta=mean_a - mean_b,
        sigma_d2=sigma2,
        rho=rho,
        binary=binary,
        **cells,
    )
