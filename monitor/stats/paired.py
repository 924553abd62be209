"""Paired summary of two models' item-level scores: δ̂, σ̂_D², ρ̂ and the cell counts.

The caller pairs the two columns on the items both models have; everything here works on two
equal-length arrays of scores in [0, 1] (0/1 or continuous).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numpy.typing import ArrayLike

from monitor.stats import power as pw
from monitor.stats.figures import PairRecord, PairSums, pair_figures


@dataclass(frozen=True)
class PairedSummary:
    """Sufficient figures of one pair on its N shared items (computed by the pair kernel,
    :func:`monitor.stats.figures.pair_figures`).

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
    sums: PairSums | None = field(default=None, repr=False, compare=False)

    def _figures(self, alpha: float, power: float) -> PairRecord:
        if self.sums is None:
            raise ValueError("this PairedSummary has no sums: build it with paired_summary()")
        return pair_figures(self.sums, alpha=alpha, power=power, intervals=False).record(0)

    def n_star(self, *, alpha: float = 0.05, power: float = 0.8) -> float:
        """Unrounded N* = z² σ̃² / δ̃² from the sizing estimates (``inf`` when δ̂ = 0)."""
        return self._figures(alpha, power).n_star

    def q(self, *, alpha: float = 0.05, power: float = 0.8) -> float:
        """Resolution ratio q = N / N* (0 when N* is infinite)."""
        return self._figures(alpha, power).q

    def mde(self, *, alpha: float = 0.05, power: float = 0.8) -> float:
        """Minimum detectable effect z σ̃ / √N at these N items."""
        return self._figures(alpha, power).mde

    def p_value(self) -> float:
        """Two-sided p-value of the pair's fixed-N test, the kernel's: exact McNemar on 0/1
        scores (2:0 discordant pairs give 0.5), the paired t-test otherwise."""
        return self._figures(0.05, 0.8).p_value


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
    if a.size == 0:
        raise ValueError("`x_a` and `x_b` must share at least one item")
    sums = PairSums.from_scores(a, b)
    r = pair_figures(sums, intervals=False).record(0)
    return PairedSummary(n=r.n, mean_a=r.mean_a, mean_b=r.mean_b, delta=r.delta,
                         sigma_d2=r.sigma_d2, rho=r.rho, binary=r.binary, n11=r.n11,
                         n10=r.n10, n01=r.n01, n00=r.n00, sums=sums)
