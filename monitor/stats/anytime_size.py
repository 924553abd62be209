"""Anytime-valid required size N*_AV: the smallest N by which a pair's e-process has crossed
its threshold with probability 1 − β under the alternative (δ, σ_D²).

Two decision rules are sized: ``"side"``, the monitor's (one of the two one-sided e-processes
E₊, E₋ reaches 2/α, :func:`monitor.stats.sequential.advance`; the live core and the replay
pass α = γ_p, the pair's share), and ``"mean"``, the single-pair rule E = (E₊ + E₋)/2 ≥ 1/α.

Split from :mod:`monitor.stats.eprocess` (the e-processes themselves): the normal-approximation
solve and its tabulated boundaries are the only root finding over sample sizes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log_ndtr, ndtr, ndtri

from monitor.stats.chunks import each_chunk
from monitor.stats.eprocess import (
    ALPHA_OPT,
    V_OPT,
    _bisect,
    _check_alpha,
    _log_e_sv,
    log_e_bounded_sides,
    log_e_mcnemar_sides,
)

__all__ = ["RULES", "n_star_anytime"]

#: Decision rules N*_AV is sized for: a one-sided e-process at 2/α (the monitor's), or the
#: two-sided E ≥ 1/α (a single pair watched alone).
RULES = ("side", "mean")
Rule = Literal["side", "mean"]


def _check_n_star_args(
    delta: ArrayLike, sigma2: ArrayLike, alpha: float, power: float, construction: str,
    rule: str,
) -> tuple[float, Any, Any]:
    """Validated (α, |δ|, σ²) of ``n_star_anytime``, δ and σ² broadcast together."""
    alpha = _check_alpha(alpha)
    if not (0.0 < power < 1.0):
        raise ValueError(f"`power` must lie in (0, 1), got {power}")
    if construction not in ("mcnemar", "bounded"):
        raise ValueError(f"`construction` must be 'mcnemar' or 'bounded', got {construction!r}")
    if rule not in RULES:
        raise ValueError(f"`rule` must be 'side' or 'mean', got {rule!r}")
    d_in, s_in = np.broadcast_arrays(
        np.abs(np.asarray(delta, dtype=float)), np.asarray(sigma2, dtype=float)
    )
    if np.any(s_in < 0) or np.any(~np.isfinite(s_in)):
        raise ValueError("`sigma2` must be finite and nonnegative")
    return alpha, d_in, s_in


def _rule_threshold(alpha: float, rule: str) -> float:
    """log of the level the rule's e-value must reach: 2/α for one side, 1/α for the mean."""
    return math.log((2.0 if rule == "side" else 1.0) / alpha)


def _log_e_rule(s: Any, v: Any, construction: str, v_opt: float, alpha_opt: float,
                rule: str) -> Any:
    """log E₊ (``rule="side"``) or the two-sided log E (``"mean"``) after S = s, V = v: the
    e-value the rule compares with its threshold when S ≥ 0 (E₋ is the mirror image)."""
    if rule == "mean":
        return _log_e_sv(s, v, construction, v_opt, alpha_opt)
    if construction == "mcnemar":
        return log_e_mcnemar_sides((v + s) / 2.0, (v - s) / 2.0, v_opt=v_opt,
                                   alpha_opt=alpha_opt)[0]
    return log_e_bounded_sides(v, s, v, v_opt=v_opt, alpha_opt=alpha_opt)[0]


def _boundary_s(
    v: Any, thr: float, construction: str, v_opt: float, alpha_opt: float, rule: str = "mean"
) -> Any:
    """Smallest s ≥ 0 with the rule's log e-value at (s, v) ≥ thr (inf where even s = v does
    not reach it)."""

    def reached(s_: Any) -> Any:
        return _log_e_rule(s_, v, construction, v_opt, alpha_opt, rule) >= thr

    reach = reached(v)
    _, hi = _bisect(reached, np.zeros_like(v), v.copy())
    return np.where(reach, hi, np.inf)


def _falsi(f: Callable[[Any, Any], Any], lo: Any, hi: Any, f_lo: Any, f_hi: Any, *,
           steps: int) -> Any:
    """Elementwise Illinois method (regula falsi, an end kept twice in a row has its value
    halved) on brackets [lo, hi] with f(lo) < 0 ≤ f(hi): the upper end of each final bracket
    (f ≥ 0 there), within 1e-13 of the root relative to max(1, |t|), or after ``steps``
    evaluations. Brackets that do not hold a sign change are returned as ``hi``. Each element
    on its own: ``f(t, at)`` is evaluated at the points ``t`` of the elements ``at`` (indices
    into the arrays given) that have not converged yet, and a converged one keeps its
    bracket while the others iterate."""
    hi = hi.copy()
    at = np.flatnonzero((f_lo < 0) & (f_hi >= 0))
    lo, f_lo, f_hi, top = lo[at], f_lo[at], f_hi[at], hi[at]
    moved = np.zeros(at.shape, dtype=np.int8)  # the end the last step replaced: +1 hi, −1 lo
    for _ in range(steps):
        if not at.size:
            break
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = top - f_hi * (top - lo) / (f_hi - f_lo)
        t = np.where(~np.isfinite(t) | (t <= lo) | (t >= top), 0.5 * (lo + top), t)
        f_t = f(t, at)
        up = f_t >= 0
        down = ~up
        f_lo = np.where(up & (moved == 1), 0.5 * f_lo, np.where(down, f_t, f_lo))
        f_hi = np.where(down & (moved == -1), 0.5 * f_hi, np.where(up, f_t, f_hi))
        top = np.where(up, t, top)
        lo = np.where(down, t, lo)
        moved = np.where(up, 1, -1).astype(np.int8)
        hi[at] = top
        going = ~(top - lo <= 1e-13 * np.maximum(1.0, np.abs(top)))
        at, lo, top, f_lo, f_hi, moved = (x[going] for x in (at, lo, top, f_lo, f_hi, moved))
    return hi


def _crossing_probability(n: Any, d: Any, s2: Any, b: Any, dlu: Any) -> Any:
    """P(S has crossed the boundary by N), S a Brownian motion with drift δ and variance σ²
    per item, the boundary replaced by its tangent line at N.

    With b = u(V_N) and k = d log u / d log V there (V ∝ N, so the tangent's slope is
    c = k·b/N and its intercept a = (1 − k)·b), the first passage of δt + σW_t over a + ct
    by N has the closed form (Borodin & Salminen, *Handbook of Brownian Motion*, 2.1.1.4)
    Φ((δN − b)/(σ√N)) + exp(2μa/σ²) Φ(−(a + μN)/(σ√N)), μ = δ − c. The first term is the
    chance of being above the boundary at N; the second adds the paths that crossed earlier
    and fell back. A concave boundary lies below its tangent, so crossing the line implies
    crossing the boundary. k is clipped to [0, 1] (a ≥ 0); σ² = 0 keeps the first term.
    """
    sd = np.sqrt(s2 * n)
    live = sd > 0
    sd_ = np.where(live, sd, 1.0)
    reach = np.isfinite(b)
    b_ = np.where(reach, b, 0.0)
    k = np.clip(np.where(np.isfinite(dlu), dlu, 1.0), 0.0, 1.0)
    a = (1.0 - k) * b_
    mu = d - k * b_ / n
    with np.errstate(over="ignore", under="ignore"):
        above = np.where(live, ndtr((d * n - b_) / sd_), (d * n >= b_).astype(float))
        log_back = 2.0 * mu * a / np.where(live, s2, 1.0) + log_ndtr(-(a + mu * n) / sd_)
        back = np.where(live, np.exp(np.minimum(log_back, 0.0)), 0.0)
    return np.where(reach, np.minimum(above + back, 1.0), 0.0)


def _n_star_anytime_exact(
    delta: ArrayLike,
    sigma2: ArrayLike,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    construction: Literal["mcnemar", "bounded"] = "mcnemar",
    rule: Rule = "side",
    v_opt: float = V_OPT,
    alpha_opt: float = ALPHA_OPT,
) -> Any:
    """Reference ``n_star_anytime``: nested bisection on the exact boundary (for tests).

    First the N where the gap N δ − z_{1−β} σ √N meets the boundary (the chance of being
    above it at N is 1 − β), then, below it, the N where the first-passage probability of
    :func:`_crossing_probability` reaches 1 − β, the boundary's slope by a central difference
    in log V.
    """
    alpha, d_in, s_in = _check_n_star_args(delta, sigma2, alpha, power, construction, rule)
    d = np.where(d_in > 0, d_in, 1.0)
    s2 = s_in
    m2 = s2 + d * d
    zb = float(ndtri(power))
    thr = _rule_threshold(alpha, rule)

    def boundary(v: Any) -> Any:
        return _boundary_s(v, thr, construction, v_opt, alpha_opt, rule)

    def gap(n: Any) -> Any:
        return n * d - zb * np.sqrt(n * s2) - boundary(n * m2)

    log_n_lo, log_n_hi = np.zeros_like(d), np.full_like(d, math.log(1e12))
    _, hi = _bisect(lambda t: gap(np.exp(t)) >= 0, log_n_lo, log_n_hi, steps=50)

    def crossed(t: Any) -> Any:
        n = np.exp(t)
        b = boundary(n * m2)
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.log(boundary(n * m2 * math.exp(_SLOPE_STEP)))
            down = np.log(boundary(n * m2 * math.exp(-_SLOPE_STEP)))
            # one-sided just above V_min, where the boundary is not defined below
            dlu = np.where(np.isfinite(down), (up - down) / (2 * _SLOPE_STEP),
                           (up - np.log(b)) / _SLOPE_STEP)
        return _crossing_probability(n, d, s2, b, dlu) >= power

    # Crossing by N is at least as likely as being above the boundary at N: the answer lies
    # at or below the first solution (which stays where even it is not reached by 1e12),
    # within a factor 2 of it unless the lower end has crossed already.
    near = np.maximum(hi - _LOG2, log_n_lo)
    first = crossed(log_n_lo)
    low = np.where(crossed(near), log_n_lo, near)
    _, hi2 = _bisect(crossed, low, hi.copy(), steps=36)
    hi2 = np.where(first, log_n_lo, np.where(crossed(hi), hi2, hi))
    out = np.where(d_in > 0, np.exp(hi2), np.inf)
    return float(out) if out.ndim == 0 else out


# --- Fast paths -------------------------------------------------------------------------------
# The exact functions above bisect 50 × 64 times (N*_AV) or 2 × 64 times (CS) on the special
# functions; the live monitor needs these figures in milliseconds. N*_AV uses the mixture
# boundary u(V), a 1-D function once (construction, α, tuning) are fixed: it is tabulated once
# per key on a log grid (log u against log V, a cubic spline, relative error ≲ 1e-10, tested
# against the exact root) and the N equation is solved by safeguarded Newton on the spline. The
# CS ends depend on (n, S, V) jointly and are found on the exact e-process (cs_bounded).

_T_MAX = math.log(1e12)  # largest log V tabulated: N ≤ 1e12 and V/N = σ² + δ² ≤ 1
_GRID_STEP = 0.025
_NEWTON_STEPS = 60
_PASSAGE_STEPS = 64  # at most this many steps of the first-passage solve, in log V
_CHUNK = 1 << 16  # sizes per solve (:func:`monitor.stats.chunks.each_chunk`)
_LOG2 = math.log(2.0)
_SLOPE_STEP = 1e-3  # central-difference step (in log V) of the reference's boundary slope


def _spline_coefficients(x: Any, y: Any) -> Any:
    """Pieces (c3, c2, c1, c0) of the not-a-knot cubic spline through (x, y) on a uniform grid.

    The arithmetic of ``scipy.interpolate.CubicSpline(x, y).c.T`` (a tridiagonal system for
    the slopes, then the Hermite coefficients), bit for bit, without importing
    scipy.interpolate (it pulls in scipy.optimize and scipy.spatial, a fifth of a second at the
    start of ``llm-monitor power``) or scipy.linalg. Needs at least four points.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    dx = np.diff(x)
    slope = np.diff(y) / dx
    # Not-a-knot ends: the third derivative is continuous across the second and the last but
    # one knot; the rows between match the second derivatives.
    d0, d1 = x[2] - x[0], x[-1] - x[-3]
    lower = np.append(dx[1:], d1)
    main = np.concatenate(([dx[1]], 2 * (dx[:-1] + dx[1:]), [dx[-2]]))
    upper = np.append(d0, dx[:-1])
    rhs = np.empty(x.size)
    rhs[0] = ((dx[0] + 2 * d0) * dx[1] * slope[0] + dx[0] ** 2 * slope[1]) / d0
    rhs[1:-1] = 3 * (dx[1:] * slope[:-1] + dx[:-1] * slope[1:])
    rhs[-1] = (dx[-1] ** 2 * slope[-2] + (2 * d1 + dx[-1]) * dx[-2] * slope[-1]) / d1
    s = _solve_tridiagonal(lower, main, upper, rhs)
    t = (s[:-1] + s[1:] - 2 * slope) / dx
    return np.stack((t / dx, (slope - s[:-1]) / dx - t, s[:-1], y[:-1]), axis=1)


def _solve_tridiagonal(lower: Any, main: Any, upper: Any, rhs: Any) -> Any:
    """Solve a tridiagonal system by elimination without row interchanges.

    The operations, in their order, of LAPACK's gtsv (CubicSpline's solver) where it needs no
    interchange: where every pivot is at least as large as the entry below it, as on the
    spline's uniform grid. A system that would need an interchange raises ``ValueError``.
    """
    sub, diag, sup, sol = lower.tolist(), main.tolist(), upper.tolist(), rhs.tolist()
    n = len(diag)
    for i in range(n - 1):
        if diag[i] == 0.0 or abs(diag[i]) < abs(sub[i]):
            raise ValueError("the tridiagonal system needs row interchanges")
        fact = sub[i] / diag[i]
        diag[i + 1] -= fact * sup[i]
        sol[i + 1] -= fact * sol[i]
    sol[-1] /= diag[-1]
    for i in range(n - 2, -1, -1):
        sol[i] = (sol[i] - sup[i] * sol[i + 1]) / diag[i]
    return np.array(sol)


class _BoundaryTable:
    """log u(e^t) for t ∈ [t_min, _T_MAX] as cubic-spline pieces on a uniform grid."""

    def __init__(self, construction: str, thr: float, v_opt: float, alpha_opt: float,
                 rule: str = "mean") -> None:
        def top(v: Any) -> Any:  # log E at s = v, the largest s the boundary may take
            return _log_e_rule(v, v, construction, v_opt, alpha_opt, rule)

        # V_min: below it even s = V does not reach the threshold (u = ∞ there).
        lo, hi = math.log(1e-12), _T_MAX
        for _ in range(64):  # enough to reach adjacent floats on [log 1e-12, log 1e12]
            mid = 0.5 * (lo + hi)
            if float(top(np.array(math.exp(mid)))) >= thr:
                hi = mid
            else:
                lo = mid
        self.t_min = hi
        count = max(math.ceil((_T_MAX - hi) / _GRID_STEP), 8)
        t = np.linspace(hi, _T_MAX, count + 1)
        u = _boundary_s(np.exp(t), thr, construction, v_opt, alpha_opt, rule)
        u[0] = math.exp(t[0])  # at V_min the boundary is V itself
        self.step = float(t[1] - t[0])
        self.last = count - 1
        self.coef = _spline_coefficients(t, np.log(u))  # (pieces, 4): c3, c2, c1, c0
        # One contiguous array per power: each read gathers from one, not a row of four.
        self._c3, self._c2, self._c1, self._c0 = (np.ascontiguousarray(c) for c in self.coef.T)

    def log_u(self, t: Any) -> tuple[Any, Any]:
        """log u and d log u / dt at t (t clipped to the table)."""
        x = (np.clip(t, self.t_min, _T_MAX) - self.t_min) / self.step
        k = np.clip(x.astype(np.int64), 0, self.last)
        f = (x - k) * self.step
        c3, c2, c1, c0 = self._c3[k], self._c2[k], self._c1[k], self._c0[k]
        return ((c3 * f + c2) * f + c1) * f + c0, (3.0 * c3 * f + 2.0 * c2) * f + c1


_TABLES: dict[tuple[str, float, float, float, str], _BoundaryTable] = {}


def _table(construction: str, thr: float, v_opt: float, alpha_opt: float, rule: str = "mean"
           ) -> _BoundaryTable:
    key = (construction, thr, v_opt, alpha_opt, rule)
    tab = _TABLES.get(key)
    if tab is None:
        tab = _TABLES[key] = _BoundaryTable(construction, thr, v_opt, alpha_opt, rule)
    return tab


def n_star_anytime(
    delta: ArrayLike,
    sigma2: ArrayLike,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    construction: Literal["mcnemar", "bounded"] = "mcnemar",
    rule: Rule = "side",
    v_opt: float = V_OPT,
    alpha_opt: float = ALPHA_OPT,
) -> Any:
    """Anytime required size N*_AV: the smallest N by which the rule has decided with
    probability 1 − β under (δ, σ_D²).

    ``rule="side"`` (default) is the monitor's decision: one of the one-sided e-processes
    reaches 2/α (the live core passes α = γ_p, the pair's share of the board's α);
    ``rule="mean"`` is E = (E₊ + E₋)/2 ≥ 1/α, a single pair watched alone at level α.

    Normal approximation: S_N ~ N(Nδ, Nσ²) and V_N ≈ N(σ² + δ²) (for 0/1 scores σ² + δ² is
    the discordance rate); the rule has decided when |S_N| ≥ u(V_N), u the mixture's boundary
    at the rule's threshold. S is treated as a Brownian motion and the boundary near N as its
    tangent line, whose first-passage probability by N has a closed form
    (:func:`_crossing_probability`): N*_AV is where it reaches 1 − β. Being above the boundary
    at N alone (N|δ| − z_{1−β}σ√N = u(N(σ² + δ²))) ignores the paths that crossed earlier and
    fell back, and overstates the size by 3–19 % (most at thresholds near 1/α); with the
    first passage, the 80 % point of simulated crossing times of the monitor's rule is
    matched within ±3 % over gaps of 2–20 points, ρ ∈ [0, 0.8] and boards planned for 2–64
    models (tests/statistical/test_live_power.py). Unrounded; ``inf`` where δ = 0; N is
    searched in [1, 1e12]. The boundary is tabulated once per (construction, rule, α,
    tuning) on first use.

    Examples
    --------
    >>> from monitor.stats.power import sigma_d2
    >>> n_av = float(n_star_anytime(0.05, sigma_d2(0.65, 0.60, 0.30)))
    >>> 1500 < n_av < 2500
    True
    >>> bool(n_star_anytime(0.05, sigma_d2(0.65, 0.60, 0.30), alpha=0.05 / 992) > 2 * n_av)
    True
    """
    alpha, d_in, s_in = _check_n_star_args(delta, sigma2, alpha, power, construction, rule)
    thr = _rule_threshold(alpha, rule)
    tab = _table(construction, thr, v_opt, alpha_opt, rule)
    shape = d_in.shape
    d_flat, s_flat = d_in.ravel(), s_in.ravel()
    out = np.full(d_flat.shape, math.inf)

    def solve(at: slice) -> None:
        out[at] = _n_star_flat(d_flat[at], s_flat[at], tab, alpha=alpha, power=power,
                               construction=construction, rule=rule, v_opt=v_opt,
                               alpha_opt=alpha_opt)

    each_chunk(solve, out.size, _CHUNK)
    res_out: Any = out.reshape(shape)
    return float(res_out) if res_out.ndim == 0 else res_out


def _n_star_flat(d_all: Any, s_all: Any, tab: _BoundaryTable, *, alpha: float, power: float,
                 construction: Literal["mcnemar", "bounded"], rule: Rule, v_opt: float,
                 alpha_opt: float) -> Any:
    """:func:`n_star_anytime` of flat arrays (δ, σ²) on the boundary table ``tab``."""
    out = np.full(d_all.shape, math.inf)
    live = d_all > 0
    m2_all = s_all + d_all * d_all
    # The table covers V ≤ 1e12; larger σ² + δ² (not attainable for scores in [0, 1]) and
    # anything the iteration below cannot settle go to the exact bisection.
    exact = live & (m2_all > 1.0)
    todo = np.flatnonzero(live & ~exact)
    if todo.size:
        d = d_all[todo]
        m2 = m2_all[todo]
        zb = float(ndtri(power))
        big_a = d / m2
        big_b = zb * np.sqrt(s_all[todo] / m2)
        log_m2 = np.log(m2)

        def g(t: Any, big_a: Any, big_b: Any) -> tuple[Any, Any]:
            # gap(N)/√V at V = e^t (N = V/m2): A e^{t/2} − B − u(V)/√V, −∞ below V_min.
            lu, dlu = tab.log_u(t)
            h = np.exp(lu - 0.5 * t)
            grow = big_a * np.exp(0.5 * t)
            val = np.where(t >= tab.t_min, grow - big_b - h, -np.inf)
            return val, 0.5 * grow - h * (dlu - 0.5)

        t_lo = np.maximum(log_m2, tab.t_min)
        t_hi = log_m2 + math.log(1e12)
        # Where the point solve ends: its root, t_hi where even N = 1e12 falls short, t_lo
        # where the boundary is already met at the smallest N searched (N = 1, or V_min/m2
        # when V_min exceeds m2 and the boundary is first defined above it).
        t_end = t_hi.copy()
        g_lo, _ = g(t_lo, big_a, big_b)
        g_hi, _ = g(t_hi, big_a, big_b)
        first = (t_hi >= tab.t_min) & (g_lo >= 0)
        t_end[first] = t_lo[first]
        solve = (t_hi >= tab.t_min) & (g_lo < 0) & (g_hi >= 0)
        lo, hi = t_lo[solve], t_hi[solve]
        a_s, b_s = big_a[solve], big_b[solve]
        # Start where A e^{t/2} = B + u/√V with u/√V read at the top of the bracket.
        lu_hi, _ = tab.log_u(hi)
        start = (b_s + np.exp(lu_hi - 0.5 * hi)) / a_s
        t = np.clip(2.0 * np.log(np.maximum(start, 1e-300)), lo, hi)
        # An element that has converged keeps its value while the others iterate: each pair's
        # N*_AV is the same whichever pairs it is computed beside (live = a restart = offline).
        # Only the elements still iterating are evaluated (``at``, indices into the solve).
        at = np.arange(t.size)
        t_at = t
        for _ in range(_NEWTON_STEPS):
            val, der = g(t_at, a_s, b_s)
            above = val >= 0
            hi = np.where(above, t_at, hi)
            lo = np.where(above, lo, t_at)
            with np.errstate(divide="ignore", invalid="ignore"):
                nxt = t_at - val / der
            bad = ~np.isfinite(nxt) | (nxt <= lo) | (nxt >= hi)
            nxt = np.where(bad, 0.5 * (lo + hi), nxt)
            going = ~(np.abs(nxt - t_at) <= 1e-13 * np.maximum(1.0, np.abs(t_at)))
            t[at] = nxt
            at, t_at, lo, hi, a_s, b_s = (x[going] for x in (at, nxt, lo, hi, a_s, b_s))
            if not at.size:
                break
        t_end[solve] = t
        sub = np.flatnonzero(solve)
        exact[todo[sub[at]]] = True

        # The first passage: crossing by N is at least as likely as being above the boundary
        # at N, so its solution lies in [t_lo, t_end]; regula falsi in log V on the table.
        ref = np.flatnonzero((t_hi >= tab.t_min) & ~first)
        d_r, s2_r, lm_r = d[ref], s_all[todo][ref], log_m2[ref]

        def shortfall(t_: Any, at: Any = slice(None)) -> Any:  # P(crossed by N) − (1 − β)
            lu, dlu = tab.log_u(t_)
            b = np.where(t_ >= tab.t_min, np.exp(lu), np.inf)
            return _crossing_probability(np.exp(t_ - lm_r[at]), d_r[at], s2_r[at], b,
                                         dlu) - power

        lo_r, hi_r = t_lo[ref], t_end[ref]
        f_lo, f_hi = shortfall(lo_r), shortfall(hi_r)
        at_lo, at_hi = f_lo >= 0, f_hi >= 0
        if power >= 0.5:
            found = _falsi(shortfall, lo_r, hi_r, f_lo, f_hi, steps=_PASSAGE_STEPS)
        else:  # the shortfall may change sign more than once below 1/2: bisection, as ever
            _, found = _bisect(lambda t_: shortfall(t_) >= 0, lo_r.copy(), hi_r.copy(),
                               steps=_PASSAGE_STEPS)
        t_end[ref] = np.where(at_lo, lo_r, np.where(at_hi, found, hi_r))
        res = np.exp(t_end - log_m2)
        res[(t_hi < tab.t_min)] = 1e12  # the boundary is never reached by N = 1e12
        out[todo] = res
    if np.any(exact):
        out[exact] = _n_star_anytime_exact(
            d_all[exact], s_all[exact], alpha=alpha, power=power, construction=construction,
            rule=rule, v_opt=v_opt, alpha_opt=alpha_opt,
        )
    return out
