"""Anytime decisions: each pair's e-process followed item by item, decided at its first crossing.

One procedure for the life of a board, whatever models arrive and however often anyone
reads it (docs/anytime.md, "One guarantee for the life of the board"):

* **Shares of α fixed at birth.** Pairs are numbered p = 1, 2, … in the order they come to
  exist (the later model's arrival, then the earlier model's). Pair p gets the level
  γ_p = α / (P · 2^(2b+1)) with b = ⌊log₂(1 + (p − 1)/P)⌋ and P = M₀(M₀ − 1)/2 for a
  planned board of M₀ models: the first P pairs share α/2, the next 2P pairs α/4, the next
  4P pairs α/8, … so Σ_p γ_p = α over a board of any size. This is online Bonferroni: the
  chance that any pair is ever declared resolved while its two models are equal, or in the
  wrong direction, is at most Σ γ_p = α.
* **A decision is a stopping time.** A pair is resolved the first time one of its two
  one-sided e-processes reaches 2/γ_p — E₊ ("the first model better", a supermartingale
  whenever it is not) or E₋ (the mirror) — in that direction (Ville's inequality for each, at
  γ_p/2), and stays resolved: the e-values dipping later change nothing. The two-sided value
  shown is E = (E₊ + E₋)/2, so a decision has E ≥ 1/γ_p. This covers false decisions and
  wrong directions alike, also when a pair's e-process has several segments.
* **The test is chosen per pair, once.** At the pair's first paired item: the exact McNemar
  mixture when both scores are 0/1, the bounded gamma-exponential mixture otherwise. If a
  McNemar pair later meets a score other than 0/1, its e-value is frozen there and continued
  by the bounded mixture on the items that follow (the product of two e-processes, the
  second started at a stopping time, is again an e-process); other models' scores never
  change it. Excluding items (leak flags) starts a new segment the same way: the evidence
  seen so far stays frozen, the excluded items never enter what follows.

:func:`advance` is the one implementation of the sequential part, called by the live core on
each batch's new paired items and by ``report --anytime``'s replay on the table's rows, so
live and offline take the same decisions on the same order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats import eprocess as ep

_LOG2 = float(np.log(2.0))

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: e-process kinds of a pair (``PairPaths.kind``).
UNSET, MCNEMAR, BOUNDED = 0, 1, 2

__all__ = [
    "BOUNDED",
    "MCNEMAR",
    "UNSET",
    "PairPaths",
    "advance",
    "log_e_paths",
    "log_e_sides",
    "log_threshold",
    "log_threshold_grid",
    "pair_number",
    "pair_share",
    "planned_pairs",
    "share_grid",
]


def planned_pairs(models: int) -> int:
    """P = M₀(M₀ − 1)/2 pairs of a planned board of ``models`` models (at least 1)."""
    if models < 2:
        raise ValueError(f"`planned_models` must be at least 2, got {models}")
    return models * (models - 1) // 2


def pair_number(lo: ArrayLike, hi: ArrayLike) -> IntArray:
    """1-based birth order of the pair of model columns ``lo`` < ``hi`` (columns numbered in
    arrival order): all pairs of model ``hi`` with earlier models come after those of ``hi − 1``.

    Examples
    --------
    >>> pair_number([0, 0, 1, 0], [1, 2, 2, 3]).tolist()
    [1, 2, 3, 4]
    """
    lo_, hi_ = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    return hi_ * (hi_ - 1) // 2 + lo_ + 1


@functools.lru_cache(maxsize=16)
def share_grid(size: int, *, alpha: float, planned_models: int) -> FloatArray:
    """γ of every pair of a (size × size) grid of model columns numbered by arrival, flat
    a · size + b (symmetric; the diagonal is meaningless). Cached: read-only."""
    a, b = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    number = pair_number(np.minimum(a, b), np.maximum(a, b)).ravel()
    grid = pair_share(number, alpha=alpha, planned=planned_pairs(planned_models))
    grid.setflags(write=False)
    return grid


@functools.lru_cache(maxsize=16)
def log_threshold_grid(size: int, *, alpha: float, planned_models: int) -> FloatArray:
    """log(1/γ) of :func:`share_grid` (cached, read-only)."""
    grid = log_threshold(share_grid(size, alpha=alpha, planned_models=planned_models))
    grid.setflags(write=False)
    return grid


def pair_share(p: ArrayLike, *, alpha: float, planned: int) -> FloatArray:
    """γ_p: pair p's fixed share of α (see the module docstring); Σ_p γ_p = α.

    Examples
    --------
    >>> pair_share([1, 10, 11, 30, 31], alpha=0.05, planned=10).tolist()
    [0.0025, 0.0025, 0.000625, 0.000625, 0.00015625]
    """
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    pp = np.asarray(p, dtype=np.float64)
    if np.any(pp < 1):
        raise ValueError("pair numbers start at 1")
    block = np.floor(np.log2(1.0 + (pp - 1.0) / planned))
    # Guard the floor against log2 rounding at block edges: p − 1 < P (2^(b+1) − 1) always.
    block = np.where(pp - 1.0 >= planned * (2.0 ** (block + 1.0) - 1.0), block + 1.0, block)
    block = np.where(pp - 1.0 < planned * (2.0**block - 1.0), block - 1.0, block)
    return np.asarray(alpha / (planned * 2.0 ** (2.0 * block + 1.0)), dtype=np.float64)


@dataclass
class PairPaths:
    """Per-pair sequential state, one entry per pair (arrays owned and grown by the caller).

    A pair's e-process is a product of segments: the current one runs the mixture ``kind``
    (UNSET until the first paired item, then MCNEMAR or BOUNDED) on the items since its start
    — sums n − ``start_n``, S − ``start_s``, V − ``start_v`` — and the earlier ones are
    frozen into ``start_log_plus`` and ``start_log_minus``: the two one-sided e-processes
    (E₊ for "the first model better", E₋ for the second), each a product of its segments'
    one-sided halves, with E = (E₊ + E₋)/2 the two-sided value shown. A new segment starts, at a stopping time, when a McNemar
    pair meets a score other than 0/1 (it continues with the bounded mixture) and when items
    are excluded from the pair's sums (the evidence already seen stays in the frozen part;
    the removed items never enter the new segment). ``decided`` is +1 (the first model of the
    pair resolved better), −1 (the second) or 0; ``decided_n`` and ``decided_log_e`` record
    the paired items and log E_n at the decision.
    """

    kind: NDArray[np.int8]
    start_n: FloatArray
    start_s: FloatArray
    start_v: FloatArray
    start_log_plus: FloatArray
    start_log_minus: FloatArray
    decided: NDArray[np.int8]
    decided_n: FloatArray
    decided_log_e: FloatArray

    @classmethod
    def empty(cls, size: int) -> PairPaths:
        return cls(kind=np.zeros(size, np.int8), start_n=np.zeros(size),
                   start_s=np.zeros(size), start_v=np.zeros(size),
                   start_log_plus=np.zeros(size), start_log_minus=np.zeros(size),
                   decided=np.zeros(size, np.int8),
                   decided_n=np.zeros(size), decided_log_e=np.zeros(size))

    def take(self, idx: ArrayLike) -> PairPaths:
        return PairPaths(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})

    def seen_from(self, idx: ArrayLike, swap: ArrayLike) -> PairPaths:
        """The states of pairs ``idx``, seen from the second model where ``swap``: S at the
        segment start and the decision change sign, and E₊ and E₋ trade places."""
        out = self.take(idx)
        flip = np.asarray(swap, dtype=bool)
        sign = np.where(flip, -1, 1)
        out.start_s = out.start_s * sign
        out.decided = (out.decided * sign).astype(np.int8)
        out.start_log_plus, out.start_log_minus = (
            np.where(flip, out.start_log_minus, out.start_log_plus),
            np.where(flip, out.start_log_plus, out.start_log_minus))
        return out

    def restart(self, idx: IntArray, sides_now: tuple[FloatArray, FloatArray],
                n: FloatArray, s: FloatArray, v: FloatArray) -> None:
        """Start a new segment of pairs ``idx`` at (n, S, V), freezing the one-sided
        e-values ``sides_now`` = (log E₊, log E₋) reached so far."""
        self.start_log_plus[idx] = sides_now[0]
        self.start_log_minus[idx] = sides_now[1]
        self.start_n[idx] = n
        self.start_s[idx] = s
        self.start_v[idx] = v


def log_e_sides(kind: ArrayLike, n: ArrayLike, s: ArrayLike, v: ArrayLike, *,
                start_n: ArrayLike, start_s: ArrayLike, start_v: ArrayLike,
                start_log_plus: ArrayLike, start_log_minus: ArrayLike
                ) -> tuple[FloatArray, FloatArray]:
    """(log E₊, log E₋) of pairs in the states (n, S, V): the frozen segments times the
    current one's one-sided halves. The current segment's items are all 0/1 when it is
    McNemar's, so n10 = (ΔV + ΔS)/2 and n01 = (ΔV − ΔS)/2 on its sums."""
    k = np.asarray(kind)
    dn = np.asarray(n, dtype=float) - np.asarray(start_n, dtype=float)
    ds = np.asarray(s, dtype=float) - np.asarray(start_s, dtype=float)
    dv = np.maximum(np.asarray(v, dtype=float) - np.asarray(start_v, dtype=float), 0.0)
    dn, ds, dv, k = np.broadcast_arrays(dn, ds, dv, k)
    plus = np.zeros(dn.shape)
    minus = np.zeros(dn.shape)
    mc = (k == MCNEMAR) & (dn > 0)
    if mc.any():
        p, m = ep.log_e_mcnemar_sides(np.maximum((dv[mc] + ds[mc]) / 2.0, 0.0),
                                      np.maximum((dv[mc] - ds[mc]) / 2.0, 0.0))
        plus[mc], minus[mc] = p, m
    bounded = (k == BOUNDED) & (dn > 0)
    if bounded.any():
        p, m = ep.log_e_bounded_sides(dn[bounded], ds[bounded], dv[bounded])
        plus[bounded], minus[bounded] = p, m
    return (np.asarray(start_log_plus, dtype=float) + plus,
            np.asarray(start_log_minus, dtype=float) + minus)


def log_e_paths(kind: ArrayLike, n: ArrayLike, s: ArrayLike, v: ArrayLike, *,
                start_n: ArrayLike, start_s: ArrayLike, start_v: ArrayLike,
                start_log_plus: ArrayLike, start_log_minus: ArrayLike) -> FloatArray:
    """The two-sided log E_n = log((E₊ + E₋)/2) of :func:`log_e_sides`."""
    plus, minus = log_e_sides(kind, n, s, v, start_n=start_n, start_s=start_s,
                              start_v=start_v, start_log_plus=start_log_plus,
                              start_log_minus=start_log_minus)
    return np.asarray(np.logaddexp(plus, minus) - _LOG2, dtype=np.float64)


def advance(
    paths: PairPaths,
    pair: IntArray,
    d: FloatArray,
    nonbinary: NDArray[np.bool_],
    *,
    base_n: FloatArray,
    base_s: FloatArray,
    base_v: FloatArray,
    log_threshold: FloatArray,
) -> IntArray:
    """Follow the pairs along new paired items, in stream order; update ``paths`` in place.

    Parameters
    ----------
    paths : PairPaths
        State of every pair (indexed by the values of ``pair``).
    pair : int array
        Pair of each new paired item, items of one pair in stream order (any interleaving).
    d : float array
        D = x_first − x_second of each item.
    nonbinary : bool array
        The item has a score other than 0 or 1.
    base_n, base_s, base_v : float arrays, indexed by pair
        n, S, V of each pair before these items.
    log_threshold : float array, indexed by pair
        log(1/γ_p) of each pair.

    Returns
    -------
    The pairs decided by these items (their decision is recorded in ``paths``).
    """
    if pair.size == 0:
        return np.zeros(0, dtype=np.int64)
    # A decided pair's items matter only where they start a new segment (the e-value shown
    # for it); everything else about it is settled.
    switching = np.unique(pair[(paths.kind[pair] == MCNEMAR) & nonbinary])
    live = (paths.decided[pair] == 0) | np.isin(pair, switching)
    if not live.all():
        pair, d, nonbinary = pair[live], d[live], nonbinary[live]
        if pair.size == 0:
            return np.zeros(0, dtype=np.int64)
    if pair.size > 1 and np.all(pair[1:] >= pair[:-1]):
        g, dd, nb = pair, d, nonbinary  # already grouped by pair (a replay): no sort
    else:
        order = np.argsort(pair, kind="stable")
        g, dd, nb = pair[order], d[order], nonbinary[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    groups = g[starts]
    sizes = np.diff(np.r_[starts, g.size])
    first_of = np.repeat(starts, sizes)
    pos = np.arange(g.size) - first_of  # 0-based position inside the pair's new items

    # The kind is fixed at the pair's first paired item.
    unset = paths.kind[groups] == UNSET
    paths.kind[groups[unset]] = np.where(nb[starts[unset]], BOUNDED, MCNEMAR).astype(np.int8)

    cs = np.cumsum(dd)
    cv = np.cumsum(dd * dd)
    before_s = np.repeat(np.r_[0.0, cs][starts], sizes)
    before_v = np.repeat(np.r_[0.0, cv][starts], sizes)
    n = base_n[g] + pos + 1.0
    s = base_s[g] + cs - before_s
    v = base_v[g] + cv - before_v

    # A McNemar pair meeting its first score other than 0/1 freezes its e-value just before
    # that item and continues with the bounded mixture: items from there on read the new
    # segment.
    kind = paths.kind[g]
    seg_n, seg_s, seg_v = paths.start_n[g], paths.start_s[g], paths.start_v[g]
    seg_lp, seg_lm = paths.start_log_plus[g], paths.start_log_minus[g]
    hit_mc = (kind == MCNEMAR) & nb
    if hit_mc.any():
        hit = np.flatnonzero(hit_mc)
        at = hit[np.r_[True, g[hit][1:] != g[hit][:-1]]]  # first such item of each pair
        prev_n, prev_s, prev_v = n[at] - 1.0, s[at] - dd[at], v[at] - dd[at] * dd[at]
        pairs_hit = g[at]
        frozen = log_e_sides(np.full(at.size, MCNEMAR), prev_n, prev_s, prev_v,
                             start_n=paths.start_n[pairs_hit], start_s=paths.start_s[pairs_hit],
                             start_v=paths.start_v[pairs_hit],
                             start_log_plus=paths.start_log_plus[pairs_hit],
                             start_log_minus=paths.start_log_minus[pairs_hit])
        paths.restart(pairs_hit, frozen, prev_n, prev_s, prev_v)
        paths.kind[pairs_hit] = BOUNDED
        # items of those pairs at or after the switch read the new segment
        switch_at = np.full(int(g.max()) + 1, np.inf)
        switch_at[pairs_hit] = n[at]
        after = n >= switch_at[g]
        kind = np.where(after, BOUNDED, kind)
        seg_n = np.where(after, paths.start_n[g], seg_n)
        seg_s = np.where(after, paths.start_s[g], seg_s)
        seg_v = np.where(after, paths.start_v[g], seg_v)
        seg_lp = np.where(after, paths.start_log_plus[g], seg_lp)
        seg_lm = np.where(after, paths.start_log_minus[g], seg_lm)

    # Only undecided pairs can cross, and a McNemar segment only moves at discordant items.
    undecided = (paths.decided[g] == 0) & ~((kind == MCNEMAR) & (dd == 0.0))
    if not undecided.any():
        return np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(undecided)
    gs = g[sel]
    plus, minus = log_e_sides(kind[sel], n[sel], s[sel], v[sel], start_n=seg_n[sel],
                              start_s=seg_s[sel], start_v=seg_v[sel],
                              start_log_plus=seg_lp[sel], start_log_minus=seg_lm[sel])
    # Each direction is decided by its own one-sided e-process at level γ/2: E₊ is a
    # supermartingale whenever the first model is not better, E₋ whenever the second is
    # not, so a false or wrong-direction decision has probability ≤ γ — across segments too.
    side_thr = log_threshold[gs] + _LOG2
    up, down = plus >= side_thr, minus >= side_thr
    crossed = up | down
    if not crossed.any():
        return np.zeros(0, dtype=np.int64)
    hit = sel[crossed]
    first = hit[np.r_[True, g[hit][1:] != g[hit][:-1]]]
    at = np.searchsorted(sel, first)
    decided = g[first]
    paths.decided[decided] = np.where(plus[at] >= minus[at], 1, -1).astype(np.int8)
    paths.decided_n[decided] = n[first]
    paths.decided_log_e[decided] = np.logaddexp(plus[at], minus[at]) - _LOG2
    return decided


def log_threshold(share: ArrayLike) -> FloatArray:
    """log(1/γ) of each share γ."""
    return np.asarray(-np.log(np.asarray(share, dtype=float)), dtype=np.float64)
