"""Calibration building blocks against closed forms, statsmodels and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from monitor.stats import calibration as cal
from monitor.stats.paired import paired_summary


def test_cell_probabilities_reproduce_margins_and_phi() -> None:
    for pa, pb, rho in [(0.65, 0.60, 0.30), (0.2, 0.7, -0.4), (0.5, 0.5, 1.0), (0.9, 0.85, 0.0)]:
        p11, p10, p01, p00 = cal.cell_probabilities(pa, pb, rho)
        assert p11 + p10 == pytest.approx(pa) and p11 + p01 == pytest.approx(pb)
        assert p11 + p10 + p01 + p00 == pytest.approx(1.0)
        phi = (p11 - pa * pb) / math.sqrt(pa * (1 - pa) * pb * (1 - pb))
        assert phi == pytest.approx(rho, abs=1e-12)


@pytest.mark.parametrize(("pa", "pb", "rho"), [(0.9, 0.2, 0.8), (0.5, 0.5, -1.0 - 1e-9),
                                               (0.3, 0.6, 0.9)])
def test_infeasible_correlation_is_a_clear_error(pa: float, pb: float, rho: float) -> None:
    with pytest.raises(ValueError, match="`rho`"):
        cal.cell_probabilities(pa, pb, rho)


@pytest.mark.parametrize(("x", "n"), [(0, 10), (3, 10), (1600, 2000), (2000, 2000), (17, 400)])
def test_wilson_matches_statsmodels(x: int, n: int) -> None:
    low, high = cal.wilson_interval(x, n)
    ref = proportion_confint(x, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref[0], abs=1e-12) and high == pytest.approx(ref[1], abs=1e-12)


def test_mcnemar_matches_statsmodels_exact() -> None:
    rng = np.random.default_rng(5)
    b, c = rng.integers(0, 40, size=200), rng.integers(0, 40, size=200)
    ours = cal.mcnemar_rejects(b, c, alpha=0.05)
    ref = np.array([mcnemar([[10, bi], [ci, 10]], exact=True).pvalue <= 0.05
                    for bi, ci in zip(b, c, strict=True)])
    np.testing.assert_array_equal(ours, ref)
    assert not cal.mcnemar_rejects(0, 0, alpha=0.05)


def test_z_test_matches_a_direct_wald_test() -> None:
    from scipy.stats import norm

    rng = np.random.default_rng(6)
    for _ in range(50):
        a = (rng.uniform(size=60) < 0.6).astype(float)
        b = (rng.uniform(size=60) < 0.45).astype(float)
        d = a - b
        s = paired_summary(a, b)
        # reference: the Wald statistic δ̂ / √(σ̂_D²/N) with the plug-in variance
        wald = s.delta / np.sqrt(s.sigma_d2 / 60) if s.sigma_d2 > 0 else np.inf * s.delta
        rej = cal.z_test_rejects(np.array([d.sum()]), np.array([(d * d).sum()]), 60, alpha=0.05)
        assert bool(rej[0]) == bool(2 * norm.sf(abs(wald)) <= 0.05)
    # constant non-zero D rejects, all-zero D does not
    assert cal.z_test_rejects(np.array([5.0, 0.0]), np.array([5.0, 0.0]), 5, alpha=0.05).tolist() \
        == [True, False]


def test_simulation_is_seeded_and_shaped() -> None:
    a = cal.simulate_power(0.65, 0.6, 0.3, n=300, reps=600, rng=np.random.default_rng(11))
    b = cal.simulate_power(0.65, 0.6, 0.3, n=300, reps=600, rng=np.random.default_rng(11))
    assert a == b and a.reps == 600 and 0 <= a.rejections <= 600
    ticks: list[int] = []
    cal.simulate_power(0.65, 0.6, 0.3, n=50, reps=600, rng=np.random.default_rng(1),
                       progress=ticks.append)
    assert sum(ticks) == 600 and len(ticks) == math.ceil(600 / cal.CHUNK)


def test_null_simulation_keeps_level() -> None:
    # δ = 0: the rejection rate is the size of the test, ≈ α (z-test) and ≤ α (exact McNemar).
    z = cal.simulate_power(0.6, 0.6, 0.3, n=800, reps=4000, rng=np.random.default_rng(12))
    lo, hi = z.ci(confidence=0.999)
    assert lo <= 0.05 <= hi
    mc = cal.simulate_power(0.6, 0.6, 0.3, n=800, reps=4000, test="mcnemar",
                            rng=np.random.default_rng(13))
    assert mc.ci(confidence=0.999)[0] <= 0.05


def test_resample_binary_and_continuous_paths_agree_on_binary_data() -> None:
    # The multinomial shortcut for 0/1 data and the index-draw path sample the same law.
    rng = np.random.default_rng(14)
    a = (rng.uniform(size=2000) < 0.6).astype(float)
    b = np.where(rng.uniform(size=2000) < 0.35, 1 - a, a)
    fast = cal.resample_power(a, b, n=150, reps=3000, rng=np.random.default_rng(1))
    # nudging one score off {0, 1} forces the generic path; the law barely changes
    a2 = a.copy()
    a2[0] = 0.999 if a2[0] == 1 else 0.001
    slow = cal.resample_power(a2, b, n=150, reps=3000, rng=np.random.default_rng(2))
    assert abs(fast.power - slow.power) < 4 * math.sqrt(2 * 0.25 / 3000)
    with pytest.raises(ValueError, match="`test`"):
        cal.resample_power(a2, b, n=10, reps=10, test="mcnemar", rng=rng)


@pytest.mark.parametrize(("kw", "match"), [({"n": 0}, "`n`"), ({"reps": 0}, "`reps`"),
                                           ({"alpha": 1.0}, "`alpha`"), ({"test": "t"}, "`test`")])
def test_bad_run_parameters(kw: dict, match: str) -> None:
    args = {"n": 10, "reps": 10, "rng": np.random.default_rng(0)} | kw
    with pytest.raises(ValueError, match=match):
        cal.simulate_power(0.6, 0.5, 0.2, **args)
