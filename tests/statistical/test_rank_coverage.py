"""Simultaneous coverage of the fixed-N rank confidence sets over seeded simulated boards.

Models answer 0/1 through a shared item difficulty (so they are correlated item by item),
some with exactly equal true accuracy; with clusters, each (cluster, model) has its own
shift, so clusters are sampled and the cluster-robust covariance is the right one. True
ranks: r_j = 1 + #{k : μ_k > μ_j}. Two events are counted per board: every r_j lies in its
set (coverage), and no pair is resolved with μ_a ≤ μ_b (no false resolution, which implies
coverage). Both must be ≥ 1 − α − 2 SE (Monte-Carlo SE of the observed rate). Figures of a
run are quoted in docs/ranks.md.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from monitor.stats.ranks import rank_sets

ALPHA = 0.05
REPS = 1000
MIXED = (0.6, 0.3, 0.3, 0.3, 0.1, 0.0, 0.0, -0.3)  # two groups of exact ties
NULL = (0.2,) * 6  # every model tied: the least favourable case for false resolutions


def _simulate(ability: tuple[float, ...], *, n_items: int, n_clusters: int, tau: float,
              seed: int) -> tuple[float, float, float]:
    ab = np.asarray(ability)
    m = ab.size
    rng = np.random.default_rng(seed)
    # x = 1{a_j − d_i + u_cj + e_ij > 0}, d, e ~ N(0, 1), u ~ N(0, τ²): μ_j = Φ(a_j/√(2 + τ²)).
    mu = norm.cdf(ab / math.sqrt(2.0 + tau**2))
    true_rank = 1 + (mu[None, :] > mu[:, None]).sum(axis=1)
    covered = clean = 0
    width = 0.0
    for _ in range(REPS):
        latent = ab[None, :] - rng.normal(size=(n_items, 1)) + rng.normal(size=(n_items, m))
        groups = None
        if n_clusters:
            codes = np.arange(n_items) % n_clusters
            latent += rng.normal(0.0, tau, size=(n_clusters, m))[codes]
            groups = codes
        r = rank_sets((latent > 0).astype(float), groups=groups,
                      covariance="cluster" if n_clusters else "iid", alpha=ALPHA, rng=rng,
                      n_draws=1000)
        covered += bool(np.all((r.rank_low <= true_rank) & (true_rank <= r.rank_high)))
        clean += not bool(np.any(r.resolved & ~(mu[:, None] > mu[None, :])))
        width += float(np.mean(r.rank_high - r.rank_low))
    return covered / REPS, clean / REPS, width / REPS


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "ability", "n_items", "n_clusters", "tau"),
    [
        ("items, ties", MIXED, 1000, 0, 0.0),
        ("items, all tied", NULL, 1000, 0, 0.0),
        ("50 clusters, ties", MIXED, 1000, 50, 0.3),
        ("200 clusters, all tied", NULL, 2000, 200, 0.3),
    ],
)
def test_simultaneous_coverage(name: str, ability: tuple[float, ...], n_items: int,
                               n_clusters: int, tau: float) -> None:
    cover, clean, width = _simulate(ability, n_items=n_items, n_clusters=n_clusters, tau=tau,
                                    seed=20240601)
    se = math.sqrt(clean * (1 - clean) / REPS) or 1.0 / REPS
    print(f"{name}: coverage {cover:.3f}, no false resolution {clean:.3f} ± {se:.3f}, "
          f"mean set width {width:.2f}")
    assert clean <= cover
    assert clean >= 1 - ALPHA - 2 * se, (name, cover, clean, se)
    # Not trivially covering: with ties the sets must still separate something.
    if ability is MIXED:
        assert width < len(ability) - 1
