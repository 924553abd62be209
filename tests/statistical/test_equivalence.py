"""The equivalence decision at the edge of its null: pairs whose gap is exactly the margin
(|δ| = Δ) are declared equivalent in at most γ/2 of the streams, checked after every item,
while tied pairs (δ = 0) are declared equivalent in most streams by the horizon.

Each stream is one pair scored 0/1 item by item (discordant in 20 % of the items), followed by
:func:`monitor.stats.sequential.advance` — the function the live core and the offline replay
call — at a share γ of α large enough that the error is visible at a few thousand streams.
Seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from monitor.stats.sequential import PairPaths, advance, equivalence_bound, log_e_equivalence

MARGIN = 0.05
SHARE = 0.1  # γ of the simulated pairs: the decision's error is at most γ/2 at |δ| = Δ
ITEMS = 3000


def _streams(delta: float, streams: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p10, p01 = 0.1 + delta / 2, 0.1 - delta / 2
    u = rng.random((streams, ITEMS))
    return np.where(u < p10, 1.0, np.where(u < p10 + p01, -1.0, 0.0))


def _ever_below_margin(delta: float, streams: int, seed: int) -> np.ndarray:
    """Whether the e-process against δ ≥ Δ (the side whose null holds at δ = Δ) ever reached
    2/γ along each stream, read after every item — the equivalence rule's only way to err at
    δ = Δ, with no resolution stopping it first."""
    d = _streams(delta, streams, seed)
    n = np.broadcast_to(np.arange(1.0, ITEMS + 1.0), d.shape)
    s, v = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    thr = math.log(2.0 / SHARE)
    below_bound, _ = equivalence_bound(n, s, v, MARGIN)
    ever = np.zeros(streams, dtype=bool)
    rows, cols = np.nonzero(below_bound >= thr)  # only where the bound allows a crossing
    if rows.size:
        below, _ = log_e_equivalence(n[rows, cols], s[rows, cols], v[rows, cols], MARGIN)
        ever[np.unique(rows[below >= thr])] = True
    return ever


def _equivalent(delta: float, streams: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Whether each stream was declared equivalent, and whether it was resolved."""
    d = _streams(delta, streams, seed)
    paths = PairPaths.empty(streams)
    pair = np.repeat(np.arange(streams), ITEMS)
    zero = np.zeros(streams)
    advance(paths, pair, d.ravel(), np.zeros(pair.size, dtype=bool), base_n=zero,
            base_s=zero, base_v=zero, log_threshold=np.full(streams, -math.log(SHARE)),
            margin=MARGIN)
    return paths.equivalent == 1, paths.decided != 0


@pytest.mark.slow
def test_the_side_that_must_hold_at_the_margin_crosses_at_most_half_the_share() -> None:
    """At δ = Δ the e-process against δ ≥ Δ is a supermartingale: read after every item, it
    reaches 2/γ in at most γ/2 of the streams (Ville) — so equivalence, which needs it, is
    declared at most that often while |δ| ≥ Δ, whatever resolution does."""
    streams = 2000
    ever = _ever_below_margin(MARGIN, streams, seed=1)
    hits = int(ever.sum())
    assert binomtest(hits, streams, SHARE / 2, alternative="greater").pvalue > 0.01
    # and the check can fail: a side centred inside the margin (the null false) crosses often
    assert _ever_below_margin(MARGIN - 0.04, 300, seed=4).mean() > 4 * SHARE


@pytest.mark.slow
@pytest.mark.parametrize("delta", [MARGIN, -MARGIN])
def test_a_gap_of_the_margin_is_rarely_declared_equivalent(delta: float) -> None:
    """Through the pass the live core and the replay use: the decisions at |δ| = Δ are
    resolutions in the true direction, equivalence at most γ/2 of the time."""
    streams = 3000
    equal, _ = _equivalent(delta, streams, seed=1 if delta > 0 else 2)
    hits = int(equal.sum())
    assert binomtest(hits, streams, SHARE / 2, alternative="greater").pvalue > 0.01


@pytest.mark.slow
def test_tied_pairs_are_declared_equivalent_and_never_resolved() -> None:
    equal, resolved = _equivalent(0.0, 500, seed=3)
    assert equal.mean() > 0.8
    assert not (equal & resolved).any()  # one decision per pair, kept


if __name__ == "__main__":  # the figures in docs/anytime.md, "Equivalence"
    ever = _ever_below_margin(MARGIN, 2000, seed=1)
    print(f"δ = Δ = {MARGIN}, γ = {SHARE}: the side against δ ≥ Δ ever at 2/γ in "
          f"{ever.mean():.4f} of 2,000 streams (bound γ/2 = {SHARE / 2})")
    for delta in (MARGIN, 0.0):
        eq, res = _equivalent(delta, 3000, seed=1)
        print(f"δ = {delta:.3f}, Δ = {MARGIN}, γ = {SHARE}, {ITEMS} items: equivalent "
              f"{eq.mean():.4f}, resolved {res.mean():.4f}")
