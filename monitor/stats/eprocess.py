"""Anytime-valid e-processes and confidence sequences for a paired gap δ = E[x_A − x_B].

Every quantity is a function of the pair's mergeable sufficient statistics (discordant counts
for 0/1 scores; n, S = ΣD, V = ΣD² for scores in [0, 1]), computed in log space and
broadcasting over numpy arrays, so a whole board of pairs is updated at once and a replay
gives bit-identical values. A pair is resolved (anytime) the first time E_n ≥ 1/α — valid at
any stopping time by Ville's inequality, provided items arrive in an order independent of their
outcomes.

Constructions (see docs/anytime.md):

* 0/1 scores — the exact McNemar e-process. Under H0 each discordant pair is (1, 0) with
  probability 1/2; mixing the likelihood ratio over θ ~ Beta(a, a) gives
  E_n = B(a + n10, a + n01) / B(a, a) · 2^(n10 + n01), a nonnegative martingale under H0
  (concordant pairs leave it unchanged). This is the two-sided beta-binomial mixture of
  Howard et al. (2021) with range g = h = 1 (confseq's ``beta_binomial_log_mixture``).
* scores in [0, 1] — D_i ∈ [−1, 1], so by Fan et al.'s inequality (ξ ≥ −1)
  exp(λS_n − ψ_E(λ)V_n), ψ_E(λ) = −log(1 − λ) − λ, λ ∈ [0, 1), is a supermartingale under
  H0. Mixing over 1 − λ ~ Gamma(ρ, ρ) truncated to (0, 1] gives the closed-form
  gamma-exponential mixture (Howard et al. 2021, Prop. 9 with c = 1; equal to confseq's
  ``gamma_exponential_log_mixture``); the + and − sides are averaged for two-sided.

Both mixtures are tuned once, in advance, by one precision ρ: the optimal normal-mixture
precision for intrinsic time ``V_OPT`` (discordant pairs, or ΣD²) at level ``ALPHA_OPT``. For
the beta prior a = (ρ − 1)/2, i.e. 2θ − 1 has prior variance 1/(2a + 1) = 1/ρ, the same
spread as the normal mixture over λ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betaln, gammainc, gammaln, hyp1f1

from monitor.stats.chunks import each_chunk

__all__ = [
    "ALPHA_OPT",
    "V_OPT",
    "cs_bounded",
    "cs_mcnemar",
    "log_e_bounded",
    "log_e_bounded_sides",
    "log_e_mcnemar",
    "log_e_mcnemar_sides",
    "mixture_rho",
]

#: Intrinsic time (discordant pairs for 0/1 data, ΣD² for bounded scores) at which the mixtures
#: are tightest. 500 discordant pairs is where gaps of 2–5 points between models of similar
#: accuracy are decided on benchmarks of a few thousand items; the boundary is flat in v_opt
#: (it moves with log v), so the choice matters little, but it is fixed here, not data-driven.
V_OPT = 500.0
#: Level the mixture precision is optimised for.
ALPHA_OPT = 0.05

_LOG2 = math.log(2.0)
_BISECT_STEPS = 64
#: Absolute tolerance of each end of a confidence sequence (:func:`cs_bounded`).
CS_TOLERANCE = 1e-14
_CS_CHUNK = 1 << 14  # pairs per solve of :func:`cs_bounded` (a thread each; larger is no faster)


def _check_alpha(alpha: float) -> float:
    if not (0.0 < alpha < 1.0) or not math.isfinite(alpha):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    return float(alpha)


def _bisect(above: Callable[[Any], Any], lo: Any, hi: Any, steps: int = _BISECT_STEPS
            ) -> tuple[Any, Any]:
    """Elementwise bisection of [lo, hi] towards the point where ``above`` turns true.

    ``hi`` moves to every midpoint where ``above`` holds and ``lo`` to every other one, so
    ``above(hi)`` stays true wherever it was true at the start.
    """
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        up = above(mid)
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return lo, hi


def _log_e_sv(s: Any, v: Any, construction: str, v_opt: float, alpha_opt: float) -> Any:
    """log E of the construction after ``S = s`` and ``V = v`` (0/1 scores: n10 + n01 = V)."""
    if construction == "mcnemar":
        return log_e_mcnemar((v + s) / 2.0, (v - s) / 2.0, v_opt=v_opt, alpha_opt=alpha_opt)
    return log_e_bounded(v, s, v, v_opt=v_opt, alpha_opt=alpha_opt)


def mixture_rho(*, v_opt: float = V_OPT, alpha_opt: float = ALPHA_OPT) -> float:
    """Precision ρ of the two-sided normal mixture that is tightest at intrinsic time ``v_opt``.

    ρ = v_opt / (2 log(1/α) + log(1 + 2 log(1/α))) (Howard et al. 2021, eq. (3.8); the value
    confseq uses for its two-sided normal and beta-binomial mixtures).

    Examples
    --------
    >>> round(mixture_rho(v_opt=500.0, alpha_opt=0.05), 4)
    63.0028
    """
    if not (v_opt > 0) or not math.isfinite(v_opt):
        raise ValueError(f"`v_opt` must be a positive finite number, got {v_opt}")
    alpha_opt = _check_alpha(alpha_opt)
    la = math.log(1.0 / alpha_opt)
    return float(v_opt / (2.0 * la + math.log(1.0 + 2.0 * la)))


def _prior_a(v_opt: float, alpha_opt: float) -> float:
    # confseq's beta-binomial parameter for g = h = 1: r = (ρ − gh)/(g + h); a tiny v_opt
    # (ρ ≤ 1) would leave no proper prior, so the floor keeps a valid (if diffuse) one.
    return max((mixture_rho(v_opt=v_opt, alpha_opt=alpha_opt) - 1.0) / 2.0, 1e-3)


def log_e_mcnemar(
    n10: ArrayLike, n01: ArrayLike, *, v_opt: float = V_OPT, alpha_opt: float = ALPHA_OPT
) -> Any:
    """Log of the exact two-sided McNemar e-process on discordant counts (0/1 scores).

    log E_n = log B(a + n10, a + n01) − log B(a, a) + (n10 + n01) log 2 with the symmetric
    prior a = (ρ − 1)/2, ρ = ``mixture_rho(v_opt=, alpha_opt=)``; a martingale under
    H0: p10 = p01 (δ = 0).

    Parameters
    ----------
    n10, n01 : array_like
        Items where only A (resp. only B) is correct; broadcast together.
    v_opt, alpha_opt : float
        Tuning of the prior, fixed in advance (defaults: ``V_OPT``, ``ALPHA_OPT``).

    Returns
    -------
    ndarray or float
        log E_n, 0 before any discordant pair.

    Examples
    --------
    >>> round(float(log_e_mcnemar(0, 0)), 12)
    0.0
    >>> bool(log_e_mcnemar(120, 60) > math.log(20))
    True
    """
    a10 = np.asarray(n10, dtype=float)
    a01 = np.asarray(n01, dtype=float)
    if np.any(a10 < 0) or np.any(a01 < 0):
        raise ValueError("`n10` and `n01` must be nonnegative counts")
    a = _prior_a(v_opt, alpha_opt)
    return betaln(a + a10, a + a01) - betaln(a, a) + (a10 + a01) * _LOG2


def _log_gamma_exp_side(s: Any, v: Any, rho: float) -> Any:
    """One side of the gamma-exponential mixture: log ∫ exp(λs − ψ_E(λ)v) dF(λ).

    With u = 1 − λ ~ Gamma(ρ, ρ) truncated to (0, 1], the integral is
    e^{s+v} ∫_0^1 u^{v+ρ−1} e^{−u(s+v+ρ)} du / (γ(ρ, ρ)/ρ^ρ), and the inner integral is
    γ(A, x)/x^A with A = v + ρ, x = s + v + ρ.
    """
    return _gamma_exp_parts(s, v, rho)[0]


def _gamma_exp_parts(s: Any, v: Any, rho: float) -> tuple[Any, Any, Any, Any]:
    """:func:`_log_gamma_exp_side` and the log of its inner integral, A and x."""
    big_a = v + rho
    x = s + v + rho
    log_norm = gammaln(rho) + math.log(float(gammainc(rho, rho))) - rho * math.log(rho)
    big_a, x = np.broadcast_arrays(big_a, x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # The regularized lower incomplete gamma is accurate while P(A, x) is not tiny. Deep on
        # the no-evidence side (x ≪ A) it underflows long before the integral does (the
        # integrand rises towards u = 1), so there — and for x ≤ 0 — use Kummer's form
        # ∫_0^1 u^{A−1} e^{−xu} du = e^{−x} 1F1(1; A + 1; x) / A, whose series has ratio
        # x/(A + k) < 1. Only that (small) subset pays for the slower 1F1.
        xp = np.where(x > 0, x, 1.0)
        p = np.where(x > 0, gammainc(big_a, xp), 0.0)
        inner = np.asarray(gammaln(big_a) + np.log(p) - big_a * np.log(xp), dtype=float)
        tail = p < 1e-100
        if np.any(tail):
            at, xt = big_a[tail], x[tail]
            inner[tail] = -xt - np.log(at) + np.log(hyp1f1(1.0, at + 1.0, xt))
        # ∫ ≥ e^{−max(x, 0)}/A: a fallback should a special function fail; a lower bound
        # keeps the process below a supermartingale, so validity is kept.
        floor = -np.maximum(x, 0.0) - np.log(big_a)
        inner = np.where(np.isfinite(inner), np.fmax(inner, floor), floor)
    return s + v + inner - log_norm, inner, big_a, x


def log_e_bounded(
    n: ArrayLike,
    s: ArrayLike,
    v: ArrayLike,
    *,
    delta: ArrayLike = 0.0,
    v_opt: float = V_OPT,
    alpha_opt: float = ALPHA_OPT,
) -> Any:
    """Log of the two-sided gamma-exponential e-process for paired scores in [0, 1].

    Tests H0: E[D] = ``delta`` from n, S = ΣD and V = ΣD² of D = x_A − x_B ∈ [−1, 1]. The
    centred increments ξ = D − δ satisfy ξ ≥ −(1 + δ) and −ξ ≥ −(1 − δ); each side is scaled
    by its range so that Fan's inequality applies, then the two sides are averaged:
    E = (E₊ + E₋)/2. At δ = 0 both scales are 1.

    Examples
    --------
    >>> round(float(log_e_bounded(0, 0.0, 0.0)), 12)
    0.0
    >>> bool(log_e_bounded(2000, 150.0, 600.0) > math.log(20))
    True
    """
    nn = np.asarray(n, dtype=float)
    ss = np.asarray(s, dtype=float)
    vv = np.asarray(v, dtype=float)
    d = np.asarray(delta, dtype=float)
    if np.any(nn < 0) or np.any(vv < 0):
        raise ValueError("`n` and `v` must be nonnegative")
    if np.any(np.abs(d) >= 1):
        raise ValueError("`delta` must lie in (-1, 1)")
    rho = mixture_rho(v_opt=v_opt, alpha_opt=alpha_opt)
    sc = ss - nn * d
    vc = np.maximum(vv - 2.0 * d * ss + nn * d * d, 0.0)
    c_plus = 1.0 + d
    c_minus = 1.0 - d
    lp = _log_gamma_exp_side(sc / c_plus, vc / (c_plus * c_plus), rho)
    lm = _log_gamma_exp_side(-sc / c_minus, vc / (c_minus * c_minus), rho)
    return np.logaddexp(lp, lm) - _LOG2


def log_e_mcnemar_sides(
    n10: ArrayLike, n01: ArrayLike, *, v_opt: float = V_OPT, alpha_opt: float = ALPHA_OPT
) -> tuple[Any, Any]:
    """The two one-sided halves (log E₊, log E₋) of the McNemar mixture, E = (E₊ + E₋)/2.

    E₊ mixes the likelihood ratio over θ > 1/2 only (prior renormalised), so it is a
    supermartingale whenever θ ≤ 1/2 (A not better): E₊ = 2 E · P(θ > 1/2 | data) with the
    Beta(a + n10, a + n01) posterior; E₋ is its mirror.

    Examples
    --------
    >>> p, m = log_e_mcnemar_sides(30, 10)
    >>> bool(p > m), round(float(np.logaddexp(p, m) - math.log(2.0) - log_e_mcnemar(30, 10)), 9)
    (True, 0.0)
    """
    from scipy.special import betainc

    a10 = np.asarray(n10, dtype=float)
    a01 = np.asarray(n01, dtype=float)
    a = _prior_a(v_opt, alpha_opt)
    log_e = log_e_mcnemar(a10, a01, v_opt=v_opt, alpha_opt=alpha_opt)
    # P(θ > 1/2) = I_{1/2}(a + n01, a + n10) by the symmetry of the regularised beta, and
    # P(θ < 1/2) = 1 − P(θ > 1/2): one incomplete beta per pair, for the side of the smaller
    # count (the smaller probability, so that the other, near 1, is exact as its log1p).
    a_hi, a_lo = np.maximum(a10, a01), np.minimum(a10, a01)
    small = betainc(a + a_hi, a + a_lo, 0.5)
    with np.errstate(divide="ignore"):
        log_small, log_big = np.log(small), np.log1p(-small)
    up = a10 >= a01
    plus = log_e + _LOG2 + np.where(up, log_big, log_small)
    minus = log_e + _LOG2 + np.where(up, log_small, log_big)
    return plus, minus


def log_e_bounded_sides(
    n: ArrayLike, s: ArrayLike, v: ArrayLike, *, delta: ArrayLike = 0.0,
    v_opt: float = V_OPT, alpha_opt: float = ALPHA_OPT,
) -> tuple[Any, Any]:
    """The two one-sided halves (log E₊, log E₋) of :func:`log_e_bounded`, centred at ``delta``.

    E₊ is a supermartingale whenever E[D] ≤ ``delta`` (evidence that δ > ``delta``), E₋
    whenever E[D] ≥ ``delta`` (evidence that δ < ``delta``). At ``delta`` = 0: A not better,
    resp. B not better. The equivalence decision reads E₋ at +Δ and E₊ at −Δ.

    Examples
    --------
    >>> p, m = log_e_bounded_sides(2000, 150.0, 600.0)
    >>> bool(p > m), round(float(np.logaddexp(p, m) - math.log(2.0)
    ...                          - log_e_bounded(2000, 150.0, 600.0)), 9)
    (True, 0.0)
    >>> p, m = log_e_bounded_sides(2000, 150.0, 600.0, delta=0.2)
    >>> round(float(np.logaddexp(p, m) - math.log(2.0)
    ...             - log_e_bounded(2000, 150.0, 600.0, delta=0.2)), 9)
    0.0
    """
    nn = np.asarray(n, dtype=float)
    ss = np.asarray(s, dtype=float)
    vv = np.asarray(v, dtype=float)
    d = np.asarray(delta, dtype=float)
    if np.any(nn < 0) or np.any(vv < 0):
        raise ValueError("`n` and `v` must be nonnegative")
    if np.any(np.abs(d) >= 1):
        raise ValueError("`delta` must lie in (-1, 1)")
    rho = mixture_rho(v_opt=v_opt, alpha_opt=alpha_opt)
    if not np.any(d):
        return _log_gamma_exp_side(ss, vv, rho), _log_gamma_exp_side(-ss, vv, rho)
    # ξ = D − δ ≥ −(1 + δ) and −ξ ≥ −(1 − δ): each side scaled by its range (Fan's inequality).
    sc = ss - nn * d
    vc = np.maximum(vv - 2.0 * d * ss + nn * d * d, 0.0)
    c_plus, c_minus = 1.0 + d, 1.0 - d
    return (_log_gamma_exp_side(sc / c_plus, vc / (c_plus * c_plus), rho),
            _log_gamma_exp_side(-sc / c_minus, vc / (c_minus * c_minus), rho))


def cs_bounded(
    n: ArrayLike,
    s: ArrayLike,
    v: ArrayLike,
    *,
    alpha: ArrayLike = 0.05,
    v_opt: float = V_OPT,
    alpha_opt: float = ALPHA_OPT,
) -> tuple[Any, Any]:
    """Time-uniform confidence sequence for δ: {δ : E_n(δ) < 1/α} from ``log_e_bounded``.

    Each end is a crossing of log E_n(δ) = log(1/α) on its side of the point estimate S/n,
    where E_n is at its smallest: the end reported has ``log_e_bounded`` < log(1/α) and a
    point at most ``CS_TOLERANCE`` beyond it has ``log_e_bounded`` ≥ log(1/α). An end is
    first sought by Newton's method from 1.04 times the normal mixture's radius
    √((V′ + ρ)(2 log(1/α) + log((V′ + ρ)/ρ)))/n, V′ = V − S²/n, from the estimate (about
    three evaluations), and its last iterate is checked by a pair of points ``CS_TOLERANCE``
    apart around it. Ends whose check does not hold after a few moves of that pair are
    sought between 0.8 and 1.3 radii by Chandrupatla's bracketing method
    (:func:`scipy.optimize.elementwise.find_root`, to within ``CS_TOLERANCE``), the end of
    its final bracket inside the sequence reported; ends that bracket does not hold either (a
    few in a thousand: small n, where E_n is not monotone near ±1) are bisected on their
    whole side, to the float's last digit. The computed log E_n is flat to its rounding over
    a few 1e-15 of δ around the crossing (up to ~1e-13 at V ≈ 1e4 near |δ| = 0.9), so the
    crossing found is one of the sign changes in that band. Before any item the interval is
    [−1, 1]. ``alpha`` may be one level per pair (broadcast with n, S and V).

    Examples
    --------
    >>> lo, hi = cs_bounded(1000, 100.0, 400.0, alpha=0.05)
    >>> bool(lo < 0.1 < hi), bool(lo > 0)
    (True, True)
    """
    levels = np.asarray(alpha, dtype=float)
    if np.any(~np.isfinite(levels) | (levels <= 0.0) | (levels >= 1.0)):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha!r}")
    nn, ss, vv, aa = np.broadcast_arrays(
        np.asarray(n, dtype=float), np.asarray(s, dtype=float), np.asarray(v, dtype=float),
        levels,
    )
    thr = -np.log(aa).ravel()
    n1, s1, v1 = nn.ravel(), ss.ravel(), vv.ravel()
    low, high = np.empty(thr.size), np.empty(thr.size)

    def solve(at: slice) -> None:
        low[at], high[at] = _cs_ends(n1[at], s1[at], v1[at], thr[at], v_opt=v_opt,
                                     alpha_opt=alpha_opt)

    each_chunk(solve, thr.size, _CS_CHUNK)  # the solver's working arrays stay small
    if nn.ndim == 0:
        return float(low[0]), float(high[0])
    return low.reshape(nn.shape), high.reshape(nn.shape)


def _side_at(n: Any, s: Any, v: Any, d: Any, sign: Any, rho: float
             ) -> tuple[Any, Any]:
    """One side of :func:`log_e_bounded` at δ = ``d`` (``sign`` +1: E₊, −1: E₋), with the
    same arithmetic, and its slope in δ.

    The slope is for the solver's steps only (no end is decided by it): of the inner
    integral's derivatives, ∂/∂x = −E[u] is exact (from γ(A + 1, x) = Aγ(A, x) − x^A e^{−x})
    and ∂/∂A = E[log u] is read to second order from E[u] and E[u²], the density
    ∝ u^{A−1} e^{−xu} on (0, 1].
    """
    sc = s - n * d
    vc = np.maximum(v - 2.0 * d * s + n * d * d, 0.0)
    c = 1.0 + sign * d
    log_side, inner, big_a, x = _gamma_exp_parts(sign * sc / c, vc / (c * c), rho)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = np.exp(-x - inner)
        m1 = (big_a - e) / x
        m2 = ((big_a + 1.0) * m1 - e) / x
        e_log = np.log(m1) - (m2 - m1 * m1) / (2.0 * m1 * m1)
        ds = (-sign * n * c - sc) / (c * c)
        dv = 2.0 * (n * d - s) / (c * c) - 2.0 * sign * vc / (c * c * c)
        slope = (1.0 - m1) * ds + (1.0 + e_log - m1) * dv
    return log_side, slope


#: The crossing lies at 1.03–1.15 normal-mixture radii from the estimate on 0/1 boards of
#: 12,000 items; Newton starts here.
_NEWTON_START = 1.04
_NEWTON_STEPS = 12
#: A Newton step this small leaves the next iterate within ~1e-17 of the crossing.
_NEWTON_DONE = 1e-9
#: Moves of the checked pair of points around the Newton end before Chandrupatla takes over.
_CHECK_MOVES = 6


def _cs_ends(n: Any, s: Any, v: Any, thr: Any, *, v_opt: float, alpha_opt: float
             ) -> tuple[Any, Any]:
    """:func:`cs_bounded` of flat arrays, thr = log(1/α)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        center = np.where(n > 0, np.clip(s / np.where(n > 0, n, 1.0), -1.0, 1.0), 0.0)
    edge = 1.0 - 1e-9
    center = np.clip(center, -edge, edge)

    # Both ends in one solve (each element on its own): the upper ends, then the lower ones.
    n2, s2, v2, thr2 = (np.concatenate([x, x]) for x in (n, s, v, thr))
    inside = np.concatenate([center, center])
    side = np.concatenate([np.ones_like(center), -np.ones_like(center)])
    rho = mixture_rho(v_opt=v_opt, alpha_opt=alpha_opt)
    m = np.maximum(n2, 1.0)
    spread = np.maximum(v2 - s2 * s2 / m, 0.0) + rho
    radius = np.sqrt(spread * (2.0 * thr2 + np.log(spread / rho))) / m

    out = np.empty_like(inside)
    ok = np.abs(inside + side * 1.3 * radius) < edge
    first = np.flatnonzero(ok)
    ok[first] = False
    if first.size:
        end, held = _cs_newton(n2[first], s2[first], v2[first], thr2[first], side[first],
                               inside[first], radius[first], edge, v_opt=v_opt,
                               alpha_opt=alpha_opt)
        out[first] = end
        ok[first] = held
    rest = np.flatnonzero(~ok)
    if rest.size:
        out[rest] = _cs_bracketed(n2[rest], s2[rest], v2[rest], thr2[rest], side[rest],
                                  inside[rest], radius[rest], edge, v_opt=v_opt,
                                  alpha_opt=alpha_opt)
    return out[center.size:], out[:center.size]


def _cs_newton(n: Any, s: Any, v: Any, thr: Any, side: Any, inside: Any, radius: Any,
               edge: float, *, v_opt: float, alpha_opt: float) -> tuple[Any, Any]:
    """Ends of :func:`cs_bounded` by Newton's method on log E_n(δ) − log(1/α) from
    ``_NEWTON_START`` radii, then checked: (end, held), ``held`` where the reported end has
    E_n < 1/α and a point at most ``CS_TOLERANCE`` beyond it has E_n ≥ 1/α.

    On the outer side of the estimate the side that grows (E₋ above it, E₊ below) carries the
    other: the other's log is ≤ 0 there, so it moves log E by at most 1/E. Newton reads it
    only where that could move the step by more than a millionth of the last step.
    """
    rho = mixture_rho(v_opt=v_opt, alpha_opt=alpha_opt)
    end = np.empty(n.size)
    held = np.zeros(n.size, dtype=bool)
    at = np.arange(n.size)
    x = inside + side * _NEWTON_START * radius
    last = radius.copy()  # the size of the last step (the radius before the first)
    guess = np.empty(n.size)
    converged = np.zeros(n.size, dtype=bool)
    for _ in range(_NEWTON_STEPS):
        if not at.size:
            break
        nn, ss, vv, sd = n[at], s[at], v[at], side[at]
        log_grow, slope = _side_at(nn, ss, vv, x, -sd, rho)
        with np.errstate(over="ignore", invalid="ignore"):
            other = ~(np.exp(-log_grow) <= 1e-6 * np.abs(slope) * last) | (
                sd * (ss - nn * x) > 0)
        log_e = log_grow
        if np.any(other):
            k = np.flatnonzero(other)
            log_o, slope_o = _side_at(nn[k], ss[k], vv[k], x[k], sd[k], rho)
            both = np.logaddexp(log_grow[k], log_o)
            with np.errstate(invalid="ignore"):
                w = np.exp(log_o - both)
            log_e = log_e.copy()
            log_e[k] = both
            slope = slope.copy()
            slope[k] = (1.0 - w) * slope[k] + w * slope_o
        with np.errstate(divide="ignore", invalid="ignore"):
            step = -((log_e - _LOG2) - thr[at]) / slope
        nxt = x + step
        good = (np.isfinite(nxt) & (sd * slope > 0) & (sd * (nxt - inside[at]) > 0)
                & (np.abs(nxt) < edge))
        done = good & (np.abs(step) <= _NEWTON_DONE)
        guess[at[done]] = nxt[done]
        converged[at[done]] = True
        going = good & ~done
        at, x, last = at[going], nxt[going], np.abs(step[going])
    todo = np.flatnonzero(converged)
    if not todo.size:
        return end, held
    # The check, on log_e_bounded itself: E_n < 1/α at the end reported, E_n ≥ 1/α at most
    # CS_TOLERANCE beyond it. The computed log E is not monotone within a few 1e-15 of the
    # crossing (gammaln(A) and A log x of ~1e4 cancel in it), so a pair of points that does
    # not hold is moved one width outwards or inwards, towards the sign change it did show.
    nn, ss, vv, tt, sd = n[todo], s[todo], v[todo], thr[todo], side[todo]
    width = 0.98 * CS_TOLERANCE
    near, far = guess[todo] - sd * (0.5 * width), guess[todo] + sd * (0.5 * width)
    within = np.zeros(todo.size, dtype=bool)  # E_n < 1/α at near, known
    beyond = np.zeros(todo.size, dtype=bool)  # E_n ≥ 1/α at far, known
    near_open = np.ones(todo.size, dtype=bool)  # near not evaluated yet
    far_open = np.ones(todo.size, dtype=bool)
    for _ in range(_CHECK_MOVES):
        k = np.flatnonzero(far_open)
        if k.size:
            # Beyond, the growing side alone suffices where it reaches 2/α (log E =
            # logaddexp(log E₊, log E₋) − log 2 is at least the growing side's − log 2).
            log_grow, _ = _side_at(nn[k], ss[k], vv[k], far[k], -sd[k], rho)
            reached = (log_grow - _LOG2) - tt[k] >= 0
            j = k[~reached]
            reached[~reached] = log_e_bounded(nn[j], ss[j], vv[j], delta=far[j], v_opt=v_opt,
                                              alpha_opt=alpha_opt) - tt[j] >= 0
            beyond[k] = reached
        k = np.flatnonzero(near_open)
        if k.size:
            within[k] = log_e_bounded(nn[k], ss[k], vv[k], delta=near[k], v_opt=v_opt,
                                      alpha_opt=alpha_opt) - tt[k] < 0
        near_open[:] = False
        far_open[:] = False
        inwards = ~within  # near is beyond: it becomes far, a new near inside it
        outwards = within & ~beyond  # far is within: it becomes near, a new far beyond it
        far = np.where(inwards, near, far)
        near = np.where(inwards, near - sd * width, near)
        beyond |= inwards
        near_open = inwards
        near = np.where(outwards, far, near)
        far = np.where(outwards, far + sd * width, far)
        far_open = outwards
        if not (inwards.any() or outwards.any()):
            break
    end[todo] = near
    # (and the end on its own side of the estimate: moved inwards, a pair started within one
    # width of it could cross it)
    held[todo] = (within & beyond & ~near_open & ~far_open & (sd * (far - near) <= CS_TOLERANCE)
                  & (np.abs(far) < edge) & (sd * (near - inside[todo]) >= 0))
    return end, held


def _cs_bracketed(n: Any, s: Any, v: Any, thr: Any, side: Any, inside: Any, radius: Any,
                  edge: float, *, v_opt: float, alpha_opt: float) -> Any:
    """Ends of :func:`cs_bounded` Newton did not settle: Chandrupatla's method between 0.8 and
    1.3 radii, then bisection on the whole side."""
    from scipy.optimize.elementwise import find_root

    def f(delta: Any, n: Any, s: Any, v: Any, thr: Any) -> Any:
        return log_e_bounded(n, s, v, delta=delta, v_opt=v_opt, alpha_opt=alpha_opt) - thr

    near, far = inside + side * 0.8 * radius, inside + side * 1.3 * radius
    out = np.empty_like(inside)
    ok = np.abs(far) < edge
    first = np.flatnonzero(ok)
    if first.size:
        lo_hi = np.sort(np.stack([near[first], far[first]]), axis=0)
        res = find_root(f, (lo_hi[0], lo_hi[1]),
                        args=(n[first], s[first], v[first], thr[first]),
                        tolerances={"xatol": CS_TOLERANCE, "xrtol": 0.0})
        up = side[first] > 0  # the end of the final bracket on the estimate's side
        out[first] = np.where(up, res.bracket[0], res.bracket[1])
        f_end = np.where(up, res.f_bracket[0], res.f_bracket[1])
        # find_root also stops where |f| falls below its fatol, with a wider bracket.
        narrow = res.bracket[1] - res.bracket[0] <= CS_TOLERANCE
        ok[first] = (res.status == 0) & (f_end < 0) & narrow
    rest = np.flatnonzero(~ok)
    if rest.size:  # bisection on the whole side, [estimate, ±edge]; no crossing: ±1
        args = (n[rest], s[rest], v[rest], thr[rest])
        outside = side[rest] * edge
        ends, _ = _bisect(lambda x: f(x, *args) >= 0, inside[rest].copy(), outside.copy())
        ends = np.where(f(outside, *args) >= 0, ends, side[rest])
        # The estimate itself excluded can only happen for degenerate tiny n: the point.
        out[rest] = np.where(f(inside[rest], *args) < 0, ends, inside[rest])
    return out


def cs_mcnemar(
    n11: ArrayLike,
    n10: ArrayLike,
    n01: ArrayLike,
    n00: ArrayLike,
    *,
    alpha: float = 0.05,
    v_opt: float = V_OPT,
    alpha_opt: float = ALPHA_OPT,
) -> tuple[Any, Any]:
    """Time-uniform confidence sequence for δ = p10 − p01 from the four concordance counts.

    For 0/1 scores D ∈ {−1, 0, 1}, so S = n10 − n01 and V = n10 + n01: this is ``cs_bounded``
    on those statistics (the McNemar mixture tests θ = p10/(p10 + p01), which maps to δ only
    through the unknown discordance rate, so it is not inverted here).

    Examples
    --------
    >>> lo, hi = cs_mcnemar(600, 250, 150, 1000, alpha=0.05)
    >>> bool(lo < 0.05 < hi)
    True
    """
    c11, c10, c01, c00 = (np.asarray(x, dtype=float) for x in (n11, n10, n01, n00))
    n = c11 + c10 + c01 + c00
    return cs_bounded(n, c10 - c01, c10 + c01, alpha=alpha, v_opt=v_opt, alpha_opt=alpha_opt)
