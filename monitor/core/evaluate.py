"""Pair statistics, e-values and verdicts of one benchmark, vectorised over all pairs.

Verdicts are evaluated at batch boundaries. A batch boundary is a stopping time of the
stream (whether to look again never depends on future results), so Ville's inequality
still bounds the chance that an e-process under δ = 0 ever crosses its threshold; looking
less often than after every item only delays crossings. The per-item crossing is what
``llm-monitor report --anytime`` computes offline.

Family correction: with m pairs in the family (``adjacent``: m = k − 1; ``all``:
m = k(k − 1)/2, k the models ranked), the anytime verdict is e-Bonferroni — a pair is
resolved when E_n ≥ m/α — and its confidence sequence is at level α/m. The fixed-N figures
(q, q_cluster, MDE) use ``family_alpha(α, m, method=correction)``.

Every figure comes from the pair kernel (:func:`monitor.stats.figures.pair_figures`), the
same function the offline report calls. Items without a cluster label count as clusters of
their own (so no labels gives DE = 1).
"""

from __future__ import annotations

import numpy as np

from monitor.core.board import SX, SX2, UNCLUSTERED, BenchmarkState, N, P
from monitor.core.config import CoreConfig
from monitor.core.table import PairTable
from monitor.stats.emultiplicity import e_bonferroni
from monitor.stats.figures import GroupSums, PairSums, pair_figures
from monitor.stats.multiplicity import family_alpha


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
        groups=_cluster_sums(grams),
    )


def evaluate(state: BenchmarkState, config: CoreConfig) -> PairTable:
    """Every pair figure and verdict of ``state`` (the kernel over its Gram matrices)."""
    k = state.k
    sums = pair_sums(state)
    counts = np.rint(np.diag(sums.n.reshape(k, k))).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(counts > 0, np.diag(sums.sa.reshape(k, k)) / counts, np.nan)
    models = tuple(state.models)
    active = [i for i in range(k) if counts[i] > 0]
    order = tuple(sorted(active, key=lambda i: (-means[i], models[i])))

    m = family_size(len(order), config.family)
    fam_alpha = family_alpha(config.alpha, m, method=config.correction)
    e_alpha = config.alpha / m
    fig = pair_figures(sums, alpha=fam_alpha, power=config.power, e_alpha=e_alpha,
                       intervals=False)

    n = fig.n.reshape(k, k)
    delta = np.where(n > 0, fig.delta.reshape(k, k), 0.0)
    resolved = (n > 0) & e_bonferroni(fig.e_value.reshape(k, k), alpha=config.alpha, m=m) \
        & (delta != 0)
    code = (np.sign(delta) * resolved).astype(np.int8)
    np.fill_diagonal(code, 0)
    return PairTable(
        models=models, counts=counts, means=means, order=order, m=m,
        family_alpha=fam_alpha, e_alpha=e_alpha, power=config.power,
        sums=sums, figures=fig, code=code,
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
    return GroupSums(
        kind="cluster", n_groups=int(named.shape[0]), t2=t2.ravel(),
        tn=(np.einsum("gij,gij->ij", t, nc) + s_0).ravel(),
        n2=(np.einsum("gij,gij->ij", nc, nc) + g0[N]).ravel(), t2_over_n=t2_over_n.ravel(),
    )
