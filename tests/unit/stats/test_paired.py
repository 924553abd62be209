"""Paired summary against numpy (variance of D, corrcoef) and the closed forms of power.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.stats import power as pw
from monitor.stats.paired import paired_summary


def _binary_pair(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = (rng.uniform(size=n) < 0.7).astype(float)
    flip = rng.uniform(size=n) < 0.25
    b = np.where(flip, 1.0 - a, a)
    return a, b


def test_binary_against_numpy_and_closed_form() -> None:
    rng = np.random.default_rng(7)
    a, b = _binary_pair(rng, 5000)
    s = paired_summary(a, b)
    d = a - b
    assert s.binary
    assert s.n == 5000
    assert s.n11 + s.n10 + s.n01 + s.n00 == 5000  # type: ignore[operator]
    assert s.delta == pytest.approx(d.mean(), abs=1e-15)
    assert s.sigma_d2 == pytest.approx(np.var(d), rel=1e-12)  # numpy variance of D (ddof=0)
    assert s.rho == pytest.approx(np.corrcoef(a, b)[0, 1], rel=1e-12)
    # σ_D² from the phi coefficient (docs/contract.md#statistics) equals the variance of D exactly.
    closed = float(pw.sigma_d2(s.mean_a, s.mean_b, s.rho))
    assert closed == pytest.approx(s.sigma_d2, rel=1e-10)
    # phi from the cell counts: (p11 − pA pB)/√(pA qA pB qB).
    p11 = s.n11 / s.n  # type: ignore[operator]
    phi = (p11 - s.mean_a * s.mean_b) / math.sqrt(
        s.mean_a * (1 - s.mean_a) * s.mean_b * (1 - s.mean_b))
    assert s.rho == pytest.approx(phi, rel=1e-10)
    # D = ±1 on discordant items only: δ̂ = (n10 − n01)/N.
    assert s.delta == pytest.approx((s.n10 - s.n01) / s.n)  # type: ignore[operator]


def test_continuous_scores() -> None:
    rng = np.random.default_rng(8)
    a = rng.uniform(size=300)
    b = np.clip(a + rng.normal(0, 0.2, size=300), 0, 1)
    s = paired_summary(a, b)
    assert not s.binary
    assert s.n11 is None and s.n00 is None
    assert s.sigma_d2 == pytest.approx(np.var(a - b), rel=1e-12)
    assert s.rho == pytest.approx(np.corrcoef(a, b)[0, 1], rel=1e-12)


def test_methods_match_power_module() -> None:
    rng = np.random.default_rng(9)
    a, b = _binary_pair(rng, 800)
    s = paired_summary(a, b)
    z = pw.z_total(alpha=0.01, power=0.9)
    # N* and MDE use the sizing estimates (Agresti & Min 2005 pseudo-items, docs/contract.md).
    d = a - b
    d_size = d.sum() / 802
    s2_size = ((d * d).sum() + 1) / 802 - d_size**2
    assert s.n_star(alpha=0.01, power=0.9) == pytest.approx(z * z * s2_size / d_size**2,
                                                           rel=1e-12)
    assert s.q(alpha=0.01, power=0.9) == pytest.approx(800 / s.n_star(alpha=0.01, power=0.9))
    assert s.mde() == pytest.approx(pw.z_total() * math.sqrt(s2_size / 800), rel=1e-12)
    # The kernel's fixed-N test: exact McNemar on the discordant pairs (statsmodels' mcnemar
    # with exact=True is the reference).
    from statsmodels.stats.contingency_tables import mcnemar

    ref = mcnemar([[s.n11, s.n10], [s.n01, s.n00]], exact=True).pvalue
    assert s.p_value() == pytest.approx(ref, rel=1e-12)


def test_degenerate_pairs() -> None:
    same = paired_summary([1, 0, 1], [1, 0, 1])
    assert same.delta == 0 and same.sigma_d2 == 0
    assert math.isinf(same.n_star()) and same.q() == 0.0 and same.p_value() == 1.0
    const = paired_summary([1, 1, 1], [1, 0, 1])
    assert math.isnan(const.rho)  # a constant column has no correlation
    # Every item favours A: the plug-in σ̂² is 0, but N* stays positive and q finite and
    # growing with n (the sizing estimates never give N* = 0).
    all_better = paired_summary([1, 1], [0, 0])
    # 2:0 discordant pairs: exact McNemar p = 0.5 (the kernel's, not a z-test's 0)
    assert all_better.p_value() == pytest.approx(0.5) and all_better.sigma_d2 == 0.0
    qs = [paired_summary([1] * n, [0] * n).q() for n in (1, 2, 5, 30, 1000)]
    assert all(0.0 < q < math.inf for q in qs) and qs == sorted(qs)
    assert qs[0] < 1.0 < qs[3]


@pytest.mark.parametrize(
    ("xa", "xb", "match"),
    [
        ([0.1, np.nan], [0.1, 0.2], "`x_a`"),
        ([0.1, 0.2], [0.1, 1.5], "`x_b`"),
        ([0.1, 0.2], [0.1], "equal length"),
        ([], [], "at least one item"),
    ],
)
def test_bad_input(xa: list[float], xb: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_summary(xa, xb)
