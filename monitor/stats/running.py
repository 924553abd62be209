"""Mergeable running state of one model pair: the sufficient statistics of the anytime layer.

A ``PairState`` folds paired scores one at a time or in batches, merges with a state built
elsewhere (another worker, another partition), and serialises to a small plain dict. Every
verdict figure — δ̂, σ̂_D², ρ̂, N*, q, q_cluster, the e-value, the confidence sequence and q_AV —
is a function of this state alone, so a replay or a merge gives the same answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats import eprocess as ep
from monitor.stats import power as pw

__all__ = ["PairFigures", "PairState"]


def _check_scores(name: str, x: ArrayLike) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(x, dtype=float))
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if np.any(bad):
        raise ValueError(f"`{name}` must hold scores in [0, 1], got {arr[bad][0]}")
    return arr


@dataclass(frozen=True)
class PairFigures:
    """Verdict figures of one pair, all derived from a ``PairState``.

    ``q_cluster`` equals ``q`` when no clusters were recorded (``de`` = 1). ``e_value`` is
    E_n (``inf`` if it overflows a float); ``resolved_anytime`` is E_n ≥ 1/α at the level
    given (pass the family-adjusted α, e.g. α/m for e-Bonferroni).
    """

    n: int
    delta: float
    sigma_d2: float
    rho: float
    binary: bool
    n_star: float
    q: float
    de: float
    q_cluster: float
    mde: float
    log_e: float
    e_value: float
    cs_low: float
    cs_high: float
    n_star_anytime: float
    q_anytime: float
    resolved_anytime: bool


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

    # -- derived figures -------------------------------------------------------------------

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
        """Plug-in (ddof = 0) variance of D: V/n − (S/n)²."""
        if not self.n:
            return math.nan
        if self.binary:  # exact integer arithmetic for 0/1 data
            disc = self.n10 + self.n01
            diff = self.n10 - self.n01
            return (disc * self.n - diff * diff) / (self.n * self.n)
        return max(self.v / self.n - (self.s / self.n) ** 2, 0.0)

    @property
    def rho(self) -> float:
        """Pearson correlation of the two columns (phi for 0/1 data); NaN if one is constant."""
        if not self.n:
            return math.nan
        n = self.n
        ma, mb = self.sa / n, self.sb / n
        va = self.saa / n - ma * ma
        vb = self.sbb / n - mb * mb
        cov = self.sab / n - ma * mb
        if self.binary:
            pa = (self.n11 + self.n10) / n
            pb = (self.n11 + self.n01) / n
            va, vb = pa * (1 - pa), pb * (1 - pb)
            cov = self.n11 / n - pa * pb
        if va <= 1e-15 or vb <= 1e-15:
            return math.nan
        return min(1.0, max(-1.0, cov / math.sqrt(va * vb)))

    def design_effect(self) -> float:
        """Cluster-robust DE = Var_cr(D̄)/Var_iid(D̄) from the per-cluster sums (1 without them).

        Var_cr = Σ_c (S_c − n_c D̄)² / N², Var_iid = σ̂_D²/N — the same figure as
        ``monitor.stats.clusters.design_effect`` on the raw differences.
        """
        if not self.clusters or not self.n:
            return 1.0
        dbar = self.s / self.n
        var_iid = self.sigma_d2 / self.n
        if var_iid <= 0:
            return 1.0
        var_cr = sum((sd - c * dbar) ** 2 for c, sd, _ in self.clusters.values()) / self.n**2
        return var_cr / var_iid

    def log_e(self) -> float:
        """log E_n: the exact McNemar e-process for 0/1 data, else the bounded mixture."""
        if self.binary:
            return float(ep.log_e_mcnemar(self.n10, self.n01))
        return float(ep.log_e_bounded(self.n, self.s, self.v))

    def cs(self, *, alpha: float = 0.05) -> tuple[float, float]:
        """Time-uniform confidence sequence for δ at level α."""
        lo, hi = ep.cs_bounded(self.n, self.s, self.v, alpha=alpha)
        return float(lo), float(hi)

    def figures(self, *, alpha: float = 0.05, power: float = 0.8) -> PairFigures:
        """All verdict figures at level α (family-adjusted by the caller) and power 1 − β."""
        delta, s2 = self.delta, self.sigma_d2
        if not self.n:
            delta, s2 = 0.0, 0.0
        n_star = float(pw.n_star(delta, s2, alpha=alpha, power=power))
        de = self.design_effect()
        n_av = float(
            ep.n_star_anytime(
                delta, s2, alpha=alpha, power=power,
                construction="mcnemar" if self.binary else "bounded",
            )
        )
        log_e = self.log_e()
        lo, hi = self.cs(alpha=alpha)
        return PairFigures(
            n=self.n,
            delta=self.delta,
            sigma_d2=self.sigma_d2,
            rho=self.rho,
            binary=self.binary,
            n_star=n_star,
            q=float(pw.resolution_ratio(self.n, n_star)),
            de=de,
            q_cluster=float(pw.resolution_ratio(self.n, n_star * de)),
            mde=float(pw.mde(s2, self.n, alpha=alpha, power=power)),
            log_e=log_e,
            e_value=math.exp(log_e) if log_e < 709 else math.inf,
            cs_low=lo,
            cs_high=hi,
            n_star_anytime=n_av,
            q_anytime=float(pw.resolution_ratio(self.n, n_av)),
            resolved_anytime=bool(log_e >= math.log(1.0 / alpha)),
        )


def _compact(x: float) -> float | int:
    # Integral sums (always, for 0/1 data) are written as ints to keep the value small.
    xf = float(x)
    return int(xf) if xf.is_integer() and abs(xf) < 2**53 else xf
