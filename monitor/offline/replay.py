"""The anytime replay of the offline report: a table item by item through the e-processes.

For each pair of the family the table is replayed in a chosen item order (file order = order of
first appearance of item_id, or a seeded shuffle) and the pair is *resolved (anytime)* at the
first paired item where E_n ≥ m/α (e-Bonferroni over the m pairs of the family). Validity
assumes the items arrive in an order independent of their outcomes; shuffling the replay order
makes that true by construction.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from monitor.io.tables import ScoreTable
from monitor.offline.report import AnytimeReplay, ResolutionReport
from monitor.stats import eprocess as ep
from monitor.stats.figures import PairSums, pair_figures

ORDERS = ("file", "shuffle")
_CHUNK_CELLS = 4_000_000  # items × pairs per chunk


def _mcnemar_bounds(n_disc: int, thr: float) -> np.ndarray:
    """u[k] = least j with log E(j, k − j) ≥ thr, j ≥ k/2 (k + 1 if none), k = 0..n_disc.

    E is symmetric in (n10, n01) and increases away from n10 = n01, so for k discordant pairs
    the pair has crossed iff max(n10, n01) ≥ u[k].
    """
    k = np.arange(n_disc + 1, dtype=np.float64)
    lo = np.ceil(k / 2.0)
    hi = k.copy()
    reach = ep.log_e_mcnemar(hi, k - hi) >= thr
    lo = lo - 1.0  # invariant: log E(lo) < thr (or lo below the range), log E(hi) ≥ thr
    while True:
        gap = hi - lo > 1
        if not np.any(gap & reach):
            break
        mid = np.clip(np.floor((lo + hi) / 2.0), 0.0, k)
        above = ep.log_e_mcnemar(mid, k - mid) >= thr
        move = gap & reach
        hi = np.where(move & above, mid, hi)
        lo = np.where(move & ~above, mid, lo)
    return np.where(reach, hi, k + 1.0).astype(np.int64)


def anytime_replay(
    table: ScoreTable,
    pairs: tuple[np.ndarray, np.ndarray],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    order: str = "file",
    seed: int | None = None,
) -> AnytimeReplay:
    """Replay the pairs (columns a[k], b[k] of ``table.scores``) item by item.

    Each pair's e-process is the McNemar mixture when both columns are 0/1, else the bounded
    one (the kernel's rule). The first crossing of m/α in the replay order is found from
    cumulative counts; the final figures (e-value, confidence sequence and N*_AV at α/m) are
    the kernel's on the whole table.
    """
    if order not in ORDERS:
        raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, got {order!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    a_idx = np.asarray(pairs[0], dtype=np.intp)
    b_idx = np.asarray(pairs[1], dtype=np.intp)
    m = int(a_idx.size)
    x = table.scores
    if order == "shuffle":
        x = x[np.random.default_rng(seed).permutation(x.shape[0])]
    n_items = x.shape[0]
    alpha_pair = alpha / max(m, 1)  # e-Bonferroni: E ≥ m/α
    thr = math.log(1.0 / alpha_pair)
    present_all = ~np.isnan(x)
    col_binary = np.all(~present_all | (x == 0) | (x == 1), axis=0)
    pair_binary = col_binary[a_idx] & col_binary[b_idx]
    bounds = (_mcnemar_bounds(n_items, thr) if pair_binary.any()
              else np.zeros(0, dtype=np.int64))

    sums = {key: np.zeros(m) for key in ("n", "sa", "sb", "saa", "sbb", "sab")}
    first = np.full(m, -1, dtype=np.int64)
    chunk = max(1, _CHUNK_CELLS // max(n_items, 1))
    for binary in (True, False):
        sel = np.flatnonzero(pair_binary == binary)
        for start in range(0, sel.size, chunk):
            ks = sel[start:start + chunk]
            xa, xb = x[:, a_idx[ks]], x[:, b_idx[ks]]
            present = ~np.isnan(xa) & ~np.isnan(xb)
            xa0, xb0 = np.where(present, xa, 0.0), np.where(present, xb, 0.0)
            d = xa0 - xb0
            cum_n = np.cumsum(present, axis=0, dtype=np.int64)
            if binary:
                c10 = np.cumsum(d > 0, axis=0, dtype=np.int64)
                c01 = np.cumsum(d < 0, axis=0, dtype=np.int64)
                crossed = np.maximum(c10, c01) >= bounds[c10 + c01]
            else:
                log_e = ep.log_e_bounded(cum_n, np.cumsum(d, axis=0),
                                         np.cumsum(d * d, axis=0))
                crossed = np.asarray(log_e) >= thr
            row = np.argmax(crossed, axis=0)
            first[ks] = np.where(crossed.any(axis=0), cum_n[row, np.arange(row.size)], -1)
            for key, val in (("n", present), ("sa", xa0), ("sb", xb0), ("saa", xa0 * xa0),
                             ("sbb", xb0 * xb0), ("sab", xa0 * xb0)):
                sums[key][ks] = val.sum(axis=0)

    figures = pair_figures(PairSums.build(n=sums["n"], sa=sums["sa"], sb=sums["sb"],
                                          saa=sums["saa"], sbb=sums["sbb"], sab=sums["sab"],
                                          binary=pair_binary), alpha=alpha_pair,
                           power=power)
    return AnytimeReplay(order=order, seed=seed, alpha=alpha, figures=figures,
                         first_resolved_at=tuple(int(f) if f >= 0 else None for f in first))


def with_anytime(
    report: ResolutionReport,
    table: ScoreTable,
    *,
    order: str = "file",
    seed: int | None = None,
) -> ResolutionReport:
    """``report`` with the anytime replay of its family's pairs (same α and power)."""
    res = report.figures
    replay = anytime_replay(table, (res.a, res.b), alpha=report.alpha, power=report.power,
                            order=order, seed=seed)
    return replace(report, anytime=replay)
