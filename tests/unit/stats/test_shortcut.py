"""Cohen's h shortcut and Lemma 1's closed-form C(p, ρ) against the numeric limit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.stats import power as pw
from monitor.stats.shortcut import cohens_h, lemma1_c, shortcut_ratio, shortcut_size


def test_worked_example() -> None:
    # docs/contract.md#statistics: (0.65, 0.60, 0.30) → N* 1028 and shortcut 515.
    res = shortcut_size(0.65, 0.60, 0.30)
    assert res.n == 515 and isinstance(res.n, int)
    assert math.ceil(pw.n_star(0.05, pw.sigma_d2(0.65, 0.60, 0.30))) == 1028
    z = pw.z_total()
    h = 2 * math.asin(math.sqrt(0.65)) - 2 * math.asin(math.sqrt(0.60))
    assert res.h == pytest.approx(h, rel=1e-14)
    assert res.n_exact == pytest.approx(z * z / h / h * 0.7, rel=1e-14)


def test_vectorised_and_zero_gap() -> None:
    res = shortcut_size(np.array([0.65, 0.6]), 0.6, 0.3)
    assert res.n[0] == 515 and np.isinf(res.n[1]) and np.isinf(res.n_exact[1])
    assert math.isinf(shortcut_size(0.4, 0.4, 0.0).n)
    assert cohens_h(1.0, 0.0) == pytest.approx(math.pi)


def test_ratio_equals_sizes_ratio() -> None:
    for pa, pb, rho in [(0.65, 0.60, 0.30), (0.2, 0.35, -0.4), (0.91, 0.9, 0.8)]:
        ns = float(pw.n_star(pa - pb, pw.sigma_d2(pa, pb, rho)))
        assert float(shortcut_ratio(pa, pb, rho)) == pytest.approx(
            shortcut_size(pa, pb, rho).n_exact / ns, rel=1e-12)


GRID = [(p, r) for p in (0.05, 0.2, 0.35, 0.5, 0.62, 0.8, 0.97)
        for r in (-1.0, -0.6, 0.0, 0.3, 0.7, 0.95)]


@pytest.mark.parametrize(("p", "rho"), GRID)
def test_lemma1_constant_is_the_numeric_limit(p: float, rho: float) -> None:
    # (ratio − 1/2)/δ² = C + O(δ²): Richardson-extrapolate two step sizes to cancel the δ²
    # term and compare with the closed form.
    u = p * (1 - p)
    d1 = 0.02 * min(p, 1 - p) * (1 - rho + 0.05)  # small relative to the scales 1/u, 1 − ρ
    d2 = d1 / 2
    f1, f2 = ((shortcut_ratio(p + d / 2, p - d / 2, rho) - 0.5) / d**2 for d in (d1, d2))
    limit = (4 * f2 - f1) / 3
    c = float(lemma1_c(p, rho))
    scale = 1 / u + 1 / (u * u * (1 - rho + 1e-12))
    assert limit == pytest.approx(c, abs=1e-6 * scale, rel=1e-5)
    # the un-extrapolated quotient is already close: C is the limit, not a fitted number
    assert f2 == pytest.approx(c, abs=1e-3 * scale)


@pytest.mark.parametrize("rho", [-1.0, -0.5, 0.0, 0.5, 0.9, 0.99])
def test_limit_is_one_half_for_every_rho(rho: float) -> None:
    # The (1 − ρ) factor makes the δ → 0 limit exactly 1/2; without it, 1/(2(1 − ρ)).
    ratio = float(shortcut_ratio(0.4 + 5e-5, 0.4 - 5e-5, rho))
    assert ratio == pytest.approx(0.5, abs=1e-4)
    assert ratio / (1 - rho) == pytest.approx(1 / (2 * (1 - rho)), rel=1e-3)


def test_lemma1_special_values() -> None:
    # Closed form at p = 1/2: the (1 − 2p)² term vanishes, C = 1/(12 · 1/4) = 1/3 for every ρ.
    np.testing.assert_allclose(lemma1_c(0.5, np.array([-1.0, 0.0, 0.9, 1.0])), 1 / 3)
    assert lemma1_c(0.3, 1.0) == -np.inf
    # symmetric in p ↔ 1 − p
    assert float(lemma1_c(0.2, 0.4)) == pytest.approx(float(lemma1_c(0.8, 0.4)), rel=1e-14)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="`rho`"):
        shortcut_size(0.6, 0.5, 1.5)
    with pytest.raises(ValueError, match="`p`"):
        lemma1_c(0.0, 0.2)
