"""Stopping on the plan costs no validity: an evaluator that posts a new model's results in
batches, reads its plan after each (:meth:`monitor.core.Monitor.plan`) and stops at the first
``stop`` takes a wrong decision in at most the pair's share of α of its streams — under the
null (equal models: any resolution is wrong) and at the equivalence margin (|δ| = Δ:
equivalence, or resolution the wrong way, is wrong).

Each stream is a board of one complete model and a new one, 0/1 scores discordant on 20 % of
the items, the pair at share γ = α/2 (``planned_models`` = 2) with α large enough that an
error rate above γ would show at a hundred streams; the futility rule (no decision within
reach of the items left) ends most null streams before the last item. The same streams read
by a fixed-sample interval after every batch at the same level (the rule the plan replaces)
resolve in more than γ of the null streams: the check can fail. Seeded.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor

ALPHA = 0.4
SHARE = ALPHA / 2  # the one pair's share of α (planned for two models)
MARGIN = 0.05
ITEMS = 1000
BATCH = 100
STREAMS = 80


def _stream(rng: np.random.Generator, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Scores of the new model and of the other: D = new − other is +1 with probability
    0.1 + δ/2, −1 with 0.1 − δ/2, else both score alike."""
    u = rng.random(ITEMS)
    d = np.where(u < 0.1 + delta / 2, 1, np.where(u < 0.2, -1, 0))
    same = (rng.random(ITEMS) < 0.5).astype(int)
    new = np.where(d == 1, 1, np.where(d == -1, 0, same))
    other = np.where(d == 1, 0, np.where(d == -1, 1, same))
    return new, other


def _stop_on_plan(new: np.ndarray, other: np.ndarray) -> tuple[str, int]:
    """The new model's verdict at the stop, and its items then."""
    mon = Monitor(CoreConfig(alpha=ALPHA, planned_models=2, margin=MARGIN))
    mon.apply([ItemResult(benchmark="b", item_id=f"q{i}", model="other", score=float(s))
               for i, s in enumerate(other.tolist())])
    done = 0
    while True:
        mon.apply([ItemResult(benchmark="b", item_id=f"q{i}", model="new", score=float(new[i]))
                   for i in range(done, min(done + BATCH, ITEMS))])
        done = min(done + BATCH, ITEMS)
        plan = mon.plan("b", "new", count=0)
        if plan.action == "stop":
            (pair,) = plan.pairs
            return pair.verdict, done


def _peeked_interval_wrong(new: np.ndarray, other: np.ndarray, delta: float) -> bool:
    """The fixed-sample interval at level γ read after every batch: a wrong decision at the
    first batch where it excludes 0 or lies inside ±Δ."""
    z = norm.ppf(1.0 - SHARE / 2)
    d = (new - other).astype(float)
    for t in range(BATCH, ITEMS + 1, BATCH):
        mean, half = d[:t].mean(), z * d[:t].std(ddof=1) / np.sqrt(t)
        if mean - half > 0 or mean + half < 0:
            return delta == 0 or np.sign(mean) != np.sign(delta)
        if mean - half > -MARGIN and mean + half < MARGIN:
            return delta != 0
    return False


@pytest.mark.slow
@pytest.mark.parametrize("delta", [0.0, MARGIN])
def test_an_evaluator_stopping_on_the_plan_errs_at_most_at_the_pairs_share(delta: float) -> None:
    rng = np.random.default_rng(20240611 + int(delta * 1000))
    wrong = stopped_early = peeked = 0
    for _ in range(STREAMS):
        new, other = _stream(rng, delta)
        verdict, items = _stop_on_plan(new, other)
        stopped_early += items < ITEMS
        if delta == 0:
            wrong += verdict.startswith("resolved:")
        else:
            wrong += verdict in ("equivalent", "resolved:other")
        peeked += _peeked_interval_wrong(new, other, delta)
    assert binomtest(wrong, STREAMS, SHARE, alternative="greater").pvalue > 0.01, wrong
    # The plan did stop early (futility or a decision), so stopping was exercised ...
    assert stopped_early > STREAMS // 2, stopped_early
    # ... and under the null the binomial check has teeth: the interval peeked at the same
    # level resolves far more often than γ.
    if delta == 0:
        assert binomtest(peeked, STREAMS, SHARE, alternative="greater").pvalue < 0.01, peeked
