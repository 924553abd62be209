"""Null calibration of the anytime verdict, power at N*_AV and time-uniform CS coverage.

Seeded; judged by one-sided binomial tests at level 0.001 against α = 0.05.
"""

from __future__ import annotations

import numpy as np
import pytest

from monitor.stats import anytime_calibration as ac
from monitor.stats import eprocess as ep

ALPHA = 0.05
LEVEL = 0.001


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["binary_rho0", "binary_rho05", "continuous"])
def test_false_resolution_rate_is_at_most_alpha_and_naive_peeking_inflates_it(scenario: str) -> None:
    # 2,000 null streams × 5,000 items, checked after every item (the acceptance setting).
    res = ac.simulate_null(
        scenario, streams=2000, items=5000, alpha=ALPHA, burn_in=10,
        rng=np.random.default_rng(20240501),
    )
    # e-process: rate consistent with ≤ α (the one-sided test does not reject).
    assert res.p_e_exceeds_alpha() > LEVEL, (res.e_rate, res.e_ci())
    # Naive |D̄|/(σ̂/√n) > 1.96 peeked after every item from n = 10: well above α.
    assert res.p_naive_exceeds_alpha() < LEVEL, (res.naive_rate, res.naive_ci())
    assert res.naive_rate > 4 * ALPHA


@pytest.mark.slow
def test_power_by_n_star_anytime_matches_the_target() -> None:
    # Worked example (0.65, 0.60, 0.30), single-pair rule E ≥ 1/α: N*_AV by the first-passage
    # approximation is 1,694. The simulated power by then should be 1 − β = 0.8 within
    # Monte-Carlo error (99.9 % interval) and a modelling error of ±0.03.
    res = ac.simulate_power(0.65, 0.60, 0.30, streams=1500, alpha=ALPHA, power=0.8,
                            rng=np.random.default_rng(7))
    assert res.horizon == 1694
    lo, hi = res.ci(0.999)
    assert lo < 0.83 and hi > 0.77, (res.rate, lo, hi)


@pytest.mark.slow
@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "binary", "p_a": 0.65, "p_b": 0.60, "rho": 0.30},
        {"kind": "beta", "a": (3.0, 2.0), "b": (2.0, 2.0)},
    ],
)
def test_confidence_sequence_is_time_uniformly_valid(spec: dict[str, object]) -> None:
    res = ac.simulate_cs_coverage(spec, streams=2000, items=5000, alpha=ALPHA,
                                  rng=np.random.default_rng(11))
    assert res.delta != 0
    assert res.p_miss_exceeds_alpha() > LEVEL, res.miss_rate


@pytest.mark.slow
def test_cs_ends_agree_with_the_counted_event() -> None:
    # The coverage count uses sup_n E_n(δ) ≥ 1/α; check on real paths that this is exactly
    # "δ outside cs_mcnemar / cs_bounded" at every checked n.
    rng = np.random.default_rng(12)
    spec = {"kind": "binary", "p_a": 0.65, "p_b": 0.60, "rho": 0.30}
    d = ac._draw_d(spec, (40, 600), rng)
    n = np.arange(1, 601, dtype=float)
    s, v = np.cumsum(d, axis=1), np.cumsum(d * d, axis=1)
    n10, n01 = np.cumsum(d > 0, axis=1), np.cumsum(d < 0, axis=1)
    n11_plus_n00 = n - n10 - n01
    lo, hi = ep.cs_mcnemar(n11_plus_n00, n10, n01, 0, alpha=ALPHA)
    e = ep.log_e_bounded(n, s, v, delta=0.05)
    outside = (lo > 0.05) | (hi < 0.05)
    near = np.abs(e - np.log(1 / ALPHA)) < 1e-6  # ties at the boundary are resolution noise
    np.testing.assert_array_equal(outside[~near], (e >= np.log(1 / ALPHA))[~near])
    lo_b, hi_b = ep.cs_bounded(n, s, v, alpha=ALPHA)
    np.testing.assert_array_equal(lo, lo_b)
    np.testing.assert_array_equal(hi, hi_b)
