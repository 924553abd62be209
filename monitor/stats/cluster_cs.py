"""Cluster-aware anytime verdict: a time-uniform confidence sequence for δ when clusters are sampled.

The item-level e-processes (:mod:`monitor.stats.eprocess`) treat items as exchangeable. When a
benchmark's subjects are regarded as *sampled* clusters (a new benchmark would draw new
subjects), each cluster shifts the gap by its own amount, the mean difference of the items seen
so far carries a between-cluster error that does not shrink with more items of the same
clusters, and the item-level verdict is no longer valid (docs/anytime.md, "Clusters in the
anytime verdict"). This module gives the cluster-aware verdict shown beside it.

Construction
------------
The Gaussian-mixture asymptotic confidence sequence of Waudby-Smith, Arbour, Sinha, Kennedy &
Ramdas ("Time-uniform central limit theory and asymptotic confidence sequences", Ann. Statist.
2024), written in intrinsic time (Howard et al. 2021's two-sided normal mixture) with the
item-level variance replaced by the cluster-robust one::

    V̂ = G/(G − 1) · Σ_g (T_g − n_g D̄)² = G/(G − 1) · (t2 − 2 D̄ tn + D̄² n2)
    u(V̂) = √((V̂ + ρ) · log((V̂ + ρ)/(ρ α²)))
    C_n = [D̄ − u(V̂)/n, D̄ + u(V̂)/n] ∩ [−1, 1]

with n the paired items, D̄ = S/n, T_g and n_g the sum of D and the paired items in cluster g,
G the clusters holding paired items, and ρ the mixture precision fixed in advance
(:func:`monitor.stats.eprocess.mixture_rho`, the tuning of the item-level mixtures: ρ = 63.0,
tightest at V̂ = 500). V̂/n² is Var_cr(D̄) of ``figures._grouped`` times the small-sample factor
G/(G − 1). Every quantity is a per-pair sum the kernel already keeps, so the interval costs
O(1) per pair and needs no root finding.

The pair is *resolved (cluster, anytime)* when C_n excludes 0; since the guarantee is
time-uniform, a resolution may be kept once made (equivalently, the running intersection of
the C_n may be reported).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.eprocess import ALPHA_OPT, V_OPT, mixture_rho

FloatArray = NDArray[np.float64]

__all__ = ["cluster_intrinsic_time", "cs_cluster", "resolved_cluster_anytime"]


def _arr(x: ArrayLike) -> FloatArray:
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


def cluster_intrinsic_time(n: ArrayLike, s: ArrayLike, *, t2: ArrayLike, tn: ArrayLike,
                           n2: ArrayLike, n_clusters: ArrayLike) -> FloatArray:
    """V̂ = G/(G − 1) · Σ_g (T_g − n_g D̄)², the cluster-robust variance of S = ΣD.

    0 where n = 0 or G ≤ 1 (no between-cluster variance can be estimated there; see
    :func:`cs_cluster` for what the interval does then).

    Examples
    --------
    >>> # Two clusters: T = (3, −1) over n_g = (4, 4); D̄ = 0.25, residuals 2 and −2.
    >>> float(cluster_intrinsic_time(8, 2.0, t2=10.0, tn=8.0, n2=32.0, n_clusters=2)[0])
    16.0
    """
    nn, ss, gg = _arr(n), _arr(s), _arr(n_clusters)
    pos = nn > 0
    d = np.where(pos, ss / np.where(pos, nn, 1.0), 0.0)
    # Σ_g (T_g − n_g D̄)² expanded so that only the three per-pair sums are needed; rounding
    # can leave it a hair below 0 where every cluster has the same mean.
    ss_cr = np.maximum(_arr(t2) - 2.0 * d * _arr(tn) + d * d * _arr(n2), 0.0)
    many = pos & (gg > 1)
    factor = np.where(many, gg / np.where(many, gg - 1.0, 1.0), 0.0)
    return np.asarray(np.where(many, factor * ss_cr, 0.0), dtype=np.float64)


def cs_cluster(
    n: ArrayLike,
    s: ArrayLike,
    *,
    t2: ArrayLike,
    tn: ArrayLike,
    n2: ArrayLike,
    n_clusters: ArrayLike,
    alpha: ArrayLike = 0.05,
    v_opt: float = V_OPT,
    alpha_opt: float = ALPHA_OPT,
) -> tuple[FloatArray, FloatArray]:
    """Time-uniform confidence sequence for δ with sampled clusters (cluster-robust, asymptotic).

    δ is the mean difference per item in the superpopulation of clusters. The interval is
    D̄ ± u(V̂)/n with V̂ the cluster-robust variance of S (G/(G − 1) small-sample factor) and
    u the two-sided Gaussian-mixture boundary of precision ρ = ``mixture_rho(v_opt=,
    alpha_opt=)`` (see the module docstring), clipped to [−1, 1]. Broadcasts over pairs.

    Parameters
    ----------
    n : array_like
        Paired items of each pair.
    s : array_like
        S = ΣD over the paired items.
    t2, tn, n2 : array_like
        Σ_g T_g², Σ_g T_g n_g and Σ_g n_g² over the clusters (as in
        :class:`monitor.stats.figures.GroupSums`; items without a cluster are clusters of
        their own).
    n_clusters : array_like
        G, the clusters that hold at least one paired item of the pair.
    alpha : float or array_like
        Level, one for all pairs or one per pair (e.g. the pair's share γ_p of α).
    v_opt, alpha_opt : float
        Tuning of the mixture, fixed in advance (defaults: the item-level mixtures' tuning).

    Returns
    -------
    low, high : ndarray
        The interval's ends. [−1, 1] where n = 0 or G ≤ 1.

    Notes
    -----
    **What is guaranteed, and under which regime.** The guarantee is asymptotic, as the number
    of clusters G → ∞; it is not a finite-sample statement like Ville's inequality for the
    item-level e-processes. It needs

    * clusters drawn i.i.d. from a superpopulation (the "sampled clusters" reading of the
      categories; with categories fixed by design, read the item-level verdict instead);
    * items arriving in an order independent of their outcomes (a random order, or
      ``--order shuffle``); an order sorted by cluster is not such an order;
    * differences with finite variance (they are bounded here) and cluster sizes with
      finite second moment.

    *Clusters arriving whole* (each cluster's items together): the cluster residuals
    Y_g(δ) = T_g − δ n_g are then i.i.d. with mean 0, and C_n is the Gaussian-mixture
    asymptotic CS of Waudby-Smith et al. (2024) for the mean of Y_g in "cluster time", with
    the variance evaluated at the plug-in D̄ (asymptotically equivalent). Their guarantee
    applies: as G grows, C_n is within a vanishing relative width of an exact time-uniform
    CS for the Gaussian process approximating the sums (their definition of an asymptotic
    CS).

    *Items of many clusters interleaved* (the live board, items in random order): S − nδ is
    then not a martingale — a cluster's shift is learned gradually and acts on the partial
    sums like a random drift n·ū with Var(ū) ≈ Σ n_g² τ²/n² — and no theorem is claimed.
    The boundary runs in the intrinsic time V̂, which tracks both regimes: early, with few
    items per cluster, V̂ ≈ Σ(D_i − D̄)² (the item-level time), late V̂ ≈ n² Var(ū) (the
    drift), where the boundary is at least √(2 log(1/α)) standard errors wide. The seeded
    simulation in ``tests/statistical/test_cluster_anytime.py`` (G = 50 and 200 clusters of
    random sizes, τ = 0.06, checked every 10 items) holds the error at α.

    *Few clusters*: V̂ has about G − 1 degrees of freedom and the Gaussian boundary ignores
    that, so with a handful of clusters (MMLU-Pro has 14) the interval is too narrow and the
    error exceeds α (measured in docs/anytime.md); read it as indicative there. With
    G ≤ 1 no between-cluster variance exists and the interval is [−1, 1].

    Where V̂ = 0 with G ≥ 2 (every cluster shows the same mean difference), the mixture's
    prior keeps the interval at D̄ ± √(ρ log(1/α²))/n, not a point.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> cluster = rng.integers(0, 50, size=3000)               # 50 clusters, random order
    >>> shift = rng.normal(0.0, 0.03, size=50)                 # sampled cluster shifts
    >>> d = np.clip(rng.normal(0.06 + shift[cluster], 0.5), -1, 1)  # D_i ∈ [−1, 1]
    >>> t_g = np.bincount(cluster, d, 50)
    >>> n_g = np.bincount(cluster, minlength=50).astype(float)
    >>> lo, hi = cs_cluster(d.size, d.sum(), t2=(t_g**2).sum(), tn=(t_g * n_g).sum(),
    ...                     n2=(n_g**2).sum(), n_clusters=50)
    >>> round(float(lo[0]), 3), round(float(hi[0]), 3)
    (0.021, 0.079)
    >>> resolved_cluster_anytime(lo, hi).tolist()
    [1]
    """
    nn, ss, gg = _arr(n), _arr(s), _arr(n_clusters)
    aa = _arr(alpha)
    if np.any(~np.isfinite(aa) | (aa <= 0.0) | (aa >= 1.0)):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha!r}")
    if np.any(~np.isfinite(nn) | (nn < 0.0)):
        raise ValueError(f"`n` must be finite and nonnegative, got {n!r}")
    if np.any(~np.isfinite(gg) | (gg < 0.0)):
        raise ValueError(f"`n_clusters` must be finite and nonnegative, got {n_clusters!r}")
    if np.any(gg > np.maximum(nn, 0.0)):
        raise ValueError("`n_clusters` cannot exceed the paired items `n`")
    rho = mixture_rho(v_opt=v_opt, alpha_opt=alpha_opt)
    v = cluster_intrinsic_time(nn, ss, t2=t2, tn=tn, n2=n2, n_clusters=gg)
    log_a = np.log(aa)
    half = np.sqrt((v + rho) * (np.log((v + rho) / rho) - 2.0 * log_a))  # u(V̂), units of S
    ok = (nn > 0) & (gg > 1)
    safe = np.where(ok, nn, 1.0)
    centre = np.where(ok, ss / safe, 0.0)
    low = np.where(ok, np.maximum(centre - half / safe, -1.0), -1.0)
    high = np.where(ok, np.minimum(centre + half / safe, 1.0), 1.0)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def resolved_cluster_anytime(low: ArrayLike, high: ArrayLike) -> NDArray[np.int8]:
    """Resolved (cluster, anytime): +1 where the interval lies above 0 (the pair's first model
    is better), −1 where it lies below, 0 where it contains 0.

    Examples
    --------
    >>> resolved_cluster_anytime([0.01, -0.2, -0.1], [0.2, -0.01, 0.1]).tolist()
    [1, -1, 0]
    """
    lo, hi = _arr(low), _arr(high)
    return np.asarray(np.where(lo > 0.0, 1, np.where(hi < 0.0, -1, 0)), dtype=np.int8)
