"""The sampled-clusters decision: each pair tested on one observation per cluster, decided once.

When items come in sampled clusters (passages, repositories: a new benchmark would draw new
ones), items of one cluster share its effect, so the item-level e-process is not a
supermartingale under H0 and its decisions exceed their level (docs/clusters-vs-strata.md).
The unit of independence is the cluster, and this module tests at that unit:

* **One observation per cluster.** A pair's observation of cluster c is the mean of D over the
  first ``r`` items of c that the pair has paired, in stream order; it enters the pair's test
  at the ``r``-th such item, once, and later items of c change nothing. Which items form it
  depends only on the arrival order, so under the design's assumptions (clusters drawn
  independently from a population of clusters; items arriving in an order independent of
  their outcomes) the observations are independent across clusters, each in [−1, 1] with the
  mean of the cluster-level gap. Items without a cluster label do not enter.
* **The test.** The one-sided gamma-exponential mixtures of :mod:`monitor.stats.eprocess` on
  the observations (Fan's inequality needs only Z ≥ −1 and E[Z] ≤ 0 under the side's null),
  tuned for the few observations a board has (``V_OPT_CLUSTERS``). A pair is decided the first
  time one side reaches 2/γ_p, at its fixed share γ_p of α (:mod:`monitor.stats.sequential`),
  and the decision is kept whatever follows: the same guarantee as the item-level decisions,
  at the cluster level. Valid for any number of clusters — no asymptotics.
* **What it costs.** With observations in [−1, 1] and λ < 1 an observation can add at most
  about its own value to log E, so a gap δ needs of the order of log(2/γ_p)/δ clusters;
  :func:`min_clusters` is the fewest clusters with which even observations all at one end of
  the range could reach the threshold. A pair on a board with fewer clusters than that is
  *not decidable* under this design, and says so instead of showing a verdict.

:func:`advance_clusters` is the one implementation, called by the live core on each run's new
paired items and by the offline replay on the table's rows in the replay order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammainc, gammaln

from monitor.stats import eprocess as ep
from monitor.stats.groups import run_sizes, run_starts

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Intrinsic time (Σ Z² over the observations) at which the cluster mixture is tightest: a
#: decision takes tens to hundreds of cluster observations of spread 0.1–0.3.
V_OPT_CLUSTERS = 5.0

#: Default items per cluster observation (``BenchmarkSpec.cluster_items``).
CLUSTER_ITEMS = 5

_LOG2 = math.log(2.0)

__all__ = [
    "CLUSTER_ITEMS",
    "V_OPT_CLUSTERS",
    "ClusterPaths",
    "advance_clusters",
    "log_e_cluster_sides",
    "max_log_e",
    "min_clusters",
]


def log_e_cluster_sides(n_obs: ArrayLike, s: ArrayLike, v: ArrayLike
                        ) -> tuple[FloatArray, FloatArray]:
    """(log E₊, log E₋) of pairs with ``n_obs`` cluster observations, S = ΣZ and V = ΣZ².

    Examples
    --------
    >>> p, m = log_e_cluster_sides(40, 8.0, 2.0)
    >>> bool(p > np.log(20) > m)
    True
    """
    plus, minus = ep.log_e_bounded_sides(n_obs, s, v, v_opt=V_OPT_CLUSTERS)
    return np.asarray(plus, dtype=np.float64), np.asarray(minus, dtype=np.float64)


def _per_step_max(lam: FloatArray) -> FloatArray:
    """max over z ∈ [−1, 1] of λz − ψ_E(λ)z² (the most one observation can add at λ)."""
    psi = -np.log1p(-lam) - lam
    z_star = lam / (2.0 * psi)
    return np.where(z_star >= 1.0, lam - psi, lam * lam / (4.0 * psi))


@lru_cache(maxsize=1)
def _mixture_grid() -> tuple[FloatArray, FloatArray]:
    """λ grid and log of the mixture weight of each cell (1 − λ ~ Gamma(ρ, ρ) on (0, 1])."""
    rho = ep.mixture_rho(v_opt=V_OPT_CLUSTERS)
    # u = 1 − λ on a log grid (the density piles up near u = 1 for large ρ, near 0 for small)
    edges = np.concatenate([np.geomspace(1e-12, 1.0, 20001)])
    mid = np.sqrt(edges[1:] * edges[:-1])
    log_norm = gammaln(rho) + math.log(float(gammainc(rho, rho))) - rho * math.log(rho)
    log_w = ((rho - 1.0) * np.log(mid) - rho * mid + np.log(np.diff(edges)) - log_norm)
    return 1.0 - mid, log_w


def max_log_e(clusters: int) -> float:
    """An upper bound on log E₊ (and log E₋) after ``clusters`` observations, whatever they
    are: ∫ exp(G · max_z(λz − ψ_E(λ)z²)) dF(λ), the mixture of the per-λ bound.

    Examples
    --------
    >>> max_log_e(0)
    0.0
    >>> 0.0 < max_log_e(10) < 10 * math.log(2.0)
    True
    """
    if clusters <= 0:
        return 0.0
    lam, log_w = _mixture_grid()
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = clusters * _per_step_max(lam) + log_w
    terms = terms[np.isfinite(terms)]
    # A midpoint rule on 20,000 log-spaced cells of a smooth integrand (relative error far
    # below 1e-4), raised by 1e-4 so that the bound errs high: a pair called not decidable
    # could not be decided.
    total = float(np.logaddexp.reduce(terms))
    return total + 1e-4 * abs(total)


@lru_cache(maxsize=4096)
def min_clusters(share: float) -> int:
    """The fewest cluster observations with which one side could reach 2/γ at share γ.

    Examples
    --------
    >>> min_clusters(0.05 / 2) < min_clusters(0.05 / 992)
    True
    """
    if not (0.0 < share < 1.0):
        raise ValueError(f"`share` must lie in (0, 1), got {share}")
    target = math.log(2.0 / share)
    lo, hi = 0, 1
    while max_log_e(hi) < target:
        lo, hi = hi, hi * 2
        if hi > 1 << 24:
            raise ValueError(f"no number of clusters reaches 2/γ at γ = {share}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if max_log_e(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass
class ClusterPaths:
    """The sampled-clusters state of some pairs (index i) over clusters (index g ≥ 1).

    Per (pair, cluster): ``count`` items taken into the observation so far (``r`` once it
    entered) and their sum ``total``. Per pair: the entered observations' number ``n_obs`` and
    sums ``s`` = Σ total and ``v`` = Σ total² (of the totals, exact for 0/1 scores; the test
    reads Z = total/r); ``decided`` +1/−1/0 (the first model of the pair better / the second /
    open), with ``decided_n`` (the pair's paired items at the decision), ``decided_obs`` (the
    cluster observations then) and ``decided_log_e``.
    """

    count: NDArray[np.int16]
    total: FloatArray
    n_obs: FloatArray
    s: FloatArray
    v: FloatArray
    decided: NDArray[np.int8]
    decided_n: FloatArray
    decided_obs: FloatArray
    decided_log_e: FloatArray
    equivalent: NDArray[np.int8]

    #: The per-pair arrays (besides the per-(pair, cluster) ``count`` and ``total``).
    PER_PAIR = ("n_obs", "s", "v", "decided", "decided_n", "decided_obs", "decided_log_e",
                "equivalent")

    @classmethod
    def empty(cls, pairs: int, clusters: int) -> ClusterPaths:
        return cls(count=np.zeros((pairs, clusters), np.int16),
                   total=np.zeros((pairs, clusters)), n_obs=np.zeros(pairs), s=np.zeros(pairs),
                   v=np.zeros(pairs), decided=np.zeros(pairs, np.int8),
                   decided_n=np.zeros(pairs), decided_obs=np.zeros(pairs),
                   decided_log_e=np.zeros(pairs), equivalent=np.zeros(pairs, np.int8))

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.count.shape[0]), int(self.count.shape[1]))

    def put(self, idx: slice, part: ClusterPaths) -> None:
        """Write the state of the pairs ``part`` holds at ``idx``."""
        for name in self.__dataclass_fields__:
            getattr(self, name)[idx] = getattr(part, name)

    def grown(self, pairs: int, clusters: int) -> ClusterPaths:
        """A copy with room for at least ``pairs`` pairs and ``clusters`` cluster columns."""
        p0, g0 = self.shape
        if pairs <= p0 and clusters <= g0:
            return self
        p1, g1 = max(pairs, p0), max(clusters, g0)
        out = ClusterPaths.empty(p1, g1)
        out.count[:p0, :g0] = self.count
        out.total[:p0, :g0] = self.total
        for name in self.PER_PAIR:
            getattr(out, name)[:p0] = getattr(self, name)
        return out

    def log_e(self, idx: IntArray, r: int) -> FloatArray:
        """The two-sided log E = log((E₊ + E₋)/2) of pairs ``idx`` now."""
        plus, minus = log_e_cluster_sides(self.n_obs[idx], self.s[idx] / r,
                                          self.v[idx] / (r * r))
        return np.asarray(np.logaddexp(plus, minus) - _LOG2, dtype=np.float64)


def advance_clusters(paths: ClusterPaths, pair: IntArray, group: IntArray, d: FloatArray,
                     n_at: FloatArray, *, r: int, log_threshold: FloatArray,
                     margin: float | None = None) -> IntArray:
    """Follow pairs along new paired items in stream order; update ``paths`` in place.

    Parameters
    ----------
    paths : ClusterPaths
        The state, indexed by the values of ``pair`` and ``group``.
    pair, group : int arrays
        Pair and cluster (≥ 1; 0: no label, skipped) of each new paired item, each pair's
        items in stream order (any interleaving of pairs).
    d : float array
        D = x_first − x_second of each item.
    n_at : float array
        The pair's paired items up to and including this one (its n at the item).
    r : int
        Items per cluster observation.
    log_threshold : float array, indexed by pair
        log(1/γ_p) of each pair.
    margin : float, optional
        Δ: a pair is declared equivalent when the one-sided tests on its observations
        against δ ≥ Δ and δ ≤ −Δ both reach 2/γ_p (None: never).

    Returns
    -------
    The pairs decided by these items, resolved or equivalent.

    Examples
    --------
    >>> cp = ClusterPaths.empty(1, 61)
    >>> g = np.repeat(np.arange(1, 61), 2)          # 60 clusters of 2 items, in order
    >>> dec = advance_clusters(cp, np.zeros(120, np.int64), g, np.ones(120), np.arange(1., 121),
    ...                        r=2, log_threshold=np.array([np.log(40.0)]))
    >>> dec.tolist(), int(cp.decided[0]), int(cp.decided_obs[0]) < 60
    ([0], 1, True)
    """
    if r < 1:
        raise ValueError(f"`r` must be at least 1, got {r}")
    pair = np.asarray(pair, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    keep = (group > 0) & (paths.decided[pair] == 0) & (paths.equivalent[pair] == 0)
    if keep.any():
        keep[keep] = paths.count[pair[keep], group[keep]] < r
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64)
    p, g = pair[idx], group[idx]
    key = p * paths.count.shape[1] + g
    order = np.argsort(key, kind="stable")  # each (pair, cluster) in stream order
    ks = key[order]
    first = run_starts(ks)
    sizes = run_sizes(first, ks.size)
    rank = np.arange(ks.size) - np.repeat(first, sizes)
    c0 = paths.count[p[order], g[order]].astype(np.int64)
    take = c0 + rank < r
    sel, c_at = order[take], (c0 + rank)[take]  # positions into idx, grouped, in stream order
    tp, tg = p[sel], g[sel]
    # Each cell's total after its taken items, added one by one in stream order from the
    # stored total (np.add.at adds in array order): the same floats whatever the batching.
    cell = np.repeat(np.arange(first.size), sizes)[take]
    acc = paths.total[p[order[first]], g[order[first]]].copy()
    np.add.at(acc, cell, d[idx[sel]])
    enter = np.flatnonzero(c_at == r - 1)
    # The observations entering, pair by pair in stream order: the decisions they take.
    stop = np.full(paths.decided.size, np.iinfo(np.int64).max)  # a pair's decision position
    decided: list[int] = []
    side_thr = log_threshold + _LOG2
    if enter.size:
        e_pos = idx[sel[enter]]
        e_pair = pair[e_pos]
        e_total = acc[cell[enter]]
        for j in np.lexsort((e_pos, e_pair)).tolist():
            q = int(e_pair[j])
            if paths.decided[q] != 0 or paths.equivalent[q] != 0:
                continue
            t = float(e_total[j])
            paths.n_obs[q] += 1.0
            paths.s[q] = paths.s[q] + t
            paths.v[q] = paths.v[q] + t * t
            plus, minus = log_e_cluster_sides(paths.n_obs[q], paths.s[q] / r,
                                              paths.v[q] / (r * r))
            if plus >= side_thr[q] or minus >= side_thr[q]:
                paths.decided[q] = 1 if plus >= minus else -1
                paths.decided_n[q] = n_at[e_pos[j]]
                paths.decided_obs[q] = paths.n_obs[q]
                paths.decided_log_e[q] = float(np.logaddexp(plus, minus) - _LOG2)
                stop[q] = int(e_pos[j])
                decided.append(q)
            elif margin is not None:
                n_o, s_o, v_o = paths.n_obs[q], paths.s[q] / r, paths.v[q] / (r * r)
                _, below = ep.log_e_bounded_sides(n_o, s_o, v_o, delta=margin,
                                                  v_opt=V_OPT_CLUSTERS)
                above, _ = ep.log_e_bounded_sides(n_o, s_o, v_o, delta=-margin,
                                                  v_opt=V_OPT_CLUSTERS)
                if below >= side_thr[q] and above >= side_thr[q]:
                    paths.equivalent[q] = 1
                    paths.decided_n[q] = n_at[e_pos[j]]
                    paths.decided_obs[q] = paths.n_obs[q]
                    paths.decided_log_e[q] = float(min(below, above))
                    stop[q] = int(e_pos[j])
                    decided.append(q)
    # A decided pair's state stops at its decision: the items after it are not counted, in
    # this call as in later ones.
    keep_item = idx[sel] <= stop[tp]
    np.add.at(paths.total, (tp[keep_item], tg[keep_item]), d[idx[sel[keep_item]]])
    np.add.at(paths.count, (tp[keep_item], tg[keep_item]), 1)
    return np.asarray(decided, dtype=np.int64)
