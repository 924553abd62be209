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

from monitor.core.board import BenchmarkState
from monitor.core.config import CoreConfig
from monitor.core.paths import pair_level
from monitor.core.table import PairTable
from monitor.stats.multiplicity import family_alpha
from monitor.stats.ranks import consistent_order


def family_size(k: int, family: str) -> int:
    """Number of pairs read together among k ranked models (at least 1)."""
    if family == "all":
        return max(k * (k - 1) // 2, 1)
    return max(k - 1, 1)


def evaluate(state: BenchmarkState, config: CoreConfig) -> PairTable:
    """The verdicts and ranking of ``state``: O(k²) small integers (the decisions) and the
    models' means; the pair figures are computed by the table for the pairs read."""
    st = state
    k, cap = st.k, st.cap
    counts = st.n.diagonal(k).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(counts > 0, st.sx.diagonal(k) / np.maximum(counts, 1), np.nan)
    models = tuple(st.models)
    active = [i for i in range(k) if counts[i] > 0]
    by_mean = sorted(active, key=lambda i: (-means[i], models[i]))

    # Fixed-N snapshot figures are corrected for the family read now; the anytime verdicts
    # are the path decisions, each at the pair's own fixed share of α.
    m = family_size(len(by_mean), config.family)
    fam_alpha = family_alpha(config.alpha, m, method=config.correction)
    if st.cpaths is None:
        decided = st.paths.decided.reshape(cap, cap)[:k, :k]
        equal = st.paths.equivalent.reshape(cap, cap)[:k, :k]
    else:  # sampled clusters: the clustered decisions are the verdicts
        decided = np.zeros((k, k), dtype=np.int8)
        equal = np.zeros((k, k), dtype=np.int8)
        lo, hi = np.triu_indices(k, 1)
        idx = hi * (hi - 1) // 2 + lo
        inside = idx < st.cpaths.shape[0]
        decided[lo[inside], hi[inside]] = st.cpaths.decided[idx[inside]]
        equal[lo[inside], hi[inside]] = st.cpaths.equivalent[idx[inside]]
    code = (decided - decided.T).astype(np.int8)  # decisions live at (lo, hi), lo < hi
    code[(equal | equal.T) != 0] = 2  # tied within the margin: never separated
    order = consistent_order(by_mean, code == 1)

    def levels_of(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        out = np.full(a.shape, config.alpha)  # a model against itself: no share, any level
        off = lo != hi
        out[off] = pair_level(lo[off], hi[off], alpha=config.alpha,
                              planned_models=config.planned_models)
        return out

    return PairTable(
        models=models, counts=counts, means=means, order=order, m=m,
        family_alpha=fam_alpha, power=config.power, code=code, source=st,
        levels_of=levels_of, decided_ts=st.decided_time,
        binary_board=bool(np.all(st.nonbinary[:k] == 0)),
        samples=st.samples, within_of=st.within_sums if st.samples > 1 else None,
        version=st.version,
    )
