"""The sequential pass of the live core: each pair's e-process followed item by item.

:func:`advance_paths` turns a batch's accepted results into the new paired items of every
pair, in event order, and runs :func:`monitor.stats.sequential.advance` on them;
:func:`exclude_rows` takes items out of the pair sums and starts the affected pairs' next
e-process segment. Both change a :class:`~monitor.core.board.BenchmarkState` in place.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from monitor.core.board import BenchmarkState
from monitor.stats.sequential import advance, log_e_sides

_PATH_CELLS = 4_000_000  # (results × models) cells per chunk of the sequential pass
_NONE = np.zeros(0, dtype=np.int64)


def advance_paths(st: BenchmarkState, rows: NDArray[np.int64], cols: NDArray[np.int64],
                  scores: NDArray[np.float64], log_threshold: NDArray[np.float64]
                  ) -> NDArray[np.int64]:
    """The sequential pass: the batch's new paired items, in event order, through each
    pair's e-process from the sums before them (:func:`monitor.stats.sequential.advance`).

    The result at position t pairs with every model that has the item already or got it
    earlier in the batch; items excluded from resolution pair with nothing.
    """
    keep = ~st.excluded_rows[rows]
    rows, cols, scores = rows[keep], cols[keep], scores[keep]
    if rows.size == 0:
        return _NONE
    k, cap = st.k, st.X.shape[1]
    uniq, inv = np.unique(rows, return_inverse=True)
    before = st.X[uniq, :k]
    after = before.copy()
    after[inv, cols] = scores
    present = ~np.isnan(before)
    written = np.full((uniq.size, k), rows.size, dtype=np.int64)
    written[inv, cols] = np.arange(rows.size)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    step = max(1, _PATH_CELLS // max(k, 1))
    for start in range(0, rows.size, step):
        t = np.arange(start, min(start + step, rows.size))
        mask = present[inv[t]] | (written[inv[t]] < t[:, None])
        mask[np.arange(t.size), cols[t]] = False
        tt, jj = np.nonzero(mask)
        tt = t[tt]
        c = cols[tt]
        x_c, x_j = scores[tt], after[inv[tt], jj]
        first = c < jj
        lo, hi = np.where(first, c, jj), np.where(first, jj, c)
        d = np.where(first, x_c - x_j, x_j - x_c)
        nonbinary = (x_c != 0.0) & (x_c != 1.0) | (x_j != 0.0) & (x_j != 1.0)
        parts.append((lo * cap + hi, d, nonbinary))
    pair = np.concatenate([p[0] for p in parts])
    d = np.concatenate([p[1] for p in parts])
    nonbinary = np.concatenate([p[2] for p in parts])
    if pair.size == 0:
        return _NONE
    # The sums before the batch, for the pairs it touches only (advance reads them by pair).
    touched = np.unique(pair)
    base = np.zeros((3, cap * cap))
    base[:, touched] = st.path_sums(touched)
    return advance(st.paths, pair, d, nonbinary, base_n=base[0], base_s=base[1],
                   base_v=base[2], log_threshold=log_threshold)


def exclude_rows(st: BenchmarkState, newly_excluded: NDArray[np.int64]) -> None:
    """Take ``newly_excluded`` rows out of the pair sums; the affected pairs' e-processes
    continue in a new segment (the evidence seen so far stays frozen)."""
    old = st.rows_view(newly_excluded)
    present = (~np.isnan(old[:, :st.k])).astype(np.float64)
    lo, hi = np.nonzero(np.triu(present.T @ present > 0, 1))
    flat = lo * st.X.shape[1] + hi
    n0, s0, v0 = st.path_sums(flat)
    p = st.paths
    sides_now = log_e_sides(p.kind[flat], n0, s0, v0,
                            start_n=p.start_n[flat], start_s=p.start_s[flat],
                            start_v=p.start_v[flat],
                            start_log_plus=p.start_log_plus[flat],
                            start_log_minus=p.start_log_minus[flat])
    st.excluded_rows[newly_excluded] = True
    st.fold(newly_excluded, old, st.rows_view(newly_excluded))
    # The affected pairs' e-processes continue in a new segment from the sums without
    # the excluded items (the evidence seen so far stays frozen).
    p.restart(flat, sides_now, *st.path_sums(flat))
