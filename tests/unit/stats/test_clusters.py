"""Design effect, ICC and stratified variance against direct (loop) computations."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats.clusters import (
    design_effect,
    icc_anova,
    n_star_cluster,
    q_cluster,
    strata_design_effect,
    stratified_variance,
)


def _clustered(rng: np.random.Generator, c: int, n: int, sd_cluster: float) -> tuple:
    groups = rng.integers(0, c, size=n)
    shift = rng.normal(0, sd_cluster, size=c)
    p = np.clip(0.1 + shift[groups], 0, 0.5)
    u = rng.uniform(size=n)
    d = np.where(u < p, 1.0, np.where(u > 1 - 0.1, -1.0, 0.0))
    return d, groups.astype(str)


def test_matches_loop_definition() -> None:
    rng = np.random.default_rng(1)
    d, g = _clustered(rng, 14, 3000, 0.08)
    res = design_effect(d, g)
    n = d.size
    dbar = d.mean()
    var_cr = sum(((d[g == c] - dbar).sum()) ** 2 for c in np.unique(g)) / n**2
    var_iid = np.var(d) / n  # numpy variance of D, ddof = 0
    assert res.var_cr == pytest.approx(var_cr, rel=1e-10)
    assert res.var_iid == pytest.approx(var_iid, rel=1e-10)
    assert res.de == pytest.approx(var_cr / var_iid, rel=1e-10)
    assert res.n_clusters == 14 and res.m_bar == pytest.approx(n / 14)
    assert res.de > 1.5  # the cluster shifts are strong enough to inflate the variance


def test_one_item_per_cluster_is_exactly_one() -> None:
    rng = np.random.default_rng(2)
    d = rng.choice([-1.0, 0.0, 1.0], size=500)
    res = design_effect(d, np.arange(500))
    assert res.de == pytest.approx(1.0, abs=1e-12)
    assert res.kish_de == 1.0


def test_single_cluster_is_zero_variance() -> None:
    # With one cluster the residuals sum to zero: the cluster-robust variance is 0.
    res = design_effect([1.0, 0.0, -1.0, 1.0], ["x"] * 4)
    assert res.var_cr == pytest.approx(0.0, abs=1e-15) and np.isnan(res.icc)


def test_icc_anova_balanced_closed_form() -> None:
    # Balanced design: ICC = (MSB − MSW)/(MSB + (m − 1) MSW), computed by hand here.
    rng = np.random.default_rng(3)
    c, m = 10, 30
    d = (rng.normal(size=(c, 1)) + rng.normal(size=(c, m))).ravel()
    g = np.repeat(np.arange(c), m)
    x = d.reshape(c, m)
    msb = m * np.sum((x.mean(1) - x.mean()) ** 2) / (c - 1)
    msw = np.sum((x - x.mean(1, keepdims=True)) ** 2) / (c * (m - 1))
    icc = (msb - msw) / (msb + (m - 1) * msw)
    assert icc_anova(d, g) == pytest.approx(icc, rel=1e-10)
    res = design_effect(d, g)
    assert res.kish_de == pytest.approx(1 + (m - 1) * icc, rel=1e-10)
    # Balanced clusters: the plug-in Var_cr equals the variance of cluster means over C,
    # which is close to the Kish form when C is not tiny.
    assert res.de == pytest.approx(res.kish_de, rel=0.2)


def test_stratified_variance_formula_and_bound() -> None:
    rng = np.random.default_rng(4)
    d, g = _clustered(rng, 6, 1200, 0.1)
    n = d.size
    ref = sum(
        (np.sum(g == h) / n) ** 2 * np.var(d[g == h]) / np.sum(g == h) for h in np.unique(g)
    )
    assert stratified_variance(d, g) == pytest.approx(ref, rel=1e-10)
    assert stratified_variance(d, g) <= np.var(d) / n
    assert 0 < strata_design_effect(d, g) <= 1.0


def test_n_star_and_q_cluster_are_the_kernel_s() -> None:
    # N* · max(DE · G/(G − 1), 1): with G = 5, DE = 4 → 5.0; G = 1 → no estimate (q = 0)
    np.testing.assert_allclose(n_star_cluster([100.0, np.inf], 4.0, 5), [500.0, np.inf])
    np.testing.assert_allclose(q_cluster(200, [100.0, np.inf], 4.0, 5), [0.4, 0.0])
    assert q_cluster(200, 100.0, 4.0, 1) == 0.0
    assert q_cluster(200, 100.0, 0.5, 20) == pytest.approx(2.0)  # never above q
    res = design_effect([1.0, 1.0, 0.0, -1.0], ["a", "a", "b", "b"])
    assert res.q_cluster(200, 100.0) == pytest.approx(2 / (res.de * 2.0))


def test_q_cluster_of_the_design_effect_equals_the_kernel_on_real_pairs() -> None:
    """One formula: design_effect(...).q_cluster equals the report's q_cluster (the kernel)."""
    from monitor.stats.figures import GroupSums, PairSums, pair_figures
    from monitor.stats.paired import paired_summary

    rng = np.random.default_rng(3)
    g = rng.integers(0, 9, size=600).astype(str)
    xa = (rng.random(600) < 0.7).astype(float)
    xb = (rng.random(600) < 0.6).astype(float)
    d = xa - xb
    res = design_effect(d, g)
    s = paired_summary(xa, xb)
    labels, codes = np.unique(g, return_inverse=True)
    t = np.bincount(codes, weights=d)
    nc = np.bincount(codes).astype(float)
    groups = GroupSums(kind="cluster", n_groups=labels.size, t2=np.array([(t * t).sum()]),
                       tn=np.array([(t * nc).sum()]), n2=np.array([(nc * nc).sum()]),
                       t2_over_n=np.array([(t * t / nc).sum()]),
                       count=np.array([float(labels.size)]))
    sums = PairSums.from_scores(xa, xb)
    kernel = pair_figures(PairSums.build(n=sums.n, sa=sums.sa, sb=sums.sb, saa=sums.saa,
                                         sbb=sums.sbb, sab=sums.sab, binary=sums.binary,
                                         groups=groups))
    assert kernel.q_grouped is not None and kernel.design_effect is not None
    assert kernel.design_effect[0] == pytest.approx(res.de, rel=1e-9)
    assert res.q_cluster(s.n, float(kernel.n_star[0])) == pytest.approx(
        float(kernel.q_grouped[0]), rel=1e-9)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="`groups`"):
        design_effect([1.0, 0.0], ["a"])
    with pytest.raises(ValueError, match="`d`"):
        design_effect([1.0, np.nan], ["a", "b"])
