"""The benches' peer: one running state per model pair, updated a result at a time.

What a straightforward monitor keeps — a ``PairState`` per pair that folds paired scores one at
a time or in batches, merges with a state built elsewhere and serialises to a plain dict — and
the peer the ingest benches measure the live core against (bench/_peer.py). Not part of the
package: the monitor keeps its pairs' sums as matrices (monitor/core/board.py). Its figures
come from the same kernel (:func:`monitor.stats.figures.pair_figures`), and
tests/unit/bench/test_pair_state.py holds it to numpy on every prefix, so the peer is right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats.figures import GroupSums, PairRecord, PairSums, pair_figures

__all__ = ["PairState"]


def _check_scores(name: str, x: ArrayLike) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(x, dtype=float))
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if np.any(bad):
        raise ValueError(f"`{name}` must hold scores in [0, 1], got {arr[bad][0]}")
    return arr


@dataclass
class PairState:
    """Sufficient statistics of one pair (A, B) on the items both have scored.

    Attributes
    ----------
    n : int
        Paired items folded in.
    s, v : float
        S = ΣD and V = ΣD² of D = x_A − x_B.
    sa, sb, saa, sbb, sab : float
        Σx_A, Σx_B, Σx_A², Σx_B², Σx_A x_B (for ρ̂).
    n11, n10, n01, n00 : int
        Concordance counts of the items where both scores are 0 or 1.
    clusters : dict
        label → [count, ΣD, ΣD²] per cluster (empty when no groups were given).

    Examples
    --------
    >>> st = PairState()
    >>> st.update_batch([1, 1, 0, 1], [0, 1, 0, 0])
    >>> st.n, st.n10, st.n01, round(st.delta, 2)
    (4, 2, 0, 0.5)
    >>> PairState.from_dict(st.to_dict()) == st
    True
    """

    n: int = 0
    s: float = 0.0
    v: float = 0.0
    sa: float = 0.0
    sb: float = 0.0
    saa: float = 0.0
    sbb: float = 0.0
    sab: float = 0.0
    n11: int = 0
    n10: int = 0
    n01: int = 0
    n00: int = 0
    clusters: dict[str, list[float]] = field(default_factory=dict)

    # -- folding ---------------------------------------------------------------------------

    def update(self, x_a: float, x_b: float, group: str | None = None) -> None:
        """Fold one paired item (scores in [0, 1]; ``group`` its cluster label, if any)."""
        self.update_batch([x_a], [x_b], None if group is None else [group])

    def update_batch(
        self, xa: ArrayLike, xb: ArrayLike, groups: ArrayLike | None = None
    ) -> None:
        """Fold a batch of paired items at once (vectorised)."""
        a = _check_scores("xa", xa)
        b = _check_scores("xb", xb)
        if a.shape != b.shape:
            raise ValueError(f"`xa` and `xb` must have equal length, got {a.size} and {b.size}")
        if a.size == 0:
            return
        d = a - b
        if groups is None and self.clusters:
            raise ValueError("`groups` is required: this state records clusters")
        if groups is not None and self.n > 0 and not self.clusters:
            raise ValueError("`groups` given to a state built without clusters")
        self.n += int(a.size)
        self.s += float(d.sum())
        self.v += float((d * d).sum())
        self.sa += float(a.sum())
        self.sb += float(b.sum())
        self.saa += float((a * a).sum())
        self.sbb += float((b * b).sum())
        self.sab += float((a * b).sum())
        ba = (a == 0) | (a == 1)
        bb = (b == 0) | (b == 1)
        both = ba & bb
        ia, ib = a == 1, b == 1
        self.n11 += int(np.count_nonzero(both & ia & ib))
        self.n10 += int(np.count_nonzero(both & ia & ~ib))
        self.n01 += int(np.count_nonzero(both & ~ia & ib))
        self.n00 += int(np.count_nonzero(both & ~ia & ~ib))
        if groups is not None:
            g = np.atleast_1d(np.asarray(groups)).astype(str)
            if g.shape != a.shape:
                raise ValueError(f"`groups` must have one label per item, got {g.size} for {a.size}")
            labels, codes = np.unique(g, return_inverse=True)
            cnt = np.bincount(codes, minlength=labels.size)
            sd = np.bincount(codes, weights=d, minlength=labels.size)
            sdd = np.bincount(codes, weights=d * d, minlength=labels.size)
            for k, label in enumerate(labels.tolist()):
                cur = self.clusters.setdefault(label, [0, 0.0, 0.0])
                cur[0] += int(cnt[k])
                cur[1] += float(sd[k])
                cur[2] += float(sdd[k])

    def merge(self, other: PairState) -> PairState:
        """The state of both item sets together (a new object; neither input changes)."""
        if self.n and other.n and bool(self.clusters) != bool(other.clusters):
            raise ValueError("`other` must record clusters exactly when this state does")
        clusters = {k: list(val) for k, val in self.clusters.items()}
        for k, val in other.clusters.items():
            cur = clusters.setdefault(k, [0, 0.0, 0.0])
            cur[0] += val[0]
            cur[1] += val[1]
            cur[2] += val[2]
        return PairState(
            n=self.n + other.n,
            s=self.s + other.s,
            v=self.v + other.v,
            sa=self.sa + other.sa,
            sb=self.sb + other.sb,
            saa=self.saa + other.saa,
            sbb=self.sbb + other.sbb,
            sab=self.sab + other.sab,
            n11=self.n11 + other.n11,
            n10=self.n10 + other.n10,
            n01=self.n01 + other.n01,
            n00=self.n00 + other.n00,
            clusters=clusters,
        )

    # -- serialisation ---------------------------------------------------------------------

    _FLOATS = ("s", "v", "sa", "sb", "saa", "sbb", "sab")
    _INTS = ("n", "n11", "n10", "n01", "n00")

    def to_dict(self) -> dict[str, Any]:
        """A small plain JSON-able value (floats round-trip exactly through ``json``)."""
        out: dict[str, Any] = {k: int(getattr(self, k)) for k in self._INTS}
        out.update({k: _compact(getattr(self, k)) for k in self._FLOATS})
        if self.clusters:
            out["clusters"] = {
                k: [int(c), _compact(sd), _compact(sdd)] for k, (c, sd, sdd) in self.clusters.items()
            }
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PairState:
        """Rebuild a state written by ``to_dict``."""
        try:
            kwargs: dict[str, Any] = {k: int(data[k]) for k in cls._INTS}
            kwargs.update({k: float(data[k]) for k in cls._FLOATS})
            clusters = {
                str(k): [int(v[0]), float(v[1]), float(v[2])]
                for k, v in data.get("clusters", {}).items()
            }
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"`data` is not a PairState dict: {exc}") from exc
        return cls(clusters=clusters, **kwargs)

    # -- derived figures (all from the pair kernel) -----------------------------------------

    def sums(self) -> PairSums:
        """This state as kernel input (its clusters as cluster sums)."""
        groups = None
        if self.clusters:
            c = np.array([v[0] for v in self.clusters.values()], dtype=float)
            t = np.array([v[1] for v in self.clusters.values()], dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                t2_over_n = float(np.sum(np.where(c > 0, t * t / np.where(c > 0, c, 1.0), 0.0)))
            groups = GroupSums(kind="cluster", n_groups=c.size, t2=np.array([t @ t]),
                               tn=np.array([t @ c]), n2=np.array([c @ c]),
                               t2_over_n=np.array([t2_over_n]),
                               count=np.array([float(np.count_nonzero(c))]))
        return PairSums(n=np.array([float(self.n)]), s=np.array([self.s]),
                        v=np.array([self.v]), sa=np.array([self.sa]), sb=np.array([self.sb]),
                        saa=np.array([self.saa]), sbb=np.array([self.sbb]),
                        sab=np.array([self.sab]), binary=np.array([self.binary]),
                        groups=groups)

    @property
    def binary(self) -> bool:
        """Every folded score was 0 or 1 (the counts then cover all n items)."""
        return self.n11 + self.n10 + self.n01 + self.n00 == self.n

    @property
    def delta(self) -> float:
        """δ̂ = S/n (NaN before any item)."""
        return self.s / self.n if self.n else math.nan

    @property
    def sigma_d2(self) -> float:
        """Plug-in (ddof = 0) variance of D (NaN before any item)."""
        return self.figures(intervals=False).sigma_d2

    @property
    def rho(self) -> float:
        """Pearson correlation of the two columns (phi for 0/1 data); NaN if one is constant."""
        return self.figures(intervals=False).rho

    def design_effect(self) -> float:
        """Cluster-robust DE = Var_cr(D̄)/Var_iid(D̄) from the per-cluster sums (1 without them)."""
        de = self.figures(intervals=False).design_effect
        return 1.0 if de is None else de

    def log_e(self) -> float:
        """log E_n: the exact McNemar e-process for 0/1 data, else the bounded mixture."""
        return self.figures(intervals=False).log_e

    def cs(self, *, alpha: float = 0.05) -> tuple[float, float]:
        """Time-uniform confidence sequence for δ at level α."""
        r = self.figures(alpha=alpha)
        return cast(float, r.cs_low), cast(float, r.cs_high)

    def figures(self, *, alpha: float = 0.05, power: float = 0.8,
                intervals: bool = True) -> PairRecord:
        """All verdict figures at level α (family-adjusted by the caller) and power 1 − β."""
        return pair_figures(self.sums(), alpha=alpha, power=power,
                            intervals=intervals).record(0)


def _compact(x: float) -> float | int:
    # Integral sums (always, for 0/1 data) are written as ints to keep the value small.
    xf = float(x)
    return int(xf) if xf.is_integer() and abs(xf) < 2**53 else xf
