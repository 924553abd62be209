"""Hypothesis properties of the paired-size, cluster and multiplicity formulas."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from monitor.stats import power as pw
from monitor.stats.clusters import design_effect, stratified_variance
from monitor.stats.multiplicity import adjust_pvalues
from monitor.stats.paired import paired_summary

prob = st.floats(0.01, 0.99)
rho = st.floats(-1.0, 1.0)


@settings(deadline=None)
@given(pa=prob, pb=prob, r1=rho, r2=rho)
def test_n_star_decreases_as_rho_grows(pa: float, pb: float, r1: float, r2: float) -> None:
    assume(abs(pa - pb) > 1e-3 and r2 - r1 > 1e-6)
    n1 = float(pw.n_star(pa - pb, pw.sigma_d2(pa, pb, r1)))
    n2 = float(pw.n_star(pa - pb, pw.sigma_d2(pa, pb, r2)))
    assert n2 <= n1 * (1 + 1e-12)
    # strictly, unless σ_D² is clipped at 0 at both ends
    assert n2 < n1 or n1 == 0


binary_pairs = st.integers(5, 300).flatmap(
    lambda n: st.tuples(
        arrays(np.float64, n, elements=st.sampled_from([0.0, 1.0])),
        arrays(np.float64, n, elements=st.sampled_from([0.0, 1.0])),
        st.randoms(use_true_random=False),
    )
)


@settings(max_examples=60, deadline=None)
@given(binary_pairs)
def test_q_unchanged_by_a_common_item_permutation(data: tuple) -> None:
    a, b, rnd = data
    perm = np.array(rnd.sample(range(a.size), a.size))
    s, t = paired_summary(a, b), paired_summary(a[perm], b[perm])
    assert t.q() == s.q() or np.isclose(t.q(), s.q(), rtol=1e-12)
    assert np.isclose(t.sigma_d2, s.sigma_d2, rtol=1e-12, atol=1e-15)
    assert (t.n10, t.n01) == (s.n10, s.n01)


clustered = st.integers(2, 200).flatmap(
    lambda n: st.tuples(
        arrays(np.float64, n, elements=st.sampled_from([-1.0, 0.0, 1.0])),
        arrays(np.int64, n, elements=st.integers(0, 9)),
        st.permutations(list(range(10))),
    )
)


@settings(max_examples=60, deadline=None)
@given(clustered)
def test_design_effect_invariant_to_relabelling_clusters(data: tuple) -> None:
    d, g, relabel = data
    g2 = np.array([f"c{relabel[i]}" for i in g])
    a, b = design_effect(d, g), design_effect(d, g2)
    assert np.isclose(a.de, b.de, rtol=1e-10, atol=1e-12)
    assert a.n_clusters == b.n_clusters
    assert np.isclose(a.icc, b.icc, equal_nan=True)
    # the stratified variance never exceeds the iid one
    assert stratified_variance(d, g) <= a.var_iid * (1 + 1e-12) + 1e-18


pvals = arrays(np.float64, st.integers(1, 40), elements=st.one_of(
    st.floats(0.0, 1.0), st.sampled_from([0.0, 0.01, 0.05, 1.0])))


@settings(deadline=None)
@given(pvals)
def test_bh_le_holm_le_bonferroni(p: np.ndarray) -> None:
    bonf = adjust_pvalues(p, method="bonferroni")
    holm = adjust_pvalues(p, method="holm")
    bh = adjust_pvalues(p, method="bh")
    tol = 1e-12
    assert np.all(holm <= bonf + tol)
    assert np.all(bh <= holm + tol)
    assert np.all(p <= bh + tol)
