"""Snapshots of the live monitor: its whole state as arrays plus a small JSON header, and back.

A snapshot holds what cannot be recomputed cheaply or at all: the scores (int8 codes while all
are 0/1), the pair sums (so a restart costs a copy, not a refold of every item against every
model), each pair's sequential state (its items' order is not in the scores) and the verdicts
last emitted. ``load(dump(x))`` continues exactly as ``x`` would, and :func:`pack` of the same
state gives the same bytes.

The byte format (:func:`pack` / :func:`unpack`): ``LLMMON-SNAPSHOT 2\\n``, then zlib(level 1) of
an 8-byte header length, the JSON header (arrays' dtype, shape and offset) and the arrays'
raw little-endian bytes.
"""

from __future__ import annotations

import json
import struct
import zlib
from datetime import datetime
from typing import Any

import numpy as np

from monitor.core.board import BenchmarkState
from monitor.core.config import BenchmarkSpec
from monitor.stats.cluster_sequential import CLUSTER_ITEMS
from monitor.stats.sequential import PairPaths

MAGIC = b"LLMMON-SNAPSHOT 2\n"
_DENSE_PATHS = ("kind", "decided")  # int8 per pair; the float fields are mostly 0: sparse


def bench_to_snapshot(st: BenchmarkState) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """One benchmark's state as (JSON-able header, named arrays)."""
    rows, k, cap = len(st.item_ids), st.k, st.cap
    x = st.X[:rows, :k]
    binary = bool(np.all(st.nonbinary[:k] == 0))
    arrays: dict[str, np.ndarray] = {
        "group": st.group[:rows], "excluded_rows": st.excluded_rows[:rows],
        "x": np.where(np.isnan(x), -1, x).astype(np.int8) if binary else x,
        "nonbinary": st.nonbinary[:k], "n": st.n.full(k), "sx": st.sx.full(k),
        "p": st.p.full(k), "codes": st.codes[:k, :k], "decided_at": st.decided_at[:k, :k],
    }
    if st.sx2 is not None:
        arrays["sx2"] = st.sx2.full(k)
    if st.Y is not None:
        arrays["y"] = st.Y[:rows, :k]  # the samples, of complete cells and waiting ones
    for name in PairPaths.__dataclass_fields__:
        grid = getattr(st.paths, name).reshape(cap, cap)[:k, :k]
        if name in _DENSE_PATHS:
            arrays[f"paths.{name}"] = grid
        else:
            at = np.flatnonzero(grid)
            arrays[f"paths.{name}.at"] = at
            arrays[f"paths.{name}.values"] = grid.ravel()[at]
    header = {
        "items": st.item_ids, "models": st.models, "clusters": st.clusters[1:],
        "binary_codes": binary,
        "flagged": {f: sorted(items) for f, items in sorted(st.flagged.items())},
        "excluded": sorted(st.excluded),
        "perturbed": [[v, i, m, sc] for (v, i, m), sc in st.perturbed.items()],
        "stability": st.stability,
        "last_ranking": [list(st.last_ranking[0]), st.last_ranking[1],
                         list(st.last_ranking[2])],
        "times": [t.isoformat() for t in st.times],
    }
    if st.samples > 1:
        header["samples"] = st.samples  # absent: one sample per (item, model)
    if st.declared != "default":
        header["declared"] = st.declared
    if st.spec.design != "items":
        header["design"] = st.spec.design
        header["cluster_items"] = st.spec.cluster_items
    header["margin"] = st.spec.margin
    if st.cpaths is not None:
        cp = st.cpaths
        used = k * (k - 1) // 2
        g = len(st.clusters)
        for name in cp.PER_PAIR:
            arrays[f"cpaths.{name}"] = getattr(cp, name)[:used]
        count = cp.count[:used, :g]
        at = np.flatnonzero(count)  # most cells are empty until their cluster is reached
        arrays["cpaths.count.at"] = at
        arrays["cpaths.count.values"] = count.ravel()[at]
        arrays["cpaths.total.values"] = cp.total[:used, :g].ravel()[at]
    return header, arrays


def bench_from_snapshot(name: str, header: dict[str, Any], arrays: dict[str, np.ndarray]
                        ) -> BenchmarkState:
    """Rebuild one benchmark's state from :func:`bench_to_snapshot` output."""
    spec = BenchmarkSpec(samples=int(header.get("samples", 1)),
                         design=header.get("design", "items"),
                         cluster_items=int(header.get("cluster_items", CLUSTER_ITEMS)),
                         # snapshots from before equivalence decisions held none
                         margin=header.get("margin"))
    st = BenchmarkState(name, spec, declared=str(header.get("declared", "default")))
    st.excluded = set(header["excluded"])
    for cl in header["clusters"]:
        st.cluster_id[cl] = len(st.clusters)
        st.clusters.append(cl)
    for item in header["items"]:
        st.row_of(item, None)
    for model in header["models"]:
        st.col_of(model)
    rows, k = len(st.item_ids), st.k
    st.group[:rows] = arrays["group"]
    st.excluded_rows[:rows] = arrays["excluded_rows"]
    x = arrays["x"]
    st.X[:rows, :k] = np.where(x < 0, np.nan, x) if header["binary_codes"] else x
    st.nonbinary[:k] = arrays["nonbinary"]
    if st.Y is not None:
        st.Y[:rows, :k] = arrays["y"]
    if "sx2" in arrays:
        st.to_float()
        assert st.sx2 is not None
        st.sx2.set_full(k, arrays["sx2"])
    st.n.set_full(k, arrays["n"])
    st.sx.set_full(k, arrays["sx"])
    st.p.set_full(k, arrays["p"])
    st.codes[:k, :k] = arrays["codes"]
    st.decided_at[:k, :k] = arrays["decided_at"]
    cap = st.cap
    for field in PairPaths.__dataclass_fields__:
        target = getattr(st.paths, field).reshape(cap, cap)
        if field in _DENSE_PATHS:
            target[:k, :k] = arrays[f"paths.{field}"]
        elif f"paths.{field}.at" not in arrays:
            continue  # a field newer than the snapshot (equivalent): none held then
        else:
            at = arrays[f"paths.{field}.at"]
            target[at // max(k, 1), at % max(k, 1)] = arrays[f"paths.{field}.values"]
    if st.cpaths is not None:
        used, g = k * (k - 1) // 2, len(st.clusters)
        cp = st.cpaths = st.cpaths.grown(used, g)
        for field in cp.PER_PAIR:
            if f"cpaths.{field}" in arrays:  # (equivalent: absent from older snapshots)
                getattr(cp, field)[:used] = arrays[f"cpaths.{field}"]
        at = arrays["cpaths.count.at"]
        count, total = np.zeros(used * g, np.int16), np.zeros(used * g)
        count[at] = arrays["cpaths.count.values"]
        total[at] = arrays["cpaths.total.values"]
        cp.count[:used, :g] = count.reshape(used, g)
        cp.total[:used, :g] = total.reshape(used, g)
    st.times = [datetime.fromisoformat(t) for t in header["times"]]
    st.flagged = {f: set(items) for f, items in header["flagged"].items()}
    st.perturbed = {(v, i, m): float(sc) for v, i, m, sc in header["perturbed"]}
    for v, i, m, _ in header["perturbed"]:
        st.perturbed_by_cell.setdefault((i, m), []).append(v)
    st.stability = {m: {kind: list(c) for kind, c in kinds.items()}
                    for m, kinds in header["stability"].items()}
    last = header["last_ranking"]
    st.last_ranking = (tuple(last[0]), bool(last[1]), tuple(int(t) for t in last[2]))
    st.table_stale = True
    return st


def pack(header: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    """``header`` and ``arrays`` as snapshot bytes (the same input gives the same bytes)."""
    layout = []
    chunks = []
    offset = 0
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        layout.append([name, a.dtype.str, list(a.shape), offset, a.nbytes])
        chunks.append(a.tobytes())
        offset += a.nbytes
    head = json.dumps({"header": header, "arrays": layout}, separators=(",", ":")).encode()
    comp = zlib.compressobj(1)
    parts = [MAGIC, comp.compress(struct.pack("<Q", len(head)) + head)]
    parts.extend(comp.compress(c) for c in chunks)
    parts.append(comp.flush())
    return b"".join(parts)


def unpack(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The (header, arrays) of :func:`pack` bytes; a clear error for anything else."""
    if not data.startswith(MAGIC):
        raise ValueError("not an llm-monitor snapshot (version 2): bad magic bytes")
    try:
        raw = zlib.decompress(data[len(MAGIC):])
        (size,) = struct.unpack("<Q", raw[:8])
        meta = json.loads(raw[8:8 + size])
    except (zlib.error, struct.error, ValueError) as exc:
        raise ValueError(f"corrupt llm-monitor snapshot: {exc}") from exc
    body = memoryview(raw)[8 + size:]
    arrays = {}
    for name, dtype, shape, offset, nbytes in meta["arrays"]:
        if offset + nbytes > len(body):
            raise ValueError(f"corrupt llm-monitor snapshot: array {name!r} is truncated")
        arrays[name] = np.frombuffer(body[offset:offset + nbytes], dtype=np.dtype(dtype)
                                     ).reshape(shape)
    return meta["header"], arrays
