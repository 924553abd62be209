"""Ingest and the sequential pass of the live core: pair sums, then each pair's e-process.

:func:`ingest` folds a batch's accepted results into a
:class:`~monitor.core.board.BenchmarkState` in runs (no model has more than ``RUN`` results in
one run): the pair sums of the models a run touches (:meth:`BenchmarkState.fold_new`, one
pass over the present models of each result), then the sequential decisions. A pair the run
cannot have decided — its e-process's bound over the run stays below its threshold
(:func:`monitor.stats.sequential.may_cross`) — is done; only the others are followed item by
item (:func:`monitor.stats.sequential.advance`), in event order — a long run in parts of
``SUB`` results, each screened the same way, so a pair is read item by item only where it can
decide (:func:`_advance_in_parts`); a run of one model's results (a stretch of one model
makes runs of its own, :func:`model_runs`) is read as one dense block of its partners' scores,
and only its parts that may decide are listed item by item (:func:`_follow_one_model`).
Before any of that, a pair
is not read at all while the run cannot bring it the paired items its next decision needs at
least (``BenchmarkState.recheck``, :func:`monitor.stats.sequential.items_to_decide`): the
pairs a run reads are the few near a decision, not every pair of the models it touches.
:func:`exclude_rows` takes items out of the pair sums and starts the affected pairs' next
e-process segment.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from monitor.core.board import BenchmarkState
from monitor.stats.cluster_sequential import advance_clusters
from monitor.stats.groups import first_in_run, run_sizes, run_starts, with_zero
from monitor.stats.sequential import (
    MCNEMAR,
    UNSET,
    PairPaths,
    advance,
    block_share,
    items_to_decide,
    log_e_sides,
    log_threshold,
    may_be_equivalent,
    may_cross,
    pair_block,
    pair_number,
    pair_share,
    planned_pairs,
)

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: Results of one model per run: the bound of a run is loose by at most this many items.
RUN = 256
#: Results per part of a run followed on its own (:func:`_advance_in_parts`).
SUB = 32
_NONE = np.zeros(0, dtype=np.int64)
_NEVER = np.iinfo(np.int32).max  # ``recheck`` of a decided pair


def pair_level(lo: IntArray, hi: IntArray, *, alpha: float, planned_models: int) -> FloatArray:
    """γ_p of the pairs of columns (lo, hi), lo < hi (columns numbered by arrival)."""
    return pair_share(pair_number(lo, hi), alpha=alpha, planned=planned_pairs(planned_models))


def _state_log_threshold(st: BenchmarkState, lo: IntArray, hi: IntArray, *, alpha: float,
                         planned_models: int) -> FloatArray:
    """log(1/γ_p) of the pairs (lo, hi), read from the state's cached block of every pair (int8,
    filled as models arrive) and a table per block: the same floats, without the logs."""
    k, cap = st.k, st.cap
    cache = st.blocks
    if cache is None or cache[0] != planned_models or cache[1].shape[0] != cap:
        cache = (planned_models, np.full((cap, cap), -1, dtype=np.int8), 0)
    _, blocks, done = cache
    if done < k:
        hi_new = np.arange(done, k)
        los = np.concatenate([np.arange(h) for h in hi_new.tolist()]) if k else hi_new
        his = np.repeat(hi_new, hi_new)
        blocks[los, his] = pair_block(pair_number(los, his), planned=planned_pairs(
            planned_models)).astype(np.int8)
    st.blocks = (planned_models, blocks, k)
    table = log_threshold(block_share(np.arange(64), alpha=alpha,
                                      planned=planned_pairs(planned_models)))
    return table[blocks[lo, hi]]


def runs(cols: IntArray, size: int = RUN) -> list[slice]:
    """Consecutive slices of a batch in which no column has more than ``size`` results, each
    as long as that allows (a run ends just before the result that would give one of its
    columns ``size + 1``): a shuffled batch of M models makes about n / (size · M) runs, not
    one per model per ``size`` results.

    >>> [(s.start, s.stop) for s in runs(np.array([0, 1, 0, 0, 1, 1, 1]), size=2)]
    [(0, 3), (3, 6), (6, 7)]
    """
    edges = [0]
    n = int(cols.size)
    while edges[-1] < n:
        rest = cols[edges[-1]:]
        order = np.argsort(rest, kind="stable")
        sc = rest[order]
        first = run_starts(sc)
        # each position's rank among its column's results of the rest: the first over
        # ``size`` ends the run
        rank = np.arange(rest.size) - np.repeat(first, run_sizes(first, rest.size))
        over = order[rank >= size]
        edges.append(edges[-1] + (int(over.min()) if over.size else rest.size))
    return [slice(a, b) for a, b in pairwise(edges)]


def model_runs(cols: IntArray, size: int = RUN, *, alone: int = RUN // 2) -> list[slice]:
    """:func:`runs` of a batch in which every stretch of at least ``alone`` consecutive
    results of one column makes runs of its own (``size`` long at most), the results between
    such stretches the runs :func:`runs` makes of them: a model's results in order (one model
    after another, or a long stretch of one) are followed as one model's runs
    (:func:`_follow_one_model`), not with the next model's first results. Where a batch's
    runs end changes nothing but speed.

    >>> [(s.start, s.stop) for s in model_runs(np.array([0, 0, 0, 0, 0, 1, 1, 2, 1]),
    ...                                        size=4, alone=3)]
    [(0, 4), (4, 5), (5, 9)]
    """
    starts = run_starts(cols)
    sizes = run_sizes(starts, cols.size)
    long = np.flatnonzero(sizes >= alone)
    if long.size == 0:
        return runs(cols, size)
    out: list[slice] = []
    at = 0
    for a, n in zip(starts[long].tolist(), sizes[long].tolist(), strict=True):
        out.extend(slice(at + s.start, at + s.stop) for s in runs(cols[at:a], size))
        out.extend(slice(x, min(x + size, a + n)) for x in range(a, a + n, size))
        at = a + n
    out.extend(slice(at + s.start, at + s.stop) for s in runs(cols[at:], size))
    return out


def ingest(st: BenchmarkState, rows: IntArray, cols: IntArray, scores: FloatArray, *,
           alpha: float, planned_models: int) -> IntArray:
    """Fold new cells (absent before, in event order) into ``st``; return the flat indices of
    the pairs they decided. Cells on excluded rows are stored but pair with nothing."""
    out: list[IntArray] = []
    for sl in model_runs(cols):
        out.append(_run(st, rows[sl], cols[sl], scores[sl], alpha=alpha,
                        planned_models=planned_models))
    return np.concatenate(out) if out else _NONE


def _run(st: BenchmarkState, rows: IntArray, cols: IntArray, scores: FloatArray, *,
         alpha: float, planned_models: int) -> IntArray:
    np.add.at(st.nonbinary, cols[(scores != 0.0) & (scores != 1.0)], 1)
    excluded = st.excluded_rows[rows]
    if excluded.any():
        st.X[rows[excluded], cols[excluded]] = scores[excluded]
        keep = ~excluded
        rows, cols, scores = rows[keep], cols[keep], scores[keep]
        if rows.size == 0:
            return _NONE
    k, cap = st.k, st.cap
    touched = np.unique(cols)
    # The pairs (c, j) of the run's models with every model, each once (lo < hi when both
    # are in the run), read row by row: (c, j) is at c · cap + j for j > c, at j · cap + c
    # below. Only those the run can change are read further: a pair's paired items grow by
    # at most the run's results of its two models, and a pair that cannot reach the count
    # its next decision needs (``st.recheck``; decided pairs never) is left as it is — save
    # all of a model with scores other than 0/1 (a McNemar pair's switch is shown when
    # decided too).
    in_run = np.zeros(k, dtype=bool)
    in_run[touched] = True
    count = np.bincount(cols, minlength=k).astype(np.int32)
    reach = st.n.row_block(touched, k)
    reach += count[touched][:, None]
    reach += count[None, :k]
    work = reach >= st.recheck.reshape(cap, cap)[touched, :k]
    nonbinary_col = st.nonbinary[:k] > 0
    if nonbinary_col.any():
        work |= nonbinary_col[touched][:, None] | nonbinary_col[None, :]
    ti, jj = np.divmod(np.flatnonzero(work), k)  # a quarter of np.nonzero's time
    c = touched[ti]
    once = (jj > c) | ~in_run[jj]
    ti, jj, c = ti[once], jj[once], c[once]
    lo, hi = np.minimum(c, jj), np.maximum(c, jj)
    flat = lo * cap + hi
    keep = st.paths.open(flat)
    st.set_recheck(flat[~keep], _NEVER)  # decided (a restored state starts at 0)
    if nonbinary_col.any():
        keep |= nonbinary_col[c] | nonbinary_col[jj]
    c, jj, lo, hi, flat = c[keep], jj[keep], lo[keep], hi[keep], flat[keep]
    before = st.pair_nsv(c, jj)
    st.fold_new(rows, cols, scores)
    # Sampled clusters: the clustered decisions are the verdicts (the item-level pass below
    # still runs, for the item-level e-values shown beside them).
    clustered = (None if st.cpaths is None else
                 _cluster_pass(st, rows, cols, scores, alpha=alpha,
                               planned_models=planned_models))
    after = st.pair_nsv(c, jj)
    # The screen above bounded each pair's new items by its two models' results in the run;
    # a pair whose paired items now are still short of its next decision's count is done
    # (save those of a model with scores other than 0/1, read whenever they grow).
    grew = after[0] > before[0]
    due = after[0] >= st.recheck[flat]
    if nonbinary_col.any():
        due |= nonbinary_col[c] | nonbinary_col[jj]
    grew &= due
    if not grew.any():
        return _NONE if clustered is None else clustered
    c, jj, lo, hi, flat = c[grew], jj[grew], lo[grew], hi[grew], flat[grew]
    before = tuple(b[grew] for b in before)  # type: ignore[assignment]
    after = tuple(a[grew] for a in after)  # type: ignore[assignment]
    sign = np.where(c == lo, 1.0, -1.0)  # S of (lo, hi) from c's side
    paths = st.paths
    kind = paths.kind[flat]
    binary_now = ~nonbinary_col[c] & ~nonbinary_col[jj]
    # A pair whose items are all 0/1 runs McNemar from its first item on.
    new_mc = (kind == UNSET) & binary_now
    paths.kind[flat[new_mc]] = MCNEMAR
    kind = np.where(new_mc, MCNEMAR, kind)
    # Item by item: a first item whose kind depends on it, a McNemar pair that may meet a
    # score other than 0/1 (its switch), and undecided pairs the run may have decided.
    exact = (kind == UNSET) | ((kind == MCNEMAR) & ~binary_now)
    is_open = paths.open(flat)
    undecided = np.flatnonzero(is_open & ~exact)
    need = exact | is_open
    thr = np.zeros(flat.size)
    thr[need] = _state_log_threshold(st, lo[need], hi[need], alpha=alpha,
                                     planned_models=planned_models)
    # Pairs the run may declare equivalent: all followed pairs but the undecided ones the
    # screen below rules out.
    equivalence = np.ones(flat.size, dtype=bool)
    if undecided.size:
        u = undecided
        f = flat[u]
        exact[u] = may_cross(kind[u], (before[0][u], before[1][u] * sign[u], before[2][u]),
                             (after[0][u], after[1][u] * sign[u], after[2][u]),
                             start_n=paths.start_n[f], start_s=paths.start_s[f],
                             start_v=paths.start_v[f], start_log_plus=paths.start_log_plus[f],
                             start_log_minus=paths.start_log_minus[f], log_threshold=thr[u])
        margin = st.spec.margin
        if margin is not None:  # a tied pair may be declared equivalent in the run
            equivalence[u] = may_be_equivalent(
                (before[0][u], before[1][u] * sign[u], before[2][u]),
                (after[0][u], after[1][u] * sign[u], after[2][u]),
                start_n=paths.start_n[f], start_s=paths.start_s[f], start_v=paths.start_v[f],
                margin=margin, log_threshold=thr[u])
            exact[u] |= equivalence[u]
    pick = np.flatnonzero(exact)
    decided = _NONE
    if pick.size:
        base = (before[0][pick], before[1][pick] * sign[pick], before[2][pick])
        decided = _follow(st, rows, cols, scores, touched, flat[pick], base, thr[pick],
                          equivalence[pick])
    # When the pairs read here need reading again: after as many more paired items as their
    # next decision needs at least.
    read = np.flatnonzero(need)
    f = flat[read]
    more = items_to_decide(
        paths.kind[f], after[0][read], after[1][read] * sign[read], after[2][read],
        start_n=paths.start_n[f], start_s=paths.start_s[f], start_v=paths.start_v[f],
        start_log_plus=paths.start_log_plus[f], start_log_minus=paths.start_log_minus[f],
        log_threshold=thr[read], margin=st.spec.margin)
    st.set_recheck(f, np.minimum(after[0][read] + more, _NEVER))
    st.set_recheck(decided, _NEVER)
    return decided if clustered is None else clustered


def _cluster_pass(st: BenchmarkState, rows: IntArray, cols: IntArray, scores: FloatArray, *,
                  alpha: float, planned_models: int) -> IntArray:
    """The sampled-clusters pass of a run (its cells already in the score matrix): every new
    paired item of every pair, in event order, through
    :func:`monitor.stats.cluster_sequential.advance_clusters`. Returns the flat indices
    (lo · cap + hi) of the pairs it decided. Cost: the run's results × the models."""
    cp = st.cpaths
    assert cp is not None
    k, cap = st.k, st.cap
    groups = st.group[rows].astype(np.int64)
    if not (groups > 0).any():
        return _NONE  # items without a cluster label do not enter the clustered decision
    block = st.X[rows, :k]
    # when[t, j]: the position in the run of the cell (row of t, j), −1 if stored before it
    when = np.full(block.shape, -1, dtype=np.int64)
    key = rows * cap + cols
    key_order = np.argsort(key, kind="stable")
    keys = key[key_order]
    touched = np.unique(cols)
    probe = rows[:, None] * cap + touched[None, :]
    pos = np.minimum(np.searchsorted(keys, probe), keys.size - 1)
    when[:, touched] = np.where(keys[pos] == probe, key_order[pos], -1)
    t_pos = np.arange(rows.size)
    valid = ~np.isnan(block) & (when < t_pos[:, None]) & (groups[:, None] > 0)
    valid[t_pos, cols] = False
    tt, jj = np.nonzero(valid)  # row-major: event order, then partner
    if tt.size == 0:
        return _NONE
    c = cols[tt]
    lo, hi = np.minimum(c, jj), np.maximum(c, jj)
    x_c, x_j = scores[tt], block[tt, jj]
    d = np.where(c == lo, x_c - x_j, x_j - x_c)
    pair = pair_number(lo, hi) - 1
    # The pair's n at each of its new items: its n after the run, less the items after this one.
    order = np.argsort(pair, kind="stable")
    ps = pair[order]
    first = run_starts(ps)
    sizes = run_sizes(first, ps.size)
    rank = np.empty(ps.size, dtype=np.int64)
    rank[order] = np.arange(ps.size) - np.repeat(first, sizes)
    count = np.empty(ps.size, dtype=np.int64)
    count[order] = np.repeat(sizes, sizes)
    n_at = st.n.at(lo, hi).astype(np.float64) - count + rank + 1.0
    cp = cp.grown(k * (k - 1) // 2, len(st.clusters))
    st.cpaths = cp
    uniq, rep = np.unique(pair, return_index=True)  # each pair, and one item of it
    thr = np.zeros(cp.shape[0])
    thr[uniq] = _state_log_threshold(st, lo[rep], hi[rep], alpha=alpha,
                                     planned_models=planned_models)
    decided = advance_clusters(cp, pair, groups[tt], d, n_at, r=st.spec.cluster_items,
                               log_threshold=thr, margin=st.spec.margin)
    if decided.size == 0:
        return _NONE
    where = np.searchsorted(uniq, decided)
    return lo[rep][where] * cap + hi[rep][where]


def _follow(st: BenchmarkState, rows: IntArray, cols: IntArray, scores: FloatArray,
            touched: IntArray, flat: IntArray, base: tuple[FloatArray, FloatArray, FloatArray],
            thr: FloatArray, equivalence: NDArray[np.bool_]) -> IntArray:
    """The item-by-item pass of the pairs ``flat`` (sums ``base`` before the run) along the
    run's results (already in the score matrix): the result at position t pairs with every
    model that has the item already or got it earlier in the run; only the pairs
    ``equivalence`` marks are read for an equivalence decision. Cost: the followed pairs'
    new items."""
    cap = st.cap
    order = np.argsort(flat)
    flat, thr, equivalence = flat[order], thr[order], equivalence[order]
    b_n, b_s, b_v = (b[order] for b in base)
    if _dense_follow(st, touched):
        return _follow_one_model(st, rows, scores, int(touched[0]), flat, (b_n, b_s, b_v), thr,
                                 equivalence)
    lo, hi = np.divmod(flat, cap)
    # Position in the run of each of its cells, by key row · cap + col (sorted for lookups).
    cell_key = rows * cap + cols
    key_order = np.argsort(cell_key)
    keys = cell_key[key_order]
    # Each followed pair under each of its ends that has results in the run.
    ends = np.concatenate((lo, hi))
    others = np.concatenate((hi, lo))
    pair_of = np.tile(np.arange(flat.size), 2)
    in_run = np.isin(ends, touched)
    ends, others, pair_of = ends[in_run], others[in_run], pair_of[in_run]
    by_end = np.argsort(ends, kind="stable")
    ends, others, pair_of = ends[by_end], others[by_end], pair_of[by_end]
    cut = np.flatnonzero(np.append(first_in_run(ends), True))
    in_run_col = np.zeros(st.k, dtype=bool)
    in_run_col[touched] = True

    def entries(ev: IntArray, partners: IntArray, pairs: IntArray
                ) -> tuple[IntArray, IntArray, FloatArray, NDArray[np.bool_]]:
        """The new paired items among (result ev[i], partner[i]): the partner has the item
        before the result — stored before the run, or earlier in it."""
        r = rows[ev]
        x_p = st.X.reshape(-1).take(r * st.X.shape[1] + partners)
        mask = ~np.isnan(x_p)
        also = np.flatnonzero(in_run_col[partners] & mask)
        if also.size:
            key = r[also] * cap + partners[also]
            pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
            when = np.where(keys[pos] == key, key_order[pos], -1)  # −1: before the run
            mask[also] = when < ev[also]
        ev, partners, pairs, x_p = ev[mask], partners[mask], pairs[mask], x_p[mask]
        x_c = scores[ev]
        first = cols[ev] < partners
        d = np.where(first, x_c - x_p, x_p - x_c)
        nonbinary = (x_c != 0.0) & (x_c != 1.0) | (x_p != 0.0) & (x_p != 1.0)
        return pairs, ev, d, nonbinary

    parts: list[tuple[IntArray, IntArray, FloatArray, NDArray[np.bool_]]] = []
    if cut.size - 1 > 8:
        # Many models in the run (results in any order): every (result, followed partner)
        # at once, then each pair's items put in event order.
        start_of = np.full(st.k, 0, dtype=np.int64)
        count_of = np.zeros(st.k, dtype=np.int64)
        start_of[ends[cut[:-1]]] = cut[:-1]
        count_of[ends[cut[:-1]]] = np.diff(cut)
        per_ev = count_of[cols]
        ev = np.repeat(np.arange(rows.size), per_ev)
        offsets = np.arange(ev.size) - np.repeat(np.cumsum(per_ev) - per_ev, per_ev)
        at = start_of[cols[ev]] + offsets
        p_idx, p_ev, p_d, p_nb = entries(ev, others[at], pair_of[at])
        seq = np.lexsort((p_ev, p_idx))
        parts.append((p_idx[seq], p_ev[seq], p_d[seq], p_nb[seq]))
    else:
        ev_order = np.argsort(cols, kind="stable")  # each column's results in event order
        ev_cols = cols[ev_order]
        for a, b in pairwise(cut.tolist()):
            c = int(ends[a])
            lo_e, hi_e = np.searchsorted(ev_cols, [c, c + 1])
            ev_c = ev_order[lo_e:hi_e]  # c's results, in event order
            n_p = b - a
            # partner-major: each pair's items in event order
            parts.append(entries(np.tile(ev_c, n_p), np.repeat(others[a:b], ev_c.size),
                                 np.repeat(pair_of[a:b], ev_c.size)))
    if not parts:
        return _NONE
    idx = np.concatenate([p[0] for p in parts])
    tt = np.concatenate([p[1] for p in parts])
    d = np.concatenate([p[2] for p in parts])
    nonbinary = np.concatenate([p[3] for p in parts])
    if len(parts) > 1:
        # Items of the pairs under two ends come in two blocks: merge into event order.
        seq = np.lexsort((tt, idx))
        idx, tt, d, nonbinary = idx[seq], tt[seq], d[seq], nonbinary[seq]
    local = st.paths.take(flat)
    # In parts on a board of 0/1 scores only: the running sums of one pass over every item
    # round with the other pairs' items before them otherwise (a pair's e-value could then
    # differ from the one pass's in its last bits).
    if st.binary and idx.size >= 2 * SUB * flat.size:
        decided = _advance_in_parts(local, idx, tt, d, nonbinary, (b_n, b_s, b_v), thr,
                                    st.spec.margin, equivalence)
    else:
        decided = advance(local, idx, d, nonbinary, base_n=b_n, base_s=b_s, base_v=b_v,
                          log_threshold=thr, margin=st.spec.margin, equivalence=equivalence)
    st.paths.put(flat, local)
    return flat[decided]


def _advance_in_parts(local: PairPaths, idx: IntArray, tt: IntArray, d: FloatArray,
                      nonbinary: NDArray[np.bool_],
                      base: tuple[FloatArray, FloatArray, FloatArray], thr: FloatArray,
                      margin: float | None, equivalence: NDArray[np.bool_]) -> IntArray:
    """:func:`advance` of the pairs ``local`` along their new items (``idx`` grouped by pair,
    each pair's items in event order ``tt``), with the run cut into parts of ``SUB`` results:
    a part of an open McNemar pair of 0/1 items that cannot have crossed (nor been declared
    equivalent) between its end points (:func:`may_cross`, :func:`may_be_equivalent`) is not
    read item by item. Every other part is followed from the pair's sums at its start, as a
    pair of its own; a pair's decision is its earliest part's. The same decisions as one
    :func:`advance` over every item: a part's items see the same (n, S, V) either way —
    exactly, bit for bit, when every D is a multiple of 1/2 (:func:`advance`'s running sums
    are then exact whatever items come before them)."""
    b_n, b_s, b_v = base
    pairs = local.kind.size
    starts = run_starts(idx)
    sizes = run_sizes(starts, idx.size)
    # Only open McNemar pairs whose new items are all 0/1 are cut; the others are one part.
    nb_pair = np.bincount(idx[nonbinary], minlength=pairs) > 0
    cut = (local.kind == MCNEMAR) & local.open(np.arange(pairs)) & ~nb_pair
    part = np.where(cut[idx], tt // SUB, 0)
    brk = first_in_run(idx)
    brk[1:] |= part[1:] != part[:-1]
    first = np.flatnonzero(brk)
    p_size = run_sizes(first, idx.size)
    owner = idx[first]
    # Each pair's sums before each of its parts: its sums before the run and its items before.
    pos = np.arange(idx.size) - np.repeat(starts, sizes)
    cs = np.cumsum(d)
    cv = np.cumsum(d * d)
    cs_0, cv_0 = with_zero(cs), with_zero(cv)
    pair_cs0 = np.repeat(cs_0[starts], sizes)
    pair_cv0 = np.repeat(cv_0[starts], sizes)
    last = first + p_size - 1
    n0 = b_n[owner] + pos[first]
    s0 = b_s[owner] + cs_0[first] - pair_cs0[first]
    v0 = b_v[owner] + cv_0[first] - pair_cv0[first]
    n1 = n0 + p_size
    s1 = b_s[owner] + cs[last] - pair_cs0[last]
    v1 = b_v[owner] + cv[last] - pair_cv0[last]
    keep, eq = _screen_parts(local, owner, cut, nb_pair, (n0, s0, v0), (n1, s1, v1), thr,
                             margin, equivalence)
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        return _NONE
    # The kept parts as pairs of their own, numbered in (pair, part) order.
    item_kept = np.repeat(keep, p_size)
    return _advance_kept(local, owner, cut, kept, np.repeat(np.arange(kept.size), p_size[kept]),
                         d[item_kept], nonbinary[item_kept], (n0, s0, v0), thr, margin, eq)


def _screen_parts(local: PairPaths, owner: IntArray, cut: NDArray[np.bool_],
                  nb_pair: NDArray[np.bool_], before: tuple[FloatArray, FloatArray, FloatArray],
                  after: tuple[FloatArray, FloatArray, FloatArray], thr: FloatArray,
                  margin: float | None, equivalence: NDArray[np.bool_]
                  ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Which parts (of the pairs ``owner``, sums ``before`` and ``after`` each) are followed
    item by item, and which of them may declare their pair equivalent: every part of a pair
    not ``cut``, unless the pair is decided and all its items are 0/1 (:func:`advance` drops
    those); a part of a cut pair where it may cross or be declared equivalent."""
    keep = ~cut[owner] & (local.open(owner) | nb_pair[owner])
    eq = equivalence[owner].copy()
    c = np.flatnonzero(cut[owner])
    if c.size:
        o = owner[c]
        seg = {"start_n": local.start_n[o], "start_s": local.start_s[o],
               "start_v": local.start_v[o]}
        b = tuple(x[c] for x in before)
        a = tuple(x[c] for x in after)
        keep[c] = may_cross(local.kind[o], b, a,  # type: ignore[arg-type]
                            start_log_plus=local.start_log_plus[o],
                            start_log_minus=local.start_log_minus[o], log_threshold=thr[o],
                            **seg)
        if margin is not None:
            e = eq[c]
            e[e] = may_be_equivalent(tuple(x[e] for x in b),  # type: ignore[arg-type]
                                     tuple(x[e] for x in a),  # type: ignore[arg-type]
                                     margin=margin, log_threshold=thr[o][e],
                                     **{k: v[e] for k, v in seg.items()})
            eq[c] = e
            keep[c] |= e
    return keep, eq


def _advance_kept(local: PairPaths, owner: IntArray, cut: NDArray[np.bool_], kept: IntArray,
                  item_part: IntArray, d: FloatArray, nonbinary: NDArray[np.bool_],
                  start: tuple[FloatArray, FloatArray, FloatArray], thr: FloatArray,
                  margin: float | None, eq: NDArray[np.bool_]) -> IntArray:
    """:func:`advance` of the ``kept`` parts (of the pairs ``owner``, in (pair, part) order;
    sums ``start`` at each part's start) as pairs of their own, along their items (``d``, the
    kept part of each in ``item_part``, parts in order, each one's items in event order).
    The uncut pairs' one part carries their whole state; a cut pair's state changes only by
    its decision, at its earliest deciding part. Returns the pairs decided."""
    n0, s0, v0 = start
    sub = local.take(owner[kept])
    got = advance(sub, item_part, d, nonbinary, base_n=n0[kept], base_s=s0[kept],
                  base_v=v0[kept], log_threshold=thr[owner[kept]], margin=margin,
                  equivalence=eq[kept])
    got = np.unique(got)
    of = owner[kept][got]
    earliest = got[first_in_run(of)] if got.size else got
    write = np.union1d(np.flatnonzero(~cut[owner[kept]]), earliest)
    local.put(owner[kept][write], sub.take(write))
    return owner[kept][earliest]


def _dense_follow(st: BenchmarkState, touched: IntArray) -> bool:
    """Whether a run is followed by :func:`_follow_one_model`: one model's results on a board
    of 0/1 scores."""
    return touched.size == 1 and st.binary


def _follow_one_model(st: BenchmarkState, rows: IntArray, scores: FloatArray, c: int,
                      flat: IntArray, base: tuple[FloatArray, FloatArray, FloatArray],
                      thr: FloatArray, equivalence: NDArray[np.bool_]) -> IntArray:
    """:func:`_follow` of a run of one model's results (column ``c``) on a board of 0/1
    scores, its pairs ``flat`` sorted: the partners' scores on the run's items are one dense
    (results × pairs) block, the parts' end points its sums over ``SUB`` rows, and only the
    kept parts' items are listed for :func:`advance` — the same decisions and state as the
    general pass (whose item lists cost a pass per item of every followed pair). Every
    followed pair is McNemar: :func:`_run` gives each new pair of 0/1 scores its kind first."""
    local = st.paths.take(flat)
    assert (local.kind == MCNEMAR).all()
    cap = st.cap
    lo, hi = np.divmod(flat, cap)
    sign = np.where(lo == c, 1.0, -1.0)  # D of (lo, hi) = x_lo − x_hi
    x = st.X[np.ix_(rows, np.where(lo == c, hi, lo))]
    present = x >= 0.0  # NaN: the partner has no score on the item
    d = (scores[:, None] - x) * sign  # (a tie seen from hi: −0.0, which sums as 0.0)
    d[~present] = 0.0
    n_pairs, n_res = flat.size, rows.size
    counts = present.sum(axis=0)
    if int(counts.sum()) < 2 * SUB * n_pairs:  # few items a pair: one pass, as _follow
        j, t = np.nonzero(present.T)
        decided = advance(local, j, d[t, j], np.zeros(j.size, dtype=bool), base_n=base[0],
                          base_s=base[1], base_v=base[2], log_threshold=thr,
                          margin=st.spec.margin, equivalence=equivalence)
        st.paths.put(flat, local)
        return flat[decided]
    # Sums of each open pair's items in each part of SUB results (a decided pair's 0/1 items
    # change nothing, as in :func:`advance`).
    n_parts = -(-n_res // SUB)
    cut = local.open(np.arange(n_pairs))
    sums = np.add.reduceat(np.stack([present, d, np.abs(d)]),  # n, S, V (D² = |D|)
                           np.arange(0, n_res, SUB), axis=1)
    has = (sums[0] > 0.0).T & cut[:, None]  # (pairs × parts), in (pair, part) order
    owner, part_of = np.nonzero(has)
    before = np.cumsum(sums, axis=1) - sums  # each part's sums before it
    start = [b[owner] + s[part_of, owner] for b, s in zip(base, before, strict=True)]
    end = [s0 + s[part_of, owner] for s0, s in zip(start, sums, strict=True)]
    no_nonbinary = np.zeros(n_pairs, dtype=bool)
    keep, eq = _screen_parts(local, owner, cut, no_nonbinary, (start[0], start[1], start[2]),
                             (end[0], end[1], end[2]), thr, st.spec.margin, equivalence)
    kept = np.flatnonzero(keep)
    decided = _NONE
    if kept.size:
        number = np.full((n_pairs, n_parts), -1, dtype=np.int64)
        number[owner[kept], part_of[kept]] = np.arange(kept.size)
        item = number[:, np.arange(n_res) // SUB]  # (pairs × results)
        j, t = np.nonzero((item >= 0) & present.T)  # (pair, part) order, then event order
        decided = _advance_kept(local, owner, cut, kept, item[j, t], d[t, j],
                                np.zeros(j.size, dtype=bool), (start[0], start[1], start[2]),
                                thr, st.spec.margin, eq)
    st.paths.put(flat, local)
    return flat[decided]


def exclude_rows(st: BenchmarkState, newly_excluded: IntArray) -> None:
    """Take ``newly_excluded`` rows out of the pair sums; the affected pairs' e-processes
    continue in a new segment (the evidence seen so far stays frozen)."""
    old = st.rows_view(newly_excluded)
    present = (~np.isnan(old)).astype(np.float64)
    lo, hi = np.nonzero(np.triu(present.T @ present > 0, 1))
    flat = lo * st.cap + hi
    n0, s0, v0 = st.path_sums(flat)
    p = st.paths
    sides_now = log_e_sides(p.kind[flat], n0, s0, v0,
                            start_n=p.start_n[flat], start_s=p.start_s[flat],
                            start_v=p.start_v[flat],
                            start_log_plus=p.start_log_plus[flat],
                            start_log_minus=p.start_log_minus[flat])
    st.remove_rows(newly_excluded)
    st.excluded_rows[newly_excluded] = True
    st.set_recheck(flat, 0)
    # The affected pairs' e-processes continue in a new segment from the sums without
    # the excluded items (the evidence seen so far stays frozen).
    p.restart(flat, sides_now, *st.path_sums(flat))
