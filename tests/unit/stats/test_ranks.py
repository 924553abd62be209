"""Rank confidence sets (csranks' max-|t| with stepdown) and tiers: monitor/stats/ranks.py."""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import numpy as np
import pytest
from scipy.stats import norm, studentized_range

from monitor.stats.board import board, board_sums
from monitor.stats.ranks import (
    Covariance,
    RankSets,
    means_covariance,
    rank_sets,
    rank_sets_from_resolved,
    ranks_and_tiers,
    resolve_pairs,
    tiers,
)


def _board(rng: np.random.Generator, *, n_items: int = 1500, ability: tuple[float, ...],
           n_clusters: int = 0, missing: float = 0.0) -> tuple[np.ndarray, np.ndarray | None]:
    """Correlated 0/1 models (shared item difficulty), optional clusters and missing cells."""
    k = len(ability)
    difficulty = rng.normal(0.0, 1.0, size=n_items)
    groups = None
    latent = np.asarray(ability)[None, :] - difficulty[:, None]
    if n_clusters:
        codes = rng.integers(0, n_clusters, size=n_items)
        latent = latent + rng.normal(0.0, 0.3, size=(n_clusters, k))[codes]
        groups = np.array([f"c{c}" for c in codes])
    x = (latent + rng.normal(size=(n_items, k)) > 0).astype(float)
    if missing:
        x[rng.random(x.shape) < missing] = np.nan
    return x, groups


# --- hand-checkable cases --------------------------------------------------------------


def test_two_models_are_the_paired_z_test_then_its_one_sided_step() -> None:
    # 100 items: A right on 60, B on 45, both on 40 → D = +1 on 20, −1 on 5, 0 on 75.
    # δ̂ = 0.15, σ̂_D² = 0.25 − 0.15² = 0.2275 (ddof 0), t = 0.15 / √(0.2275/100) = 3.1449.
    x = np.zeros((100, 2))
    x[:40] = 1.0
    x[40:60, 0] = 1.0
    x[60:65, 1] = 1.0
    r = rank_sets(x, rng=np.random.default_rng(0), n_draws=50_000)
    assert r.t[0, 1] == pytest.approx(0.15 / math.sqrt(0.2275 / 100), rel=1e-12)
    # Step 1: max over the two directions = |Z| → z_{0.975}; step 2: only H_BA is left,
    # one-sided → z_{0.95}. Monte-Carlo error of a quantile from 50,000 draws ≈ 0.01.
    c1, c2 = r.critical_values
    assert c1 == pytest.approx(norm.isf(0.025), abs=0.04)
    assert c2 == pytest.approx(norm.isf(0.05), abs=0.04)
    assert [r.interval(0), r.interval(1)] == [(1, 1), (2, 2)]
    assert r.tier.tolist() == [1, 2] and r.n_tiers == 2 and r.top_resolved


def test_two_models_below_the_critical_value_share_one_tier() -> None:
    # Same margins, 12 items where D = +1 on 3 and −1 on 1: t = 0.1667/√(0.3056/12) = 1.044.
    x = np.array([[1, 0]] * 3 + [[0, 1]] + [[1, 1]] * 4 + [[0, 0]] * 4, dtype=float)
    r = rank_sets(x, rng=np.random.default_rng(0))
    assert r.t[0, 1] == pytest.approx(1.0445, abs=1e-4)
    assert [r.interval(0), r.interval(1)] == [(1, 2), (1, 2)]
    assert r.tier.tolist() == [1, 1] and not r.top_resolved
    assert len(r.critical_values) == 1  # nothing rejected: no second step


def test_independent_equal_variances_give_tukeys_critical_value() -> None:
    # Σ = I: max_{a<b} |Z_a − Z_b|/√2 is the range of 4 normals over √2, whose 0.95 quantile is
    # Tukey's q(0.95; 4, ∞)/√2 (scipy's studentized_range with a huge df).
    t = np.zeros((4, 4))
    r = resolve_pairs(t, np.eye(4), rng=np.random.default_rng(3), n_draws=100_000)
    expected = studentized_range.ppf(0.95, 4, 1e6) / math.sqrt(2.0)
    assert r.critical_values[0] == pytest.approx(expected, abs=0.02)
    assert not r.resolved.any() and r.rank_low.tolist() == [1] * 4


def test_means_covariance_gives_the_kernels_pair_variance() -> None:
    # (e_a − e_b)ᵀ Σ̂ (e_a − e_b) = σ̂_D² · DE / n: one definition of a pair's variance.
    rng = np.random.default_rng(11)
    x, groups = _board(rng, ability=(0.5, 0.2, 0.1, -0.3), n_clusters=9, n_items=600)
    for kind in ("iid", "cluster", "strata"):
        cov, n = means_covariance(x, groups=groups, kind=kind)
        res = board(x, groups=None if kind == "iid" else groups,
                    group_kind="strata" if kind == "strata" else "cluster")
        de = np.ones_like(res.n) if res.design_effect is None else res.design_effect
        var = cov[res.a, res.a] + cov[res.b, res.b] - 2 * cov[res.a, res.b]
        assert n == 600
        np.testing.assert_allclose(var, res.sigma_d2 * de / res.n, rtol=1e-10)


# --- stepdown, marginal, a brute-force reference -----------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_stepdown_sets_lie_inside_single_step_sets(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, groups = _board(rng, ability=tuple(np.sort(rng.normal(0, 0.3, 8))[::-1]),
                       n_clusters=20 if seed % 2 else 0)
    kind: Covariance = "cluster" if seed % 2 else "iid"
    step = rank_sets(x, groups=groups, covariance=kind, rng=np.random.default_rng(seed))
    single = rank_sets(x, groups=groups, covariance=kind, rng=np.random.default_rng(seed),
                       stepdown=False)
    assert np.all(step.rank_low >= single.rank_low) and np.all(step.rank_high <= single.rank_high)
    assert np.all(step.resolved >= single.resolved)
    assert step.critical_values[0] == single.critical_values[0]
    assert list(step.critical_values) == sorted(step.critical_values, reverse=True)


def test_stepdown_resolves_what_one_step_cannot() -> None:
    # Three independent models (Σ = I). One step: c = q(0.95; 3, ∞)/√2 = 2.343 (Tukey), so
    # t = 2.3 between models 1 and 2 is not resolved. Once 0 is above both, only one side of
    # its pairs stays in the family and c drops (≈ 2.20): 1 above 2 is resolved at step 2.
    t = np.zeros((3, 3))
    t[0, 1], t[0, 2], t[1, 2] = 5.0, 7.3, 2.3
    t -= t.T
    step = resolve_pairs(t, np.eye(3), rng=np.random.default_rng(0), n_draws=50_000)
    single = resolve_pairs(t, np.eye(3), rng=np.random.default_rng(0), n_draws=50_000,
                           stepdown=False)
    assert single.critical_values[0] == pytest.approx(
        studentized_range.ppf(0.95, 3, 1e6) / math.sqrt(2.0), abs=0.03)
    assert single.resolved.astype(int).tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert step.resolved.astype(int).tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert step.critical_values[1] < 2.3 < step.critical_values[0]
    assert single.rank_high.tolist() == [1, 3, 3] and step.rank_high.tolist() == [1, 2, 3]


def test_marginal_sets_lie_inside_simultaneous_sets() -> None:
    rng = np.random.default_rng(4)
    x, _ = _board(rng, ability=(0.8, 0.55, 0.5, 0.3, 0.25, 0.0), n_items=2000)
    sim = rank_sets(x, rng=np.random.default_rng(1), n_draws=20_000)
    marg = rank_sets(x, rng=np.random.default_rng(1), method="marginal", n_draws=20_000)
    assert np.all(marg.rank_low >= sim.rank_low) and np.all(marg.rank_high <= sim.rank_high)
    # Each model's family is its M − 1 pairs: its critical value is below the board's.
    assert max(marg.critical_values) < sim.critical_values[-1]


def test_marginal_resolves_what_the_simultaneous_family_cannot() -> None:
    # Four independent models, one gap t_01 = 2.5: below the board's max-|t| value
    # q(0.95; 4, ∞)/√2 = 2.569, above model 0's (and 1's) own family value (≈ 2.29).
    t = np.zeros((4, 4))
    t[0, 1] = 2.5
    t -= t.T
    kw = {"rng": np.random.default_rng(0), "n_draws": 50_000}
    sim = resolve_pairs(t, np.eye(4), **kw)  # type: ignore[arg-type]
    marg = resolve_pairs(t, np.eye(4), method="marginal", **kw)  # type: ignore[arg-type]
    assert sim.critical_values[0] == pytest.approx(
        studentized_range.ppf(0.95, 4, 1e6) / math.sqrt(2.0), abs=0.03)
    assert not sim.resolved.any() and sim.rank_high.tolist() == [4, 4, 4, 4]
    assert marg.rank_low.tolist() == [1, 2, 1, 1] and marg.rank_high.tolist() == [3, 4, 4, 4]
    assert marg.resolved[0, 1] and marg.resolved.sum() == 1


def _reference(x: np.ndarray, groups: np.ndarray | None, *, alpha: float, n_draws: int,
               rng: np.random.Generator
               ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], bool], list[float]]:
    """A per-pair loop a reader can check line by line (no board, no Gram matrices).

    t_ab on the shared items (plug-in σ̂_D², cluster-robust variance by hand); correlations
    from the complete rows via numpy's multivariate normal; stepdown over a dict of
    hypotheses H_ab: μ_a ≤ μ_b.
    """
    k = x.shape[1]
    t: dict[tuple[int, int], float] = {}
    for a, b in itertools.permutations(range(k), 2):
        both = ~np.isnan(x[:, a]) & ~np.isnan(x[:, b])
        d = x[both, a] - x[both, b]
        var = d.var() / d.size
        if groups is not None:
            g = groups[both]
            dev = np.array([np.sum(d[g == c] - d.mean()) for c in np.unique(g)])
            var = float(np.sum(dev**2)) / d.size**2
        t[(a, b)] = d.mean() / math.sqrt(var)
    complete = ~np.isnan(x).any(axis=1)
    rows = x[complete]
    if groups is None:
        cov = np.cov(rows, rowvar=False, bias=True) / rows.shape[0]
    else:
        g = groups[complete]
        u = np.array([(rows[g == c] - rows.mean(axis=0)).sum(axis=0) for c in np.unique(g)])
        cov = u.T @ u / rows.shape[0] ** 2
    z = rng.multivariate_normal(np.zeros(k), cov, size=n_draws, method="eigh")
    if groups is not None:  # multivariate t with G − 1 degrees of freedom
        df = len(np.unique(groups)) - 1
        z /= np.sqrt(rng.chisquare(df, size=n_draws) / df)[:, None]
    active = dict.fromkeys(t, True)
    rejected = dict.fromkeys(t, False)
    crit = []
    while True:
        cols = [(z[:, a] - z[:, b]) / math.sqrt(cov[a, a] + cov[b, b] - 2 * cov[a, b])
                for (a, b), on in active.items() if on]
        c = float(np.quantile(np.max(np.column_stack(cols), axis=1), 1 - alpha))
        crit.append(c)
        new = [h for h, on in active.items() if on and t[h] > c]
        if not new:
            return t, rejected, crit
        for h in new:
            active[h], rejected[h] = False, True


@pytest.mark.parametrize(("seed", "clusters", "missing"),
                         [(0, 0, 0.0), (1, 25, 0.0), (2, 0, 0.05), (3, 25, 0.05)])
def test_agrees_with_a_per_pair_reference(seed: int, clusters: int, missing: float) -> None:
    rng = np.random.default_rng(100 + seed)
    x, groups = _board(rng, ability=(1.0, 0.7, 0.6, 0.3, 0.28, -0.1), n_items=1200,
                       n_clusters=clusters, missing=missing)
    ours = rank_sets(x, groups=groups, covariance="cluster" if clusters else "iid",
                     rng=np.random.default_rng(seed), n_draws=20_000)
    t, ref, crit = _reference(x, groups, alpha=0.05, n_draws=20_000,
                              rng=np.random.default_rng(seed + 1))
    # Different draws: critical values agree within Monte-Carlo error (≈ 0.02 at 20,000).
    assert len(ours.critical_values) == len(crit)
    np.testing.assert_allclose(ours.critical_values, crit, atol=0.06)
    boundary = 0
    for (a, b), rej in ref.items():
        assert ours.t[a, b] == pytest.approx(t[(a, b)], rel=1e-9)
        if abs(t[(a, b)] - crit[-1]) > 0.1:  # away from the Monte-Carlo boundary
            assert bool(ours.resolved[a, b]) == rej, (a, b, t[(a, b)], crit)
        else:
            boundary += 1
    assert boundary <= 2  # the comparison above covers (nearly) every pair
    assert sum(ref.values()) > 0 and sum(not v for v in ref.values()) > 0
    assert ours.exact_correlation == (missing == 0.0)


# --- tiers and rank sets from any resolved matrix ----------------------------------------


def _tiers_brute(order: list[int], r: np.ndarray) -> list[int]:
    m = len(order)
    cuts = [all(r[order[p], order[q]] for p in range(i) for q in range(i, m))
            for i in range(1, m)]
    by_pos = [1]
    for c in cuts:
        by_pos.append(by_pos[-1] + int(c))
    out = [0] * m
    for pos, j in enumerate(order):
        out[j] = by_pos[pos]
    return out


def test_tiers_of_a_hand_made_matrix() -> None:
    # Order (best first) 2, 0, 3, 1, 4. 2 is above everyone; 0 is above 1 and 4 but not 3;
    # 3 is above 1 only; 1 is above 4. Only the cut 2 | 0 3 1 4 exists: 0 is not above 3,
    # and 3 is not above 4, which blocks the cuts after 3 and after 1.
    r = np.zeros((5, 5), dtype=bool)
    r[2, [0, 1, 3, 4]] = True
    r[0, [1, 4]] = True
    r[3, 1] = True
    r[1, 4] = True
    order = [2, 0, 3, 1, 4]
    assert tiers(order, r).tolist() == [2, 2, 1, 2, 2]
    r[3, 4] = True  # now 3 is above 4 as well: both cuts appear
    assert tiers(order, r).tolist() == [2, 3, 1, 2, 4]
    low, high = rank_sets_from_resolved(r)
    assert low.tolist() == [2, 4, 1, 2, 5] and high.tolist() == [3, 4, 1, 3, 5]


@pytest.mark.parametrize("seed", range(20))
def test_tiers_equal_a_brute_force_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 12))
    # A resolved matrix from random intervals on a line (a above b when a's interval is wholly
    # above b's), so that resolutions are consistent with some order, plus random deletions.
    centre = rng.normal(size=m)
    half = rng.uniform(0.0, 0.8, size=m)
    r = (centre - half)[:, None] > (centre + half)[None, :]
    r &= rng.random((m, m)) > 0.1
    order = [int(j) for j in np.argsort(-centre)]
    assert tiers(order, r).tolist() == _tiers_brute(order, r)


@pytest.mark.parametrize("seed", range(20))
def test_tiers_of_any_valid_matrix_equal_a_brute_force_loop(seed: int) -> None:
    # Any resolved matrix (no pair both ways, False diagonal), dense or sparse, against any
    # order; and the checked-once ranks_and_tiers of the matrix by position.
    rng = np.random.default_rng(100 + seed)
    m = int(rng.integers(2, 40))
    up = np.triu(rng.random((m, m)) < rng.uniform(0.3, 1.0), k=1)
    flip = rng.random((m, m)) < rng.uniform(0.0, 0.2)
    r = (up & ~flip) | (up & flip).T
    order = [int(j) for j in rng.permutation(m)]
    assert tiers(order, r).tolist() == _tiers_brute(order, r)
    by_pos = r[np.ix_(order, order)]
    low, high, tier = ranks_and_tiers(by_pos)
    assert tier.tolist() == tiers(np.arange(m), by_pos).tolist()
    assert [x.tolist() for x in (low, high)] == [
        x.tolist() for x in rank_sets_from_resolved(by_pos)]


def test_tiers_scale_to_thousands_of_models() -> None:
    m = 3000
    r = np.triu(np.ones((m, m), dtype=bool), k=1)  # fully resolved in column order
    r[1000:1500, 1000:1500] = False  # one block of 500 models not separated
    out = tiers(np.arange(m), r)
    assert out[:1000].tolist() == list(range(1, 1001))
    assert set(out[1000:1500].tolist()) == {1001} and out[1500] == 1002 and out[-1] == 2501


def test_resolved_matrix_is_validated() -> None:
    with pytest.raises(ValueError, match="`resolved` must be a square"):
        tiers([0, 1], np.zeros((2, 3), dtype=bool))
    with pytest.raises(ValueError, match="each above the other"):
        rank_sets_from_resolved(np.array([[False, True], [True, False]]))
    with pytest.raises(ValueError, match="False diagonal"):
        rank_sets_from_resolved(np.eye(2, dtype=bool))
    with pytest.raises(ValueError, match="`order` must be a permutation"):
        tiers([0, 0], np.zeros((2, 2), dtype=bool))


def test_options_are_validated() -> None:
    x = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="`alpha` must lie in"):
        rank_sets(x, rng=rng, alpha=1.5)
    with pytest.raises(ValueError, match="`method` must be one of"):
        rank_sets(x, rng=rng, method="bootstrap")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`n_draws`"):
        rank_sets(x, rng=rng, n_draws=10)
    with pytest.raises(ValueError, match="`groups` is required"):
        rank_sets(x, rng=rng, covariance="cluster")
    with pytest.raises(ValueError, match="no item has a score from every model"):
        rank_sets(np.array([[1, np.nan, 0], [np.nan, 1, 1], [0, 1, np.nan]]), rng=rng)


def test_few_clusters_draw_from_a_multivariate_t() -> None:
    rng = np.random.default_rng(8)
    x, g = _board(rng, ability=(0.4, 0.3, 0.2, 0.1), n_clusters=5)
    t_draws = rank_sets(x, groups=g, covariance="cluster", rng=np.random.default_rng(1))
    normal = rank_sets(x, groups=g, covariance="cluster", rng=np.random.default_rng(1),
                       small_sample=False)
    assert t_draws.df == 4.0 and normal.df is None
    # Four clusters' worth of df: a far heavier tail than the normal's.
    assert t_draws.critical_values[0] > 1.3 * normal.critical_values[0]
    with pytest.raises(ValueError, match="at least two clusters"):
        rank_sets(x, groups=np.zeros(x.shape[0]), covariance="cluster", rng=rng)


def test_same_seed_same_sets() -> None:
    rng = np.random.default_rng(9)
    x, g = _board(rng, ability=(0.4, 0.3, 0.2, 0.1), n_clusters=15)
    one = rank_sets(x, groups=g, covariance="cluster", rng=np.random.default_rng(5))
    two = rank_sets(x, groups=g, covariance="cluster", rng=np.random.default_rng(5))
    assert one.critical_values == two.critical_values
    assert np.array_equal(one.resolved, two.resolved)


# --- the stepdown's draws: one pass over the pairs, the same bits as materialising them ----


def _materialised_stepdown(t: np.ndarray, z32: np.ndarray, inv: np.ndarray, a: np.ndarray,
                           b: np.ndarray, alpha: float) -> list[float]:
    """The stepdown on the whole pairs × draws matrix W = (Z_a − Z_b) · inv, each step's maxima
    with −∞ added to the hypotheses no longer active (as the rank sets were first computed)."""
    w = z32[a]
    w -= z32[b]
    w *= inv[:, None]
    up = np.zeros(t.size, dtype=bool)
    down = np.zeros(t.size, dtype=bool)
    crit = []
    while True:
        off_up = np.where(~up, 0.0, -np.inf).astype(np.float32)[:, None]
        off_down = np.where(~down, 0.0, -np.inf).astype(np.float32)[:, None]
        maxima = np.maximum((w + off_up).max(axis=0), (off_down - w).max(axis=0))
        c = float(np.quantile(maxima, 1.0 - alpha))
        crit.append(c)
        new_up, new_down = ~up & (t > c), ~down & (-t > c)
        if not (new_up.any() or new_down.any()):
            return crit
        up |= new_up
        down |= new_down


@pytest.mark.parametrize("seed", range(6))
def test_sorted_draws_give_the_materialised_critical_values(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.stats import ranks

    # Bins of 5 pairs: the active sets cut bins, whole bins come from their extremes.
    monkeypatch.setattr(ranks, "_BIN_PAIRS", 5)
    rng = np.random.default_rng(seed)
    m = 12
    x, groups = _board(rng, ability=tuple(np.sort(rng.normal(0, 0.4, m))[::-1]),
                       n_clusters=6 if seed % 2 else 0, n_items=800)
    kind: Covariance = "cluster" if seed % 2 else "iid"
    cov, _ = means_covariance(x, groups=groups, kind=kind)
    root = ranks._cov_root(cov)
    a, b = (v.astype(np.int64) for v in np.triu_indices(m, k=1))
    # Gaps of both signs, many beyond any critical value (several steps, both directions),
    # ties, and decisive pairs.
    t = np.round(rng.uniform(-6.0, 6.0, a.size), 1)
    t[:3] = [np.inf, -np.inf, 0.0]
    z32 = ranks._draws(root, a.size, 300, np.random.default_rng(seed), 5.0 if seed % 2 else None)
    inv = ranks._inverse_sd(root, a, b)
    draws = ranks._SortedDraws(t, z32, inv, a, b)
    _, _, crit = ranks._stepdown(t, draws, 0.05, True)
    assert crit == _materialised_stepdown(t, z32, inv, a, b, 0.05)
    assert len(crit) >= 2  # some steps beyond the first were compared


def test_sorted_draws_extremes_of_every_prefix_and_suffix(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    from monitor.stats import ranks

    monkeypatch.setattr(ranks, "_BIN_PAIRS", 4)
    rng = np.random.default_rng(5)
    m = 8
    z32 = rng.normal(size=(m, 50)).astype(np.float32)
    a, b = (v.astype(np.int64) for v in np.triu_indices(m, k=1))
    inv = rng.random(a.size).astype(np.float32)
    t = rng.normal(size=a.size)
    draws = ranks._SortedDraws(t, z32, inv, a, b)
    o = np.argsort(t, kind="stable")
    w = (z32[a[o]] - z32[b[o]]) * inv[o, None]
    for k in range(a.size + 1):
        top = w[:k].max(axis=0) if k else np.full(50, -np.inf, dtype=np.float32)
        bottom = w[k:].min(axis=0) if k < a.size else np.full(50, np.inf, dtype=np.float32)
        np.testing.assert_array_equal(draws.max_up(k), top)
        np.testing.assert_array_equal(draws.min_down(k), bottom)


def test_inverse_sd_is_the_rowwise_dot_product() -> None:
    from monitor.stats import ranks

    rng = np.random.default_rng(2)
    m = 37
    root = rng.normal(size=(m, m)) * rng.random(m)
    root[:, 3] = 0.0
    root[5] = root[6]  # a pair with no variance: 0
    cases = [np.triu_indices(m, k=1),
             (np.full(m - 1, 4), np.delete(np.arange(m), 4)),  # one model's family
             (rng.integers(0, m, 200), rng.integers(0, m, 200))]  # no runs: gathered rows
    for a, b in cases:
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        var = np.einsum("ij,ij->i", root, root)
        sd = np.sqrt(np.maximum(var[a] + var[b] - 2.0 * np.einsum("ij,ij->i", root[a], root[b]),
                                0.0))
        ok = sd > 1e-9 * np.sqrt(var[a] + var[b])
        expected = np.where(ok, 1.0 / np.where(ok, sd, 1.0), 0.0).astype(np.float32)
        np.testing.assert_array_equal(ranks._inverse_sd(root, a, b), expected)


def test_rank_sets_read_the_callers_board_sums() -> None:
    from monitor.stats.board import board_sums

    rng = np.random.default_rng(8)
    x, groups = _board(rng, ability=(0.6, 0.3, 0.25, 0.0, -0.2), n_clusters=7, missing=0.05)
    for kind in ("iid", "cluster", "strata"):
        g = None if kind == "iid" else groups
        own = rank_sets(x, groups=g, covariance=kind, rng=np.random.default_rng(1))
        shared = rank_sets(x, groups=g, covariance=kind, rng=np.random.default_rng(1),
                           sums=board_sums(x, groups=groups))
        np.testing.assert_array_equal(own.t, shared.t)
        assert own.critical_values == shared.critical_values
    with pytest.raises(ValueError, match="sums"):
        rank_sets(x, groups=groups, covariance="cluster", rng=np.random.default_rng(1),
                  sums=board_sums(x))


@pytest.mark.parametrize("kind", ["iid", "cluster", "strata"])
@pytest.mark.parametrize("absent", [0.0, 0.1])
def test_rank_sets_read_the_reports_figures_as_their_own(kind: str, absent: float) -> None:
    """Given the kernel's figures of every pair in the report's orientation (A ranked above
    B), the rank sets are those they compute themselves: the same t, bit for bit."""
    rng = np.random.default_rng(7)
    m = 9
    x = (rng.random((3000, m)) < np.linspace(0.35, 0.75, m)).astype(float)
    x[rng.random(x.shape) < absent] = np.nan
    groups = None if kind == "iid" else np.char.add("g", rng.integers(0, 25, 3000).astype(str))
    order = rng.permutation(m)
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    lo, hi = np.triu_indices(m, 1)
    a, b = np.where(rank[lo] < rank[hi], lo, hi), np.where(rank[lo] < rank[hi], hi, lo)
    sums = board_sums(x, groups=groups)
    figures = board(x, pairs=(a, b), groups=groups, alpha=0.001, sums=sums,
                    group_kind="strata" if kind == "strata" else "cluster")
    cov = cast(Covariance, kind)

    def sets(**more: Any) -> RankSets:
        return rank_sets(x, groups=groups, covariance=cov, order=order,
                         rng=np.random.default_rng(1), sums=sums, **more)

    own, read = sets(), sets(figures=figures)
    assert np.array_equal(own.t, read.t) and np.count_nonzero(own.t) == m * (m - 1)
    for name in ("rank_low", "rank_high", "tier", "resolved"):
        assert np.array_equal(getattr(own, name), getattr(read, name))
    assert own.critical_values == read.critical_values and own.resolved.any()
    with pytest.raises(ValueError, match="every pair"):
        sets(figures=board(x, pairs=(a[:-1], b[:-1]), groups=groups, sums=sums))
    twice = np.r_[a[:-1], a[0]], np.r_[b[:-1], b[0]]  # one pair twice, another missing
    with pytest.raises(ValueError, match="every pair"):
        sets(figures=board(x, pairs=twice, groups=groups, sums=sums))
    # figures of another design: grouped ones for iid, ungrouped ones for the others
    other = (board(x, pairs=(a, b), group_kind="strata",
                   groups=np.char.add("g", rng.integers(0, 25, 3000).astype(str)))
             if kind == "iid" else board(x, pairs=(a, b)))
    with pytest.raises(ValueError, match="covariance"):
        sets(figures=other)
