"""The replay's fast passes of 0/1 scores leave the state of the full item-by-item pass:
the screened item-level pass the paths of :func:`advance`, the sampled-clusters replay the
state of :func:`advance_clusters` — every field of every pair exactly equal, with and without
a margin, with absent scores."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from monitor.io.tables import ScoreTable
from monitor.offline import replay
from monitor.stats.cluster_sequential import ClusterPaths
from monitor.stats.sequential import PairPaths


def _board(seed: int, *, n_items: int, k: int, absent: float) -> np.ndarray:
    """0/1 scores of ``k`` models of spread abilities (two of them equal) on items of spread
    difficulty, a share ``absent`` of them missing."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0.0, 0.6, k)
    ability[-1] = ability[0]  # a tied pair: equivalence has something to declare
    difficulty = rng.normal(0.0, 1.5, n_items)
    p = 1.0 / (1.0 + np.exp(-(ability[None, :] - difficulty[:, None])))
    x = (rng.random((n_items, k)) < p).astype(float)
    x[rng.random(x.shape) < absent] = np.nan
    return x


def _both(x: np.ndarray, *, margin: float | None, seed: int, segment: int
          ) -> tuple[PairPaths, PairPaths]:
    """The full pass's paths and the screened pass's, of every pair of ``x``'s columns at
    levels from generous to strict (so that pairs decide early, late and never)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.triu_indices(x.shape[1], 1)
    log_thr = -np.log(rng.choice([0.3, 0.05, 0.005, 1e-4], lo.size))
    present = ~np.isnan(x)
    arrival = np.where(present, np.arange(x.size).reshape(x.shape), np.iinfo(np.int64).max)
    full = PairPaths.empty(lo.size)
    replay._item_pass(full, None, x, present, arrival, lo, hi, np.zeros(x.shape[0], np.int64),
                      by_rows=True, log_thr=log_thr, margin=margin, cluster_items=5)
    fast = PairPaths.empty(lo.size)
    replay._screened_pass(fast, x, present, lo, hi, log_thr=log_thr, margin=margin,
                          segment=segment)
    return full, fast


def _differences(a: PairPaths, b: PairPaths) -> list[str]:
    return [f.name for f in fields(PairPaths)
            if not np.array_equal(getattr(a, f.name), getattr(b, f.name))]


@pytest.mark.parametrize("products", [True, False])
@pytest.mark.parametrize("margin", [None, 0.01, 0.2])
@pytest.mark.parametrize("seed", range(6))
def test_screened_pass_equals_the_item_by_item_pass(
        seed: int, margin: float | None, products: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not products:  # the runs' sums from the pairs' columns instead of dense products
        monkeypatch.setattr(replay, "_PRODUCT_CELLS", 0)
    rng = np.random.default_rng(seed)
    x = _board(seed, n_items=int(rng.integers(200, 2500)), k=int(rng.integers(3, 8)),
               absent=(0.0, 0.15)[seed % 2])
    full, fast = _both(x, margin=margin, seed=seed, segment=int(rng.choice([7, 64, 256])))
    assert _differences(full, fast) == []
    # the boards decide pairs (a wide margin declares most of them equivalent first)
    assert (full.equivalent if margin == 0.2 else full.decided != 0).any()


def test_a_screen_that_skips_too_much_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: a screen that lets no pair through leaves other paths."""
    x = _board(0, n_items=1500, k=5, absent=0.1)

    def nothing(self: object, f: np.ndarray, *args: object) -> np.ndarray:
        return np.zeros(f.size, dtype=bool)

    monkeypatch.setattr(replay._Screen, "may_decide", nothing)
    full, fast = _both(x, margin=0.01, seed=0, segment=64)
    assert "decided" in _differences(full, fast)


def test_the_replay_takes_the_screened_pass_to_the_same_paths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``_decide`` on a 0/1 table, shuffled and in file order, with the screen and with the
    full pass in its place."""
    x = _board(3, n_items=1200, k=6, absent=0.1)
    table = ScoreTable(source="t", benchmark="b", item_ids=np.array([f"i{i}" for i in range(x.shape[0])]),
                       models=tuple(f"m{j}" for j in range(x.shape[1])), scores=x)
    pairs = np.triu_indices(x.shape[1], 1)

    def decide(order: str) -> PairPaths:
        return replay._decide(table, pairs, alpha=0.05, order=order, seed=4, planned_models=3,
                              rule="board", margin=0.01)[0]

    screened = {order: decide(order) for order in replay.ORDERS}

    def full_pass(paths: PairPaths, x: np.ndarray, present: np.ndarray, lo: np.ndarray,
                  hi: np.ndarray, *, log_thr: np.ndarray, margin: float | None) -> None:
        arrival = np.where(present, np.arange(x.size).reshape(x.shape), 0)
        replay._item_pass(paths, None, x, present, arrival, lo, hi,
                          np.zeros(x.shape[0], np.int64), by_rows=True, log_thr=log_thr,
                          margin=margin, cluster_items=5)

    monkeypatch.setattr(replay, "_screened_pass", full_pass)
    for order in replay.ORDERS:
        full = decide(order)
        assert _differences(full, screened[order]) == []
        assert (full.decided != 0).any()


def _cluster_both(x: np.ndarray, codes: np.ndarray, *, r: int, margin: float | None,
                  seed: int) -> tuple[ClusterPaths, ClusterPaths]:
    """:func:`advance_clusters` on every paired item, and the clusters replay, of every pair
    of ``x``'s columns (clusters ``codes``, 0: no label)."""
    rng = np.random.default_rng(seed)
    lo, hi = np.triu_indices(x.shape[1], 1)
    log_thr = -np.log(rng.choice([0.5, 0.3, 0.05], lo.size))
    present = ~np.isnan(x)
    arrival = np.where(present, np.arange(x.size).reshape(x.shape), np.iinfo(np.int64).max)
    full = ClusterPaths.empty(lo.size, int(codes.max()) + 1)
    replay._item_pass(PairPaths.empty(lo.size), full, x, present, arrival, lo, hi, codes,
                      by_rows=True, log_thr=log_thr, margin=margin, cluster_items=r)
    fast = ClusterPaths.empty(lo.size, int(codes.max()) + 1)
    replay._cluster_replay(fast, x, present, lo, hi, codes, r=r, log_thr=log_thr,
                           margin=margin)
    return full, fast


@pytest.mark.parametrize("margin", [None, 0.01, 0.4])
@pytest.mark.parametrize("seed", range(6))
def test_clusters_replay_equals_the_item_by_item_pass(
        seed: int, margin: float | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay, "_CLUSTER_PAIRS", 4)  # blocks of pairs too
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(1500, 3000))
    x = _board(seed, n_items=n_items, k=int(rng.integers(4, 8)), absent=(0.0, 0.15)[seed % 2])
    clusters = int(rng.integers(150, 400))
    # some items without a cluster label (0) on every other board
    codes = np.asarray(rng.integers(int(seed % 2 == 0), clusters + 1, n_items), dtype=np.int64)
    full, fast = _cluster_both(x, codes, r=int(rng.choice([1, 2, 5])), margin=margin,
                               seed=seed)
    assert [f.name for f in fields(ClusterPaths)
            if not np.array_equal(getattr(full, f.name), getattr(fast, f.name))] == []
    assert (full.equivalent if margin == 0.4 else full.decided != 0).any()


def test_a_clusters_screen_that_skips_too_much_is_caught(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: bounds that rule out every resolution leave other
    decisions."""
    rng = np.random.default_rng(0)
    x = _board(0, n_items=2500, k=6, absent=0.1)
    codes = np.asarray(rng.integers(1, 300, x.shape[0]), dtype=np.int64)
    monkeypatch.setattr(replay, "max_log_e", lambda clusters: 0.0)
    full, fast = _cluster_both(x, codes, r=2, margin=None, seed=0)
    assert (full.decided != 0).any()
    assert not np.array_equal(full.decided, fast.decided)


def test_under_sampled_clusters_the_report_is_the_full_passes_report(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A 0/1 table under sampled clusters skips the item-level decisions (not its verdict):
    the report's JSON is byte for byte the one of the full item-by-item pass of both designs,
    which does decide pairs item by item on this board."""
    from io import StringIO

    from monitor.commands._jsonstream import write_report
    from monitor.offline.report import build_report

    rng = np.random.default_rng(5)
    x = _board(5, n_items=2400, k=7, absent=0.1)
    groups = np.char.add("c", rng.integers(0, 300, x.shape[0]).astype(str))
    table = ScoreTable(source="t", benchmark="b",
                       item_ids=np.array([f"i{i}" for i in range(x.shape[0])]),
                       models=tuple(f"m{j}" for j in range(x.shape[1])), scores=x,
                       groups=groups, group_kind="cluster", group_col="subject")

    def text() -> str:
        report = build_report(table, family="all")
        out = StringIO()
        write_report(out, replay.with_anytime(report, table, planned_models=3, margin=0.01))
        return out.getvalue()

    fast = text()
    # the item-level decision is not kept under this design: none, not zeros that read "open"
    figures = replay.anytime_replay(table, np.triu_indices(x.shape[1], 1), planned_models=3,
                                    margin=0.01).figures
    assert figures.decided is None and figures.decided_n is None
    assert figures.verdict_code().any()
    item_decided: list[bool] = []

    def full_pass(paths: PairPaths, cpaths: ClusterPaths, x: np.ndarray, present: np.ndarray,
                  lo: np.ndarray, hi: np.ndarray, codes: np.ndarray, *, r: int,
                  log_thr: np.ndarray, margin: float | None) -> None:
        arrival = np.where(present, np.arange(x.size).reshape(x.shape), 0)
        replay._item_pass(paths, cpaths, x, present, arrival, lo, hi, codes, by_rows=True,
                          log_thr=log_thr, margin=margin, cluster_items=r)
        item_decided.append(bool((paths.decided != 0).any()))

    monkeypatch.setattr(replay, "_clusters_pass", full_pass)
    assert text() == fast
    assert item_decided == [True]
    assert '"design": "clusters"' in fast and '"verdict": "undecidable"' not in fast
