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
    for columns in runs:
        objects = render_objects(columns, indent=4)
        if not objects:
            continue
        out.write(",\n" if opened else "[\n")
        out.write(objects)
        opened = True
    out.write("\n  ]" if opened else "[]")
    out.write(parts[1])
    out.write("\n")


def render_objects(columns: Sequence[PairColumn], *, indent: int) -> str:
    """The JSON text of the objects of a run joined by ``,\\n``, each at nesting depth
    ``indent`` spaces (json's ``indent=2`` layout: keys ``indent + 2`` deep, the closing
    brace ``indent`` deep)."""
    outer = " " * indent
    return ",\n".join(outer + text for text in object_texts(columns, indent=indent))


def object_texts(columns: Sequence[PairColumn], *, indent: int) -> list[str]:
    """The JSON text of each object of a run, from its opening brace to its closing one, the
    brace at depth ``indent`` (json's ``indent=2`` layout)."""
    n = len(columns[0]) if columns else 0
    if n == 0:
        return []
    pad, outer = " " * (indent + 2), " " * indent
    # One list of every piece of text in output order — per object: before key 1, value 1,
    # before key 2, …, the closing brace — filled a column at a time, joined once per object.
    stride = 2 * len(columns) + 1
    pieces: list[str] = [""] * (n * stride)
    empty = [True] * n  # object i has no key yet
    pending = True  # some object has no key yet
    for j, column in enumerate(columns):
        name = f"{pad}{json.dumps(column.key)}: "
        later, first = ",\n" + name, "{\n" + name
        values = tokens(column, indent=indent + 2)
        if column.present is None and not pending:
            pieces[2 * j::stride] = [later] * n
        else:
            here = [True] * n if column.present is None else column.present.tolist()
            pieces[2 * j::stride] = [(first if e else later) if h else ""
                                     for e, h in zip(empty, here, strict=True)]
            values = [v if h else "" for v, h in zip(values, here, strict=True)]
            empty = [e and not h for e, h in zip(empty, here, strict=True)]
            pending = any(empty)
        pieces[2 * j + 1::stride] = values
    closing = "\n" + outer + "}"
    pieces[stride - 1::stride] = ["{}" if e else closing for e in empty]
    return ["".join(pieces[i:i + stride]) for i in range(0, n * stride, stride)]


def tokens(column: PairColumn, *, indent: int = 0) -> list[str]:
    """The JSON text of every value of ``column`` (numbers by :func:`wire_float`), a value
    that is an object laid out as at depth ``indent`` (the depth of its key)."""
    kind, values = column.kind, column.values
    if kind == "object":
        return object_texts(values, indent=indent)
    if kind == "float":
        return _float_tokens(np.asarray(values, dtype=np.float64))
    if kind == "count":
        x = np.asarray(values, dtype=np.float64)
        if x.size and bool(np.all(np.abs(x) < 2.0**62)):  # finite and exact as int64
            return list(map(int.__repr__, x.astype(np.int64).tolist()))
        return [repr(int(v)) if math.isfinite(v) else json.dumps(wire_float(v))
                for v in x.tolist()]
    if kind == "int":
        return list(map(int.__repr__, np.asarray(values, dtype=np.int64).tolist()))
    if kind == "bool":
        return [_BOOLS[v] for v in np.asarray(values, dtype=bool).tolist()]
    if kind == "str":
        memo = {v: json.dumps(v) for v in set(values)}
        return [memo[v] for v in values]
    if kind == "null":
        return ["null"] * len(values)
    # Plain values; a dict or list among them nested as json's indent=2 lays it out here.
    newline = "\n" + " " * indent
    return ["null" if v is None else
            json.dumps(jsonable(v), indent=2, allow_nan=False).replace("\n", newline)
            for v in values]


def _float_tokens(x: np.ndarray) -> list[str]:
    if x.size >= 1024:
        # Columns such as the models' means repeat few values: write each distinct bit
        # pattern once (a pattern, not a value, so that −0.0 stays −0.0).
        bits, inverse = np.unique(x.view(np.int64), return_inverse=True)
        if bits.size * 2 <= x.size:
            distinct = _float_tokens(bits.view(np.float64))
            return [distinct[i] for i in inverse.reshape(-1).tolist()]
    if x.size == 0:
        return []
    # orjson writes the shortest round-trip digits, as repr does, at a quarter of repr's cost;
    # the two lay them out alike except below 1e-4 in magnitude (0.00001 vs repr's 1e-05) and
    # for non-finite values (null): those few are written by repr and wire_float.
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].decode().split(",")
    finite = np.isfinite(x)
    for i in np.flatnonzero(finite & (np.abs(x) < 1e-4)).tolist():
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
