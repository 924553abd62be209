"""Configuration of the engine-agnostic monitor core (one frozen value, validated once)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from monitor.stats.multiplicity import METHODS

Family = Literal["adjacent", "all"]


@dataclass(frozen=True)
class CoreConfig:
    """Options of :class:`monitor.core.Monitor`.

    Parameters
    ----------
    alpha
        Family-wise level (two-sided). The anytime verdict uses e-Bonferroni over the current
        family: a pair is resolved when E_n ≥ m/α, m the family size.
    power
        Target power 1 − β for N*, N*_AV and the MDE.
    family
        ``"adjacent"`` (m = k − 1 adjacent pairs of the ranking of k models) or ``"all"``
        (m = k(k − 1)/2).
    correction
        Multiplicity correction of the fixed-N figures q, q_cluster and MDE:
        ``monitor.stats.multiplicity.family_alpha`` (α/m for ``bonferroni`` and ``holm``).
    per_pair_series
        Which pairs get per-pair Prometheus series: ``"adjacent"`` (default, bounded
        cardinality) or ``"all"``.
    exclude_flags
        Items carrying any of these flags are excluded from resolution (empty: off).
    """

    alpha: float = 0.05
    power: float = 0.8
    family: Family = "adjacent"
    correction: str = "bonferroni"
    per_pair_series: Family = "adjacent"
    exclude_flags: tuple[str, ...] = ("leak-suspect",)

    def __post_init__(self) -> None:
        if not (0.0 < self.alpha < 1.0):
            raise ValueError(f"`alpha` must lie in (0, 1), got {self.alpha}")
        if not (0.0 < self.power < 1.0):
            raise ValueError(f"`power` must lie in (0, 1), got {self.power}")
        if self.family not in ("adjacent", "all"):
            raise ValueError(f"`family` must be 'adjacent' or 'all', got {self.family!r}")
        if self.per_pair_series not in ("adjacent", "all"):
            raise ValueError(
                f"`per_pair_series` must be 'adjacent' or 'all', got {self.per_pair_series!r}"
            )
        if self.correction not in METHODS:
            raise ValueError(
                f"`correction` must be one of {', '.join(METHODS)}, got {self.correction!r}"
            )
        object.__setattr__(self, "exclude_flags", tuple(self.exclude_flags))
