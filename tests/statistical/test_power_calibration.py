"""Empirical power of the paired z-test at N* is the planned 0.80; at N*/2 it is clearly lower.

Seeded, judged by a two-sided exact binomial test on the rejection count (scipy.binomtest).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from monitor.stats import calibration as cal
from monitor.stats import power as pw
from monitor.stats.paired import paired_summary

REPS = 4000
CASES = [
    (0.65, 0.60, 0.30),  # worked example of docs/contract.md#statistics, N* = 1028
    (0.80, 0.76, 0.55),
    (0.35, 0.30, -0.10),
    (0.52, 0.50, 0.70),
]


def _n_star(pa: float, pb: float, rho: float) -> int:
    return math.ceil(float(pw.n_star(pa - pb, pw.sigma_d2(pa, pb, rho))))


@pytest.mark.parametrize(("pa", "pb", "rho"), CASES)
def test_power_at_n_star_is_080(pa: float, pb: float, rho: float) -> None:
    n = _n_star(pa, pb, rho)
    res = cal.simulate_power(pa, pb, rho, n=n, reps=REPS, rng=np.random.default_rng(1000 + n))
    assert binomtest(res.rejections, REPS, 0.8).pvalue > 0.001, res


@pytest.mark.parametrize(("pa", "pb", "rho"), CASES)
def test_power_at_half_n_star_is_clearly_lower(pa: float, pb: float, rho: float) -> None:
    n = _n_star(pa, pb, rho) // 2
    res = cal.simulate_power(pa, pb, rho, n=n, reps=REPS, rng=np.random.default_rng(2000 + n))
    # normal approximation: Φ(z/√2 − z_{0.975}) ≈ 0.51
    assert binomtest(res.rejections, REPS, 0.8, alternative="less").pvalue < 1e-6
    assert res.power < 0.6


def test_resampled_real_pair_reaches_080(shared_data) -> None:
    # The resampling mode on a real adjacent-ish MMLU-Pro pair: the table's own δ̂, σ̂_D² give
    # N*, and iid resamples of that size reject at the planned rate.
    from monitor.io.tables import read_table

    table = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv",
                       exclude=("src", "category"))
    xa, xb, _ = table.pair("jamba-1.5-large", "Qwen1.5-72B-Chat")
    n = math.ceil(paired_summary(xa, xb).n_star())
    res = cal.resample_power(xa, xb, n=n, reps=REPS, rng=np.random.default_rng(77))
    assert binomtest(res.rejections, REPS, 0.8).pvalue > 0.001, res
