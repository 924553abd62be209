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
from dataclasses import replace

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
from monitor.stats.board import pair_sums
from monitor.stats.cluster_sequential import CLUSTER_ITEMS, ClusterPaths, advance_clusters
from monitor.stats.figures import ClusterDecisions, Design, pair_figures
from monitor.stats.ranks import consistent_order, ranks_and_tiers
from monitor.stats.sequential import (
    MCNEMAR,
    UNSET,
    PairPaths,
    advance,
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
# rows per segment of the screened 0/1 pass (:func:`_screened_pass`)
_SEGMENT_ROWS = 256
# rows per run inside a segment, and cells per block, of the pairs a segment follows
_SUB_ROWS = 16
_FOLLOW_CELLS = 2_000_000


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
    perm = np.random.default_rng(seed).permutation(table.scores.shape[0])
    x = table.scores[perm]
    n, kk = x.shape
    return perm, np.where(np.isnan(x), -1, np.arange(n * kk, dtype=np.int64).reshape(n, kk))


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
    table's groups are sampled clusters — the pairs' clustered decisions (same orientation)."""
    if order not in ORDERS:
        raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, got {order!r}")
    if rule not in RULES:
        raise ValueError(f"`rule` must be one of {', '.join(RULES)}, got {rule!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    a_idx = np.asarray(pairs[0], dtype=np.intp)
    b_idx = np.asarray(pairs[1], dtype=np.intp)
    m = int(a_idx.size)
    perm, arrival = replay_arrival(table, order=order, seed=seed)
    x = table.scores if perm is None else table.scores[perm]
    k = x.shape[1]
    present = ~np.isnan(x)
    # Models are born at their first result; a pair's items come in the order their second
    # score arrives.
    big = np.iinfo(np.int64).max
    arr = np.where(present, arrival, big)
    # (A repeated-sample table in file order: a model is born at its first sample.)
    first = table.born if table.born is not None and order == "file" else arr.min(axis=0)
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
    # Scores that arrive row by row (a shuffled replay, a wide table's file order): each pair's
    # items arrive in row order, so no pair's items need sorting.
    seen = arr[present]  # row-major
    by_rows = bool(np.all(seen[1:] > seen[:-1]))
    binary = bool(np.all((x[present] == 0.0) | (x[present] == 1.0)))
    screened = by_rows and binary
    if screened:
        _screened_pass(paths, x, present, lo_col, hi_col, log_thr=log_thr, margin=margin)
    if cpaths is not None or not screened:
        _item_pass(paths if not screened else None, cpaths, x, present, arr, lo_col, hi_col,
                   codes, by_rows=by_rows, log_thr=log_thr, margin=margin,
                   cluster_items=cluster_items)
    return paths, shares, a_first, cpaths


def _item_pass(paths: PairPaths | None, cpaths: ClusterPaths | None, x: np.ndarray,
               present: np.ndarray, arr: np.ndarray, lo_col: np.ndarray, hi_col: np.ndarray,
               codes: np.ndarray, *, by_rows: bool, log_thr: np.ndarray,
               margin: float | None, cluster_items: int) -> None:
    """Every paired item of every pair, in arrival order, through :func:`advance` (``paths``,
    unless None) and :func:`advance_clusters` (``cpaths``, unless None), a chunk of pairs at
    a time."""
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
        if paths is not None:
            nonbinary = (va != 0.0) & (va != 1.0) | (vb != 0.0) & (vb != 1.0)
            advance(paths, cols[pp], va - vb, nonbinary, base_n=zero, base_s=zero,
                    base_v=zero, log_threshold=log_thr, margin=margin)
        if cpaths is not None:
            advance_clusters(cpaths, cols[pp], codes[rows], va - vb,
                             rank.astype(np.float64) + 1.0, r=cluster_items,
                             log_threshold=log_thr, margin=margin)


def _segment_sums(pres: np.ndarray, xs: np.ndarray, flat_ab: np.ndarray, flat_ba: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs' (n, S, V) over a block of rows of 0/1 scores (``xs``, 0 where absent) and
    presence ``pres``, by dense products: n = Σ P_a P_b, S = Σ P_b X_a − Σ P_a X_b and
    V = Σ P_b X_a + Σ P_a X_b − 2 Σ X_a X_b (with every score present, n is the rows and
    Σ P_b X_a the column sums of X: one product). ``flat_ab`` = a · k + b of each pair (a its
    first model), ``flat_ba`` = b · k + a. Exact in float32: every count is below 2^24."""
    x32 = xs.astype(np.float32)
    both = (x32.T @ x32).ravel().take(flat_ab).astype(np.float64)  # Σ X_a X_b
    k = xs.shape[1]
    if pres.all():
        col = x32.sum(axis=0, dtype=np.float64)
        b_has_a = col[flat_ab // k]  # Σ P_b X_a
        a_has_b = col[flat_ab % k]  # Σ P_a X_b
        dn = np.full(flat_ab.size, float(pres.shape[0]))
    else:
        p32 = pres.astype(np.float32)
        px = (p32.T @ x32).ravel()  # [i, j]: Σ P_i X_j
        b_has_a = px.take(flat_ba).astype(np.float64)
        a_has_b = px.take(flat_ab).astype(np.float64)
        dn = (p32.T @ p32).ravel().take(flat_ab).astype(np.float64)
    return dn, b_has_a - a_has_b, b_has_a + a_has_b - 2.0 * both


def _screened_pass(paths: PairPaths, x: np.ndarray, present: np.ndarray, lo_col: np.ndarray,
                   hi_col: np.ndarray, *, log_thr: np.ndarray, margin: float | None,
                   segment: int = _SEGMENT_ROWS) -> None:
    """:func:`advance` on every pair's paired items in row order, 0/1 scores only, following
    item by item only the pairs a segment of rows may decide — the same paths as the full
    pass (the live core's screen, :func:`monitor.core.paths._run`, applied to the table).

    The rows go in segments of ``segment``; every pair's sums (n, S, V) at each segment's
    end come from dense products (:func:`_segment_sums`). In a segment a pair is skipped when
    it is decided (its path stops at its decision), when it is short of the paired items its
    next decision needs at least (:func:`items_to_decide` on its state when last read: the
    live core's ``recheck``), or when its e-process provably cannot cross nor be declared
    equivalent between the segment's two end states (:func:`may_cross`,
    :func:`may_be_equivalent`); the others are followed item by item from their sums at the
    segment start. With every score 0/1 a pair's only state besides its decision is its kind,
    McNemar from its first paired item, set here for skipped pairs too; the sums are integers,
    so the bases give the same floats as the full pass.
    """
    m = lo_col.size
    n_rows = x.shape[0]
    used, inverse = np.unique(np.r_[lo_col, hi_col], return_inverse=True)
    a, b = inverse[:m], inverse[m:]
    k = used.size
    flat_ab, flat_ba = a * k + b, b * k + a
    pres = present[:, used]
    xs = np.where(pres, x[:, used], 0.0)
    n, s, v = np.zeros(m), np.zeros(m), np.zeros(m)
    recheck = np.zeros(m)
    still = np.ones(m, dtype=bool)  # neither resolved nor declared equivalent
    with single_thread_blas():  # small products: OpenBLAS' pool only slows them on a busy host
        for top in range(0, n_rows, segment):
            n, s, v = _screen_segment(paths, pres[top:top + segment], xs[top:top + segment],
                                      a, b, flat_ab, flat_ba, sums=(n, s, v), recheck=recheck,
                                      still=still, log_thr=log_thr, margin=margin)


def _screen_segment(paths: PairPaths, pres: np.ndarray, xs: np.ndarray, a: np.ndarray,
                    b: np.ndarray, flat_ab: np.ndarray, flat_ba: np.ndarray, *,
                    sums: tuple[np.ndarray, np.ndarray, np.ndarray], recheck: np.ndarray,
                    still: np.ndarray, log_thr: np.ndarray, margin: float | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One segment of :func:`_screened_pass`: ``paths``, ``recheck`` and ``still`` updated in
    place; returns the pairs' sums at the segment's end."""
    n, s, v = sums
    dn, ds, dv = _segment_sums(pres, xs, flat_ab, flat_ba)
    n1, s1, v1 = n + dn, s + ds, v + dv
    cand = np.flatnonzero(still & (dn > 0) & (n1 >= recheck))
    if cand.size == 0:
        return n1, s1, v1
    unset = cand[paths.kind[cand] == UNSET]
    paths.kind[unset] = MCNEMAR  # every item 0/1: McNemar from the first
    before = (n[cand], s[cand], v[cand])
    after = (n1[cand], s1[cand], v1[cand])
    start = {"start_n": paths.start_n[cand], "start_s": paths.start_s[cand],
             "start_v": paths.start_v[cand]}
    thr = log_thr[cand]
    follow = may_cross(paths.kind[cand], before, after, **start,
                       start_log_plus=paths.start_log_plus[cand],
                       start_log_minus=paths.start_log_minus[cand], log_threshold=thr)
    if margin is not None:  # a tied pair may be declared equivalent in the segment
        follow |= may_be_equivalent(before, after, **start, margin=margin, log_threshold=thr)
    _follow_segment(paths, cand[follow], pres, xs, a, b, base=(n, s, v), log_thr=log_thr,
                    margin=margin)
    still[cand] = paths.open(cand)
    # When each pair read here needs reading again: after as many more paired items as its
    # next decision needs at least.
    read = cand[still[cand]]
    more = items_to_decide(
        paths.kind[read], n1[read], s1[read], v1[read], start_n=paths.start_n[read],
        start_s=paths.start_s[read], start_v=paths.start_v[read],
        start_log_plus=paths.start_log_plus[read], start_log_minus=paths.start_log_minus[read],
        log_threshold=log_thr[read], margin=margin)
    recheck[read] = n1[read] + more
    return n1, s1, v1

def _follow_segment(paths: PairPaths, follow: np.ndarray, pres: np.ndarray, xs: np.ndarray,
                    a: np.ndarray, b: np.ndarray, *, base: tuple[np.ndarray, ...],
                    log_thr: np.ndarray, margin: float | None, sub: int = _SUB_ROWS) -> None:
    """:func:`advance` on the pairs ``follow`` (ascending; McNemar, nothing frozen) along a
    segment's rows (0/1 scores ``xs``, presence ``pres``), from their sums ``base`` at the
    segment start: the segment screened again in runs of ``sub`` rows, as the segment was
    (:func:`may_cross`, :func:`may_be_equivalent` between each run's end points, their
    sums from cumulative counts), and only the runs that may decide a pair followed item by
    item."""
    rows = pres.shape[0]
    edges = np.arange(0, rows, sub)
    chunk = max(1, _FOLLOW_CELLS // max(rows, 1))
    for top in range(0, follow.size, chunk):
        f = follow[top:top + chunk]
        both = pres[:, a[f]] & pres[:, b[f]]
        d = np.where(both, xs[:, a[f]] - xs[:, b[f]], 0.0)
        # the pairs' sums at each run's start and end (J + 1 rows): integers, exact
        sums = []
        for inc, at in ((both.astype(np.float64), base[0]), (d, base[1]), (np.abs(d), base[2])):
            runs = np.add.reduceat(inc, edges, axis=0)
            sums.append(at[f][None, :] + np.cumsum(np.r_[np.zeros((1, f.size)), runs], axis=0))
        n, s, v = sums
        local = paths.take(f)
        j_of, p_of = np.nonzero(n[1:] > n[:-1])  # runs that bring a pair items
        ends = (n[j_of, p_of], s[j_of, p_of], v[j_of, p_of])
        after = (n[j_of + 1, p_of], s[j_of + 1, p_of], v[j_of + 1, p_of])
        start = {"start_n": local.start_n[p_of], "start_s": local.start_s[p_of],
                 "start_v": local.start_v[p_of]}
        thr = log_thr[f]
        flag = may_cross(local.kind[p_of], ends, after, **start,
                         start_log_plus=local.start_log_plus[p_of],
                         start_log_minus=local.start_log_minus[p_of],
                         log_threshold=thr[p_of])
        if margin is not None:
            flag |= may_be_equivalent(ends, after, **start, margin=margin,
                                      log_threshold=thr[p_of])
        j_of, p_of = j_of[flag], p_of[flag]
        for j in np.unique(j_of).tolist():
            q = p_of[j_of == j]  # ascending
            q = q[local.open(q)]
            if q.size == 0:
                continue
            block = both[edges[j]:edges[j] + sub, q]
            pp, rr = np.nonzero(block.T)  # pair by pair, each in row order
            advance(local, q[pp], d[edges[j] + rr, q[pp]], np.zeros(pp.size, dtype=bool),
                    base_n=n[j], base_s=s[j], base_v=v[j], log_threshold=thr, margin=margin)
        for name in PairPaths.__dataclass_fields__:
            getattr(paths, name)[f] = getattr(local, name)


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
