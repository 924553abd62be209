"""Paired sample-size arithmetic: σ_D², McNemar–Connor N*, resolution ratio q and MDE.

Every function broadcasts over numpy arrays so that a whole board of pairs is sized at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtri

FloatArray = NDArray[np.float64]


def _check_level(name: str, value: float) -> float:
    if not (0.0 < value < 1.0) or not np.isfinite(value):
        raise ValueError(f"`{name}` must lie in (0, 1), got {value}")
    return float(value)


def z_total(*, alpha: float = 0.05, power: float = 0.8, two_sided: bool = True) -> float:
    """Return z = z_{1−α/2} + z_{1−β} (or z_{1−α} + z_{1−β} one-sided).

    Examples
    --------
    >>> round(z_total(alpha=0.05, power=0.8), 4)
    2.8016
    """
    alpha = _check_level("alpha", alpha)
    power = _check_level("power", power)
    a = alpha / 2.0 if two_sided else alpha
    # ndtri is the normal quantile itself: norm.isf(a) == -ndtri(a) and norm.ppf(q) == ndtri(q)
    # bit for bit, without importing scipy.stats (most of the CLI's start-up).
    return float(-ndtri(a) + ndtri(power))


def check_probability(name: str, p: ArrayLike, *, open_interval: bool = True) -> FloatArray:
    """Validate an array of probabilities; open interval (0, 1) unless told otherwise."""
    arr = np.asarray(p, dtype=float)
    bad = ~np.isfinite(arr) | ((arr <= 0) | (arr >= 1) if open_interval else (arr < 0) | (arr > 1))
    if np.any(bad):
        first = arr[bad].flat[0]
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise ValueError(f"`{name}` must lie in {interval}, got {first}")
    return arr


def check_unit_vector(name: str, x: ArrayLike, *, what: str) -> FloatArray:
    """Validate a one-dimensional array of ``what`` (scores, p-values) in [0, 1], no NaN."""
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be one-dimensional, got shape {arr.shape}")
    bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1)
    if np.any(bad):
        raise ValueError(f"`{name}` must hold {what} in [0, 1] without NaN, got {arr[bad][0]}")
    return arr


def check_rho(rho: ArrayLike) -> FloatArray:
    """Validate correlations: finite values in [−1, 1]."""
    arr = np.asarray(rho, dtype=float)
    bad = ~np.isfinite(arr) | (arr < -1) | (arr > 1)
    if np.any(bad):
        raise ValueError(f"`rho` must lie in [-1, 1], got {arr[bad].flat[0]}")
    return arr


def rho_bounds(p_a: float, p_b: float) -> tuple[float, float]:
    """Feasible range of the phi correlation of two 0/1 scores with accuracies p_A and p_B.

    The Fréchet bounds max(0, p_A + p_B − 1) ≤ p11 ≤ min(p_A, p_B) on the joint cell, mapped
    to ρ = (p11 − p_A p_B) / √(p_A q_A p_B q_B). ρ = 1 needs p_A = p_B, ρ = −1 needs
    p_A + p_B = 1.

    Examples
    --------
    >>> [round(r, 3) for r in rho_bounds(0.65, 0.60)]
    [-0.599, 0.899]
    """
    pa = float(check_probability("p_a", p_a))
    pb = float(check_probability("p_b", p_b))
    s = float(np.sqrt(pa * (1 - pa) * pb * (1 - pb)))
    return (max(0.0, pa + pb - 1.0) - pa * pb) / s, (min(pa, pb) - pa * pb) / s


def check_feasible_rho(p_a: float, p_b: float, rho: float) -> float:
    """Validate ρ against :func:`rho_bounds`; ``ValueError`` naming the range otherwise.

    Examples
    --------
    >>> check_feasible_rho(0.65, 0.60, 1.0)
    Traceback (most recent call last):
    ...
    ValueError: `rho` must lie in [-0.599, 0.899] for p_A = 0.65, p_B = 0.6, got 1.0
    """
    r = float(check_rho(rho))
    lo, hi = rho_bounds(p_a, p_b)
    if not (lo - 1e-12 <= r <= hi + 1e-12):
        raise ValueError(f"`rho` must lie in [{lo:.3f}, {hi:.3f}] for p_A = {float(p_a):g}, "
                         f"p_B = {float(p_b):g}, got {r}")
    return r


def sigma_d2(p_a: ArrayLike, p_b: ArrayLike, rho: ArrayLike) -> Any:
    """Variance of the paired difference D = x_A − x_B for 0/1 scores.

    σ_D² = p_A q_A + p_B q_B − 2ρ √(p_A q_A p_B q_B).

    Examples
    --------
    >>> round(float(sigma_d2(0.65, 0.60, 0.30)), 4)
    0.3273
    """
    pa = check_probability("p_a", p_a)
    pb = check_probability("p_b", p_b)
    r = check_rho(rho)
    va, vb = pa * (1 - pa), pb * (1 - pb)
    out = va + vb - 2.0 * r * np.sqrt(va * vb)
    return np.maximum(out, 0.0)


def n_star(
    delta: ArrayLike,
    sigma2: ArrayLike,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
) -> Any:
    """Exact (unrounded) required paired size N* = z² σ_D² / δ²; ``inf`` where δ = 0.

    Examples
    --------
    >>> import math
    >>> math.ceil(n_star(0.05, sigma_d2(0.65, 0.60, 0.30)))
    1028
    """
    z = z_total(alpha=alpha, power=power)
    d = np.asarray(delta, dtype=float)
    s2 = np.asarray(sigma2, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d == 0, np.inf, z * z * s2 / (d * d))
    return out


def mde(sigma2: ArrayLike, n: ArrayLike, *, alpha: float = 0.05, power: float = 0.8) -> Any:
    """Minimum detectable effect z σ_D / √N at N paired items."""
    z = z_total(alpha=alpha, power=power)
    nn = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(nn > 0, z * np.sqrt(np.asarray(sigma2, dtype=float)) / np.sqrt(nn), np.inf)


def resolution_ratio(n: ArrayLike, n_required: ArrayLike) -> Any:
    """q = N / N*: the gap is resolved at fixed N iff q ≥ 1 (q = 0 when N* is infinite)."""
    req = np.asarray(n_required, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.isfinite(req) & (req > 0), np.asarray(n, dtype=float) / req, 0.0)


def sigma_d2_samples(sigma2: ArrayLike, within_share: ArrayLike, samples: ArrayLike) -> Any:
    """σ_D² of item means with K samples per item: σ² (1 − w + w/K).

    ``sigma2`` is σ_D² at one sample per item and ``within_share`` w the share of it that is
    within-item sampling noise, σ_w²/σ_D² (Miller 2024, "Adding error bars to evals",
    arXiv:2411.00640: Var(D̄_i) = σ_b² + σ_w²/K; only the within-item term shrinks).

    Examples
    --------
    >>> round(float(sigma_d2_samples(0.32, 0.5, 4)), 4)
    0.2
    """
    w = check_probability("within_share", within_share, open_interval=False)
    k = np.asarray(samples, dtype=float)
    if np.any(~np.isfinite(k) | (k < 1)):
        raise ValueError(f"`samples` must be at least 1, got {k[(k < 1) | ~np.isfinite(k)].flat[0]}")
    return np.asarray(sigma2, dtype=float) * (1.0 - w + w / k)


def samples_needed(delta: ArrayLike, sigma2: ArrayLike, within_share: ArrayLike, n: ArrayLike,
                   *, alpha: float = 0.05, power: float = 0.8) -> Any:
    """The fewest samples per item (unrounded) that resolve δ with ``n`` items:
    σ² (1 − w + w/K) ≤ n δ²/z², so K = wσ² / (nδ²/z² − (1 − w)σ²); ``inf`` where the
    between-item term alone exceeds nδ²/z² (no number of samples is enough), and at most 1
    where one sample already is.

    Examples
    --------
    >>> round(float(samples_needed(0.05, 0.32, 0.5, 800)), 3)
    1.688
    """
    z = z_total(alpha=alpha, power=power)
    d = np.asarray(delta, dtype=float)
    s2 = np.asarray(sigma2, dtype=float)
    w = check_probability("within_share", within_share, open_interval=False)
    room = np.asarray(n, dtype=float) * d * d / (z * z) - (1.0 - w) * s2
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(room > 0, w * s2 / np.where(room > 0, room, 1.0), np.inf)
