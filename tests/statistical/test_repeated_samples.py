"""Repeated samples: N* with K samples per item follows σ_D²(K) = σ_b² + σ_w²/K (Miller 2024,
"Adding error bars to evals"), and the e-process on item means stays valid on
repeated-sample nulls.

Population values come from a large draw of the item probabilities (no answer noise in
them); each check is judged statistically (binomial tests at level 0.001, or a tolerance of
several standard errors stated next to it). Seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from monitor.io.tables import ScoreTable
from monitor.offline.replay import anytime_replay
from monitor.stats import power as pw
from monitor.stats.samples import cell_means, mean_variance, pair_within, variance_split
from tests.repeated_samples import draw_samples, item_probabilities

ALPHA = 0.05
LEVEL = 0.001
OFFSETS = [0.3, 0.0]  # model A a little better on average


def _population(rng: np.random.Generator) -> tuple[float, float, float]:
    """δ, σ_b² = Var(p_A − p_B) and σ_w² = E[p_A q_A + p_B q_B] over 2,000,000 items."""
    p = item_probabilities(rng, items=2_000_000, offsets=OFFSETS)
    d = p[:, 0] - p[:, 1]
    return float(d.mean()), float(d.var()), float((p * (1.0 - p)).sum(axis=1).mean())


@pytest.fixture(scope="module")
def population() -> tuple[float, float, float]:
    return _population(np.random.default_rng(2024))


@pytest.mark.parametrize("k", [1, 4, 16])
def test_variance_of_item_means_and_its_split_follow_the_formula(
    population: tuple[float, float, float], k: int,
) -> None:
    delta, between, within = population
    rng = np.random.default_rng(100 + k)
    items = 200_000
    y = draw_samples(rng, item_probabilities(rng, items=items, offsets=OFFSETS), k)
    means = cell_means(y)
    d = means[:, 0] - means[:, 1]
    expected = between + within / k
    # The variance of 200,000 bounded differences has a relative SE below 0.5 %; 2 % is > 4 SE.
    assert d.var() == pytest.approx(expected, rel=0.02)
    assert d.mean() == pytest.approx(delta, abs=5 * math.sqrt(expected / items))
    if k == 1:
        return  # one sample: the within-item term cannot be estimated from the data
    split = variance_split(d.var(), *pair_within(means, mean_variance(y), [0], [1]), samples=k)
    assert float(split.within[0]) == pytest.approx(within / k, rel=0.02)
    assert float(split.between[0]) == pytest.approx(between, rel=0.03)
    # back to one sample: σ̂_b² + K σ̂_w²/K
    assert float(split.sigma_d2_at(1)[0]) == pytest.approx(between + within, rel=0.02)
    assert float(split.sigma_d2_at(k)[0]) == pytest.approx(float(split.sigma_d2[0]))


@pytest.mark.parametrize("k", [1, 4])
def test_n_star_with_k_samples_gives_the_target_power(
    population: tuple[float, float, float], k: int,
) -> None:
    delta, between, within = population
    n = math.ceil(float(pw.n_star(delta, pw.sigma_d2_samples(between + within,
                                                             within / (between + within), k))))
    assert n == math.ceil(float(pw.n_star(delta, between + within / k)))
    rng = np.random.default_rng(7 + k)
    reps = 2000
    z = float(norm.isf(ALPHA / 2))
    hits = 0
    for _ in range(reps // 100):
        p = item_probabilities(rng, items=100 * n, offsets=OFFSETS).reshape(100, n, 2)
        means = cell_means(draw_samples(rng, p, k))
        d = means[..., 0] - means[..., 1]
        t = d.mean(axis=1) / (d.std(axis=1, ddof=1) / math.sqrt(n))
        hits += int(np.count_nonzero(np.abs(t) > z))
    # Power 1 − β = 0.8 at N*(K): a two-sided binomial test does not reject it.
    assert binomtest(hits, reps, 0.8).pvalue > LEVEL, (k, n, hits / reps)


def _null_stream(rng: np.random.Generator, items: int, k: int) -> ScoreTable:
    p = item_probabilities(rng, items=items, offsets=[0.0, 0.0])  # δ = 0 by symmetry
    y = draw_samples(rng, p, k)
    arrival = np.arange(items * 2, dtype=np.int64).reshape(items, 2)
    return ScoreTable(source="null", benchmark=None,
                      item_ids=np.asarray([str(i) for i in range(items)]), models=("A", "B"),
                      scores=cell_means(y), arrival=arrival,
                      samples=np.full((items, 2), k), mean_var=mean_variance(y))


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 8])
def test_the_e_process_on_item_means_is_valid_on_repeated_sample_nulls(k: int) -> None:
    # 1,000 null streams of 2,000 items, each item entering once with the mean of its K samples
    # (the live core's rule; live = offline is tested in tests/unit/core), decided by the
    # sequential pass at level α for the one pair: false resolutions ≤ α + 2 SE.
    rng = np.random.default_rng(31 + k)
    streams, items = 1000, 2000
    pair = (np.asarray([0]), np.asarray([1]))
    false = 0
    for _ in range(streams):
        # The stream's own order: its items are drawn independently already.
        decided = anytime_replay(_null_stream(rng, items, k), pair, alpha=ALPHA, order="file",
                                 seed=None, rule="family").figures.decided
        assert decided is not None
        false += bool(decided[0])
    se = math.sqrt(ALPHA * (1 - ALPHA) / streams)
    assert false / streams <= ALPHA + 2 * se, false
    assert binomtest(false, streams, ALPHA, alternative="greater").pvalue > LEVEL
