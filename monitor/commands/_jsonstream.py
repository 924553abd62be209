"""``--json`` of a document with one very long list, written in chunks as it is rendered.

The list arrives as runs of :class:`~monitor.offline.report.PairColumn` (one column per key)
and each run is rendered without an object per entry — the numbers of a run in one orjson call,
the text around the values from a template per set of keys, the whole joined once — to exactly
the text ``json.dumps(jsonable(doc), indent=2, allow_nan=False)`` would print, without holding
that text (hundreds of MB for the 499,500 pairs of 1,000 models) in memory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from json.encoder import encode_basestring_ascii as _quote
from typing import Any, TextIO

import numpy as np
import orjson
from numpy.typing import NDArray

from monitor.contracts import jsonable, wire_float
from monitor.core.records import PairColumn
from monitor.offline.report import ResolutionReport

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
    n = len(columns[0]) if columns else 0
    if n == 0:
        return ""
    values = _Values()
    keys = values.layout(columns, indent=indent, absent=None)
    slots = values.texts()
    masks = values.masks
    if len(masks) > 62:
        # The keys an object has are the bits of one int64.
        raise ValueError(f"{len(masks)} keys that only some objects have: at most 62")
    # The text is one flat list joined once: per object the text around its values — a
    # template of its keys — with each value's token in its place, filled a slot at a time.
    codes = np.zeros(n, dtype=np.int64)
    for j, here in enumerate(masks):
        codes |= here.astype(np.int64) << j
    kinds, inverse = np.unique(codes, return_inverse=True)
    stride = len(slots) * 2 + 1
    between = ",\n" + " " * indent
    templates: list[list[str]] = []
    for here in kinds.tolist():  # a template per combination of keys the objects have
        text = [""] * stride
        text[::2] = _template(keys, indent=indent, here=here)
        text[-1] += between
        templates.append(text)
    if len(templates) == 1:
        pieces = templates[0] * n
    else:
        pieces = list(chain.from_iterable(map(templates.__getitem__,
                                              inverse.reshape(-1).tolist())))
    for k, texts in enumerate(slots):
        pieces[2 * k + 1::stride] = texts
    pieces[-1] = pieces[-1][:len(pieces[-1]) - len(between)]
    return " " * indent + "".join(pieces)


# A key's place in an object: its text up to the value (``"key": `` at its depth), the bit of
# its presence mask (-1: in every object) and its value: a slot of values, the one text of a
# value all objects share, or a nested object's keys.
_Key = tuple[str, int, "int | str | list[_Key]"]


class _Values:
    """The values of a run of objects, a slot of tokens per key whose values differ.

    Tokens are made as few times as they can be, and near each other: the floats of a run
    are written as one table (one orjson call and one split, object by object, so that an
    object's tokens lie together for the join), as are its whole numbers; small whole
    numbers, and floats of columns that repeat few values, are shared texts."""

    def __init__(self) -> None:
        self.masks: list[NDArray[np.bool_]] = []  # keys only some objects have
        self._slots: list[list[str]] = []
        self._absent: list[NDArray[np.bool_] | None] = []  # where a slot's key is absent
        self._floats: list[tuple[int, NDArray[np.float64]]] = []
        self._wholes: list[tuple[int, NDArray[np.int64]]] = []
        self._odd: list[tuple[int, int, str]] = []  # (slot, object, text) not in the tables

    def layout(self, columns: Sequence[PairColumn], *, indent: int,
               absent: NDArray[np.bool_] | None) -> list[_Key]:
        """The keys of objects at depth ``indent`` (``absent``: where their parent is); a key
        no object has is left out."""
        out: list[_Key] = []
        for column in columns:
            present = column.present
            if present is not None and not present.any():
                continue
            at, gone = -1, absent
            if present is not None and not present.all():
                at = len(self.masks)
                self.masks.append(present)
                gone = ~present if absent is None else absent | ~present
            name = f"{' ' * (indent + 2)}{json.dumps(column.key)}: "
            value: int | str | list[_Key]
            if column.kind == "object":
                value = self.layout(column.values, indent=indent + 2, absent=gone)
            else:
                value = self._add(column, indent=indent + 2, absent=gone)
            out.append((name, at, value))
        return out

    def _add(self, column: PairColumn, *, indent: int, absent: NDArray[np.bool_] | None
             ) -> int | str:
        """The slot of ``column``'s values, or their text when every object has the same."""
        kind = column.kind
        slot = len(self._slots)
        if kind in ("float", "count", "int"):
            x = np.asarray(column.values, dtype=np.int64 if kind == "int" else np.float64)
            if (x.view(np.int64) == x.view(np.int64)[0]).all():  # one bit pattern
                return tokens(PairColumn(column.key, kind, x[:1]))[0]
            texts: list[str] = []
            if kind == "float":
                few = _few_floats(np.asarray(x, dtype=np.float64))
                if few is None:
                    self._floats.append((slot, np.asarray(x, dtype=np.float64)))
                else:
                    texts = few
            else:
                whole, odd = ((np.asarray(x, dtype=np.int64), []) if kind == "int"
                              else _wholes(np.asarray(x, dtype=np.float64)))
                if whole.min() >= 0 and whole.max() < len(_SMALL):
                    # Counts of items, ranks: each text is one of a table's, shared.
                    texts = list(map(_SMALL.__getitem__, whole.tolist()))
                    for i, text in odd:
                        texts[i] = text
                else:
                    self._wholes.append((slot, whole))
                    self._odd += [(slot, i, text) for i, text in odd]
        else:
            texts = tokens(column, indent=indent)
            if texts.count(texts[0]) == len(texts):
                return texts[0]
        self._slots.append(texts)
        self._absent.append(absent)
        return slot

    def texts(self) -> list[list[str]]:
        """Every slot's tokens, blank where the key is absent."""
        for numbers, write in ((self._floats, _float_tokens), (self._wholes, _orjson_tokens)):
            if numbers:
                flat = write(np.stack([x for _, x in numbers], axis=1))
                for j, (slot, _) in enumerate(numbers):
                    self._slots[slot] = flat[j::len(numbers)]
        for slot, i, text in self._odd:
            self._slots[slot][i] = text
        for slot, absent in enumerate(self._absent):
            if absent is not None:
                texts = self._slots[slot]
                for i in np.flatnonzero(absent).tolist():
                    texts[i] = ""
        return self._slots


def _template(keys: list[_Key], *, indent: int, here: int) -> list[str]:
    """An object's text around its values, as the pieces between them (one more than the
    slots): the keys present in the objects whose presence bits are ``here``; an absent
    key's slots stay as empty places."""
    pieces = [""]
    first = True
    for name, at, value in keys:
        if at >= 0 and not (here >> at) & 1:
            pieces += [""] * _width(value)
            continue
        pieces[-1] += ("{\n" if first else ",\n") + name
        first = False
        if isinstance(value, int):
            pieces.append("")
        elif isinstance(value, str):
            pieces[-1] += value
        else:
            inner = _template(value, indent=indent + 2, here=here)
            pieces[-1] += inner[0]
            pieces += inner[1:]
    pieces[-1] += "{}" if first else "\n" + " " * indent + "}"
    return pieces


def _width(value: int | str | list[_Key]) -> int:
    if isinstance(value, int):
        return 1
    return 0 if isinstance(value, str) else sum(_width(v) for _, _, v in value)


def tokens(column: PairColumn, *, indent: int = 0) -> list[str]:
    """The JSON text of every value of ``column`` (numbers by :func:`wire_float`), a nested
    dict or list laid out as at depth ``indent`` (the depth of its key); object columns are
    :func:`render_objects`' own."""
    kind, values = column.kind, column.values
    if kind == "float":
        return _float_tokens(np.asarray(values, dtype=np.float64).reshape(-1, 1))
    if kind == "count":
        x, odd = _wholes(np.asarray(values, dtype=np.float64))
        out = _orjson_tokens(x)
        for i, text in odd:
            out[i] = text
        return out
    if kind == "int":
        return _orjson_tokens(np.asarray(values, dtype=np.int64))
    if kind == "bool":
        return _orjson_tokens(np.asarray(values, dtype=bool))
    if kind == "str":
        memo = {v: json.dumps(v) for v in set(values)}
        return list(map(memo.__getitem__, values))
    if kind == "null":
        return ["null"] * len(values)
    # Plain values; a dict or list among them nested as json's indent=2 lays it out here. A
    # string is quoted by the encoder json.dumps itself calls for it (ensure_ascii).
    newline = "\n" + " " * indent
    return ["null" if v is None else _quote(v) if type(v) is str else
            repr(v) if type(v) is int else
            json.dumps(jsonable(v), indent=2, allow_nan=False).replace("\n", newline)
            for v in values]


def _orjson_tokens(x: np.ndarray) -> list[str]:
    """orjson's text of every entry of ``x`` (row by row), as one text split."""
    if x.size == 0:
        return []
    text = orjson.dumps(np.ascontiguousarray(x).reshape(-1), option=orjson.OPT_SERIALIZE_NUMPY)
    return text[1:-1].decode().split(",")


def _wholes(x: NDArray[np.float64]) -> tuple[NDArray[np.int64], list[tuple[int, str]]]:
    """A ``count`` column as int64 (0 where it does not fit) and the text of each entry that
    does not (beyond int64, ±∞, NaN): (entry, text)."""
    exact = np.abs(x) < 2.0**62  # finite and exact as int64
    odd = []
    for i in np.flatnonzero(~exact).tolist():
        v = float(x[i])
        odd.append((i, repr(int(v)) if math.isfinite(v) else json.dumps(wire_float(v))))
    return np.where(exact, x, 0.0).astype(np.int64), odd


#: The text of every whole number below 2**15.
_SMALL = tuple(map(str, range(1 << 15)))


def _few_floats(x: NDArray[np.float64]) -> list[str] | None:
    """The tokens of a column of floats that repeats few values (the models' means: a sample
    shows it), each distinct bit pattern written once (a pattern, not a value, so that −0.0
    stays −0.0); None for a column of many values."""
    if x.size < 1024 or np.unique(x[:256].view(np.int64)).size > 128:
        return None
    bits, inverse = np.unique(x.view(np.int64), return_inverse=True)
    if bits.size * 2 > x.size:
        return None
    distinct = _float_tokens(bits.view(np.float64).reshape(-1, 1))
    return list(map(distinct.__getitem__, inverse.reshape(-1).tolist()))


def _float_tokens(x: NDArray[np.float64]) -> list[str]:
    """Every entry of a table of floats, row by row, as json writes it (by :func:`wire_float`).

    orjson writes the shortest round-trip digits, as repr does, at a quarter of repr's cost;
    the two lay them out alike except between 1e-9 and 1e-4 in magnitude (0.00001 and 1e-7
    against repr's 1e-05 and 1e-07; from e-10 down both write the exponent alike) and for
    non-finite values (null): those are written by repr and wire_float."""
    out = _orjson_tokens(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    finite = np.isfinite(flat)
    size = np.abs(flat)
    for i in np.flatnonzero(finite & (size < 1e-4) & (size >= 9e-10)).tolist():
        out[i] = repr(float(flat[i]))
    if not finite.all():
        for value in (math.nan, math.inf, -math.inf):
            text = json.dumps(wire_float(value))
            for i in np.flatnonzero(np.isnan(flat) if value != value else flat == value
                                    ).tolist():
                out[i] = text
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
