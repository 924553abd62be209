"""Snapshots of the live monitor: its whole state as a plain JSON-able value and back.

Only scores and decisions are stored (not derived statistics): the Gram matrices are rebuilt
from the scores on load, so a snapshot is compact and ``from_snapshot(to_snapshot())``
continues exactly as the original would.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import numpy as np

from monitor.core.board import BenchmarkState


def bench_to_snapshot(st: BenchmarkState) -> dict[str, Any]:
    """One benchmark's state as a plain JSON-able value (scores, not derived statistics)."""
    rows, k, cap = len(st.item_ids), st.k, st.X.shape[1]
    x = st.X[:rows, :k]
    # Row-major like np.argwhere; .tolist() gives the Python ints and floats at C
    # speed (indexing x[r, c] cell by cell dominated a checkpoint of a large matrix).
    rr, cc = np.nonzero(~np.isnan(x))
    return {
        "items": list(st.item_ids),
        "models": list(st.models),
        "clusters": list(st.clusters[1:]),
        "group": st.group[:rows].tolist(),
        "cells": [[r, c, v] for r, c, v in zip(rr.tolist(), cc.tolist(),
                                                x[rr, cc].tolist(), strict=True)],
        "flagged": {f: sorted(items) for f, items in sorted(st.flagged.items())},
        "excluded": sorted(st.excluded),
        "perturbed": [[v, i, m, sc] for (v, i, m), sc in st.perturbed.items()],
        "stability": {m: {k2: list(v) for k2, v in kinds.items()}
                      for m, kinds in st.stability.items()},
        "codes": st.codes[:k, :k].tolist(),
        "last_ranking": [list(st.last_ranking[0]), st.last_ranking[1],
                         list(st.last_ranking[2])],
        # The sequential state of each pair (k × k, upper triangle used): the order its items
        # came in is not in the cells, so decisions and e-process kinds are kept as they are.
        "paths": {name: getattr(st.paths, name).reshape(cap, cap)[:k, :k].tolist()
                  for name in st.paths.__dataclass_fields__},
        "decided_ts": [[lo, hi, ts.isoformat()] for (lo, hi), ts in st.decided_ts.items()],
    }


def bench_from_snapshot(name: str, b: dict[str, Any]) -> BenchmarkState:
    """Rebuild one benchmark's state from :func:`bench_to_snapshot` output."""
    st = BenchmarkState(name)
    st.excluded = set(b["excluded"])
    for cl in b["clusters"]:
        st.cluster_id[cl] = len(st.clusters)
        st.clusters.append(cl)
    st.grams = np.zeros((len(st.clusters), *st.grams.shape[1:]))
    for item, g in zip(b["items"], b["group"], strict=True):
        r = st.row_of(item, None)
        st.group[r] = g
    for model in b["models"]:
        st.col_of(model)
    rows_all = np.arange(len(st.item_ids), dtype=np.int64)
    old = st.rows_view(rows_all)
    for r, c, score in b["cells"]:
        st.X[r, c] = score
        if score not in (0.0, 1.0):
            st.nonbinary[c] += 1
    st.fold(rows_all, old, st.rows_view(rows_all))
    st.flagged = {f: set(items) for f, items in b["flagged"].items()}
    st.perturbed = {(v, i, m): float(sc) for v, i, m, sc in b["perturbed"]}
    for v, i, m, _ in b["perturbed"]:
        st.perturbed_by_cell.setdefault((i, m), []).append(v)
    if all(len(v) == 3 for kinds in b["stability"].values() for v in kinds.values()):
        st.stability = {m: {k2: list(v) for k2, v in kinds.items()}
                        for m, kinds in b["stability"].items()}
    else:  # a snapshot from before the right-on-original count: recount
        st.stability = {}
        for v, i, m, sc in b["perturbed"]:
            row, col = st.item_row.get(i), st.model_col.get(m)
            if row is not None and col is not None and not np.isnan(st.X[row, col]):
                st.count_stability(m, v.split(":", 1)[1], float(st.X[row, col]),
                                   float(sc))
    k = st.k
    st.codes[:k, :k] = np.asarray(b["codes"], dtype=np.int8).reshape(k, k)
    last = b["last_ranking"]
    st.last_ranking = (tuple(last[0]), bool(last[1]),
                       tuple(int(t) for t in last[2]) if len(last) > 2 else ())
    cap = st.X.shape[1]
    for name, values in b.get("paths", {}).items():
        if name not in st.paths.__dataclass_fields__:
            continue  # a field of an older layout
        target = getattr(st.paths, name).reshape(cap, cap)
        target[:k, :k] = np.asarray(values, dtype=target.dtype).reshape(k, k)
    st.decided_ts = {(int(lo), int(hi)): datetime.fromisoformat(ts)
                     for lo, hi, ts in b.get("decided_ts", [])}
    st.table_stale = True
    return st
