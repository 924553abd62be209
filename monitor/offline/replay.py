"""The verdicts of the offline report: a table replayed item by item through the live rule.

Each pair is decided at the first crossing of its e-process, by the live monitor's functions
(:mod:`monitor.stats.sequential`, and :mod:`monitor.stats.cluster_sequential` under sampled
clusters): the same order, the same decisions. The decisions are valid when the items arrive
in an order independent of their outcomes, so by default the items are replayed in a seeded
permutation (``shuffle``, :data:`monitor.defaults.REPLAY_SEED`), the order ``llm-monitor
demo`` and ``run --replay FILE --shuffle --seed S`` send them in (:func:`replay_arrival`);
``file`` keeps the table's own order, valid only when that order does not depend on the
outcomes (a file sorted by subject does).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np

from monitor.core.board import single_thread_blas
from monitor.defaults import MARGIN, PLANNED_MODELS, REPLAY_SEED
from monitor.io.tables import ScoreTable
from monitor.offline.report import (
    DEFAULT_RANK_SEED,
    AnytimeReplay,
    ResolutionReport,
    build_report,
    ranking_order,
)
from monitor.stats import eprocess as ep
from monitor.stats.board import pair_sums
from monitor.stats.chunks import each_chunk
from monitor.stats.cluster_sequential import (
    CLUSTER_ITEMS,
    V_OPT_CLUSTERS,
    ClusterPaths,
    advance_clusters,
    log_e_cluster_sides,
    max_log_e,
)
from monitor.stats.figures import ClusterDecisions, Design, pair_figures
from monitor.stats.ranks import consistent_order, ranks_and_tiers
from monitor.stats.sequential import (
    MCNEMAR,
    UNSET,
    PairPaths,
    advance,
    equivalence_bound,
    items_to_decide,
    log_threshold,
    may_be_equivalent,
    may_cross,
    pair_number,
    pair_share,
    planned_pairs,
)

ORDERS = ("file", "shuffle")
# items × pairs per chunk: a few arrays of this size (~2 MB each) stay in cache; larger chunks
# cost more time as well as memory (MMLU-Pro's 496 pairs: 7.8 s and 1.28 GB at 4 M cells,
# 3.7 s and 0.21 GB at 250 k)
_CHUNK_CELLS = 250_000
_LOG2 = float(np.log(2.0))
# rows per segment of the screened 0/1 pass (:func:`_screened_pass`)
_SEGMENT_ROWS = 256
# runs of at most this many rows are followed item by item (:func:`_descend`)
_LEAF_ROWS = 16
# :func:`_pair_sums`: dense products over the models when models² (× products) is at most
# this many times the pairs, else the pairs' columns side by side, in blocks of these cells
_PRODUCT_CELLS = 400
_FOLLOW_CELLS = 2_000_000
# pairs per block of the sampled-clusters replay (:func:`_cluster_replay`)
_CLUSTER_PAIRS = 16_384
# pairs per descent of the screened pass (:func:`_descend`)
_DESCEND_PAIRS = 65_536


RULES = ("board", "family")


def replay_arrival(table: ScoreTable, *, order: str, seed: int | None
                   ) -> tuple[np.ndarray | None, np.ndarray]:
    """The replay's item order: ``(perm, arrival)``, the table's rows in the order they are
    replayed (None: the table's own order) and the arrival rank of every present score in that
    order (−1 where absent). ``file``: the table's arrival order; ``shuffle``: the items in the
    seeded permutation ``default_rng(seed)``, each item's results together, models left to
    right. A pair's item arrives with its later score."""
    if order not in ORDERS:
        raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, got {order!r}")
    if order == "file":
        return None, table.arrival_order()
    perm = shuffled_rows(table, seed)
    x = table.scores[perm]
    n, kk = x.shape
    return perm, np.where(np.isnan(x), -1, np.arange(n * kk, dtype=np.int64).reshape(n, kk))


def shuffled_rows(table: ScoreTable, seed: int | None) -> np.ndarray:
    """The table's rows in the seeded order of a shuffled replay."""
    return np.random.default_rng(seed).permutation(table.scores.shape[0])


def design_of(table: ScoreTable) -> Design:
    """The design a table's groups declare: ``--cluster-col`` sampled clusters, ``--strata-col``
    fixed strata, no groups exchangeable items."""
    if table.groups is None:
        return "items"
    return "clusters" if (table.group_kind or "cluster") == "cluster" else "strata"


def cluster_codes(table: ScoreTable) -> np.ndarray:
    """Each item's cluster as an id ≥ 1 (0: no label), for the sampled-clusters decision."""
    if table.groups is None:
        return np.zeros(len(table.item_ids), dtype=np.int64)
    labels = np.asarray(table.groups, dtype=object)
    named = np.array([g is not None and g == g and str(g) != "" for g in labels.tolist()],
                     dtype=bool)
    codes = np.zeros(labels.size, dtype=np.int64)
    if named.any():
        _, inverse = np.unique(labels[named].astype(str), return_inverse=True)
        codes[named] = inverse.reshape(-1) + 1
    return codes


def _decide(
    table: ScoreTable,
    pairs: tuple[np.ndarray, np.ndarray],
    *,
    alpha: float,
    order: str,
    seed: int | None,
    planned_models: int,
    rule: str,
    cluster_items: int = CLUSTER_ITEMS,
    margin: float | None = MARGIN,
) -> tuple[PairPaths, np.ndarray, np.ndarray, ClusterPaths | None]:
    """The sequential pass of :func:`anytime_replay`: the pairs' paths (first-born model first),
    their shares of α, whether A = a[k] is the first-born model of each pair, and — when the
    table's groups are sampled clusters — the pairs' clustered decisions (same orientation).

    A table of 0/1 scores replayed row by row (shuffled, or a wide table in file order) takes
    the fast passes, to the same state: the screened pass (:func:`_screened_pass`), which
    follows item by item only the pairs a run of rows may decide, or under sampled clusters
    the replay of the clusters' observations (:func:`_clusters_pass`: the item-level
    decisions, not the verdict there, are not taken). Other scores and
    other arrival orders take every paired item of every pair through :func:`advance` and
    :func:`advance_clusters` (:func:`_item_pass`)."""
    if order not in ORDERS:
        raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, got {order!r}")
    if rule not in RULES:
        raise ValueError(f"`rule` must be one of {', '.join(RULES)}, got {rule!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    a_idx = np.asarray(pairs[0], dtype=np.intp)
    b_idx = np.asarray(pairs[1], dtype=np.intp)
    m = int(a_idx.size)
    big = np.iinfo(np.int64).max
    arr: np.ndarray | None = None
    if order == "shuffle":
        # Row by row, each row's results left to right (replay_arrival's arrival ranks,
        # row · k + column, not built: a model is born at its first present row).
        perm: np.ndarray | None = shuffled_rows(table, seed)
        x = table.scores[perm]
        k = x.shape[1]
        present = ~np.isnan(x)
        first = np.where(present.any(axis=0),
                         np.argmax(present, axis=0).astype(np.int64) * k + np.arange(k), big)
        by_rows = True
    else:
        perm, arrival = replay_arrival(table, order=order, seed=seed)
        x = table.scores
        k = x.shape[1]
        present = ~np.isnan(x)
        # Models are born at their first result; a pair's items come in the order their
        # second score arrives.
        arr = np.where(present, arrival, big)
        # (A repeated-sample table in file order: a model is born at its first sample.)
        first = table.born if table.born is not None else arr.min(axis=0)
        # Scores that arrive row by row (a wide table's file order): each pair's items
        # arrive in row order, so no pair's items need sorting.
        seen = arr[present]  # row-major
        by_rows = bool(np.all(seen[1:] > seen[:-1]))
        del seen, arrival
    birth = np.empty(k, dtype=np.int64)
    birth[np.lexsort((np.arange(k), first))] = np.arange(k)
    a_first = birth[a_idx] < birth[b_idx]  # A is the pair's first-born model
    lo_col = np.where(a_first, a_idx, b_idx)
    hi_col = np.where(a_first, b_idx, a_idx)
    if rule == "board":
        shares = pair_share(pair_number(birth[lo_col], birth[hi_col]), alpha=alpha,
                            planned=planned_pairs(planned_models))
    else:
        shares = np.full(m, alpha / max(m, 1))
    log_thr = log_threshold(shares)

    paths = PairPaths.empty(m)
    clustered = design_of(table) == "clusters"
    codes = cluster_codes(table)
    if perm is not None:
        codes = codes[perm]
    cpaths = ClusterPaths.empty(m, int(codes.max(initial=0)) + 1) if clustered else None
    binary = not np.any((x != 0.0) & (x != 1.0) & present)
    if by_rows and binary:
        del arr  # the fast passes read the rows in order: no arrival ranks
        if cpaths is None:
            _screened_pass(paths, x, present, lo_col, hi_col, log_thr=log_thr, margin=margin)
        else:
            _clusters_pass(paths, cpaths, x, present, lo_col, hi_col, codes,
                           r=cluster_items, log_thr=log_thr, margin=margin)
    else:
        if arr is None:  # shuffled: the arrival ranks row · k + column
            arr = np.where(present, np.arange(x.size, dtype=np.int64).reshape(x.shape), big)
        _item_pass(paths, cpaths, x, present, arr, lo_col, hi_col, codes, by_rows=by_rows,
                   log_thr=log_thr, margin=margin, cluster_items=cluster_items)
    return paths, shares, a_first, cpaths


def _clusters_pass(paths: PairPaths, cpaths: ClusterPaths, x: np.ndarray, present: np.ndarray,
                   lo_col: np.ndarray, hi_col: np.ndarray, codes: np.ndarray, *, r: int,
                   log_thr: np.ndarray, margin: float | None) -> None:
    """The decisions of 0/1 scores arriving row by row under sampled clusters: the clustered
    ones (:func:`_cluster_replay`), which are the verdicts. The item-level decisions are
    neither the verdict under this design nor shown (:meth:`PairFigures.verdict_code`, the
    serializers' ``headline_*``), so they are not taken: ``paths`` stays as it is, which
    :func:`pair_figures` reads as the McNemar e-process of every paired item (on 0/1 scores
    no segment is ever frozen), the path the item-by-item pass leaves."""
    _cluster_replay(cpaths, x, present, lo_col, hi_col, codes, r=r, log_thr=log_thr,
                    margin=margin)


def _item_pass(paths: PairPaths, cpaths: ClusterPaths | None, x: np.ndarray,
               present: np.ndarray, arr: np.ndarray, lo_col: np.ndarray, hi_col: np.ndarray,
               codes: np.ndarray, *, by_rows: bool, log_thr: np.ndarray,
               margin: float | None, cluster_items: int) -> None:
    """Every paired item of every pair, in arrival order, through :func:`advance` and (unless
    ``cpaths`` is None) :func:`advance_clusters`, a chunk of pairs at a time."""
    n_items = x.shape[0]
    m = lo_col.size
    big = np.iinfo(np.int64).max
    zero = np.zeros(m)
    chunk = max(1, _CHUNK_CELLS // max(n_items, 1))
    for start in range(0, m, chunk):
        cols = np.arange(start, min(start + chunk, m))
        if by_rows:
            both = present[:, lo_col[cols]] & present[:, hi_col[cols]]
            pp, rows = np.nonzero(both.T)  # pair by pair, each in arrival (row) order
            va, vb = x[rows, lo_col[cols][pp]], x[rows, hi_col[cols][pp]]
            counts = both.sum(axis=0)
            rank = np.arange(pp.size) - np.repeat(np.cumsum(counts) - counts, counts)
        else:
            key = np.maximum(arr[:, lo_col[cols]], arr[:, hi_col[cols]])
            seq = np.argsort(key, axis=0, kind="stable")  # each pair's items in arrival order
            xa = np.take_along_axis(x[:, lo_col[cols]], seq, axis=0)
            xb = np.take_along_axis(x[:, hi_col[cols]], seq, axis=0)
            both = np.take_along_axis(key, seq, axis=0) < big
            pp, rank = np.nonzero(both.T)  # pair by pair, each in arrival order
            va, vb = xa[rank, pp], xb[rank, pp]
            rows = seq[rank, pp]  # each item's row of the (replay-ordered) table
        nonbinary = (va != 0.0) & (va != 1.0) | (vb != 0.0) & (vb != 1.0)
        advance(paths, cols[pp], va - vb, nonbinary, base_n=zero, base_s=zero,
                base_v=zero, log_threshold=log_thr, margin=margin)
        if cpaths is not None:
            advance_clusters(cpaths, cols[pp], codes[rows], va - vb,
                             rank.astype(np.float64) + 1.0, r=cluster_items,
                             log_threshold=log_thr, margin=margin)


def _scores_of(x: np.ndarray, present: np.ndarray, used: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Presence and 0/1 scores (0 where absent, float32: exact) of the columns ``used``
    (ascending), without copies of the whole table when they are all of them."""
    every = used.size == x.shape[1]
    pres = present if every else present[:, used]
    xs = np.zeros(pres.shape, dtype=np.float32)
    np.copyto(xs, x if every else x[:, used], casting="same_kind", where=pres)
    return pres, xs


def _pair_sums(pres: np.ndarray, xs: np.ndarray, a: np.ndarray, b: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sums (n, S, V) of the pairs (a, b) of columns over a block of rows of 0/1 scores
    (``xs``, 0 where absent; presence ``pres``): n = Σ P_a P_b, S = Σ (x_a − x_b) and
    V = Σ (x_a − x_b)² on the rows both have. Integers, exact.

    Many pairs of few models: dense products of the block's columns, n = Σ P_a P_b,
    S = Σ P_b X_a − Σ P_a X_b, V = Σ P_b X_a + Σ P_a X_b − 2 Σ X_a X_b (with every score
    present n is the rows and Σ P_b X_a the column sums of X: one product), exact in float32
    while the rows are fewer than 2^24. Few pairs: their columns side by side.
    """
    rows, k = pres.shape
    used = np.zeros(k, dtype=bool)
    used[a] = True
    used[b] = True
    ku = int(used.sum())
    full = bool(pres.all())
    if ku * ku * (1 if full else 3) > _PRODUCT_CELLS * a.size:
        n, s, v = np.empty(a.size), np.empty(a.size), np.empty(a.size)
        chunk = max(1, _FOLLOW_CELLS // max(rows, 1))
        for top in range(0, a.size, chunk):
            at = slice(top, top + chunk)
            both = pres[:, a[at]] & pres[:, b[at]]
            d = np.where(both, xs[:, a[at]] - xs[:, b[at]], 0.0)
            n[at] = np.count_nonzero(both, axis=0)
            s[at] = d.sum(axis=0)
            v[at] = np.count_nonzero(d, axis=0)
        return n, s, v
    if ku < k:
        local = np.cumsum(used) - 1
        a, b = local[a], local[b]
        cols = np.flatnonzero(used)
        pres, xs = pres[:, cols], xs[:, cols]
    flat_ab, flat_ba = a * ku + b, b * ku + a
    x32 = xs.astype(np.float32, copy=False)
    both_x = (x32.T @ x32).ravel().take(flat_ab).astype(np.float64)  # Σ X_a X_b
    if full:
        col = x32.sum(axis=0, dtype=np.float64)
        b_has_a, a_has_b = col[a], col[b]  # Σ P_b X_a, Σ P_a X_b
        n = np.full(a.size, float(rows))
    else:
        p32 = pres.astype(np.float32)
        px = (p32.T @ x32).ravel()  # [i, j]: Σ P_i X_j
        b_has_a = px.take(flat_ba).astype(np.float64)
        a_has_b = px.take(flat_ab).astype(np.float64)
        n = (p32.T @ p32).ravel().take(flat_ab).astype(np.float64)
    return n, b_has_a - a_has_b, b_has_a + a_has_b - 2.0 * both_x


def _screened_pass(paths: PairPaths, x: np.ndarray, present: np.ndarray, lo_col: np.ndarray,
                   hi_col: np.ndarray, *, log_thr: np.ndarray, margin: float | None,
                   segment: int = _SEGMENT_ROWS) -> None:
    """:func:`advance` on every pair's paired items in row order, 0/1 scores only, following
    item by item only the pairs a run of rows may decide — the same paths as the full pass
    (the live core's screen, :func:`monitor.core.paths._run`, applied to the table).

    The rows go in segments of ``segment``, every pair's sums (n, S, V) at the segment's end
    from dense products (:func:`_pair_sums`). In a segment a pair is skipped when it is
    decided (its path stops at its decision), when it is short of the paired items its next
    decision needs at least (:func:`items_to_decide` on its state when last read: the live
    core's ``recheck``), or when its e-process provably cannot cross nor be declared
    equivalent between the segment's two end states (:class:`_Screen`: the tests of
    :func:`may_cross` and :func:`may_be_equivalent`); the segment is halved for the others,
    and each half screened the same way, down to runs of ``_LEAF_ROWS`` rows followed item
    by item from the pair's sums at the run's start (:func:`_descend`). With every score 0/1 a pair's only
    state besides its decision is its kind, McNemar from its first paired item, set here for
    skipped pairs too; the sums are integers, so the bases give the same floats as the full
    pass.
    """
    m = lo_col.size
    n_rows = x.shape[0]
    used, inverse = np.unique(np.r_[lo_col, hi_col], return_inverse=True)
    a, b = inverse[:m], inverse[m:]
    pres, xs = _scores_of(x, present, used)
    n, s, v = np.zeros(m), np.zeros(m), np.zeros(m)
    recheck = np.zeros(m)
    still = np.ones(m, dtype=bool)  # neither resolved nor declared equivalent
    screen = _Screen(log_thr, margin)
    with single_thread_blas():  # small products: OpenBLAS' pool only slows them on a busy host
        for top in range(0, n_rows, segment):
            rows = slice(top, top + segment)
            dn, ds, dv = _pair_sums(pres[rows], xs[rows], a, b)
            n1, s1, v1 = n + dn, s + ds, v + dv
            cand = np.flatnonzero(still & (dn > 0) & (n1 >= recheck))
            if cand.size:
                paths.kind[cand[paths.kind[cand] == UNSET]] = MCNEMAR  # 0/1 from the first
                base = (n[cand], s[cand], v[cand])
                after = (n1[cand], s1[cand], v1[cand])
                go = np.flatnonzero(screen.may_decide(cand, base, after))
                for at in range(0, go.size, _DESCEND_PAIRS):  # pairs apart: bounded memory
                    g = go[at:at + _DESCEND_PAIRS]
                    _descend(paths, cand[g], pres[rows], xs[rows], a, b,
                             base=tuple(x0[g] for x0 in base),
                             total=(dn[cand[g]], ds[cand[g]], dv[cand[g]]), screen=screen)
                still[cand] = paths.open(cand)
                # When each pair read here needs reading again: after as many more paired
                # items as its next decision needs at least.
                read = cand[still[cand]]
                more = items_to_decide(
                    paths.kind[read], n1[read], s1[read], v1[read],
                    start_n=paths.start_n[read], start_s=paths.start_s[read],
                    start_v=paths.start_v[read], start_log_plus=paths.start_log_plus[read],
                    start_log_minus=paths.start_log_minus[read], log_threshold=log_thr[read],
                    margin=margin)
                recheck[read] = n1[read] + more
            n, s, v = n1, s1, v1


@dataclass(frozen=True)
class _Screen:
    """Whether pairs (fresh McNemar segments) may be decided on a run of rows, from the run's
    end points: :func:`may_cross` and, with a margin, :func:`may_be_equivalent` — the live
    core's screen. ``False`` is a proof that no item of the run decided the pair."""

    log_thr: np.ndarray
    margin: float | None

    def may_decide(self, f: np.ndarray, before: tuple[np.ndarray, ...],
                   after: tuple[np.ndarray, ...]) -> np.ndarray:
        """Pairs ``f`` between the states (n, S, V) ``before`` and ``after``."""
        (n0, s0, v0), (n1, s1, v1) = before, after
        zero = np.zeros(f.size)
        out = may_cross(np.full(f.size, MCNEMAR, dtype=np.int8), (n0, s0, v0), (n1, s1, v1),
                        start_n=zero, start_s=zero, start_v=zero, start_log_plus=zero,
                        start_log_minus=zero, log_threshold=self.log_thr[f])
        if self.margin is not None:  # a tied pair may be declared equivalent in the run
            r = np.flatnonzero(~out)
            out[r] = may_be_equivalent(
                (n0[r], s0[r], v0[r]), (n1[r], s1[r], v1[r]), start_n=zero[r],
                start_s=zero[r], start_v=zero[r], margin=self.margin,
                log_threshold=self.log_thr[f[r]])
        return out


def _descend(paths: PairPaths, f: np.ndarray, pres: np.ndarray, xs: np.ndarray, a: np.ndarray,
             b: np.ndarray, *, base: tuple[np.ndarray, ...], total: tuple[np.ndarray, ...],
             screen: _Screen) -> None:
    """Pairs ``f`` (ascending, open, McNemar with nothing frozen) along a run of rows that may
    decide them, from their sums ``base`` at its start (``total``: their sums over the run):
    each half of the run screened as :func:`_screened_pass` screens a segment, and the
    halves that may decide a pair halved again; runs of ``_LEAF_ROWS`` rows or fewer are
    followed item by item by :func:`advance`."""
    if f.size == 0:
        return
    rows = pres.shape[0]
    if rows <= _LEAF_ROWS:
        local = paths.take(f)
        both = pres[:, a[f]] & pres[:, b[f]]
        pp, rr = np.nonzero(both.T)  # pair by pair, each in row order
        d = (xs[rr, a[f][pp]] - xs[rr, b[f][pp]]).astype(np.float64)
        advance(local, pp, d, np.zeros(pp.size, dtype=bool), base_n=base[0],
                base_s=base[1], base_v=base[2], log_threshold=screen.log_thr[f],
                margin=screen.margin)
        paths.put(f, local)
        return
    half = rows // 2
    first = _pair_sums(pres[:half], xs[:half], a[f], b[f])
    second = tuple(t - h for t, h in zip(total, first, strict=True))
    start = base
    for rows_of, inc in ((slice(0, half), first), (slice(half, rows), second)):
        after = tuple(x0 + dx for x0, dx in zip(start, inc, strict=True))
        go = np.flatnonzero((inc[0] > 0) & paths.open(f))
        go = go[screen.may_decide(f[go], tuple(x0[go] for x0 in start),
                                  tuple(x1[go] for x1 in after))]
        _descend(paths, f[go], pres[rows_of], xs[rows_of], a, b,
                 base=tuple(x0[go] for x0 in start), total=tuple(dx[go] for dx in inc),
                 screen=screen)
        start = after

def anytime_replay(
    table: ScoreTable,
    pairs: tuple[np.ndarray, np.ndarray],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    order: str = "shuffle",
    seed: int | None = REPLAY_SEED,
    planned_models: int = PLANNED_MODELS,
    rule: str = "board",
    cluster_items: int = CLUSTER_ITEMS,
    margin: float | None = MARGIN,
    fixed_alpha: float | None = None,
) -> AnytimeReplay:
    """Replay the pairs (columns a[k], b[k] of ``table.scores``; A = a[k]) item by item.

    The figures' fixed-N part (q, N*, MDE) is at ``fixed_alpha`` (the report's family-adjusted
    level; default ``alpha``), as the live table's is at its family's.

    ``rule="board"`` (the live monitor's): each pair's share γ_p of α is fixed by its birth
    order — models are born in the order of their first score in the replay, ties by column —
    and the pair is decided at its first crossing of 1/γ_p by
    :func:`monitor.stats.sequential.advance`, the function the live core calls, so the two
    agree on the same order. ``rule="family"``: every pair of these m at α/m (e-Bonferroni over
    a family fixed in advance; what the live monitor did before it kept one guarantee for the
    board's life), kept for comparison. A table whose groups are sampled clusters
    (``--cluster-col``) is decided by the sampled-clusters rule
    (:mod:`monitor.stats.cluster_sequential`, ``cluster_items`` items per observation), as
    the live monitor decides a benchmark of that design.
    """
    paths, shares, a_first, cpaths = _decide(
        table, pairs, alpha=alpha, order=order, seed=seed, planned_models=planned_models,
        rule=rule, cluster_items=cluster_items, margin=margin)
    a_idx = np.asarray(pairs[0], dtype=np.intp)
    b_idx = np.asarray(pairs[1], dtype=np.intp)
    # The final figures of A − B: the sums on the shared items (the board's, with the table's
    # groups; order does not matter for them) and the path, flipped where B was born first.
    _, _, sums = pair_sums(table.scores, pairs=(a_idx, b_idx), groups=table.groups,
                           group_kind=table.group_kind or "cluster")
    oriented = paths.seen_from(np.arange(a_idx.size), ~a_first)
    design = design_of(table)
    clusters = None
    if cpaths is not None:
        sign = np.where(a_first, 1, -1)
        clusters = ClusterDecisions(
            r=cluster_items, n_obs=cpaths.n_obs, s=cpaths.s * sign, v=cpaths.v,
            decided=(cpaths.decided * sign).astype(np.int8), decided_n=cpaths.decided_n,
            decided_obs=cpaths.decided_obs, decided_log_e=cpaths.decided_log_e,
            seen=int(cluster_codes(table).max(initial=0)), equivalent=cpaths.equivalent)
    figures = pair_figures(replace(sums, paths=oriented, design=design, clusters=clusters),
                           alpha=alpha if fixed_alpha is None else fixed_alpha, power=power,
                           e_alpha=shares)
    code = figures.verdict_code()
    decided_n = cpaths.decided_n if cpaths is not None else paths.decided_n
    return AnytimeReplay(
        order=order, seed=seed if order == "shuffle" else None, alpha=alpha, rule=rule,
        planned_models=planned_models, figures=figures, cluster_items=cluster_items,
        first_resolved_at=tuple(round(float(n)) if dec else None
                                for n, dec in zip(decided_n, code, strict=True)))


def with_anytime(
    report: ResolutionReport,
    table: ScoreTable,
    *,
    order: str = "shuffle",
    seed: int | None = REPLAY_SEED,
    planned_models: int = PLANNED_MODELS,
    rule: str = "board",
    cluster_items: int = CLUSTER_ITEMS,
    margin: float | None = MARGIN,
) -> ResolutionReport:
    """``report`` with its verdicts: the decisions of every pair sharing items, replayed item
    by item in ``order`` (same α and power), by which the ranking is ordered (a model decided
    above another comes first, :func:`monitor.stats.ranks.consistent_order`, as live), the
    family's pairs with their anytime figures, and every model's rank set and tier from the
    decisions (:func:`monitor.stats.ranks.ranks_and_tiers`, the live board's function)."""
    k = len(table.models)
    res = report.figures

    def replay_of(rep: ResolutionReport) -> AnytimeReplay:
        pairs = (rep.figures.a, rep.figures.b)
        return anytime_replay(table, pairs, alpha=rep.alpha, power=rep.power, order=order,
                              seed=seed, planned_models=planned_models, rule=rule,
                              cluster_items=cluster_items, margin=margin,
                              fixed_alpha=rep.alpha_per_pair)

    replay: AnytimeReplay | None = None
    if report.family == "all":
        # The family is every pair: its replay holds every decision.
        replay = replay_of(report)
        a_all, b_all, decided = res.a, res.b, replay.figures.verdict_code()
    else:
        # Every other pair only for its decision: no figures, no intervals.
        present = (~np.isnan(table.scores)).astype(float)
        a_all, b_all = np.triu_indices(k, 1)
        shared = (present.T @ present)[a_all, b_all] > 0
        a_all, b_all = a_all[shared], b_all[shared]
        paths, _, a_first, cpaths = _decide(
            table, (a_all, b_all), alpha=report.alpha, order=order, seed=seed,
            planned_models=planned_models, rule=rule, cluster_items=cluster_items,
            margin=margin)
        chosen = paths.decided if cpaths is None else cpaths.decided
        decided = chosen * np.where(a_first, 1, -1)
    above = np.zeros((k, k), dtype=bool)
    # resolutions separate models (+1: A above, −1: B above; 2, equivalent, does not)
    above[a_all[decided == 1], b_all[decided == 1]] = True
    above[b_all[decided == -1], a_all[decided == -1]] = True
    index = {name: j for j, name in enumerate(table.models)}
    current = [index[e.model] for e in report.ranking]
    by_mean, _, _ = ranking_order(table)
    ranked = list(consistent_order([int(j) for j in by_mean], above))
    if ranked != current:
        # A decision against the means: the ranking follows the decisions, so the family's
        # pairs (and the fixed-N figures read on them) are those of that order.
        report = build_report(
            table, family=report.family, correction=report.correction, alpha=report.alpha,
            power=report.power, selection=report.selection, rank_method=report.rank_method,
            rank_seed=report.rank_seed if report.rank_seed is not None else DEFAULT_RANK_SEED,
            rank_draws=report.rank_draws, order=ranked)
        replay = None
    if replay is None:
        replay = replay_of(report)
    o = np.asarray(ranked, dtype=np.int64)
    low, high, tier = ranks_and_tiers(above[np.ix_(o, o)])
    entries = tuple(replace(e, rank_low=int(low[r]), rank_high=int(high[r]),
                            tier=int(tier[r])) for r, e in enumerate(report.ranking))
    adjacent = [bool(above[x, y]) for x, y in itertools.pairwise(ranked)]
    standing = {"resolved": bool(adjacent) and all(adjacent),
                "unresolved_pairs": sum(not x for x in adjacent),
                "top_resolved": len(ranked) >= 2 and bool(above[ranked[0], ranked[1:]].all()),
                "tiers": int(tier.max(initial=0))}
    return replace(report, anytime=replay, ranking=entries, standing=standing)


def _cluster_replay(cpaths: ClusterPaths, x: np.ndarray, present: np.ndarray,
                    lo_col: np.ndarray, hi_col: np.ndarray, codes: np.ndarray, *, r: int,
                    log_thr: np.ndarray, margin: float | None) -> None:
    """The sampled-clusters decisions of fresh pairs along 0/1 scores that arrive row by row:
    the state :func:`advance_clusters` leaves after every paired item of every pair, built
    from the observations instead of item by item.

    A pair's observation of cluster c is the sum of D over its first ``r`` paired items of c
    and enters at the ``r``-th: with every score present in those rows, the first ``r`` rows
    of c for every pair (column sums); else each pair's own, from its presence. Each pair's
    observations in entry order give its sums (integers, exact) after each; the e-values
    are evaluated only where they may reach the level — :func:`max_log_e` of the observations
    so far for resolution, the arithmetic bound :func:`equivalence_bound` (the one
    :func:`advance` screens with) for equivalence — and the first observation that decides
    is the decision, resolution first. The state stops there, as the item-by-item pass stops
    it: the items a decided pair took are those up to its decision.
    """
    _, xs = _scores_of(x, present, np.arange(x.shape[1]))

    def solve(at: slice) -> None:  # pairs apart: blocks on the process's cores
        block = ClusterPaths.empty(lo_col[at].size, cpaths.count.shape[1])
        _cluster_block(block, xs, present, lo_col[at], hi_col[at], codes, r=r,
                       log_thr=log_thr[at], margin=margin)
        cpaths.put(at, block)

    each_chunk(solve, lo_col.size, _CLUSTER_PAIRS)


def _cluster_block(cpaths: ClusterPaths, xs: np.ndarray, present: np.ndarray,
                   lo_col: np.ndarray, hi_col: np.ndarray, codes: np.ndarray, *, r: int,
                   log_thr: np.ndarray, margin: float | None) -> None:
    """:func:`_cluster_replay` of some pairs (scores ``xs``, 0 where absent)."""
    m = lo_col.size
    k_groups = cpaths.count.shape[1]

    big = np.iinfo(np.int64).max
    count = np.zeros((m, k_groups), dtype=np.int64)
    total = np.zeros((m, k_groups))
    enter = np.full((m, k_groups), big, dtype=np.int64)  # the row of each observation's entry
    for c in range(1, k_groups):
        rows_c = np.flatnonzero(codes == c)
        if rows_c.size == 0:
            continue
        if rows_c.size >= r and present[rows_c[:r]].all():
            # every pair's first r paired items of c: the first r rows of c
            col = xs[rows_c[:r]].sum(axis=0)
            count[:, c] = r
            total[:, c] = col[lo_col] - col[hi_col]
            enter[:, c] = rows_c[r - 1]
            continue
        todo = np.arange(m)
        for window in (min(rows_c.size, 4 * r), rows_c.size):
            block = rows_c[:window]
            step = max(1, _FOLLOW_CELLS // max(window, 1))
            short = []
            for top in range(0, todo.size, step):
                p = todo[top:top + step]
                both = present[np.ix_(block, lo_col[p])] & present[np.ix_(block, hi_col[p])]
                rank = np.cumsum(both, axis=0)
                taken = both & (rank <= r)
                d = xs[np.ix_(block, lo_col[p])] - xs[np.ix_(block, hi_col[p])]
                got = rank[-1]
                done = (got >= r) | (window == rows_c.size)
                q = p[done]
                count[q, c] = np.minimum(got[done], r)
                total[q, c] = np.where(taken[:, done], d[:, done], 0.0).sum(axis=0)
                full = got[done] >= r
                at = np.argmax(rank[:, done][:, full] >= r, axis=0)
                enter[q[full], c] = block[at]
                short.append(p[~done])
            todo = np.concatenate(short) if short else todo[:0]
            if todo.size == 0:
                break
    # Each pair's observations in entry order, and its sums after each.
    order = np.argsort(enter, axis=1, kind="stable")
    e_row = np.take_along_axis(enter, order, axis=1)
    t = np.take_along_axis(total, order, axis=1)
    entered = e_row < big
    n_obs = np.cumsum(entered, axis=1).astype(np.float64)
    s = np.cumsum(np.where(entered, t, 0.0), axis=1)
    v = np.cumsum(np.where(entered, t * t, 0.0), axis=1)
    side_thr = log_thr + _LOG2
    thr = np.broadcast_to(side_thr[:, None], entered.shape)
    reach = np.array([max_log_e(j) for j in range(k_groups + 1)])
    maybe = entered & (reach[n_obs.astype(np.int64)] >= thr - 1e-9)
    crossed = np.zeros(entered.shape, dtype=bool)
    plus = np.zeros(entered.shape)
    minus = np.zeros(entered.shape)
    if maybe.any():
        p_, m_ = log_e_cluster_sides(n_obs[maybe], s[maybe] / r, v[maybe] / (r * r))
        plus[maybe], minus[maybe] = p_, m_
        crossed[maybe] = (p_ >= thr[maybe]) | (m_ >= thr[maybe])
    equal = np.zeros(entered.shape, dtype=bool)
    eq_log_e = np.zeros(entered.shape)
    if margin is not None:
        b1, b2 = equivalence_bound(n_obs, s / r, v / (r * r), margin)
        maybe = entered & ~crossed & (b1 >= thr - 1e-9) & (b2 >= thr - 1e-9)
        if maybe.any():
            n_o, s_o, v_o = n_obs[maybe], s[maybe] / r, v[maybe] / (r * r)
            _, below = ep.log_e_bounded_sides(n_o, s_o, v_o, delta=margin,
                                              v_opt=V_OPT_CLUSTERS)
            above, _ = ep.log_e_bounded_sides(n_o, s_o, v_o, delta=-margin,
                                              v_opt=V_OPT_CLUSTERS)
            equal[maybe] = (below >= thr[maybe]) & (above >= thr[maybe])
            eq_log_e[maybe] = np.minimum(below, above)
    hit = crossed | equal
    decided = np.flatnonzero(hit.any(axis=1))
    last = entered.sum(axis=1) - 1  # each pair's last observation (−1: none)
    at = last.copy()
    at[decided] = np.argmax(hit[decided], axis=1)
    has = at >= 0
    idx = np.flatnonzero(has)
    cpaths.n_obs[idx] = n_obs[idx, at[idx]]
    cpaths.s[idx] = s[idx, at[idx]]
    cpaths.v[idx] = v[idx, at[idx]]
    if decided.size:
        j = at[decided]
        res = crossed[decided, j]
        q = decided[res]
        cpaths.decided[q] = np.where(plus[q, j[res]] >= minus[q, j[res]], 1, -1).astype(np.int8)
        cpaths.decided_log_e[q] = np.logaddexp(plus[q, j[res]], minus[q, j[res]]) - _LOG2
        q_eq = decided[~res]
        cpaths.equivalent[q_eq] = 1
        cpaths.decided_log_e[q_eq] = eq_log_e[q_eq, j[~res]]
        cpaths.decided_obs[decided] = n_obs[decided, j]
        stop = e_row[decided, j]
        # The decided pairs' items up to the decision: their paired items by then (n at the
        # decision), and in each cluster its first r of them.
        seq = np.argsort(stop, kind="stable")
        step = max(1, _FOLLOW_CELLS // max(int(stop.max()) + 1, 1))
        for top in range(0, seq.size, step):
            w = seq[top:top + step]
            q, last_row = decided[w], stop[w]
            rows = np.arange(int(last_row.max()) + 1)
            both = present[np.ix_(rows, lo_col[q])] & present[np.ix_(rows, hi_col[q])]
            both &= rows[:, None] <= last_row[None, :]
            cpaths.decided_n[q] = both.sum(axis=0)
            d = np.where(both, xs[np.ix_(rows, lo_col[q])] - xs[np.ix_(rows, hi_col[q])], 0.0)
            onehot = (codes[rows][None, :] == np.arange(k_groups)[:, None]).astype(np.float64)
            upto_n = (onehot @ both.astype(np.float64)).T  # paired items of each cluster
            upto_s = (onehot @ d).T
            whole = enter[q] <= last_row[:, None]  # entered by the decision: all r taken
            count[q] = np.where(whole, r, upto_n)
            total[q] = np.where(whole, total[q], upto_s)
    count[:, 0] = 0
    total[:, 0] = 0.0
    cpaths.count[:] = count.astype(cpaths.count.dtype)
    cpaths.total[:] = total
