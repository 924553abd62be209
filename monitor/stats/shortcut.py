"""The Cohen's-h shortcut n_h = z²/h² · (1 − ρ) and Lemma 1, its ratio to the paired N*.

The shortcut is what G*Power, R ``pwr`` and Cohen (1988) users compute: an unpaired per-arm
size on the arcsine scale, then multiplied by (1 − ρ). Lemma 1 (docs/lemma1.md): around the
midpoint p = (p_A + p_B)/2 with δ = p_A − p_B,

    n_h / N* = 1/2 + C(p, ρ) δ² + O(δ⁴),
    C(p, ρ) = 1/(12 u) − (1 − 2p)² (1 + ρ) / (32 u² (1 − ρ)),   u = p(1 − p),

for every ρ in [−1, 1): the shortcut asks for about half the items the paired test needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.stats import power as pw


def cohens_h(p_a: ArrayLike, p_b: ArrayLike) -> Any:
    """Cohen's effect size h = 2 asin√p_A − 2 asin√p_B (broadcasting).

    Examples
    --------
    >>> round(float(cohens_h(0.65, 0.60)), 5)
    0.10333
    """
    pa = pw.check_probability("p_a", p_a, open_interval=False)
    pb = pw.check_probability("p_b", p_b, open_interval=False)
    return 2.0 * np.arcsin(np.sqrt(pa)) - 2.0 * np.arcsin(np.sqrt(pb))


@dataclass(frozen=True)
class ShortcutResult:
    """The shortcut's size for one (or an array of) planned comparisons.

    Attributes
    ----------
    h : float or ndarray
        Cohen's h.
    n_exact : float or ndarray
        z²/h² · (1 − ρ), unrounded; ``inf`` where h = 0.
    n : int, float or ndarray
        ``n_exact`` rounded up (an ``int`` for scalar finite input, ``inf`` stays ``inf``).
    """

    h: Any
    n_exact: Any
    n: Any


def shortcut_size(
    p_a: ArrayLike, p_b: ArrayLike, rho: ArrayLike, *, alpha: float = 0.05, power: float = 0.8
) -> ShortcutResult:
    """Per-comparison size the Cohen's-h shortcut asks for: n_h = z²/h² · (1 − ρ).

    Examples
    --------
    >>> shortcut_size(0.65, 0.60, 0.30).n
    515
    """
    r = pw.check_rho(rho)
    h = cohens_h(p_a, p_b)
    z = pw.z_total(alpha=alpha, power=power)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(h == 0, np.inf, z * z * (1.0 - r) / (h * h))
    rounded = np.where(np.isfinite(exact), np.ceil(exact), exact)
    if np.ndim(exact) == 0:
        e = float(exact)
        n: Any = int(rounded) if np.isfinite(e) else e
        return ShortcutResult(h=float(h), n_exact=e, n=n)
    return ShortcutResult(h=h, n_exact=exact, n=rounded)


def shortcut_ratio(
    p_a: ArrayLike, p_b: ArrayLike, rho: ArrayLike, *, alpha: float = 0.05, power: float = 0.8
) -> Any:
    """Unrounded n_h / N*; the z² cancels, so the ratio is (1 − ρ) δ² / (h² σ_D²).

    NaN where p_A = p_B (both sizes infinite).

    Examples
    --------
    >>> round(float(shortcut_ratio(0.65, 0.60, 0.30)), 5)
    0.50072
    """
    pw.z_total(alpha=alpha, power=power)  # validates the levels; they cancel in the ratio
    pa = pw.check_probability("p_a", p_a)
    pb = pw.check_probability("p_b", p_b)
    r = pw.check_rho(rho)
    h = cohens_h(pa, pb)
    s2 = pw.sigma_d2(pa, pb, r)
    d = pa - pb
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d == 0, np.nan, (1.0 - r) * d * d / (h * h * s2))


def lemma1_c(p: ArrayLike, rho: ArrayLike) -> Any:
    """Lemma 1's constant C(p, ρ) in n_h / N* = 1/2 + C δ² + O(δ⁴) (closed form).

    C(p, ρ) = 1/(12u) − (1 − 2p)²(1 + ρ) / (32 u² (1 − ρ)) with u = p(1 − p); −inf at ρ = 1
    for p ≠ 1/2 (the expansion does not hold uniformly as ρ → 1). Derivation in docs/lemma1.md.

    Examples
    --------
    >>> round(float(lemma1_c(0.5, 0.0)), 6)
    0.333333
    >>> round(float(lemma1_c(0.625, 0.30)), 6)
    0.289524
    """
    pp = pw.check_probability("p", p)
    r = pw.check_rho(rho)
    u = pp * (1.0 - pp)
    w = (1.0 - 2.0 * pp) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        second = np.where(w == 0, 0.0, w * (1.0 + r) / (32.0 * u * u * (1.0 - r)))
    return 1.0 / (12.0 * u) - second
