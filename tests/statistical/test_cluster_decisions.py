"""The sampled-clusters verdict on whole boards, through the live core: null error at the
shares the live rule uses, decisions kept, and the item-level decisions' inflation on the
same streams.

Each stream is one board of M models on G sampled clusters of ``PER`` items (random order of
arrival). In cluster g model j is correct with probability logistic(a_j + u_gj + e_i),
u_gj ~ N(0, τ²) independent over clusters and models (a sampled cluster shifts each model's
accuracy on its own), e_i ~ N(0, 0.3²) an item effect shared by the models. Under the null
every a_j is equal: no pair has a gap over the population of clusters, so any decision is
false. The board is read after every ``EVERY`` items (a batch of EVERY items × M models).
Seeded. The figures in docs/clusters-vs-strata.md were printed by
``python -m tests.statistical.test_cluster_decisions``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import binomtest

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.stats.cluster_sequential import min_clusters
from monitor.stats.sequential import pair_share, planned_pairs

ALPHA = 0.05
EVERY = 10
PER = 20
TAU = 0.8


@dataclass(frozen=True)
class Board:
    """Per stream: whether any pair was ever decided by the clustered rule / the item-level
    rule, whether a clustered decision was ever reversed between reads, and the clustered
    decisions at the end."""

    clustered_any: np.ndarray
    item_any: np.ndarray
    reversals: int
    decided: np.ndarray


def _stream(rng: np.random.Generator, abilities: np.ndarray, clusters: int
            ) -> tuple[np.ndarray, np.ndarray]:
    g = np.repeat(np.arange(clusters), PER)
    logit = (abilities[None, :] + rng.normal(0.0, TAU, size=(clusters, abilities.size))[g]
             + rng.normal(0.0, 0.3, size=(g.size, 1)))
    x = (rng.random(logit.shape) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
    order = rng.permutation(g.size)
    return x[order], g[order]


def run_boards(*, streams: int, models: int, clusters: int, gap: float, planned: int,
               seed: int) -> Board:
    rng = np.random.default_rng(seed)
    abilities = np.linspace(gap * (models - 1) / 2, -gap * (models - 1) / 2, models)
    names = [f"m{j}" for j in range(models)]
    clustered_any = np.zeros(streams, dtype=bool)
    item_any = np.zeros(streams, dtype=bool)
    decided = np.zeros(streams, dtype=np.int64)
    reversals = 0
    for s in range(streams):
        x, g = _stream(rng, abilities, clusters)
        mon = Monitor(CoreConfig(design="clusters", planned_models=planned, family="all"))
        shown = np.zeros((models, models), dtype=np.int8)  # verdicts as last read
        for lo in range(0, x.shape[0], EVERY):
            mon.apply([ItemResult(benchmark="b", item_id=str(lo + i), model=names[j],
                                  score=float(x[lo + i, j]), cluster=f"c{g[lo + i]}")
                       for i in range(min(EVERY, x.shape[0] - lo)) for j in range(models)])
            table = mon.table("b")  # the verdicts every face reads (ranking, pairs, changes)
            assert table is not None
            now = np.zeros_like(shown)
            now[:len(table.models), :len(table.models)] = table.code
            reversals += int(np.count_nonzero((shown != 0) & (now != shown)))
            shown = now
        st = mon._benches["b"]
        assert st.cpaths is not None
        k = st.k
        clustered = int(np.count_nonzero(st.cpaths.decided[: k * (k - 1) // 2]))
        clustered_any[s] = clustered > 0
        decided[s] = clustered
        item_any[s] = bool(np.any(st.paths.decided.reshape(st.cap, st.cap)[:k, :k] != 0))
    return Board(clustered_any, item_any, reversals, decided)


def _claimed_minimum(models: int, planned: int) -> int:
    """The clusters the docs say a pair of the first block needs at least (its share)."""
    return min_clusters(float(pair_share([1], alpha=ALPHA, planned=planned_pairs(planned))[0]))


@pytest.mark.slow
def test_clustered_null_holds_on_whole_boards_and_item_level_inflates() -> None:
    """10 equal models on the fewest clusters a decision could need at their shares (and a
    few more): no clustered decision past α, none ever reversed, while the item-level
    decisions on the same streams exceed α."""
    models, planned = 10, 10
    clusters = _claimed_minimum(models, planned)
    n = 120
    null = run_boards(streams=n, models=models, clusters=clusters, gap=0.0,
                      planned=planned, seed=11)
    false_clustered = int(null.clustered_any.sum())
    false_item = int(null.item_any.sum())
    # Board-wide error of the clustered rule ≤ α, judged statistically …
    assert binomtest(false_clustered, n, ALPHA, alternative="greater").pvalue > 0.01
    assert false_clustered / n <= ALPHA
    assert null.reversals == 0
    # … while the item-level e-process, valid only for exchangeable items, is fooled by the
    # clusters' shared effects on the same streams (what the design protects against).
    assert binomtest(false_item, n, ALPHA, alternative="greater").pvalue < 0.01


@pytest.mark.slow
def test_clustered_decisions_come_with_enough_clusters_and_stay() -> None:
    """Power: with many clusters and a real spread, pairs are decided (and kept); with fewer
    clusters than the minimum, no pair can be, and the pairs say so."""
    strong = run_boards(streams=20, models=4, clusters=150, gap=1.0, planned=4, seed=3)
    assert strong.reversals == 0
    assert np.median(strong.decided) == 6  # every pair of the four models
    mon = Monitor(CoreConfig(design="clusters", planned_models=4))
    rng = np.random.default_rng(5)
    few = _claimed_minimum(4, 4) - 1
    x, g = _stream(rng, np.array([3.0, -3.0]), few)
    mon.apply([ItemResult(benchmark="b", item_id=str(i), model=f"m{j}", score=float(x[i, j]),
                          cluster=f"c{g[i]}") for i in range(x.shape[0]) for j in range(2)])
    pair = mon.pairs("b")[0].as_dict()
    assert pair["verdict"] == "undecidable"
    assert pair["undecidable"].startswith(f"not decidable with {few} clusters")
    assert pair["clusters"]["needed"] == few + 1


if __name__ == "__main__":  # the figures quoted in docs/clusters-vs-strata.md
    for models, planned in ((10, 10), (10, 32)):
        g_min = _claimed_minimum(models, planned)
        for clusters in (g_min, g_min + 20):
            b = run_boards(streams=int(sys.argv[1]) if len(sys.argv) > 1 else 200,
                           models=models, clusters=clusters, gap=0.0, planned=planned,
                           seed=11)
            se = math.sqrt(ALPHA * (1 - ALPHA) / b.clustered_any.size)
            print(f"M={models} planned={planned} G={clusters} (minimum {g_min}): "
                  f"clustered {b.clustered_any.mean():.3f}, item-level {b.item_any.mean():.3f} "
                  f"(α = {ALPHA}, 2 SE = {2 * se:.3f}), reversals {b.reversals}")
