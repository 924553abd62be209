"""The peer of bench/bench_until_resolved.py: a fixed-sample normal interval on each pair's
paired difference, re-checked after every batch (tensorzero's adaptive stopping rule),
against a direct per-check recomputation."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from bench.bench_until_resolved import EQUAL, NEW, OPEN, OTHER, interval_stop


def _reading(d: np.ndarray, t: int, margin: float, z: float, min_items: int) -> int:
    """One pair's interval after its first t arrivals, computed directly."""
    x = d[:t][~np.isnan(d[:t])]
    if x.size < min_items:
        return OPEN
    mean, half = x.mean(), z * x.std(ddof=1) / np.sqrt(x.size)
    if -margin < mean - half and mean + half < margin:
        return EQUAL
    if mean - half > 0:
        return NEW
    if mean + half < 0:
        return OTHER
    return OPEN


def test_each_pair_is_decided_at_its_first_check_and_the_model_when_all_are() -> None:
    rng = np.random.default_rng(5)
    items, every, margin, z, min_items = 2000, 100, 0.03, float(norm.ppf(0.975)), 200
    # A clear gap, a tie, a small gap, and a pair with absent items.
    probs = [(0.30, 0.05), (0.10, 0.10), (0.12, 0.10), (0.20, 0.10)]
    cols = []
    for p10, p01 in probs:
        u = rng.random(items)
        cols.append(np.where(u < p10, 1.0, np.where(u < p10 + p01, -1.0, 0.0)))
    d = np.stack(cols, axis=1)
    d[rng.random(items) < 0.3, 3] = np.nan
    got = interval_stop(d, margin=margin, z=z, every=every, min_items=min_items)

    kept = np.full(d.shape[1], OPEN)
    stop = items
    for t in range(every, items + 1, every):
        for j in range(d.shape[1]):
            if kept[j] == OPEN:
                kept[j] = _reading(d[:, j], t, margin, z, min_items)
        if (kept != OPEN).all():
            stop = t
            break
    end = [_reading(d[:, j], items, margin, z, min_items) for j in range(d.shape[1])]
    assert got.items == stop and got.total == items
    assert got.at_stop.tolist() == kept.tolist()
    assert got.at_end.tolist() == end
    assert got.at_stop[0] == NEW  # the clear gap


def test_no_pair_is_decided_before_the_minimum_and_an_open_pair_runs_to_the_end() -> None:
    d = np.ones((450, 2))
    d[::2, 1] = -1.0  # mean 0, wide: never decided at this margin
    got = interval_stop(d, margin=0.01, every=100, min_items=250)
    # the constant gap is decided at the first check with 250 items: 300
    assert got.at_stop.tolist() == [NEW, OPEN]
    assert got.items == 450 and got.saved == 0.0
    assert got.left_open == (0, 1) and got.contradictions == 0


def test_a_decision_the_full_length_interval_reverses_is_a_contradiction() -> None:
    # Ahead early, behind overall: the first check resolves the pair for the new model, the
    # interval at full length for the other.
    d = np.r_[np.ones(100), -np.ones(300)][:, None]
    got = interval_stop(d, margin=0.01, every=100, min_items=50)
    assert got.items == 100 and got.at_stop.tolist() == [NEW]
    assert got.at_end.tolist() == [OTHER]
    assert got.contradictions == 1 and got.left_open == (0, 1)
