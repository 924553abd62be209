"""N*_AV predicts the live monitor's decisions: the 80 % point of simulated decision times.

Each stream is one pair of 0/1 scores with the planned marginals and phi correlation, followed
item by item by ``monitor.stats.sequential.advance`` (the live core's function: exact
McNemar, decided when one side reaches 2/γ_p). The 80 % point of the decision time is read
with a distribution-free 99 % interval (order statistics bracketing the binomial count), so the
Monte-Carlo error is part of the verdict. Seeded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.offline.power import live_level, plan_power
from monitor.stats import anytime_calibration as ac

ALPHA = 0.05
POWER = 0.8


def _decision_quantile(pa: float, pb: float, rho: float, *, level: float, horizon: int,
                       streams: int, seed: int) -> ac.LivePowerCalibration:
    times, wrong = ac.live_crossing_times(pa, pb, rho, level=level, streams=streams,
                                          items=horizon, rng=np.random.default_rng(seed))
    assert wrong <= max(3, streams * level * 10)  # wrong directions: at most γ_p in expectation
    return ac.LivePowerCalibration(pa, pb, rho, level, POWER, math.nan, horizon, times, wrong)


@pytest.mark.slow
def test_power_predicts_the_live_rule_on_a_32_model_board() -> None:
    # The case: (0.65, 0.60, ρ 0.3) on a board planned for 32 models, a pair of the
    # first block (γ_p = α/992, decided at 2/γ_p = 39,680 on one side).
    plan = plan_power(0.65, 0.60, 0.30, planned_models=32, alpha=ALPHA, power=POWER)
    assert plan.level == pytest.approx(ALPHA / 992, rel=1e-12)
    n_av = plan.n_star_anytime
    res = _decision_quantile(0.65, 0.60, 0.30, level=plan.level, horizon=3 * int(n_av),
                             streams=4000, seed=22)
    q80 = res.quantile(POWER)
    lo, hi = res.quantile_ci(POWER, confidence=0.99)
    # The Monte-Carlo error of the 80 % point is well under the 15 % tolerance…
    assert (hi - lo) / q80 < 0.06, (lo, q80, hi)
    # …and N*_AV is within 15 % of it at either end of its interval (acceptance of issue 22).
    assert 0.85 * hi < n_av < 1.15 * lo, (n_av, lo, q80, hi)
    # The single-pair figure (E ≥ 1/α) is not the live rule's: by its N*_AV only a minority of
    # the live board's streams are decided.
    early = float(np.mean(res.times <= plan.n_star_anytime_single))
    assert early < 0.35, early


@pytest.mark.slow
@pytest.mark.parametrize(("pa", "pb", "rho", "planned"), [
    (0.65, 0.60, 0.30, 3), (0.75, 0.70, 0.0, 8), (0.62, 0.60, 0.6, 4), (0.80, 0.70, 0.4, 64),
])
def test_n_star_anytime_is_the_80_percent_point_across_plans(pa: float, pb: float, rho: float,
                                                             planned: int) -> None:
    # The first-passage approximation against the simulated 80 % point over gaps of 2–10
    # points, ρ 0–0.6 and boards of 3–64 planned models: within 6 % (its modelling error is
    # ±3 %; the 99 % interval of the quantile adds about ±2 %).
    level, _ = live_level(alpha=ALPHA, planned_models=planned)
    n_av = plan_power(pa, pb, rho, planned_models=planned).n_star_anytime
    res = _decision_quantile(pa, pb, rho, level=level, horizon=3 * int(n_av), streams=2000,
                             seed=planned)
    lo, hi = res.quantile_ci(POWER, confidence=0.99)
    assert 0.94 * lo < n_av < 1.06 * hi, (n_av, lo, res.quantile(POWER), hi)
