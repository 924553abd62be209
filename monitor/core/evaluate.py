"""Pair statistics, decisions and the ranking of one benchmark, vectorised over all pairs.

The anytime verdicts are the decisions the sequential pass took item by item
(:mod:`monitor.stats.sequential`): each pair at its fixed share γ_p of α, resolved at its first
crossing of 1/γ_p, for good. Evaluating reads them; how often it happens changes nothing.
The fixed-N snapshot figures (q, q_cluster, MDE) use ``family_alpha(α, m, method=correction)``
over the family read now (``adjacent``: m = k − 1; ``all``: m = k(k − 1)/2).

Every figure comes from the pair kernel (:func:`monitor.stats.figures.pair_figures`), the
same function the offline report calls. Items without a cluster label count as clusters of
their own (so no labels gives DE = 1).
"""

from __future__ import annotations

import numpy as np

from monitor.core.board import SX, SX2, UNCLUSTERED, BenchmarkState, N, P
from monitor.core.config import CoreConfig
from monitor.core.table import PairTable
from monitor.stats.figures import GroupSums, PairSums, pair_figures
from monitor.stats.multiplicity import family_alpha
from monitor.stats.sequential import share_grid


def family_size(k: int, family: str) -> int:
    """Number of pairs read together among k ranked models (at least 1)."""
    if family == "all":
        return max(k * (k - 1) // 2, 1)
    return max(k - 1, 1)


def pair_sums(state: BenchmarkState) -> PairSums:
    """The (k × k) grid of pair sums of ``state``, flattened row by row (entry a·k + b).

    Pair (a, b) is binary when neither model has a score other than 0 or 1.
    """
    k = state.k
    grams = state.grams[:, :, :k, :k]
    total = grams.sum(axis=0)
    sx, sx2 = total[SX], total[SX2]
    binary_col = state.nonbinary[:k] == 0
    return PairSums.build(
        n=total[N].ravel(), sa=sx.ravel(), sb=sx.T.ravel(), saa=sx2.ravel(),
        sbb=sx2.T.ravel(), sab=total[P].ravel(),
        binary=(binary_col[:, None] & binary_col[None, :]).ravel(),
        groups=_cluster_sums(grams), paths=state.grid_paths(),
    )


def consistent_order(by_mean: list[int], above: np.ndarray) -> tuple[int, ...]:
    """The ranking: by mean score, except that a model resolved above another always comes
    first (a topological order of the decisions, ties broken by mean).

    Means are over each model's own items and decisions over paired items, so with missing
    items the two can disagree; the displayed rank then stays inside the model's rank set.
    A cycle of decisions (only possible through a false one) falls back to the mean order.
    """
    import heapq

    sub = above[np.ix_(by_mean, by_mean)]
    indegree = sub.sum(axis=0).astype(np.int64)
    ready = [r for r in range(len(by_mean)) if indegree[r] == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        r = heapq.heappop(ready)
        out.append(by_mean[r])
        for c in np.flatnonzero(sub[r]).tolist():
            indegree[c] -= 1
            if indegree[c] == 0:
                heapq.heappush(ready, c)
    return tuple(out) if len(out) == len(by_mean) else tuple(by_mean)


def evaluate(state: BenchmarkState, config: CoreConfig) -> PairTable:
    """Every pair figure and verdict of ``state`` (the kernel over its Gram matrices)."""
    k = state.k
    sums = pair_sums(state)
    counts = np.rint(np.diag(sums.n.reshape(k, k))).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(counts > 0, np.diag(sums.sa.reshape(k, k)) / counts, np.nan)
    models = tuple(state.models)
    active = [i for i in range(k) if counts[i] > 0]
    by_mean = sorted(active, key=lambda i: (-means[i], models[i]))
    order: tuple[int, ...] = ()  # set below, once the decisions are known

    # Fixed-N snapshot figures are corrected for the family read now; the anytime verdicts
    # are the path decisions, each at the pair's own fixed share of α.
    m = family_size(len(by_mean), config.family)
    fam_alpha = family_alpha(config.alpha, m, method=config.correction)
    levels = share_grid(k, alpha=config.alpha, planned_models=config.planned_models)
    # The live board has no use for fixed-N p-values (its verdicts are the decisions).
    fig = pair_figures(sums, alpha=fam_alpha, power=config.power, e_alpha=levels,
                       intervals=False, p_values=False)
    decided = fig.decided.reshape(k, k) if fig.decided is not None else np.zeros((k, k))
    code = decided.astype(np.int8)
    np.fill_diagonal(code, 0)
    order = consistent_order(by_mean, code == 1)
    return PairTable(
        models=models, counts=counts, means=means, order=order, m=m,
        family_alpha=fam_alpha, levels=levels, power=config.power,
        sums=sums, figures=fig, code=code, decided_ts=dict(state.decided_ts),

    )


def _cluster_sums(grams: np.ndarray) -> GroupSums:
    # Per-cluster sums of D for the cluster-robust design effect. Unclustered items are
    # singleton clusters, whose contributions to Σ T², Σ T n, Σ n² and Σ T²/n are ΣD², ΣD,
    # the count and ΣD² of the unclustered group.
    named = grams[UNCLUSTERED + 1:]
    t = named[:, SX] - np.swapaxes(named[:, SX], 1, 2)
    nc = named[:, N]
    g0 = grams[UNCLUSTERED]
    s_0 = g0[SX] - g0[SX].T
    v_0 = g0[SX2] + g0[SX2].T - 2.0 * g0[P]
    t2 = np.einsum("gij,gij->ij", t, t) + v_0
    with np.errstate(divide="ignore", invalid="ignore"):
        t2_over_n = np.einsum("gij->ij", np.where(nc > 0, t * t / np.where(nc > 0, nc, 1.0),
                                                  0.0)) + v_0
    count = np.count_nonzero(nc > 0, axis=0) + g0[N]  # unclustered items: one cluster each
    return GroupSums(
        kind="cluster", n_groups=int(named.shape[0]), t2=t2.ravel(), count=count.ravel(),
        tn=(np.einsum("gij,gij->ij", t, nc) + s_0).ravel(),
        n2=(np.einsum("gij,gij->ij", nc, nc) + g0[N]).ravel(), t2_over_n=t2_over_n.ravel(),
    )
