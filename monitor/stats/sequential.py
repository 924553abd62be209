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
* **Equivalence, the third decision.** With a margin Δ, a pair is *equivalent* (tied within
  Δ) at the first item where its time-uniform confidence sequence at γ_p lies inside
  (−Δ, Δ): the one-sided bounded e-processes against δ ≥ Δ (E₋ centred at +Δ) and against
  δ ≤ −Δ (E₊ centred at −Δ) both reach 2/γ_p, on the items of the pair's current segment.
  Whichever comes first, resolution or equivalence, is the pair's decision and stays. While
  |δ| ≥ Δ the chance of ever declaring equivalence is at most γ_p/2 — and with the
  wrong-direction error of resolution, every error of a pair stays within γ_p.
* **The test is chosen per pair, once.** At the pair's first paired item: the exact McNemar
  mixture when both scores are 0/1, the bounded gamma-exponential mixture otherwise. If a
  McNemar pair later meets a score other than 0/1, its e-value is frozen there and continued
  by the bounded mixture on the items that follow (the product of two e-processes, the
  second started at a stopping time, is again an e-process); other models' scores never
  change it. Excluding items (leak flags) starts a new segment the same way: the evidence
  seen so far stays frozen, the excluded items never enter what follows.

:func:`advance` is the one implementation of the sequential part, called by the live core on
each batch's new paired items and by ``report``'s replay on the table's rows, so
live and offline take the same decisions on the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats import eprocess as ep
from monitor.stats.groups import first_in_run, run_sizes, run_starts, with_zero

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
    "block_share",
    "items_to_decide",
    "log_e_equivalence",
    "log_e_paths",
    "log_e_sides",
    "log_threshold",
    "may_be_equivalent",
    "may_cross",
    "mcnemar_boundary",
    "pair_block",
    "pair_number",
    "pair_share",
    "planned_pairs",
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


def pair_share(p: ArrayLike, *, alpha: float, planned: int) -> FloatArray:
    """γ_p: pair p's fixed share of α (see the module docstring); Σ_p γ_p = α.

    Examples
    --------
    >>> pair_share([1, 10, 11, 30, 31], alpha=0.05, planned=10).tolist()
    [0.0025, 0.0025, 0.000625, 0.000625, 0.00015625]
    """
    return block_share(pair_block(p, planned=planned), alpha=alpha, planned=planned)


def pair_block(p: ArrayLike, *, planned: int) -> FloatArray:
    """b = ⌊log₂(1 + (p − 1)/P)⌋: the block of pair numbers p (as floats)."""
    pp = np.asarray(p, dtype=np.float64)
    if np.any(pp < 1):
        raise ValueError("pair numbers start at 1")
    block = np.floor(np.log2(1.0 + (pp - 1.0) / planned))
    # Guard the floor against log2 rounding at block edges: p − 1 < P (2^(b+1) − 1) always.
    block = np.where(pp - 1.0 >= planned * (2.0 ** (block + 1.0) - 1.0), block + 1.0, block)
    return np.asarray(np.where(pp - 1.0 < planned * (2.0**block - 1.0), block - 1.0, block),
                      dtype=np.float64)


def block_share(block: ArrayLike, *, alpha: float, planned: int) -> FloatArray:
    """γ = α / (P · 2^(2b + 1)) of the pairs in block b."""
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    b = np.asarray(block, dtype=np.float64)
    return np.asarray(alpha / (planned * 2.0 ** (2.0 * b + 1.0)), dtype=np.float64)


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
    pair resolved better), −1 (the second) or 0; ``equivalent`` 1 when the pair was declared
    equivalent instead; ``decided_n`` and ``decided_log_e`` record the paired items and log E_n
    at the decision (for equivalence, the smaller of its two one-sided log e-values).
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
    equivalent: NDArray[np.int8]

    @classmethod
    def empty(cls, size: int) -> PairPaths:
        return cls(kind=np.zeros(size, np.int8), start_n=np.zeros(size),
                   start_s=np.zeros(size), start_v=np.zeros(size),
                   start_log_plus=np.zeros(size), start_log_minus=np.zeros(size),
                   decided=np.zeros(size, np.int8),
                   decided_n=np.zeros(size), decided_log_e=np.zeros(size),
                   equivalent=np.zeros(size, np.int8))

    def open(self, idx: IntArray) -> NDArray[np.bool_]:
        """Pairs neither resolved nor declared equivalent."""
        return (self.decided[idx] == 0) & (self.equivalent[idx] == 0)

    def take(self, idx: ArrayLike) -> PairPaths:
        return PairPaths(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})

    def put(self, idx: ArrayLike, part: PairPaths) -> None:
        """Write ``part`` (as :meth:`take` gave it, since moved on) back at ``idx``."""
        for k in self.__dataclass_fields__:
            getattr(self, k)[idx] = getattr(part, k)

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


def log_e_equivalence(dn: ArrayLike, ds: ArrayLike, dv: ArrayLike, margin: float
                      ) -> tuple[FloatArray, FloatArray]:
    """(log E against δ ≥ Δ, log E against δ ≤ −Δ) on a segment's sums (n, S, V): the bounded
    mixture's E₋ centred at +Δ and E₊ centred at −Δ. Both at least log(2/γ) — the confidence
    sequence at γ inside (−Δ, Δ) — is the equivalence decision.

    Examples
    --------
    >>> a, b = log_e_equivalence(20000, 0.0, 2000.0, 0.02)  # 20,000 tied items, 10 % discordant
    >>> bool(a > np.log(40) and b > np.log(40))
    True
    """
    if not (0.0 < margin < 1.0):
        raise ValueError(f"`margin` must lie in (0, 1), got {margin}")
    n = np.asarray(dn, dtype=float)
    s, v = np.asarray(ds, dtype=float), np.asarray(dv, dtype=float)
    _, below = ep.log_e_bounded_sides(n, s, v, delta=margin)
    above, _ = ep.log_e_bounded_sides(n, s, v, delta=-margin)
    return np.asarray(below, dtype=np.float64), np.asarray(above, dtype=np.float64)


def equivalence_bound(n: FloatArray, s: FloatArray, v: FloatArray, margin: float
                       ) -> tuple[FloatArray, FloatArray]:
    """Upper bounds on the two :func:`log_e_equivalence` values, by arithmetic only: a
    one-sided mixture never exceeds sup over λ ∈ [0, 1) of λs − ψ_E(λ)v ≤ s²/(2v) (or s − v/2
    where s > v, λ = 1), on the centred and scaled sums."""
    out = []
    for centre, sign in ((margin, -1.0), (-margin, 1.0)):
        c = 1.0 - centre if sign < 0 else 1.0 + centre
        sc = sign * (s - n * centre) / c
        vc = np.maximum(v - 2.0 * centre * s + n * centre * centre, 0.0) / (c * c)
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(sc <= 0.0, 0.0,
                             np.where(sc <= vc, sc * sc / (2.0 * np.maximum(vc, 1e-300)),
                                      sc - vc / 2.0))
        out.append(np.asarray(bound, dtype=np.float64))
    return out[0], out[1]


def may_be_equivalent(before: tuple[FloatArray, FloatArray, FloatArray],
                      after: tuple[FloatArray, FloatArray, FloatArray], *, start_n: FloatArray,
                      start_s: FloatArray, start_v: FloatArray, margin: float,
                      log_threshold: FloatArray) -> NDArray[np.bool_]:
    """Whether a pair can have been declared equivalent anywhere between two states of one
    segment, read from the end points (as :func:`may_cross` for resolution). ``False`` is a
    proof that no item of the run decided it.

    Each side's bound (:func:`equivalence_bound`) grows with its centred gap and falls with
    its centred ΣD²; over the run the gap grows by at most (Δn · (1 + Δ) terms …) its share of
    (ΔS' + √(Δn ΔV'))/2 (Cauchy–Schwarz on the centred increments), and ΣD² is at least its
    value at the start.
    """
    side_thr = np.asarray(log_threshold, dtype=np.float64) + _LOG2
    n0, s0, v0 = (np.asarray(x, dtype=np.float64) for x in before)
    n1, s1, v1 = (np.asarray(x, dtype=np.float64) for x in after)
    dn = np.maximum(n1 - n0, 0.0)
    ok = np.ones(n0.shape, dtype=bool)
    for centre, sign in ((margin, -1.0), (-margin, 1.0)):
        # centred increments ξ = sign · (D − centre): their sum and sum of squares over the run
        d_sc = sign * ((s1 - s0) - dn * centre)
        d_vc = np.maximum((v1 - v0) - 2.0 * centre * (s1 - s0) + dn * centre * centre, 0.0)
        up = (d_sc + np.sqrt(dn * d_vc)) / 2.0  # Σ max(ξ, 0) at most
        seg_n = np.maximum(n0 - start_n, 0.0)
        seg_s = sign * ((s0 - start_s) - seg_n * centre) + np.maximum(up, 0.0)
        seg_v = np.maximum((v0 - start_v) - 2.0 * centre * (s0 - start_s)
                           + seg_n * centre * centre, 0.0)
        c = 1.0 - centre if sign < 0 else 1.0 + centre
        sc, vc = seg_s / c, seg_v / (c * c)
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.where(sc <= 0.0, 0.0,
                             np.where(sc <= vc, sc * sc / (2.0 * np.maximum(vc, 1e-300)),
                                      sc - vc / 2.0))
        ok &= bound >= side_thr
    return ok


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
    margin: float | None = None,
    equivalence: NDArray[np.bool_] | None = None,
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
    margin : float, optional
        Δ of the equivalence decision (None: no equivalence).
    equivalence : bool array, indexed by pair, optional
        The pairs these items may declare equivalent (a screen's proof that the others
        cannot be, :func:`may_be_equivalent`; default: every pair): only those are read for it.

    Returns
    -------
    The pairs decided by these items, resolved or equivalent (their decision is recorded in
    ``paths``).
    """
    if pair.size == 0:
        return np.zeros(0, dtype=np.int64)
    # A decided pair's items matter only where they start a new segment (the e-value shown
    # for it); everything else about it is settled.
    switching = np.unique(pair[(paths.kind[pair] == MCNEMAR) & nonbinary])
    live = paths.open(pair) | np.isin(pair, switching)
    if not live.all():
        pair, d, nonbinary = pair[live], d[live], nonbinary[live]
        if pair.size == 0:
            return np.zeros(0, dtype=np.int64)
    if pair.size > 1 and np.all(pair[1:] >= pair[:-1]):
        g, dd, nb = pair, d, nonbinary  # already grouped by pair (a replay): no sort
    else:
        order = np.argsort(pair, kind="stable")
        g, dd, nb = pair[order], d[order], nonbinary[order]
    starts = run_starts(g)
    groups = g[starts]
    sizes = run_sizes(starts, g.size)
    first_of = np.repeat(starts, sizes)
    pos = np.arange(g.size) - first_of  # 0-based position inside the pair's new items

    # The kind is fixed at the pair's first paired item.
    unset = paths.kind[groups] == UNSET
    paths.kind[groups[unset]] = np.where(nb[starts[unset]], BOUNDED, MCNEMAR).astype(np.int8)

    cs = np.cumsum(dd)
    cv = np.cumsum(dd * dd)
    before_s = np.repeat(with_zero(cs)[starts], sizes)
    before_v = np.repeat(with_zero(cv)[starts], sizes)
    n = base_n[g] + pos + 1.0
    s = base_s[g] + cs - before_s
    v = base_v[g] + cv - before_v

    # A McNemar pair meeting its first score other than 0/1 freezes its e-value just before
    # that item and continues with the bounded mixture: items from there on read the new
    # segment. Only undecided pairs can cross, and a McNemar segment only moves at discordant
    # items: the state is read at those items only.
    kind = paths.kind[g]
    hit_mc = (kind == MCNEMAR) & nb
    if hit_mc.any():
        hit = np.flatnonzero(hit_mc)
        at = hit[first_in_run(g[hit])]  # first such item of each pair
        prev_n, prev_s, prev_v = n[at] - 1.0, s[at] - dd[at], v[at] - dd[at] * dd[at]
        pairs_hit = g[at]
        frozen = log_e_sides(np.full(at.size, MCNEMAR), prev_n, prev_s, prev_v,
                             start_n=paths.start_n[pairs_hit], start_s=paths.start_s[pairs_hit],
                             start_v=paths.start_v[pairs_hit],
                             start_log_plus=paths.start_log_plus[pairs_hit],
                             start_log_minus=paths.start_log_minus[pairs_hit])
        seg_before = [paths.start_n[g], paths.start_s[g], paths.start_v[g],
                      paths.start_log_plus[g], paths.start_log_minus[g]]
        paths.restart(pairs_hit, frozen, prev_n, prev_s, prev_v)
        paths.kind[pairs_hit] = BOUNDED
        # items of those pairs at or after the switch read the new segment
        switch_at = np.full(int(g.max()) + 1, np.inf)
        switch_at[pairs_hit] = n[at]
        after = n >= switch_at[g]
        kind = np.where(after, BOUNDED, kind)
        # each item's segment start (n, S, V): the new segment's from the switch on
        item_start = [np.where(after, now[g], was) for now, was in zip(
            (paths.start_n, paths.start_s, paths.start_v), seg_before[:3], strict=True)]
        sel = np.flatnonzero(paths.open(g) & ~((kind == MCNEMAR) & (dd == 0.0)))
        gs = g[sel]
        seg = [np.where(after[sel], now[gs], was[sel]) for now, was in zip(
            (paths.start_n, paths.start_s, paths.start_v, paths.start_log_plus,
             paths.start_log_minus), seg_before, strict=True)]
    else:
        item_start = [paths.start_n[g], paths.start_s[g], paths.start_v[g]]
        sel = np.flatnonzero(~((kind == MCNEMAR) & (dd == 0.0)))
        sel = sel[paths.open(g[sel])]
        gs = g[sel]
        seg = [paths.start_n[gs], paths.start_s[gs], paths.start_v[gs],
               paths.start_log_plus[gs], paths.start_log_minus[gs]]
    # Equivalence: the first item of each open pair whose confidence sequence at γ_p lies
    # inside (−Δ, Δ), every item counting (a tie moves the centred e-processes too).
    eq_first = np.full(int(g.max()) + 1, np.iinfo(np.int64).max)
    eq_log_e = np.zeros(int(g.max()) + 1)
    if margin is not None:
        cand = np.flatnonzero(paths.open(g) if equivalence is None
                              else paths.open(g) & equivalence[g])
        if cand.size:
            dn = n[cand] - item_start[0][cand]
            ds = s[cand] - item_start[1][cand]
            dv = np.maximum(v[cand] - item_start[2][cand], 0.0)
            thr_eq = log_threshold[g[cand]] + _LOG2
            b1, b2 = equivalence_bound(dn, ds, dv, margin)
            maybe = np.flatnonzero((b1 >= thr_eq) & (b2 >= thr_eq))
            if maybe.size:
                e1, e2 = log_e_equivalence(dn[maybe], ds[maybe], dv[maybe], margin)
                hit = maybe[(e1 >= thr_eq[maybe]) & (e2 >= thr_eq[maybe])]
                if hit.size:
                    at = cand[hit]  # positions in g, in stream order within each pair
                    firsts = at[first_in_run(g[at])]
                    eq_first[g[firsts]] = firsts
                    where = np.searchsorted(cand[maybe], firsts)
                    eq_log_e[g[firsts]] = np.minimum(e1, e2)[where]
    if sel.size == 0 and not np.any(eq_first < np.iinfo(np.int64).max):
        return np.zeros(0, dtype=np.int64)
    # Each direction is decided by its own one-sided e-process at level γ/2: E₊ is a
    # supermartingale whenever the first model is not better, E₋ whenever the second is
    # not, so a false or wrong-direction decision has probability ≤ γ — across segments too.
    side_thr = log_threshold[gs] + _LOG2
    ks, ns, ss, vs = kind[sel], n[sel], s[sel], v[sel]
    crossed = _crossed(ks, ns, ss, vs, *seg, side_thr) if sel.size else np.zeros(0, bool)
    hit = np.flatnonzero(crossed)
    first = hit[first_in_run(gs[hit])] if hit.size else hit  # in sel
    # A resolution comes first unless the pair was declared equivalent at an earlier item (at
    # the same item, the resolution: it says more).
    first = first[sel[first] <= eq_first[gs[first]]]
    plus, minus = log_e_sides(ks[first], ns[first], ss[first], vs[first],
                              start_n=seg[0][first], start_s=seg[1][first],
                              start_v=seg[2][first], start_log_plus=seg[3][first],
                              start_log_minus=seg[4][first])
    decided = gs[first]
    paths.decided[decided] = np.where(plus >= minus, 1, -1).astype(np.int8)
    paths.decided_n[decided] = ns[first]
    paths.decided_log_e[decided] = np.logaddexp(plus, minus) - _LOG2
    equal = np.flatnonzero(eq_first < np.iinfo(np.int64).max)
    equal = equal[paths.decided[equal] == 0]
    if equal.size:
        paths.equivalent[equal] = 1
        paths.decided_n[equal] = n[eq_first[equal]]
        paths.decided_log_e[equal] = eq_log_e[equal]
        decided = np.concatenate([decided, equal])
    return decided


def _crossed(kind: NDArray[np.int8], n: FloatArray, s: FloatArray, v: FloatArray,
             *segment_and_threshold: FloatArray) -> NDArray[np.bool_]:
    """log E₊ ≥ ``side_thr`` or log E₋ ≥ ``side_thr`` at each state.

    A McNemar segment with nothing frozen before it (the common case) is read from the
    crossing boundary of its level (:func:`mcnemar_boundary`): a table lookup per item instead
    of two special functions; the other states evaluate :func:`log_e_sides`.
    """
    seg_n, seg_s, seg_v, seg_lp, seg_lm, side_thr = segment_and_threshold
    out = np.zeros(n.size, dtype=bool)
    table = (kind == MCNEMAR) & (seg_lp == 0.0) & (seg_lm == 0.0)
    if table.any():
        idx = np.flatnonzero(table)
        ds, dv = s[idx] - seg_s[idx], np.maximum(v[idx] - seg_v[idx], 0.0)
        n10 = np.rint(np.maximum((dv + ds) / 2.0, 0.0)).astype(np.int64)
        n01 = np.rint(np.maximum((dv - ds) / 2.0, 0.0)).astype(np.int64)
        for level, at in _level_groups(side_thr[idx]):
            bound = mcnemar_boundary(level, int(max(n10[at].max(), n01[at].max())) + 1)
            out[idx[at]] = (n10[at] >= bound[n01[at]]) | (n01[at] >= bound[n10[at]])
    rest = np.flatnonzero(~table)
    if rest.size:
        plus, minus = log_e_sides(kind[rest], n[rest], s[rest], v[rest], start_n=seg_n[rest],
                                  start_s=seg_s[rest], start_v=seg_v[rest],
                                  start_log_plus=seg_lp[rest], start_log_minus=seg_lm[rest])
        out[rest] = (plus >= side_thr[rest]) | (minus >= side_thr[rest])
    return out


def may_cross(kind: NDArray[np.int8], before: tuple[FloatArray, FloatArray, FloatArray],
              after: tuple[FloatArray, FloatArray, FloatArray], *, start_n: FloatArray,
              start_s: FloatArray, start_v: FloatArray, start_log_plus: FloatArray,
              start_log_minus: FloatArray, log_threshold: FloatArray) -> NDArray[np.bool_]:
    """Whether a pair's e-process can have crossed anywhere between two states of one segment.

    Reads only the end points (n, S, V) of a run of new items, so a batch can skip the item
    by item pass (:func:`advance`) for every pair it cannot decide. Each one-sided e-value is
    monotone in the evidence for its side, which bounds it along the whole run:

    * McNemar: E₊ grows with n10 and falls with n01, so on the run E₊ ≤ E₊(n10 at the end,
      n01 at the start); with nothing frozen this is the boundary table's n10 ≥ T[n01];
    * bounded: E₊ grows with S and falls with V; S on the run is at most S₀ + Σ max(D, 0) and
      Σ max(D, 0) ≤ (ΔS + √(Δn ΔV))/2 (Cauchy–Schwarz), V at least V₀.

    UNSET pairs (kind chosen at their first item) always need the pass. ``False`` is a proof
    that no item of the run crossed.
    """
    side_thr = np.asarray(log_threshold, dtype=np.float64) + _LOG2
    n0, s0, v0 = (np.asarray(x, dtype=np.float64) for x in before)
    n1, s1, v1 = (np.asarray(x, dtype=np.float64) for x in after)
    out = kind == UNSET
    ds0, dv0 = s0 - start_s, np.maximum(v0 - start_v, 0.0)
    ds1, dv1 = s1 - start_s, np.maximum(v1 - start_v, 0.0)
    mc = kind == MCNEMAR
    if mc.any():
        a0 = np.rint(np.maximum((dv0 + ds0) / 2.0, 0.0))
        b0 = np.rint(np.maximum((dv0 - ds0) / 2.0, 0.0))
        a1 = np.rint(np.maximum((dv1 + ds1) / 2.0, 0.0))
        b1 = np.rint(np.maximum((dv1 - ds1) / 2.0, 0.0))
        table = mc & (start_log_plus == 0.0) & (start_log_minus == 0.0)
        if table.any():
            idx = np.flatnonzero(table)
            for level, where in _level_groups(side_thr[idx]):
                at = idx[where]
                ia0, ib0 = a0[at].astype(np.int64), b0[at].astype(np.int64)
                ia1, ib1 = a1[at].astype(np.int64), b1[at].astype(np.int64)
                bound = mcnemar_boundary(float(level), int(max(ia0.max(), ib0.max())) + 1)
                out[at] = (ia1 >= bound[ib0]) | (ib1 >= bound[ia0])
        frozen = np.flatnonzero(mc & ~table)
        if frozen.size:
            plus = ep.log_e_mcnemar_sides(a1[frozen], b0[frozen])[0] + start_log_plus[frozen]
            minus = ep.log_e_mcnemar_sides(a0[frozen], b1[frozen])[1] + start_log_minus[frozen]
            out[frozen] = (plus >= side_thr[frozen]) | (minus >= side_thr[frozen])
    bd = np.flatnonzero(kind == BOUNDED)
    if bd.size:
        dn, d_s = n1[bd] - n0[bd], s1[bd] - s0[bd]
        spread = np.sqrt(np.maximum(dn * np.maximum(v1[bd] - v0[bd], 0.0), 0.0))
        up, down = (d_s + spread) / 2.0, (spread - d_s) / 2.0
        seg_n = np.maximum(n0[bd] - start_n[bd], 0.0)
        plus = ep.log_e_bounded_sides(seg_n, ds0[bd] + up, dv0[bd])[0] + start_log_plus[bd]
        minus = ep.log_e_bounded_sides(seg_n, ds0[bd] - down, dv0[bd])[1] + start_log_minus[bd]
        out[bd] = (plus >= side_thr[bd]) | (minus >= side_thr[bd])
    return out


def items_to_decide(kind: NDArray[np.int8], n: FloatArray, s: FloatArray, v: FloatArray, *,
                    start_n: FloatArray, start_s: FloatArray, start_v: FloatArray,
                    start_log_plus: FloatArray, start_log_minus: FloatArray,
                    log_threshold: FloatArray, margin: float | None) -> IntArray:
    """The fewest further paired items before an undecided pair at (n, S, V) can be resolved
    or declared equivalent: a run that brings fewer cannot have decided it, so the live core
    need not read the pair again until then. 0 where no bound is kept (a segment other than
    a McNemar one with nothing frozen before it).

    * Resolution: E₊ crosses exactly where n10 ≥ T[n01] (:func:`mcnemar_boundary`, T
      nondecreasing), and n10 grows by at most one per item while n01 does not fall, so E₊
      needs at least T[n01] − n10 more items; E₋ at least T[n10] − n01.
    * Equivalence (``margin``) needs both of :func:`equivalence_bound`'s sides at their
      threshold; each grows with its centred gap — by at most (1 + Δ)/c per item — and falls
      with its centred ΣD², which never falls, as in :func:`may_be_equivalent`.

    Examples
    --------
    >>> thr = np.array([np.log(40.0)])
    >>> m = items_to_decide(np.array([MCNEMAR], np.int8), np.array([10.0]), np.array([2.0]),
    ...                     np.array([4.0]), start_n=np.zeros(1), start_s=np.zeros(1),
    ...                     start_v=np.zeros(1), start_log_plus=np.zeros(1),
    ...                     start_log_minus=np.zeros(1), log_threshold=thr, margin=None)
    >>> t = mcnemar_boundary(float(thr[0] + np.log(2.0)), 4)  # n10 = 3, n01 = 1
    >>> bool(int(m[0]) == t[1] - 3)
    True
    """
    side_thr = np.asarray(log_threshold, dtype=np.float64) + _LOG2
    out = np.zeros(np.shape(n), dtype=np.int64)
    table = np.flatnonzero((kind == MCNEMAR) & (start_log_plus == 0.0) & (start_log_minus == 0.0))
    if table.size == 0:
        return out
    ds = s[table] - start_s[table]
    dv = np.maximum(v[table] - start_v[table], 0.0)
    a = np.rint(np.maximum((dv + ds) / 2.0, 0.0)).astype(np.int64)
    b = np.rint(np.maximum((dv - ds) / 2.0, 0.0)).astype(np.int64)
    need = np.zeros(table.size, dtype=np.int64)
    for level, at in _level_groups(side_thr[table]):
        bound = mcnemar_boundary(level, int(max(a[at].max(), b[at].max())) + 1)
        need[at] = np.minimum(bound[b[at]] - a[at], bound[a[at]] - b[at])
    if margin is not None:
        seg_n = np.maximum(n[table] - start_n[table], 0.0)
        eq = np.zeros(table.size)
        for centre, sign in ((margin, -1.0), (-margin, 1.0)):
            c = 1.0 - centre if sign < 0 else 1.0 + centre
            sc = sign * (ds - seg_n * centre)  # the centred gap, unscaled
            vc = np.maximum((v[table] - start_v[table]) - 2.0 * centre * ds
                            + seg_n * centre * centre, 0.0) / (c * c)
            thr = side_thr[table]
            # the scaled gap at which the side's bound reaches thr, with ΣD² where it is now
            reach = np.where(thr <= vc / 2.0, np.sqrt(2.0 * vc * thr), thr + vc / 2.0)
            eq = np.maximum(eq, (reach * c - sc) / (1.0 + margin))
        need = np.minimum(need, np.floor(eq).astype(np.int64))
    out[table] = np.maximum(need, 1)
    return out


_BOUNDARIES: dict[float, IntArray] = {}


def _level_groups(values: FloatArray) -> list[tuple[float, IntArray]]:
    """(value, positions) of each distinct value of ``values`` — a few thresholds over many
    pairs: one comparison pass per value, no sort."""
    out = []
    todo = np.arange(values.size)
    while todo.size:
        v = values[todo[0]]
        hit = values[todo] == v
        out.append((float(v), todo[hit]))
        todo = todo[~hit]
    return out


def mcnemar_boundary(side_threshold: float, size: int) -> IntArray:
    """T[b] = the fewest n10 with log E₊(n10, b) ≥ ``side_threshold``, for b < ``size`` (at least).

    E₊ of the McNemar mixture grows with n10 and falls with n01 (it mixes likelihood ratios
    (2θ)^n10 (2(1 − θ))^n01 over θ > 1/2), so E₊ crosses exactly where n10 ≥ T[n01]; E₋ is its
    mirror, E₋(n10, n01) = E₊(n01, n10), so E₋ crosses where n01 ≥ T[n10]. Cached per level
    and grown by doubling.

    Examples
    --------
    >>> t = mcnemar_boundary(float(np.log(40.0)), 4)
    >>> bool(ep.log_e_mcnemar_sides(t[0], 0)[0] >= np.log(40.0) > ep.log_e_mcnemar_sides(t[0] - 1, 0)[0])
    True
    """
    have = _BOUNDARIES.get(side_threshold)
    if have is not None and have.size >= size:
        return have
    total = 1024
    while total < size:
        total *= 2
    b = np.arange(total, dtype=np.float64)

    def plus(a: FloatArray) -> FloatArray:
        return np.asarray(ep.log_e_mcnemar_sides(a, b)[0], dtype=np.float64)

    lo = np.zeros(total)  # plus(lo) < threshold or lo = 0
    hi = 2.0 * b + 64.0
    while True:
        short = plus(hi) < side_threshold
        if not short.any():
            break
        hi = np.where(short, 2.0 * hi, hi)
    while np.any(hi - lo > 1.0):
        mid = np.floor((lo + hi) / 2.0)
        ok = plus(mid) >= side_threshold
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    # Nondecreasing (E₊ falls with n01), also where rounding would make it wobble: the
    # screening of a batch by its end points (:func:`may_cross`) then agrees with the items.
    bound = np.maximum.accumulate(np.where(plus(lo) >= side_threshold, lo, hi)).astype(np.int64)
    bound.setflags(write=False)
    _BOUNDARIES[side_threshold] = bound
    return bound


def log_threshold(share: ArrayLike) -> FloatArray:
    """log(1/γ) of each share γ."""
    return np.asarray(-np.log(np.asarray(share, dtype=float)), dtype=np.float64)
