"""Readers for per-item score tables: long (one row per item × model) and wide (one column per model).

Both layouts end as one :class:`ScoreTable`: an (items × models) float matrix with NaN where a
model has no result for an item. Every rejection is an :class:`~monitor.errors.InputError`
naming the file, line and field.

Over 400 lines on purpose: the long and wide readers share the parsing, the per-line error
messages and the checks, and one module keeps their rejections identical.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import gzip
import io
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.errors import InputError
from monitor.stats.samples import cell_means, mean_variance

GroupKind = Literal["cluster", "strata"]

#: Cell text meaning "the model answered but no answer could be extracted" (wide tables).
NA_TOKEN = "NA"
_ID_DEFAULTS = ("item_id", "question_id")
_SCORE_DEFAULTS = ("score", "correct")


@dataclass(frozen=True, eq=False)
class ScoreTable:
    """Per-item scores of several models on one benchmark.

    Attributes
    ----------
    source : str
        The file the table was read from.
    benchmark : str or None
        Benchmark name, when known.
    item_ids : ndarray of str
        Item identifiers in order of first appearance.
    models : tuple of str
        Model names in order of first appearance.
    scores : ndarray, shape (n_items, n_models)
        Scores in [0, 1]; NaN where the model has no result for the item.
    groups : ndarray of str or None
        One cluster/stratum label per item.
    group_kind : {"cluster", "strata"} or None
        Whether ``groups`` are sampled clusters or fixed strata.
    group_col : str or None
        The column the groups came from.
    arrival : ndarray of int, shape (n_items, n_models), or None
        Long tables: the 0-based data row at which each score first appears (−1 where
        absent), i.e. the order the results came in; None for wide tables, whose order is
        row by row, models left to right.
    samples : ndarray of int, shape (n_items, n_models), or None
        Long tables with a ``sample`` column (repeated samples per item and model): the
        samples of each cell (0 where absent); ``scores`` are then the cells' means and
        ``arrival`` the row of each cell's last sample (when it became complete). None: one
        score per cell.
    mean_var : ndarray, shape (n_items, n_models), or None
        With ``samples``: the estimated sampling variance of each cell's mean, s²/K
        (:func:`monitor.stats.samples.mean_variance`; NaN with fewer than two samples).
    born : ndarray of int, shape (n_models,), or None
        With ``samples``: the row of each model's first sample. A model joins the board at its
        first sample, which may come before its first complete item.
    repeats : ndarray, shape (n_items, n_models, K), or None
        With ``samples``: every sample's score (NaN where absent), for replaying the table as
        the events it was made of.
    """

    source: str
    benchmark: str | None
    item_ids: NDArray[np.str_]
    models: tuple[str, ...]
    scores: NDArray[np.float64]
    groups: NDArray[np.str_] | None = None
    group_kind: GroupKind | None = None
    group_col: str | None = None
    arrival: NDArray[np.int64] | None = None
    samples: NDArray[np.int64] | None = None
    mean_var: NDArray[np.float64] | None = None
    born: NDArray[np.int64] | None = None
    repeats: NDArray[np.float64] | None = None

    def arrival_order(self) -> NDArray[np.int64]:
        """The arrival rank of every present score (−1 where absent): ``arrival`` for long
        tables, row by row and left to right for wide ones."""
        if self.arrival is not None:
            return self.arrival
        n, k = self.scores.shape
        order = np.arange(n * k, dtype=np.int64).reshape(n, k)
        return np.where(np.isnan(self.scores), -1, order)

    def _index(self, model: str) -> int:
        try:
            return self.models.index(model)
        except ValueError:
            raise InputError(f"unknown model {model!r}", source=self.source) from None

    def column(self, model: str) -> NDArray[np.float64]:
        """All items' scores of ``model`` (NaN where absent)."""
        return self.scores[:, self._index(model)]

    def pair(
        self, a: str, b: str
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.str_] | None]:
        """Scores of ``a`` and ``b`` on the items both have, and those items' groups.

        Raises
        ------
        InputError
            When the two models share no item.
        """
        xa, xb = self.column(a), self.column(b)
        both = ~np.isnan(xa) & ~np.isnan(xb)
        if not both.any():
            raise InputError(f"models {a!r} and {b!r} share no item", source=self.source)
        groups = self.groups[both] if self.groups is not None else None
        return xa[both], xb[both], groups

    def is_binary(self) -> bool:
        """True when every present score is 0 or 1."""
        present = self.scores[~np.isnan(self.scores)]
        return bool(np.all((present == 0.0) | (present == 1.0)))

    def select(self, models: Sequence[str]) -> ScoreTable:
        """The same table restricted to ``models`` (in that order); items no one has are dropped."""
        cols = [self._index(m) for m in models]
        scores = self.scores[:, cols]
        keep = ~np.isnan(scores).all(axis=1)
        return ScoreTable(
            source=self.source, benchmark=self.benchmark, item_ids=self.item_ids[keep],
            models=tuple(models), scores=scores[keep],
            groups=None if self.groups is None else self.groups[keep],
            group_kind=self.group_kind, group_col=self.group_col,
            arrival=None if self.arrival is None else self.arrival[:, cols][keep],
            samples=None if self.samples is None else self.samples[:, cols][keep],
            mean_var=None if self.mean_var is None else self.mean_var[:, cols][keep],
            born=None if self.born is None else self.born[cols],
            repeats=None if self.repeats is None else self.repeats[:, cols][keep],
        )

    def sample_count(self) -> float:
        """K, the mean number of samples of the present cells (1 without a sample column)."""
        if self.samples is None:
            return 1.0
        present = ~np.isnan(self.scores)
        return float(self.samples[present].mean()) if present.any() else 1.0

    def n_items(self) -> NDArray[np.int64]:
        """Number of items each model has, in ``models`` order."""
        return np.sum(~np.isnan(self.scores), axis=0)


# --------------------------------------------------------------------------- file access


def _open_text(path: Path) -> io.TextIOBase:
    if path.name.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


def _is_jsonl(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith((".jsonl", ".ndjson"))


class _Columns:
    """A table as header + cell text + the file line of each row.

    The cells are held as rows (CSV) or as columns (JSONL); a column of a CSV is cut from the
    rows when asked for, so that a wide table's thousands of model columns are never
    transposed one by one (:meth:`matrix` reads them row by row).
    """

    def __init__(self, header: list[str], lines: list[int], *,
                 columns: list[list[str]] | None = None,
                 rows: list[list[str]] | None = None) -> None:
        self.header = header
        self.lines = lines
        self._columns = {} if columns is None else dict(enumerate(columns))
        self._rows = [] if rows is None else rows

    def get(self, name: str) -> list[str]:
        j = self.header.index(name)
        if j not in self._columns:
            self._columns[j] = list(map(itemgetter(j), self._rows))
        return self._columns[j]

    def matrix(self, names: Sequence[str], parse: Callable[[str], float | str], *,
               source: str) -> NDArray[np.float64]:
        """The (rows × ``names``) matrix of ``parse`` of each cell text, each distinct text
        parsed once; ``parse`` returns a float or the message of a rejected cell, raised (as
        :func:`_parse_scores` would, column by column) for the first such cell in ``names``
        order, then in file order."""
        rows = self._rows
        if not rows:
            return np.column_stack([_parse_cells(self.get(m), parse, lines=self.lines,
                                                 source=source, field=m) for m in names])
        where = [self.header.index(m) for m in names]

        def cells() -> Iterator[str]:
            pick = itemgetter(*where)
            if len(where) == 1:
                return (pick(r) for r in rows)
            return chain.from_iterable(map(pick, rows))

        values = {text: parse(text) for text in set(cells())}
        bad = {text for text, v in values.items() if isinstance(v, str)}
        n = len(self.lines) * len(where)
        if bad:
            mask = np.fromiter(map(bad.__contains__, cells()), dtype=bool, count=n)
            mask = mask.reshape(len(self.lines), len(where))
            j = _first_index(np.asarray(mask.any(axis=0), dtype=bool))
            row = _first_index(mask[:, j])
            raise InputError(str(values[self.get(names[j])[row]]), source=source,
                             line=self.lines[row], field=names[j])
        flat = np.fromiter(map(values.__getitem__, cells()), dtype=np.float64, count=n)
        return flat.reshape(len(self.lines), len(where))


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    # Millions of short-lived cell strings and row lists trigger the cyclic collector again and
    # again while nothing here can form a cycle; pausing it halves the read time of a long table.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_csv(path: Path, source: str) -> _Columns:
    with _no_gc():
        return _read_csv_rows(path, source)


def _read_csv_rows(path: Path, source: str) -> _Columns:
    try:
        with _open_text(path) as fh:
            text = fh.read()
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as exc:
        raise InputError(f"cannot read the file: {exc}", source=source) from None
    if not rows:
        raise InputError("empty file", source=source)
    n_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    if n_lines == len(rows):
        line_of = list(range(1, len(rows) + 1))
    else:
        # Quoted fields span lines: recount physical line numbers row by row.
        reader = csv.reader(io.StringIO(text, newline=""))
        line_of = []
        for _ in reader:
            line_of.append(reader.line_num)
    header = [h.strip() for h in rows[0]]
    _check_header(header, source)
    width = len(header)
    keep = [k for k in range(1, len(rows)) if rows[k]]
    if len(keep) != len(rows) - 1:
        rows = [rows[0]] + [rows[k] for k in keep]
        line_of = [line_of[0]] + [line_of[k] for k in keep]
    body = rows[1:]
    if any(len(r) != width for r in body):
        k = next(k for k, r in enumerate(body) if len(r) != width)
        raise InputError(f"expected {width} fields as in the header, found {len(body[k])}",
                         source=source, line=line_of[k + 1])
    return _Columns(header, line_of[1:], rows=body)


def _json_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return repr(value)
    return str(value)


def _read_jsonl(path: Path, source: str) -> _Columns:
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    try:
        with _open_text(path) as fh:
            for lineno, text in enumerate(fh, start=1):
                if not text.strip():
                    continue
                try:
                    rec = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON: {exc.msg}", source=source,
                                     line=lineno) from None
                if not isinstance(rec, dict):
                    raise InputError("each line must be a JSON object", source=source,
                                     line=lineno)
                records.append(rec)
                lines.append(lineno)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"cannot read the file: {exc}", source=source) from None
    if not records:
        raise InputError("empty file", source=source)
    header: list[str] = []
    seen: set[str] = set()
    for rec in records:
        for key in rec:
            if key not in seen:
                seen.add(key)
                header.append(str(key))
    columns = [[_json_cell(rec.get(h)) for rec in records] for h in header]
    return _Columns(header, lines, columns=columns)


def _check_header(header: list[str], source: str) -> None:
    seen: set[str] = set()
    for name in header:
        if not name:
            raise InputError("a column has an empty name", source=source, line=1)
        if name in seen:
            raise InputError("column name appears twice", source=source, line=1, field=name)
        seen.add(name)


# --------------------------------------------------------------------------- cell parsing


def _first_index(mask: NDArray[np.bool_]) -> int:
    return int(np.flatnonzero(mask)[0])


def _score_parser(*, na_as_wrong: bool, hint: str = "") -> Callable[[str], float | str]:
    """Cell text → float score (blank → NaN, absent; NA → 0 or NaN; anything else in [0, 1]),
    or the message naming why the text is not a score."""
    def parse(cell: str) -> float | str:
        # As numpy's fixed-width text, which drops trailing NULs.
        text = cell.rstrip("\x00")
        t = text.strip()
        if t == "":
            return math.nan
        if t == NA_TOKEN:
            return 0.0 if na_as_wrong else math.nan
        try:
            v = float(t)
        except ValueError:
            return f"score {text!r} is not a number{hint}"
        if not math.isfinite(v) or v < 0.0 or v > 1.0:
            return f"score {text!r} is outside [0, 1]{hint}"
        return v

    return parse


def _parse_cells(
    cells: Sequence[str],
    parse: Callable[[str], float | str],
    *,
    lines: Sequence[int],
    source: str,
    field: str,
) -> NDArray[np.float64]:
    """Cell text → floats by ``parse``; the first rejected cell in file order is raised."""
    n = len(cells)
    if n == 0:
        return np.empty(0)
    # Few distinct strings in practice (0/1/NA/blank): parse each distinct one once.
    uniq, inverse = np.unique(np.asarray(cells, dtype=str), return_inverse=True)
    inverse = inverse.reshape(-1)
    values = np.empty(len(uniq))
    bad: dict[int, str] = {}
    for k, text in enumerate(uniq.tolist()):
        v = parse(text)
        if isinstance(v, str):
            bad[k] = v
        else:
            values[k] = v
    if bad:
        # Name the first offending cell in file order, not in sort order.
        row = _first_index(np.isin(inverse, list(bad)))
        raise InputError(bad[int(inverse[row])], source=source, line=lines[row], field=field)
    return values[inverse]


def _parse_scores(
    cells: Sequence[str],
    *,
    lines: Sequence[int],
    source: str,
    field: str,
    na_as_wrong: bool,
    hint: str = "",
) -> NDArray[np.float64]:
    """Cell text → float scores: blank → NaN (absent), NA → 0 or NaN; anything else in [0, 1]."""
    return _parse_cells(cells, _score_parser(na_as_wrong=na_as_wrong, hint=hint), lines=lines,
                        source=source, field=field)


def _first_appearance_codes(
    values: Sequence[str],
) -> tuple[NDArray[np.str_], NDArray[np.intp], NDArray[np.intp]]:
    """Distinct values in order of first appearance, each element's index into them, and the
    row where each distinct value first appears."""
    arr = np.asarray(values, dtype=str)
    uniq, first, inverse = np.unique(arr, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.intp)
    rank[order] = np.arange(len(uniq))
    return uniq[order], rank[inverse.reshape(-1)], first[order]


def _parse_sample(cell: str) -> float | str:
    """A ``sample`` cell → its index (an integer ≥ 0), or why it is not one."""
    t = cell.rstrip("\x00").strip()
    if not t.isdigit() or len(t) > 7:
        return f"sample {cell!r} is not an integer in [0, 1000000]"
    return float(int(t))


def _resolve_id_col(header: list[str], id_col: str | None, source: str,
                    *, first_column_fallback: bool) -> str:
    if id_col is not None:
        if id_col not in header:
            raise InputError("missing id column (named by --id-col)", source=source, line=1,
                             field=id_col)
        return id_col
    for name in _ID_DEFAULTS:
        if name in header:
            return name
    if first_column_fallback:
        return header[0]
    raise InputError("missing id column: expected 'item_id' or 'question_id' (or pass --id-col)",
                     source=source, line=1, field="item_id")


def _require(header: list[str], names: Iterable[str | None], source: str, what: str) -> None:
    for name in names:
        if name is not None and name not in header:
            raise InputError(f"missing column (named by {what})", source=source, line=1,
                             field=name)


def _group_labels(
    item_codes: NDArray[np.intp], first_rows: NDArray[np.intp], labels: Sequence[str], *,
    lines: Sequence[int], source: str, field: str,
) -> NDArray[np.str_]:
    """One label per item; an item given two different labels is an error."""
    lab = np.asarray(labels, dtype=str)
    out = lab[first_rows]
    bad = out[item_codes] != lab
    if bad.any():
        row = _first_index(bad)
        raise InputError(f"item has two different {field!r} values "
                         f"({out[item_codes[row]]!r} and {lab[row]!r})",
                         source=source, line=lines[row], field=field)
    if np.any(np.char.strip(out) == ""):
        row = _first_index(np.char.strip(lab) == "")
        raise InputError("empty group label", source=source, line=lines[row], field=field)
    return out


# --------------------------------------------------------------------------- layouts


def _score_col(header: list[str]) -> str | None:
    for name in _SCORE_DEFAULTS:
        if name in header:
            return name
    return None


def _read_long(
    cols: _Columns, *, source: str, id_col: str | None, group_col: str | None,
    benchmark: str | None, na_as_wrong: bool,
) -> tuple[str | None, NDArray[np.str_], tuple[str, ...], NDArray[np.float64],
           NDArray[np.str_] | None, NDArray[np.int64], NDArray[np.int64] | None,
           NDArray[np.float64] | None, NDArray[np.int64] | None,
           NDArray[np.float64] | None]:
    header = cols.header
    idc = _resolve_id_col(header, id_col, source, first_column_fallback=False)
    score_name = _score_col(header) or _SCORE_DEFAULTS[0]
    _require(header, [group_col], source, "--cluster-col/--strata-col")
    lines: Sequence[int] = cols.lines
    ids, models, cells = cols.get(idc), cols.get("model"), cols.get(score_name)
    groups_raw = cols.get(group_col) if group_col else None
    samples_raw = cols.get("sample") if "sample" in header else None

    if "benchmark" in header:
        bench = np.asarray(cols.get("benchmark"), dtype=str)
        names = list(dict.fromkeys(bench.tolist()))
        if benchmark is None:
            if len(names) > 1:
                raise InputError(f"several benchmarks in one table ({', '.join(names)}): "
                                 "choose one with --benchmark", source=source, field="benchmark")
            benchmark = names[0] if names else None
        else:
            keep = bench == benchmark
            if not keep.any():
                raise InputError(f"no rows for benchmark {benchmark!r} (found {', '.join(names)})",
                                 source=source, field="benchmark")
            idx = np.flatnonzero(keep).tolist()
            ids = [ids[i] for i in idx]
            models = [models[i] for i in idx]
            cells = [cells[i] for i in idx]
            lines = [lines[i] for i in idx]
            if groups_raw is not None:
                groups_raw = [groups_raw[i] for i in idx]
            if samples_raw is not None:
                samples_raw = [samples_raw[i] for i in idx]

    for name, column in ((idc, ids), ("model", models)):
        blank = np.char.strip(np.asarray(column, dtype=str)) == ""
        if blank.any():
            raise InputError("empty value", source=source, line=lines[_first_index(blank)],
                             field=name)
    values = _parse_scores(cells, lines=lines, source=source, field=score_name,
                           na_as_wrong=na_as_wrong)
    item_ids, item_codes, item_first = _first_appearance_codes(ids)
    model_names, model_codes, _ = _first_appearance_codes(models)
    groups = None
    if groups_raw is not None and group_col is not None:
        groups = _group_labels(item_codes, item_first, groups_raw, lines=lines,
                               source=source, field=group_col)

    sample = None
    if samples_raw is not None:
        sample = _parse_cells(samples_raw, _parse_sample, lines=lines, source=source,
                              field="sample").astype(np.int64)
    present = ~np.isnan(values)
    rows = np.flatnonzero(present)
    n_samples = int(sample[rows].max()) + 1 if sample is not None and rows.size else 1
    cell = item_codes[rows].astype(np.int64) * len(model_names) + model_codes[rows]
    key = cell * n_samples + (sample[rows] if sample is not None else 0)
    order = np.argsort(key, kind="stable")
    skey, svals = key[order], values[rows][order]
    same = skey[1:] == skey[:-1]
    conflict = same & (svals[1:] != svals[:-1])
    if conflict.any():
        k = _first_index(conflict)
        first_row, second_row = rows[order[k]], rows[order[k + 1]]
        which = f" sample {sample[second_row]}" if sample is not None else ""
        raise InputError(
            f"item {ids[second_row]!r} of model {models[second_row]!r}{which} has two "
            f"different scores ({cells[first_row].strip()} at line {lines[first_row]} and "
            f"{cells[second_row].strip()})",
            source=source, line=lines[second_row], field=score_name)
    shape = (len(item_ids), len(model_names))
    if sample is not None:
        # Each (cell, sample) at its first row; a cell is complete at its last sample's row.
        first = order[np.r_[True, ~same]]
        flat = np.full((shape[0] * shape[1], n_samples), np.nan)
        flat[cell[first], sample[rows[first]]] = values[rows[first]]
        last = np.full(shape[0] * shape[1], -1, dtype=np.int64)
        np.maximum.at(last, cell[first], rows[first].astype(np.int64))
        y = flat.reshape(*shape, n_samples)
        born = np.full(shape[1], np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(born, model_codes[rows], rows.astype(np.int64))
        return (benchmark, item_ids, tuple(model_names.tolist()), cell_means(y), groups,
                last.reshape(shape), (~np.isnan(y)).sum(axis=-1), mean_variance(y), born, y)
    scores = np.full(shape, np.nan)
    scores[item_codes[rows], model_codes[rows]] = values[rows]
    first = np.full(scores.shape, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, (item_codes[rows], model_codes[rows]), rows.astype(np.int64))
    arrival = np.where(np.isnan(scores), -1, first)
    return (benchmark, item_ids, tuple(model_names.tolist()), scores, groups, arrival, None,
            None, None, None)


def _read_wide(
    cols: _Columns, *, source: str, id_col: str | None, group_col: str | None,
    exclude: Sequence[str], na_as_wrong: bool,
) -> tuple[NDArray[np.str_], tuple[str, ...], NDArray[np.float64], NDArray[np.str_] | None]:
    header = cols.header
    idc = _resolve_id_col(header, id_col, source, first_column_fallback=True)
    _require(header, [group_col], source, "--cluster-col/--strata-col")
    _require(header, exclude, source, "--exclude")
    skip = {idc, *exclude}
    if group_col is not None:
        skip.add(group_col)
    model_cols = [h for h in header if h not in skip]
    if not model_cols:
        raise InputError("no model columns (every column is the id, a group or excluded)",
                         source=source, line=1)
    lines = cols.lines
    ids = cols.get(idc)
    blank = np.char.strip(np.asarray(ids, dtype=str)) == ""
    if blank.any():
        raise InputError("empty value", source=source, line=lines[_first_index(blank)], field=idc)
    hint = " (if this column is not a model, name it with --exclude, --cluster-col or --strata-col)"
    matrix = cols.matrix(model_cols, _score_parser(na_as_wrong=na_as_wrong, hint=hint),
                         source=source)
    item_ids, codes, first_rows = _first_appearance_codes(ids)
    groups = None
    if group_col is not None:
        groups = _group_labels(codes, first_rows, cols.get(group_col), lines=lines,
                               source=source, field=group_col)
    if len(item_ids) == len(ids):
        return item_ids, tuple(model_cols), matrix, groups
    if id_col is None and idc not in _ID_DEFAULTS:
        # The first column stood in for a missing id column; repeated values say it is none.
        row = _first_index(first_rows[codes] != np.arange(len(ids)))
        raise InputError(f"no item id column (item_id, question_id), so the first column "
                         f"{idc!r} was taken as the id, but its value {ids[row]!r} repeats "
                         f"line {lines[first_rows[codes[row]]]}: name the id column with "
                         "--id-col, or add an item_id column",
                         source=source, line=lines[row], field=idc)
    # The same item on several rows: merge them cell by cell; equal scores are harmless.
    scores = np.full((len(item_ids), len(model_cols)), np.nan)
    for row in range(len(ids)):
        target = scores[codes[row]]
        new = matrix[row]
        clash = ~np.isnan(target) & ~np.isnan(new) & (target != new)
        if clash.any():
            j = _first_index(clash)
            raise InputError(f"item {ids[row]!r} appears again with a different score "
                             f"({target[j]:g} before, {new[j]:g} here)",
                             source=source, line=lines[row], field=model_cols[j])
        fill = np.isnan(target)
        target[fill] = new[fill]
    return item_ids, tuple(model_cols), scores, groups


def read_table(
    path: str | Path,
    *,
    id_col: str | None = None,
    cluster_col: str | None = None,
    strata_col: str | None = None,
    exclude: Sequence[str] = (),
    benchmark: str | None = None,
    na_as_wrong: bool = True,
) -> ScoreTable:
    """Read a long or wide per-item score table (CSV or JSONL, optionally gzip-compressed).

    A table with a ``model`` column and a ``score`` (or ``correct``) column is *long*: one row
    per (item, model), or per (item, model, sample) with a ``sample`` column (0, 1, … for
    repeated samples; the item's score is the mean of its samples). Otherwise it is *wide*: an id column and one column per model; the
    group column and the ``exclude`` columns are not models.

    Parameters
    ----------
    path : str or Path
        The file.
    id_col : str, optional
        Item id column; default ``item_id``, else ``question_id``, else (wide) the first column.
    cluster_col, strata_col : str, optional
        Column of item groups, read as sampled clusters or as fixed strata (at most one).
    exclude : sequence of str
        Wide tables: further columns that are not models (e.g. ``src``, ``gold``).
    benchmark : str, optional
        Long tables with a ``benchmark`` column: keep only this benchmark's rows.
    na_as_wrong : bool
        ``NA`` (answered, nothing extracted) scores 0 when True, else the item is absent
        for that model. An empty cell always means absent.

    Returns
    -------
    ScoreTable

    Raises
    ------
    InputError
        Naming file, line and field: missing columns, non-numeric or out-of-range scores,
        one (item, model) with two different scores, an empty file, no models.
    """
    p = Path(path)
    source = str(path)
    if cluster_col is not None and strata_col is not None:
        raise InputError("give either --cluster-col or --strata-col, not both", source=source)
    if not p.is_file():
        raise InputError("no such file", source=source)
    group_col = cluster_col if cluster_col is not None else strata_col
    kind: GroupKind | None = (
        "cluster" if cluster_col is not None else "strata" if strata_col is not None else None
    )
    cols = _read_jsonl(p, source) if _is_jsonl(p) else _read_csv(p, source)
    if not cols.lines:
        raise InputError("no data rows after the header", source=source)
    if group_col is not None and group_col in exclude:
        raise InputError("a column cannot be both excluded and the group column",
                         source=source, field=group_col)

    if "model" in cols.header and _score_col(cols.header) is None and "model" not in exclude:
        raise InputError("missing score column: a long table (one with a 'model' column) needs "
                         "'score' or 'correct'", source=source, line=1, field="score")
    if "model" in cols.header and _score_col(cols.header) is not None:
        (bench, item_ids, models, scores, groups, arrival, samples, mean_var, born,
         repeats) = _read_long(
            cols, source=source, id_col=id_col, group_col=group_col, benchmark=benchmark,
            na_as_wrong=na_as_wrong)
    else:
        bench = benchmark
        arrival = None
        samples = born = None
        mean_var = repeats = None
        item_ids, models, scores, groups = _read_wide(
            cols, source=source, id_col=id_col, group_col=group_col, exclude=exclude,
            na_as_wrong=na_as_wrong)

    present = ~np.isnan(scores)
    empty = np.logical_not(present.any(axis=0))
    if empty.all():
        raise InputError("no scores: every cell is empty", source=source)
    if empty.any():
        # An all-empty model column is more likely a mistake (e.g. a misnamed column) than
        # intent, so it is an error rather than silently dropped.
        name = models[_first_index(empty)]
        raise InputError("model has no scores at all", source=source, field=name)
    keep = present.any(axis=1)
    if not keep.all():
        item_ids, scores = item_ids[keep], scores[keep]
        groups = groups[keep] if groups is not None else None
        arrival = arrival[keep] if arrival is not None else None
        samples = samples[keep] if samples is not None else None
        mean_var = mean_var[keep] if mean_var is not None else None
        repeats = repeats[keep] if repeats is not None else None
    return ScoreTable(source=source, benchmark=bench, item_ids=item_ids, models=models,
                      scores=scores, groups=groups, group_kind=kind, group_col=group_col,
                      arrival=arrival, samples=samples, mean_var=mean_var, born=born,
                      repeats=repeats)
