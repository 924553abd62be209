"""Item clusters and strata: how grouping of items changes the variance of the mean gap D̄.

Two questions, two answers (docs/clusters-vs-strata.md):

* **clusters** — the groups (e.g. MMLU-Pro's 14 subjects) are a *sample*: a new benchmark
  would draw new subjects. The cluster-robust variance Var_cr(D̄) = Σ_c (Σ_{i∈c}(D_i − D̄))² / N²
  inflates the iid variance by the design effect DE = Var_cr / Var_iid, so N*_cluster = N* · DE.
* **strata** — the groups are fixed by design and every replication keeps them: the
  stratified variance Σ_h (N_h/N)² s_h² / N_h removes between-stratum variation and is at
  most the iid variance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: The fewest clusters from which a report reads the cluster-robust design effect without a
#: warning. Var_cr is a sum of G squared cluster totals, with about G − 1 degrees of freedom:
#: below 30 clusters its relative standard error √(2/(G − 1)) (:func:`de_relative_se`) is
#: above a quarter, the Student t quantile with G − 1 degrees of freedom exceeds the normal
#: quantile N* is sized with by more than 4 % (t₀.₉₇₅,₂₉ = 2.045 against 1.960), and the
#: plug-in Var_cr is biased downward — Cameron & Miller (2015, "A Practitioner's Guide to
#: Cluster-Robust Inference", §VI) put "few clusters" somewhere below 20 to 50.
MIN_CLUSTERS = 30


def _check_d(d: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(d, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`d` must be a non-empty one-dimensional array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("`d` must be finite (pair on shared items before computing D)")
    return arr


def _codes(groups: ArrayLike, n: int, name: str) -> tuple[NDArray[np.intp], int]:
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"`{name}` must have one label per item ({n}), got shape {g.shape}")
    _, codes = np.unique(g, return_inverse=True)
    codes = codes.reshape(-1)
    return codes, int(codes.max()) + 1


@dataclass(frozen=True)
class DesignEffect:
    """Cluster design effect of the mean paired difference D̄.

    Attributes
    ----------
    de : float
        Var_cr / Var_iid; 1.0 when D has no variance at all (nothing to inflate).
    var_cr, var_iid : float
        Cluster-robust and iid variances of D̄ (plug-in, no small-sample correction).
    n_clusters : int
    m_bar : float
        Mean cluster size N / n_clusters.
    icc : float
        One-way ANOVA estimator of the intra-cluster correlation of D (may be negative;
        NaN with a single cluster or when every cluster holds one item).
    kish_de : float
        The Kish approximation 1 + (m̄ − 1)·ICC (1.0 when every cluster holds one item).
    """

    de: float
    var_cr: float
    var_iid: float
    n_clusters: int
    m_bar: float
    icc: float
    kish_de: float

    def n_star_cluster(self, n_star: float) -> float:
        """N*_cluster = N* · max(DE · G/(G − 1), 1) (:func:`cluster_inflation`)."""
        return float(n_star_cluster(n_star, self.de, self.n_clusters))

    def q_cluster(self, n: float, n_star: float) -> float:
        """q_cluster = N / N*_cluster (0 when N* is infinite or G = 1)."""
        return float(q_cluster(n, n_star, self.de, self.n_clusters))


def icc_anova(d: ArrayLike, groups: ArrayLike) -> float:
    """One-way ANOVA estimator of the intra-cluster correlation of ``d``.

    ICC = (MSB − MSW) / (MSB + (m₀ − 1) MSW) with MSB = Σ_c m_c (D̄_c − D̄)² / (C − 1),
    MSW = Σ_c Σ_{i∈c} (D_i − D̄_c)² / (N − C) and the unequal-size average
    m₀ = (N − Σ_c m_c² / N) / (C − 1) (Searle, Casella & McCulloch 1992, §3.6).

    Examples
    --------
    >>> round(icc_anova([1, 1, 0, 0, 1, 0], ["a", "a", "b", "b", "c", "c"]), 4)
    0.5
    """
    x = _check_d(d)
    codes, c = _codes(groups, x.size, "groups")
    n = x.size
    if c < 2 or n <= c:
        return float("nan")
    m = np.bincount(codes, minlength=c).astype(float)
    means = np.bincount(codes, weights=x, minlength=c) / m
    msb = float(np.sum(m * (means - x.mean()) ** 2)) / (c - 1)
    msw = float(np.sum((x - means[codes]) ** 2)) / (n - c)
    m0 = (n - float(np.sum(m * m)) / n) / (c - 1)
    denom = msb + (m0 - 1.0) * msw
    return (msb - msw) / denom if denom > 0 else float("nan")


def design_effect(d: ArrayLike, groups: ArrayLike) -> DesignEffect:
    """Cluster-robust design effect of D̄ with the Kish/ICC form alongside.

    Parameters
    ----------
    d : array_like, shape (N,)
        Paired differences D_i = x_Ai − x_Bi on the shared items.
    groups : array_like, shape (N,)
        Cluster label of each item (any hashable dtype numpy can sort).

    Examples
    --------
    >>> d = [1, 1, 0, 0, 1, 0]
    >>> round(design_effect(d, ["a", "a", "b", "b", "c", "c"]).de, 4)
    1.3333
    >>> design_effect(d, list("abcdef")).de  # one item per cluster
    1.0
    """
    x = _check_d(d)
    codes, c = _codes(groups, x.size, "groups")
    n = x.size
    resid = x - x.mean()
    sums = np.bincount(codes, weights=resid, minlength=c)
    var_cr = float(np.sum(sums * sums)) / (n * n)
    var_iid = float(np.sum(resid * resid)) / (n * n)
    de = var_cr / var_iid if var_iid > 0 else 1.0
    m_bar = n / c
    if c == n:
        icc, kish = float("nan"), 1.0
    else:
        icc = icc_anova(x, groups)
        kish = 1.0 + (m_bar - 1.0) * icc
    return DesignEffect(
        de=de, var_cr=var_cr, var_iid=var_iid, n_clusters=c, m_bar=m_bar, icc=icc, kish_de=kish
    )


def stratified_variance(d: ArrayLike, strata: ArrayLike) -> float:
    """Variance of D̄ when the groups are fixed strata: Σ_h (N_h/N)² s_h² / N_h.

    s_h² is the plug-in (ddof = 0) variance of D inside stratum h, so the result equals the
    within-stratum sum of squares over N², never more than the iid variance SS_total / N².

    Examples
    --------
    >>> stratified_variance([1, 1, 0, 0], ["a", "a", "b", "b"])
    0.0
    """
    x = _check_d(d)
    codes, c = _codes(strata, x.size, "strata")
    n = x.size
    m = np.bincount(codes, minlength=c).astype(float)
    means = np.bincount(codes, weights=x, minlength=c) / m
    within = float(np.sum((x - means[codes]) ** 2))
    return within / (n * n)


def strata_design_effect(d: ArrayLike, strata: ArrayLike) -> float:
    """Stratified variance of D̄ over the iid variance (≤ 1; 1.0 when D is constant).

    Examples
    --------
    >>> round(strata_design_effect([1, 0, 1, 0, 0, 0], ["a", "a", "a", "b", "b", "b"]), 4)
    0.5
    """
    x = _check_d(d)
    var_iid = float(np.var(x)) / x.size
    strat = stratified_variance(x, strata)
    return strat / var_iid if var_iid > 0 else 1.0


def de_relative_se(n_clusters: int) -> float:
    """About how far, relatively, a variance estimated from ``n_clusters`` cluster totals is
    from the truth: √(2/(G − 1)), the relative standard error of a χ²_{G−1}/(G − 1) variance
    (∞ below two clusters: no between-cluster variance can be estimated).

    Examples
    --------
    >>> round(de_relative_se(14), 2), round(de_relative_se(30), 2), de_relative_se(1)
    (0.39, 0.26, inf)
    """
    g = int(n_clusters)
    return math.sqrt(2.0 / (g - 1)) if g > 1 else math.inf


def cluster_inflation(de: ArrayLike, n_clusters: ArrayLike) -> Any:
    """The factor sampled clusters put on N*: max(DE · G/(G − 1), 1) — the cluster-robust
    variance with its small-sample factor G/(G − 1), never below the i.i.d. one — and ∞
    where G ≤ 1 or DE = 0 (no between-cluster variance can be estimated). The one definition:
    the pair kernel (:func:`monitor.stats.figures.pair_figures`) reads it too.

    Examples
    --------
    >>> cluster_inflation([4.0, 0.5, 4.0], [14, 14, 1]).round(3).tolist()
    [4.308, 1.0, inf]
    """
    d = np.asarray(de, dtype=float)
    g = np.asarray(n_clusters, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(g > 1, g / np.where(g > 1, g - 1.0, 1.0), np.inf)
        return np.where(d > 0, np.maximum(d * factor, 1.0), np.inf)


def n_star_cluster(n_star: ArrayLike, de: ArrayLike, n_clusters: ArrayLike) -> Any:
    """N*_cluster = N* · :func:`cluster_inflation` (broadcasting; ``inf`` stays ``inf``)."""
    return np.asarray(n_star, dtype=float) * cluster_inflation(de, n_clusters)


def q_cluster(n: ArrayLike, n_star: ArrayLike, de: ArrayLike, n_clusters: ArrayLike) -> Any:
    """q_cluster = N / N*_cluster; 0 where N*_cluster is infinite (broadcasting)."""
    req = n_star_cluster(n_star, de, n_clusters)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(req) & (req > 0), np.asarray(n, dtype=float) / req, 0.0)
