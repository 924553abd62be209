"""``--json`` of a document with one very long list, written in chunks as it is rendered.

The list arrives as runs of :class:`~monitor.offline.report.PairColumn` (one column per key)
and each run is rendered column by column — a column of numbers at once, no object per entry —
to exactly the text ``json.dumps(jsonable(doc), indent=2, allow_nan=False)`` would print,
without holding that text (hundreds of MB for the 499,500 pairs of 1,000 models) in memory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from json.encoder import encode_basestring_ascii as _quote
from typing import Any, TextIO

import numpy as np
import orjson

from monitor.contracts import jsonable, wire_float
from monitor.core.records import PairColumn
from monitor.offline.report import ResolutionReport

_BOOLS = ("false", "true")
# Stands in for the list while the rest of the document is dumped; a NUL cannot come from a
# table, and the document is checked to hold it exactly once.
_MARKER = "\x00streamed list\x00"


def write_json(out: TextIO, doc: dict[str, Any], *, key: str,
               runs: Iterable[Sequence[PairColumn]]) -> None:
    """Write ``doc`` as indented JSON with ``doc[key]`` replaced by the objects of ``runs``."""
    text = json.dumps(jsonable({**doc, key: _MARKER}), indent=2, allow_nan=False)
    parts = text.split(json.dumps(_MARKER))
    if len(parts) != 2:
        raise ValueError(f"the document must hold {key!r} once")
    out.write(parts[0])
    opened = False
    # A run's text is written by a thread while the next is rendered (the write releases
    # the GIL); one writer, so the text stays in order.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-monitor-json") as writer:
        written: Future[None] | None = None
        for columns in runs:
            objects = render_objects(columns, indent=4)
            if not objects:
                continue
            if written is not None:
                written.result()
            written = writer.submit(_write, out, ",\n" if opened else "[\n", objects)
            opened = True
        if written is not None:
            written.result()
    out.write("\n  ]" if opened else "[]")
    out.write(parts[1])
    out.write("\n")


def _write(out: TextIO, *texts: str) -> None:
    for text in texts:
        out.write(text)


def render_objects(columns: Sequence[PairColumn], *, indent: int) -> str:
    """The JSON text of the objects of a run joined by ``,\\n``, each at nesting depth
    ``indent`` spaces (json's ``indent=2`` layout: keys ``indent + 2`` deep, the closing
    brace ``indent`` deep)."""
    outer = " " * indent
    pieces, _ = _pieces(columns, indent=indent, between=",\n" + outer)
    return outer + "".join(pieces) if pieces else ""


def _pieces(columns: Sequence[PairColumn], *, indent: int, between: str
            ) -> tuple[list[str], int]:
    """Every piece of the text of the objects of a run in output order — per object: before
    key 1, value 1, before key 2, …, the closing brace and ``between`` (not after the last)
    — filled a column at a time; and the pieces per object. A value that is an object is
    its own pieces in place (no text per nested object)."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return [], 1
    pad, outer = " " * (indent + 2), " " * indent
    # Each column's values: one token per object, or a nested object's pieces (width each).
    values: list[tuple[list[str], int] | None] = []
    for column in columns:
        present = column.present
        if present is not None and not present.any():
            values.append(None)  # a key no object of the run has
        elif column.kind == "object":
            values.append(_pieces(column.values, indent=indent + 2, between=""))
        else:
            values.append((tokens(column, indent=indent + 2), 1))
    stride = sum(1 + (0 if v is None else v[1]) for v in values) + 1
    pieces: list[str] = [""] * (n * stride)
    empty = [True] * n  # object i has no key yet
    pending = True  # some object has no key yet
    at = 0  # the column's first slot in an object
    for column, value in zip(columns, values, strict=True):
        if value is None:
            at += 1
            continue
        texts, width = value
        present = column.present
        if present is not None and present.all():
            present = None
        name = f"{pad}{json.dumps(column.key)}: "
        later, first = ",\n" + name, "{\n" + name
        here: list[bool] | None = None
        if present is None and not pending:
            pieces[at::stride] = [later] * n
        else:
            here = [True] * n if present is None else present.tolist()
            pieces[at::stride] = [(first if e else later) if h else ""
                                  for e, h in zip(empty, here, strict=True)]
            empty = [e and not h for e, h in zip(empty, here, strict=True)]
            pending = any(empty)
        for k in range(width):
            part = texts[k::width]
            if here is not None and present is not None:
                part = [v if h else "" for v, h in zip(part, here, strict=True)]
            pieces[at + 1 + k::stride] = part
        at += 1 + width
    closing = "\n" + outer + "}"
    pieces[stride - 1::stride] = [("{}" if e else closing) + between for e in empty]
    pieces[-1] = pieces[-1][:len(pieces[-1]) - len(between)]
    return pieces, stride


def tokens(column: PairColumn, *, indent: int = 0) -> list[str]:
    """The JSON text of every value of ``column`` (numbers by :func:`wire_float`), a nested
    dict or list laid out as at depth ``indent`` (the depth of its key); object columns are
    :func:`_pieces`' own."""
    kind, values = column.kind, column.values
    if kind == "float":
        return _float_tokens(np.asarray(values, dtype=np.float64))
    if kind == "count":
        x = np.asarray(values, dtype=np.float64)
        exact = np.abs(x) < 2.0**62  # finite and exact as int64
        out = list(map(int.__repr__, np.where(exact, x, 0.0).astype(np.int64).tolist()))
        for i in np.flatnonzero(~exact).tolist():
            v = float(x[i])
            out[i] = repr(int(v)) if math.isfinite(v) else json.dumps(wire_float(v))
        return out
    if kind == "int":
        return list(map(int.__repr__, np.asarray(values, dtype=np.int64).tolist()))
    if kind == "bool":
        return [_BOOLS[v] for v in np.asarray(values, dtype=bool).tolist()]
    if kind == "str":
        memo = {v: json.dumps(v) for v in set(values)}
        return [memo[v] for v in values]
    if kind == "null":
        return ["null"] * len(values)
    # Plain values; a dict or list among them nested as json's indent=2 lays it out here. A
    # string is quoted by the encoder json.dumps itself calls for it (ensure_ascii).
    newline = "\n" + " " * indent
    return ["null" if v is None else _quote(v) if type(v) is str else
            json.dumps(jsonable(v), indent=2, allow_nan=False).replace("\n", newline)
            for v in values]


def _float_tokens(x: np.ndarray) -> list[str]:
    if x.size >= 1024 and np.unique(x[:256].view(np.int64)).size <= 128:
        # Columns such as the models' means repeat few values (a sample of them shows it):
        # write each distinct bit pattern once (a pattern, not a value, so that −0.0 stays
        # −0.0).
        bits, inverse = np.unique(x.view(np.int64), return_inverse=True)
        if bits.size * 2 <= x.size:
            distinct = _float_tokens(bits.view(np.float64))
            return [distinct[i] for i in inverse.reshape(-1).tolist()]
    if x.size == 0:
        return []
    # orjson writes the shortest round-trip digits, as repr does, at a quarter of repr's cost;
    # the two lay them out alike except between 1e-9 and 1e-4 in magnitude (0.00001 and 1e-7
    # against repr's 1e-05 and 1e-07; from e-10 down both write the exponent alike) and for
    # non-finite values (null): those are written by repr and wire_float.
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].decode().split(",")
    finite = np.isfinite(x)
    size = np.abs(x)
    for i in np.flatnonzero(finite & (size < 1e-4) & (size >= 9e-10)).tolist():
        out[i] = repr(float(x[i]))
    for i in np.flatnonzero(~finite).tolist():
        out[i] = json.dumps(wire_float(float(x[i])))
    return out


#: Pairs rendered per run: the text of one run is a few MB.
CHUNK_PAIRS = 1 << 14


def write_report(out: TextIO, report: ResolutionReport, *, chunk_pairs: int = CHUNK_PAIRS
                 ) -> None:
    """``report.as_dict()`` as ``--json`` text, its pairs rendered ``chunk_pairs`` at a time."""
    n = len(report.figures)
    runs = (report.pair_columns(np.arange(lo, min(n, lo + chunk_pairs)))
            for lo in range(0, n, chunk_pairs))
    write_json(out, report.as_dict(pairs=[]), key="pairs", runs=runs)
