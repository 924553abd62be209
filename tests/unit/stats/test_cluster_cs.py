"""The cluster-aware confidence sequence: edge cases, shapes and a scalar reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.stats.cluster_cs import (
    cluster_intrinsic_time,
    cs_cluster,
    resolved_cluster_anytime,
)
from monitor.stats.eprocess import mixture_rho

RHO = mixture_rho()


def _group_sums(d: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    _, codes = np.unique(labels, return_inverse=True)
    t = np.bincount(codes, d)
    m = np.bincount(codes).astype(float)
    return {"t2": float((t * t).sum()), "tn": float((t * m).sum()), "n2": float((m * m).sum()),
            "n_clusters": float(t.size)}


def _reference(d: list[float], labels: list[int], alpha: float) -> tuple[float, float]:
    """Item by item from the definitions, in Waudby-Smith et al.'s (2024) parametrization.

    Their Gaussian-mixture AsympCS is μ̂_t ± √(2(tσ̂²ρ_w² + 1)/(t²ρ_w²) · log(√(tσ̂²ρ_w² + 1)/α));
    here tσ̂² is the cluster-robust V̂ with the G/(G − 1) factor and ρ_w² = 1/ρ (Howard et
    al.'s precision, the item-level mixtures' tuning).
    """
    n = len(d)
    groups: dict[int, list[float]] = {}
    for x, g in zip(d, labels, strict=True):
        groups.setdefault(g, []).append(x)
    if n == 0 or len(groups) < 2:
        return -1.0, 1.0
    mean = sum(d) / n
    big_g = len(groups)
    v = big_g / (big_g - 1) * sum((sum(xs) - len(xs) * mean) ** 2 for xs in groups.values())
    rw2 = 1.0 / RHO
    half = math.sqrt(2.0 * (v * rw2 + 1.0) / (n * n * rw2)
                     * math.log(math.sqrt(v * rw2 + 1.0) / alpha))
    return max(mean - half, -1.0), min(mean + half, 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_the_scalar_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    labels = rng.integers(0, int(rng.integers(2, 30)), size=n)
    binary = seed % 2 == 0
    d = (rng.integers(0, 2, n) - rng.integers(0, 2, n)).astype(float) if binary \
        else rng.uniform(-1, 1, n)
    alpha = [0.05, 0.01, 0.2][seed % 3]
    lo, hi = cs_cluster(n, d.sum(), alpha=alpha, **_group_sums(d, labels))
    ref = _reference(d.tolist(), labels.tolist(), alpha)
    np.testing.assert_allclose([lo[0], hi[0]], ref, rtol=1e-10, atol=1e-12)


def test_vectorised_over_pairs_with_a_level_per_pair() -> None:
    rng = np.random.default_rng(1)
    sums, ns, ss, refs = [], [], [], []
    alphas = np.array([0.05, 0.01, 0.001, 0.3])
    for a in alphas:
        labels = rng.integers(0, 12, size=300)
        d = rng.uniform(-1, 1, 300) + 0.1
        d = np.clip(d, -1, 1)
        sums.append(_group_sums(d, labels))
        ns.append(300.0)
        ss.append(d.sum())
        refs.append(_reference(d.tolist(), labels.tolist(), float(a)))
    cols = {k: np.array([s[k] for s in sums]) for k in sums[0]}
    lo, hi = cs_cluster(np.array(ns), np.array(ss), alpha=alphas, t2=cols["t2"],
                        tn=cols["tn"], n2=cols["n2"], n_clusters=cols["n_clusters"])
    assert lo.shape == hi.shape == (4,)
    np.testing.assert_allclose(np.c_[lo, hi], np.array(refs), rtol=1e-10)
    # A 2-D board broadcasts too.
    c2 = {k: np.tile(v, (2, 1)) for k, v in cols.items()}
    lo2, hi2 = cs_cluster(np.full((2, 4), 300.0), np.tile(ss, (2, 1)), alpha=alphas,
                          t2=c2["t2"], tn=c2["tn"], n2=c2["n2"], n_clusters=c2["n_clusters"])
    assert lo2.shape == (2, 4)
    np.testing.assert_array_equal(lo2[1], lo)
    np.testing.assert_array_equal(hi2[0], hi)


def test_no_items_or_one_cluster_give_the_trivial_interval() -> None:
    lo, hi = cs_cluster([0, 50, 50], [0.0, 20.0, 50.0], t2=[0.0, 400.0, 2500.0],
                        tn=[0.0, 1000.0, 2500.0], n2=[0.0, 2500.0, 2500.0],
                        n_clusters=[0, 1, 1])
    np.testing.assert_array_equal(lo, [-1.0, -1.0, -1.0])
    np.testing.assert_array_equal(hi, [1.0, 1.0, 1.0])
    assert resolved_cluster_anytime(lo, hi).tolist() == [0, 0, 0]
    np.testing.assert_array_equal(
        cluster_intrinsic_time([0, 50], [0.0, 20.0], t2=[0.0, 400.0], tn=[0.0, 1000.0],
                               n2=[0.0, 2500.0], n_clusters=[0, 1]), [0.0, 0.0])


def test_no_between_cluster_spread_keeps_the_prior_width() -> None:
    # Four clusters with the same mean difference 0.5: Σ_g (T_g − n_g D̄)² = 0 (DE = 0).
    d = np.tile([1.0, 0.0], 40)
    labels = np.repeat(np.arange(4), 20)
    sums = _group_sums(d, labels)
    assert cluster_intrinsic_time(80, d.sum(), **sums)[0] == pytest.approx(0.0, abs=1e-9)
    lo, hi = cs_cluster(80, d.sum(), alpha=0.05, **sums)
    half = math.sqrt(RHO * math.log(1 / 0.05**2)) / 80  # u(0)/n
    assert hi[0] - 0.5 == pytest.approx(half, rel=1e-9)
    assert 0.5 - lo[0] == pytest.approx(half, rel=1e-9)


def test_one_item_per_cluster_is_the_iid_variance_with_ddof_1() -> None:
    rng = np.random.default_rng(4)
    d = rng.uniform(-1, 1, 50)
    v = cluster_intrinsic_time(50, d.sum(), **_group_sums(d, np.arange(50)))
    assert v[0] == pytest.approx(50 * np.var(d, ddof=1), rel=1e-12)


def test_monotone_in_alpha_and_symmetric_in_the_sign_of_d() -> None:
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 20, 500)
    d = np.clip(rng.normal(0.03, 0.6, 500), -1, 1)
    sums = _group_sums(d, labels)
    alphas = np.array([0.5, 0.2, 0.1, 0.05, 0.01, 1e-3, 1e-6])
    lo, hi = cs_cluster(500, d.sum(), alpha=alphas, **sums)
    assert np.all(np.diff(lo) < 0) and np.all(np.diff(hi) > 0)  # smaller α, wider
    neg = dict(sums, tn=-sums["tn"])
    lo_n, hi_n = cs_cluster(500, -d.sum(), alpha=alphas, **neg)
    np.testing.assert_allclose(lo_n, -hi, rtol=1e-12)
    np.testing.assert_allclose(hi_n, -lo, rtol=1e-12)


def test_interval_is_clipped_to_the_range_of_d() -> None:
    lo, hi = cs_cluster(4, 4.0, t2=4.0, tn=4.0, n2=4.0, n_clusters=4)
    assert hi[0] == 1.0 and lo[0] < 1.0


def test_resolved_direction() -> None:
    assert resolved_cluster_anytime([0.01, -0.2, -0.1, 0.0], [0.2, -0.01, 0.1, 0.3]).tolist() \
        == [1, -1, 0, 0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": [0.05, 1.0]}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"n": -1.0}, "`n`"),
        ({"n_clusters": -1.0}, "n_clusters"),
        ({"n_clusters": 11.0}, "cannot exceed"),
    ],
)
def test_invalid_input_names_the_parameter(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"n": 10.0, "s": 2.0, "t2": 4.0, "tn": 10.0, "n2": 30.0,
                               "n_clusters": 4.0}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        cs_cluster(args.pop("n"), args.pop("s"), **args)  # type: ignore[arg-type]
