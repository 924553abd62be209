"""The pair-statistics kernel: mergeable pair sums in, every per-pair figure out, vectorised.

Every number llm-monitor prints about a pair — δ̂, σ̂_D², ρ̂, N*, q, q_cluster (q_strata), MDE,
the p-value, the e-value, the confidence sequence, N*_AV and q_AV — is computed here and
nowhere else. The offline report (:func:`monitor.stats.board.board`), the live core
(:mod:`monitor.core.evaluate`), the anytime replay and ``compare``
(:func:`monitor.stats.paired.paired_summary`) build :class:`PairSums` from their own storage
and call :func:`pair_figures`; that is why live and offline agree exactly.

Conventions (one for every edge case; see docs/contract.md, "Pair figures: conventions")
-------------------------------------------------------------------------------------
Let n be the paired items, S = ΣD and V = ΣD² with D = x_A − x_B ∈ [−1, 1].

* **Reported estimates** are the plug-in ones: δ̂ = S/n and σ̂_D² = V/n − δ̂² (ddof = 0).
  Rounding cannot make them negative: V is first raised to S²/n (Cauchy–Schwarz) where
  cancellation left it below, and for scores other than 0/1 an n σ̂_D² within the rounding
  error of the sums (1e-12 × (Σx_A² + Σx_B²)) is 0 — and then a |S| within the rounding
  scale √(n · 1e-12 · (Σx_A² + Σx_B²)) is 0 too. With n = 0 both are NaN.
* **Sizing estimates** (N*, q, q_cluster, MDE, N*_AV, q_AV) add the pseudo-items of Agresti &
  Min (2005, "Simple improved confidence intervals for comparing matched proportions", Stat.
  Med. 24:729): half an item at D = +1, half at D = −1 and one at D = 0, i.e.
  δ̃ = S/(n + 2) and σ̃² = (V + 1)/(n + 2) − δ̃². σ̃² > 0 always, so N* = z² σ̃²/δ̃² is never 0:
  q is finite, continuous in the data and grows with the evidence. Thirty items all
  favouring A give q = 37 at α = 0.05 (they are decisive: exact McNemar p = 1.9e-9), a single
  item gives q = 0.03, 1000:0 discordant pairs give more than 999:1. On benchmarks of
  thousands of items the sizing estimates differ from the plug-in ones by O(1/n) (at most
  6.5e-4 relative in q on the MMLU-Pro adjacent pairs; no verdict changes).
* δ̃ = 0 (no gap): N* = N*_AV = ∞ and q = q_cluster = q_AV = 0. n = 0: additionally
  MDE = ∞, E = 1, the confidence sequence is [−1, 1] and p = 1.
* Design effect DE = Var_grouped(D̄)/Var_iid(D̄) from the plug-in σ̂_D²; DE = 1 where
  σ̂_D² = 0 or without groups. Strata: q_strata = n / (N* · DE). Sampled clusters:
  q_cluster = n / (N* · max(DE · G/(G − 1), 1)) with G the clusters holding paired items
  (the small-sample factor of the cluster-robust variance), so q_cluster ≤ q; q_cluster = 0
  where G = 1 or DE = 0 (no between-cluster variance can be estimated).
* The e-process of a pair is the exact McNemar mixture when the pair's scores are all 0/1
  (``binary``), else the bounded gamma-exponential mixture; both are functions of (n, S, V).
* Non-finite figures are written to JSON by :func:`monitor.contracts.wire_float`.

Over 400 lines on purpose: the kernel, its input and result types and the conventions they
share are one unit — splitting them would put the edge cases of one number in two places.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import betainc, stdtr

from monitor.stats import power as pw
from monitor.stats.clusters import cluster_inflation
from monitor.stats.sequential import PairPaths

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
GroupKind = Literal["cluster", "strata"]
#: A benchmark's declared design: exchangeable items, fixed strata, or sampled clusters
#: (docs/clusters-vs-strata.md). It decides which decision is a pair's verdict.
Design = Literal["items", "strata", "clusters"]
DESIGNS: tuple[Design, ...] = ("items", "strata", "clusters")

__all__ = ["DESIGNS", "ClusterDecisions", "GroupSums", "PairFigures", "PairRecord", "PairSums",
           "pair_figures", "plugin_estimates", "sizing_estimates"]


def e_of(log_e: float) -> float:
    """exp(log E) as a float, ``inf`` beyond float range (the log is always finite)."""
    return math.exp(log_e) if log_e < 709.0 else math.inf


def e_values(log_e: ArrayLike) -> FloatArray:
    """:func:`e_of` of every entry, each by ``math.exp`` itself (numpy's exp may differ in
    the last bit, and a report's e-values are written as the scalars are).

    Examples
    --------
    >>> e_values([0.0, 800.0]).tolist()
    [1.0, inf]
    """
    x = _arr(log_e)
    big = ~(x < 709.0)
    out = np.fromiter(map(math.exp, np.where(big, 0.0, x).tolist()), dtype=np.float64,
                      count=x.size)
    out[big] = math.inf
    return out


def _arr(x: ArrayLike) -> FloatArray:
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


@dataclass(frozen=True, eq=False)
class GroupSums:
    """Per-pair sums over item groups: T_g = Σ_{i∈g} D_i and n_g the paired items in group g.

    ``t2`` = Σ_g T_g², ``tn`` = Σ_g T_g n_g, ``n2`` = Σ_g n_g² (clusters) and ``t2_over_n`` =
    Σ_g T_g²/n_g (strata); ``count`` = G, the groups holding paired items of the pair. Items
    without a group count as groups of their own.
    """

    kind: GroupKind
    n_groups: int
    t2: FloatArray
    tn: FloatArray
    n2: FloatArray
    t2_over_n: FloatArray
    count: FloatArray

    def take(self, idx: Any) -> GroupSums:
        return replace(self, t2=self.t2[idx], tn=self.tn[idx], n2=self.n2[idx],
                       t2_over_n=self.t2_over_n[idx], count=self.count[idx])


@dataclass(frozen=True, eq=False)
class ClusterDecisions:
    """Per pair, the sampled-clusters sequential state (:mod:`monitor.stats.cluster_sequential`)
    as the kernel reads it: cluster observations entered ``n_obs`` with the sums of their
    totals ``s`` and ``v`` (Z = total/``r``), the decision (``decided`` ±1/0, the paired items
    ``decided_n`` and observations ``decided_obs`` then, ``decided_log_e``) and ``seen`` — the
    clusters the board has — against which a pair is decidable or not."""

    r: int
    n_obs: FloatArray
    s: FloatArray
    v: FloatArray
    decided: NDArray[np.int8]
    decided_n: FloatArray
    decided_obs: FloatArray
    decided_log_e: FloatArray
    seen: int
    equivalent: NDArray[np.int8] | None = None

    def take(self, idx: Any) -> ClusterDecisions:
        out = replace(self, **{name: getattr(self, name)[idx] for name in (
            "n_obs", "s", "v", "decided", "decided_n", "decided_obs", "decided_log_e")})
        return out if self.equivalent is None else replace(out, equivalent=self.equivalent[idx])


@dataclass(frozen=True, eq=False)
class PairSums:
    """Mergeable sufficient statistics of many pairs (A, B), one array entry per pair.

    ``n`` paired items; ``s`` = ΣD, ``v`` = ΣD²; ``sa``, ``sb`` = Σx_A, Σx_B; ``saa``, ``sbb``,
    ``sab`` = Σx_A², Σx_B², Σx_A x_B (all over the paired items); ``binary`` marks pairs whose
    scores are all 0 or 1 (then n11 = sab, n10 = sa − sab, n01 = sb − sab). ``paths``, when
    given, is each pair's sequential state (:class:`monitor.stats.sequential.PairPaths`): its
    e-process kind, switch and decision; without it the e-process follows ``binary``.
    ``design`` is the benchmark's declared design; under ``"clusters"``, ``clusters`` carries
    each pair's sampled-clusters decision, which is then the pair's verdict.
    """

    n: FloatArray
    s: FloatArray
    v: FloatArray
    sa: FloatArray
    sb: FloatArray
    saa: FloatArray
    sbb: FloatArray
    sab: FloatArray
    binary: BoolArray
    groups: GroupSums | None = None
    paths: PairPaths | None = None
    design: Design = "items"
    clusters: ClusterDecisions | None = None

    @classmethod
    def build(cls, *, n: ArrayLike, sa: ArrayLike, sb: ArrayLike, saa: ArrayLike,
              sbb: ArrayLike, sab: ArrayLike, binary: ArrayLike,
              groups: GroupSums | None = None, paths: PairPaths | None = None,
              design: Design = "items", clusters: ClusterDecisions | None = None) -> PairSums:
        """Sums from the per-model sums on the paired items (S and V follow from them)."""
        a, b, aa, bb, ab = _arr(sa), _arr(sb), _arr(saa), _arr(sbb), _arr(sab)
        return cls(n=_arr(n), s=a - b, v=aa + bb - 2.0 * ab, sa=a, sb=b, saa=aa, sbb=bb,
                   sab=ab, binary=np.broadcast_to(np.asarray(binary, dtype=bool), a.shape),
                   groups=groups, paths=paths, design=design, clusters=clusters)

    @classmethod
    def from_scores(cls, x_a: ArrayLike, x_b: ArrayLike) -> PairSums:
        """The sums of one pair from its two paired score columns (no NaN)."""
        a = np.asarray(x_a, dtype=np.float64)
        b = np.asarray(x_b, dtype=np.float64)
        binary = bool(np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1)))
        return cls.build(n=a.size, sa=a.sum(), sb=b.sum(), saa=(a * a).sum(),
                         sbb=(b * b).sum(), sab=(a * b).sum(), binary=binary)

    def __len__(self) -> int:
        return int(self.n.size)

    def take(self, idx: Any) -> PairSums:
        """The sums of the pairs ``idx`` (an index array or slice)."""
        return PairSums(n=self.n[idx], s=self.s[idx], v=self.v[idx], sa=self.sa[idx],
                        sb=self.sb[idx], saa=self.saa[idx], sbb=self.sbb[idx],
                        sab=self.sab[idx], binary=self.binary[idx],
                        groups=None if self.groups is None else self.groups.take(idx),
                        paths=None if self.paths is None else self.paths.take(idx),
                        design=self.design,
                        clusters=None if self.clusters is None else self.clusters.take(idx))


def plugin_estimates(n: ArrayLike, s: ArrayLike, v: ArrayLike) -> tuple[Any, Any]:
    """Reported δ̂ = S/n and σ̂_D² = V/n − δ̂² ≥ 0 (NaN where n = 0).

    Examples
    --------
    >>> d, s2 = plugin_estimates(4, 2.0, 2.0)
    >>> float(d[0]), float(s2[0])
    (0.5, 0.25)
    """
    nn, ss, vv = _arr(n), _arr(s), _arr(v)
    pos = nn > 0
    safe = np.where(pos, nn, 1.0)
    delta = np.where(pos, ss / safe, np.nan)
    # (V − S²/n)/n: exactly 0 where V was set to S²/n.
    sigma2 = np.where(pos, np.maximum((vv - ss * ss / safe) / safe, 0.0), np.nan)
    return delta, sigma2


def sizing_estimates(n: ArrayLike, s: ArrayLike, v: ArrayLike) -> tuple[Any, Any]:
    """Sizing δ̃ = S/(n + 2) and σ̃² = (V + 1)/(n + 2) − δ̃² > 0 (Agresti & Min 2005 pseudo-items).

    Examples
    --------
    >>> d, s2 = sizing_estimates(30, 30.0, 30.0)  # thirty items, all favouring A
    >>> round(float(d[0]), 4), round(float(s2[0]), 4)
    (0.9375, 0.0898)
    """
    nn, ss, vv = _arr(n), _arr(s), _arr(v)
    vv = np.maximum(vv, np.where(nn > 0, ss * ss / np.where(nn > 0, nn, 1.0), 0.0))
    delta = ss / (nn + 2.0)
    return delta, np.maximum((vv + 1.0) / (nn + 2.0) - delta * delta, 0.0)


@dataclass(frozen=True, eq=False)
class PairFigures:
    """Every figure of many pairs, one array entry per pair (see the module conventions).

    ``n_star``, ``q``, ``mde`` and ``q_grouped`` are at the per-comparison level ``alpha``
    (family-adjusted by the caller); ``log_e`` is the pair's e-process, and ``cs_low``,
    ``cs_high``, ``n_star_anytime``, ``q_anytime`` are at level ``e_alpha`` (None when the
    figures were computed without ``intervals``: they need root finding). With paths,
    ``n_star_anytime`` is sized for the decision of :mod:`monitor.stats.sequential` (one side
    reaching 2/e_alpha), without them for E ≥ 1/e_alpha.
    ``n11 … n00`` are valid where ``binary``. ``decided``, ``equivalent``, ``decided_n`` and
    ``decided_log_e`` are the item-level decision: None without paths and under sampled
    clusters, whose decision (``cluster_*``) is the verdict.
    """

    n: FloatArray
    s: FloatArray
    v: FloatArray
    mean_a: FloatArray
    mean_b: FloatArray
    delta: FloatArray
    sigma_d2: FloatArray
    rho: FloatArray
    binary: BoolArray
    n11: FloatArray
    n10: FloatArray
    n01: FloatArray
    n00: FloatArray
    n_star: FloatArray
    q: FloatArray
    mde: FloatArray
    design_effect: FloatArray | None
    q_grouped: FloatArray | None
    group_kind: GroupKind | None
    n_groups: int
    p_value: FloatArray
    log_e: FloatArray
    cs_low: FloatArray | None
    cs_high: FloatArray | None
    n_star_anytime: FloatArray | None
    q_anytime: FloatArray | None
    decided: NDArray[np.int8] | None
    decided_n: FloatArray | None
    decided_log_e: FloatArray | None
    equivalent: NDArray[np.int8] | None
    n_clusters: FloatArray | None
    design: Design
    cluster_obs: FloatArray | None
    cluster_log_e: FloatArray | None
    cluster_decided: NDArray[np.int8] | None
    cluster_equivalent: NDArray[np.int8] | None
    cluster_decided_n: FloatArray | None
    cluster_decided_obs: FloatArray | None
    cluster_decided_log_e: FloatArray | None
    cluster_min: FloatArray | None
    clusters_seen: int
    alpha: float
    e_alpha: FloatArray
    power: float

    def __len__(self) -> int:
        return int(self.n.size)

    @property
    def e_value(self) -> FloatArray:
        """E_n = exp(log E_n) (``inf`` beyond float range; ``log_e`` is always finite)."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_e)

    def verdict_code(self, at: slice = slice(None)) -> NDArray[np.int8]:
        """The pair's verdict under the declared design: +1 (A resolved better), −1 (B),
        2 (equivalent within the margin), 0 (open). Sampled clusters: the clustered decision;
        otherwise the item-level one. ``at``: of those pairs only (a record reads one)."""
        if self.design == "clusters":
            decided, equivalent = self.cluster_decided, self.cluster_equivalent
        else:
            decided, equivalent = self.decided, self.equivalent
        code = (np.zeros(self.n[at].shape, np.int8) if decided is None
                else np.asarray(decided[at], dtype=np.int8).copy())
        if equivalent is not None:
            code[np.asarray(equivalent)[at] != 0] = 2
        return code

    def decidable(self, at: slice = slice(None)) -> BoolArray:
        """False where the design allows no decision: sampled clusters, with fewer clusters
        on the board than any decision at the pair's share needs. ``at``: of those pairs
        only."""
        if self.design != "clusters" or self.cluster_min is None:
            return np.ones(self.n[at].shape, dtype=bool)
        return np.asarray((self.clusters_seen >= self.cluster_min[at])
                          | (self.verdict_code(at) != 0), dtype=bool)

    def record(self, k: int) -> PairRecord:
        """The figures of pair ``k`` as plain Python numbers."""
        def at(x: FloatArray | None) -> float | None:
            return None if x is None else float(x[k])

        binary = bool(self.binary[k])
        one = slice(k, k + 1)
        cells = [round(float(c[k])) if binary else None
                 for c in (self.n11, self.n10, self.n01, self.n00)]
        return PairRecord(
            n=round(float(self.n[k])), s=float(self.s[k]), v=float(self.v[k]),
            mean_a=float(self.mean_a[k]),
            mean_b=float(self.mean_b[k]), delta=float(self.delta[k]),
            sigma_d2=float(self.sigma_d2[k]), rho=float(self.rho[k]), binary=binary,
            n11=cells[0], n10=cells[1], n01=cells[2], n00=cells[3],
            n_star=float(self.n_star[k]), q=float(self.q[k]), mde=float(self.mde[k]),
            design_effect=at(self.design_effect), q_grouped=at(self.q_grouped),
            group_kind=self.group_kind, p_value=float(self.p_value[k]),
            log_e=float(self.log_e[k]), cs_low=at(self.cs_low), cs_high=at(self.cs_high),
            n_star_anytime=at(self.n_star_anytime), q_anytime=at(self.q_anytime),
            e_alpha=float(self.e_alpha[k]),
            decided=None if self.decided is None else int(self.decided[k]),
            equivalent=None if self.equivalent is None else bool(self.equivalent[k]),
            decided_n=None if self.decided_n is None else round(float(self.decided_n[k])),
            decided_log_e=at(self.decided_log_e),
            n_clusters=None if self.n_clusters is None else round(float(self.n_clusters[k])),
            design=self.design,
            cluster_obs=None if self.cluster_obs is None else round(float(self.cluster_obs[k])),
            cluster_log_e=at(self.cluster_log_e),
            cluster_decided=(None if self.cluster_decided is None
                             else int(self.cluster_decided[k])),
            cluster_decided_n=(None if self.cluster_decided_n is None
                               or not self.cluster_decided_n[k]
                               else round(float(self.cluster_decided_n[k]))),
            cluster_decided_obs=(None if self.cluster_decided_obs is None
                                 or not self.cluster_decided_obs[k]
                                 else round(float(self.cluster_decided_obs[k]))),
            cluster_decided_log_e=(None if self.cluster_decided_log_e is None
                                   or self.cluster_decided is None
                                   or not self.cluster_decided[k]
                                   else float(self.cluster_decided_log_e[k])),
            cluster_min=(None if self.cluster_min is None
                         else round(float(self.cluster_min[k]))),
            clusters_seen=self.clusters_seen,
            verdict_code=int(self.verdict_code(one)[0]),
            decidable=bool(self.decidable(one)[0]),
        )


@dataclass(frozen=True)
class PairRecord:
    """The figures of one pair (fields as in :class:`PairFigures`)."""

    n: int
    s: float
    v: float
    mean_a: float
    mean_b: float
    delta: float
    sigma_d2: float
    rho: float
    binary: bool
    n11: int | None
    n10: int | None
    n01: int | None
    n00: int | None
    n_star: float
    q: float
    mde: float
    design_effect: float | None
    q_grouped: float | None
    group_kind: GroupKind | None
    p_value: float
    log_e: float
    cs_low: float | None
    cs_high: float | None
    n_star_anytime: float | None
    q_anytime: float | None
    e_alpha: float
    decided: int | None
    equivalent: bool | None
    decided_n: int | None
    decided_log_e: float | None
    n_clusters: int | None
    design: Design
    cluster_obs: int | None
    cluster_log_e: float | None
    cluster_decided: int | None
    cluster_decided_n: int | None
    cluster_decided_obs: int | None
    cluster_decided_log_e: float | None
    cluster_min: int | None
    clusters_seen: int
    verdict_code: int
    decidable: bool

    @property
    def headline_decided_n(self) -> int | None:
        """The paired items at which the verdict was taken (None while open)."""
        if self.verdict_code == 0:
            return None
        return self.cluster_decided_n if self.design == "clusters" else self.decided_n

    @property
    def headline_decided_log_e(self) -> float | None:
        """log E at the decision of the verdict (None while open)."""
        if self.verdict_code == 0:
            return None
        return self.cluster_decided_log_e if self.design == "clusters" else self.decided_log_e

    @property
    def e_value(self) -> float:
        """E_n (``inf`` beyond float range)."""
        return e_of(self.log_e)

    @property
    def q_cluster(self) -> float | None:
        """q with the cluster-robust design effect (None without clusters)."""
        return self.q_grouped if self.group_kind == "cluster" else None

    def as_dict(self) -> dict[str, Any]:
        """Plain fields plus ``e_value`` (non-finite values are left to the JSON writer)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["e_value"] = self.e_value
        return out


#: Relative rounding error allowed in Σx_A² + Σx_B² − 2Σx_Ax_B before Σ(D − D̄)² counts as 0.
_ROUNDING = 1e-12


def _check_level(name: str, value: float) -> float:
    if not (0.0 < value < 1.0) or not math.isfinite(value):
        raise ValueError(f"`{name}` must lie in (0, 1), got {value}")
    return float(value)


def pair_figures(
    sums: PairSums,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    e_alpha: ArrayLike | None = None,
    intervals: bool = True,
    p_values: bool = True,
) -> PairFigures:
    """Every figure of the pairs in ``sums`` (see the module docstring for the conventions).

    Parameters
    ----------
    sums : PairSums
    alpha : float
        Per-comparison level of N*, q, q_grouped and MDE (pass the family-adjusted level).
    power : float
        Target power 1 − β of N*, MDE and N*_AV.
    e_alpha : float or array, optional
        Level of the anytime layer, one for all pairs or one per pair: confidence sequence and
        N*_AV (default ``alpha``; the live core passes each pair's share γ_p of α).
    intervals : bool
        Also solve the confidence sequence and N*_AV (root finding; skip it for a whole board
        and ask for the pairs that are shown).
    p_values : bool
        Also compute the fixed-N test's p-value (exact McNemar or paired t); NaN without.

    Examples
    --------
    >>> f = pair_figures(PairSums.from_scores([1, 1, 0, 1], [0, 1, 0, 0]))
    >>> f.record(0).n, f.record(0).delta, f.record(0).n10, f.record(0).n01
    (4, 0.5, 2, 0)
    >>> f30 = pair_figures(PairSums.from_scores([1] * 30, [0] * 30))
    >>> round(f30.record(0).q, 1), float(f30.p_value[0]) < 1e-8
    (37.4, True)
    """
    from monitor.stats import eprocess as ep
    from monitor.stats.anytime_size import n_star_anytime
    from monitor.stats.cluster_sequential import log_e_cluster_sides, min_clusters
    from monitor.stats.sequential import BOUNDED, MCNEMAR, UNSET, log_e_paths

    alpha = _check_level("alpha", alpha)
    power = _check_level("power", power)
    n, s = sums.n, sums.s
    e_levels = np.broadcast_to(np.asarray(alpha if e_alpha is None else e_alpha, dtype=float),
                               n.shape).copy()
    if np.any(~np.isfinite(e_levels) | (e_levels <= 0.0) | (e_levels >= 1.0)):
        raise ValueError(f"`e_alpha` must lie in (0, 1), got {e_alpha!r}")
    pos = n > 0
    safe = np.where(pos, n, 1.0)
    # Cancellation in V = Σx_A² + Σx_B² − 2Σx_Ax_B can leave it a hair off S²/n: below it
    # (a negative variance), or above it by rounding noise where D is constant. Within the
    # rounding error of the sums, Σ(D − D̄)² is 0 (0/1 sums are exact integers).
    floor = np.where(pos, s * s / safe, 0.0)
    noise = np.where(sums.binary, 0.0, _ROUNDING * (sums.saa + sums.sbb))
    flat = sums.v - floor <= noise
    # Where D is constant within rounding, a gap S as small as the rounding scale √(n·noise)
    # is rounding too (a model against its own scores stored in float32): δ̂ = 0, not a
    # "certain" nonzero gap.
    s = np.where(flat & (noise > 0) & (np.abs(s) <= np.sqrt(n * noise)), 0.0, s)
    floor = np.where(pos, s * s / safe, 0.0)
    v = np.where(flat, floor, sums.v)
    delta, sigma2 = plugin_estimates(n, s, v)
    d_size, s2_size = sizing_estimates(n, s, v)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_a = np.where(pos, sums.sa / safe, np.nan)
        mean_b = np.where(pos, sums.sb / safe, np.nan)
        var_a = np.maximum(sums.saa / safe - mean_a * mean_a, 0.0)
        var_b = np.maximum(sums.sbb / safe - mean_b * mean_b, 0.0)
        cov = sums.sab / safe - mean_a * mean_b
        rho = np.where(pos & (var_a > 1e-15) & (var_b > 1e-15),
                       np.clip(cov / np.sqrt(var_a * var_b), -1.0, 1.0), np.nan)

    n_star = np.asarray(pw.n_star(d_size, s2_size, alpha=alpha, power=power), dtype=float)
    q = _ratio(n, n_star)
    with np.errstate(divide="ignore", invalid="ignore"):
        mde = np.where(pos, pw.z_total(alpha=alpha, power=power) * np.sqrt(s2_size / safe),
                       np.inf)

    binary = np.asarray(sums.binary, dtype=bool)
    n11 = np.where(binary, sums.sab, 0.0)
    n10 = np.where(binary, sums.sa - sums.sab, 0.0)
    n01 = np.where(binary, sums.sb - sums.sab, 0.0)
    n00 = np.where(binary, n - n11 - n10 - n01, 0.0)
    p_value = np.ones_like(n) if p_values else np.full_like(n, np.nan)
    if p_values and binary.any():
        k10, k01 = np.rint(np.maximum(n10, 0.0)), np.rint(np.maximum(n01, 0.0))
        p_value = np.where(binary, _mcnemar_exact_p(k10, k01), p_value)
    if p_values and not binary.all():
        p_value = np.where(binary, p_value, _paired_t_p(delta, sigma2, n))

    de, q_grouped = _grouped(sums.groups, n, delta, sigma2, v, n_star)

    paths = sums.paths
    if paths is not None:
        # The pair's own e-process (kind fixed at its first item, switch recorded by the path).
        kind = np.where(paths.kind == UNSET, np.where(binary, MCNEMAR, BOUNDED), paths.kind)
        log_e = log_e_paths(kind, n, s, v, start_n=paths.start_n, start_s=paths.start_s,
                            start_v=paths.start_v, start_log_plus=paths.start_log_plus,
                            start_log_minus=paths.start_log_minus)
        mcnemar = kind == MCNEMAR
    else:
        kind = np.where(binary, MCNEMAR, BOUNDED)
        log_e = log_e_paths(kind, n, s, v, start_n=0.0, start_s=0.0, start_v=0.0,
                            start_log_plus=0.0, start_log_minus=0.0)
        mcnemar = binary

    cs_low = cs_high = n_av = q_av = None
    if intervals:
        cs_low, cs_high = (np.atleast_1d(np.asarray(x, dtype=float))
                           for x in ep.cs_bounded(n, s, v, alpha=e_levels))
        n_av = np.zeros_like(n)
        constructions: tuple[tuple[Literal["mcnemar", "bounded"], BoolArray], ...] = (
            ("mcnemar", mcnemar), ("bounded", ~mcnemar))
        # Sized for the rule that decides: with paths, a one-sided e-process reaching 2/γ
        # (stats.sequential); without, E ≥ 1/e_alpha now.
        rule: Literal["side", "mean"] = "side" if paths is not None else "mean"
        for construction, mask in constructions:
            for level in np.unique(e_levels[mask]):  # one boundary table per level
                sel = mask & (e_levels == level)
                n_av[sel] = np.atleast_1d(n_star_anytime(
                    d_size[sel], s2_size[sel], alpha=float(level), power=power,
                    construction=construction, rule=rule))
        q_av = _ratio(n, n_av)

    item_level = None if sums.design == "clusters" else paths
    g = sums.groups
    cl = sums.clusters
    cl_log_e = cl_min = None
    if cl is not None:
        r = float(cl.r)
        plus, minus = log_e_cluster_sides(cl.n_obs, cl.s / r, cl.v / (r * r))
        cl_log_e = np.asarray(np.logaddexp(plus, minus) - math.log(2.0), dtype=float)
        levels, at = np.unique(e_levels, return_inverse=True)  # a few shares of α
        cl_min = np.asarray([min_clusters(float(x)) for x in levels.tolist()],
                            dtype=float)[at.reshape(-1)].reshape(np.shape(e_levels))
    return PairFigures(
        n=n, s=s, v=v, mean_a=mean_a, mean_b=mean_b, delta=delta, sigma_d2=sigma2, rho=rho,
        binary=binary, n11=n11, n10=n10, n01=n01, n00=n00, n_star=n_star, q=q, mde=mde,
        design_effect=de, q_grouped=q_grouped, group_kind=None if g is None else g.kind,
        n_groups=0 if g is None else g.n_groups, p_value=p_value, log_e=log_e,
        cs_low=cs_low, cs_high=cs_high, n_star_anytime=n_av, q_anytime=q_av,
        # The item-level decision is the verdict except under sampled clusters, where it is
        # neither the verdict nor kept (the replay does not take it): none there, live and
        # offline alike.
        decided=None if item_level is None else item_level.decided,
        equivalent=None if item_level is None else item_level.equivalent,
        decided_n=None if item_level is None else item_level.decided_n,
        decided_log_e=None if item_level is None else item_level.decided_log_e,
        # The clusters holding each pair's paired items (sampled clusters' design effect).
        n_clusters=(None if g is None or g.kind != "cluster" or g.n_groups == 0
                    else g.count),
        design=sums.design, cluster_obs=None if cl is None else cl.n_obs,
        cluster_log_e=cl_log_e, cluster_decided=None if cl is None else cl.decided,
        cluster_equivalent=None if cl is None else cl.equivalent,
        cluster_decided_n=None if cl is None else cl.decided_n,
        cluster_decided_obs=None if cl is None else cl.decided_obs,
        cluster_decided_log_e=None if cl is None else cl.decided_log_e,
        cluster_min=cl_min, clusters_seen=0 if cl is None else cl.seen,
        alpha=alpha, e_alpha=e_levels, power=power,
    )


def _ratio(n: FloatArray, required: FloatArray) -> FloatArray:
    # q = N / N*; N* is never 0 with the sizing estimates, and q = 0 where N* = ∞.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(required) & (required > 0), n / required, 0.0)


def _grouped(g: GroupSums | None, n: FloatArray, delta: FloatArray, sigma2: FloatArray,
             v: FloatArray, n_star: FloatArray) -> tuple[FloatArray | None, FloatArray | None]:
    if g is None:
        return None, None
    if g.kind == "cluster" and g.n_groups == 0:
        # No cluster labels: every item is its own cluster, DE = 1 and q_cluster = q.
        return np.ones_like(n), _ratio(n, n_star)
    d0 = np.where(n > 0, delta, 0.0)
    ss_total = np.where(n > 0, sigma2, 0.0) * n  # Σ (D_i − D̄)²
    # Clusters: Σ_c (T_c − n_c D̄)², expanded so that only per-group sums are needed.
    # Strata: the within-stratum sum of squares.
    ss_grouped = np.maximum(g.t2 - 2.0 * d0 * g.tn + d0 * d0 * g.n2 if g.kind == "cluster"
                            else v - g.t2_over_n, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        de = np.where(ss_total > 0, ss_grouped / np.where(ss_total > 0, ss_total, 1.0), 1.0)
        if g.kind == "strata":
            return de, _ratio(n, n_star * de)
        # Sampled clusters: the cluster-robust variance with its small-sample factor
        # G/(G − 1), and never below the i.i.d. one — q_cluster ≤ q. One cluster: no
        # between-cluster variance can be estimated, q_cluster = 0.
        return de, _ratio(n, n_star * cluster_inflation(de, g.count))


def _mcnemar_exact_p(k10: FloatArray, k01: FloatArray) -> FloatArray:
    """The exact McNemar test's two-sided p-value, min(1, 2 P(Bin(n10 + n01, 1/2) ≤ the
    smaller count)).

    The binomial tail is the regularised incomplete beta P(Bin(N, p) ≤ k) = I_{1−p}(N − k, k + 1)
    (scipy.special; scipy.stats.binom.cdf computes the same to within 1e-14 relative, and
    importing scipy.stats is most of a report's start-up).
    """
    k, total = np.minimum(k10, k01), k10 + k01
    tail = np.where(k < total, betainc(np.maximum(total - k, 1.0), k + 1.0, 0.5), 1.0)
    return np.asarray(np.minimum(1.0, 2.0 * tail), dtype=float)


def _paired_t_p(delta: FloatArray, sigma2: FloatArray, n: FloatArray) -> FloatArray:
    """Two-sided paired t-test p-value from δ̂, the plug-in σ̂_D² and N (Student's t survival
    function as scipy.special.stdtr, which scipy.stats.t.sf evaluates)."""
    df = n - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(np.where(df > 0, sigma2, 0.0) / np.where(df > 0, df, 1.0))
        p = 2.0 * stdtr(np.where(df > 0, df, 1.0), -(np.abs(delta) / se))
    # No spread: a nonzero constant gap is certain, a zero gap carries no evidence.
    p = np.where(se > 0, p, np.where(delta != 0, 0.0, 1.0))
    return np.where(df > 0, p, 1.0)
