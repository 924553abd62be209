"""Read text collections for the audit commands: CSV/TSV, JSONL (optionally .gz) or a directory of .txt files."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.errors import InputError

csv.field_size_limit(1 << 30)


#: Id columns/fields recognised without --id-col / --corpus-id-col, in this order.
ID_FIELDS = ("id", "item_id", "question_id", "doc_id")


@dataclass(frozen=True)
class TextRecord:
    """One text with its identifier."""

    id: str
    text: str


@dataclass(frozen=True)
class Texts:
    """The texts of one file or directory and where their ids came from: ``"column 'x'"``,
    ``"file names"`` (a directory of .txt files) or ``"line numbers"`` (ids ``line N`` when the
    file has no id column; :meth:`id_note` says so)."""

    source: str
    records: list[TextRecord]
    id_source: str

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[TextRecord]:
        return iter(self.records)

    def id_note(self, what: str, option: str) -> str | None:
        """A sentence for the report when the ids are line numbers, else None."""
        if self.id_source != "line numbers":
            return None
        return (f"{what} {self.source} has no id column (tried {', '.join(ID_FIELDS)}): its "
                f"texts are named by line ('line N'); pass {option} to use its own ids")


def _open_text(path: Path) -> io.TextIOBase:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise InputError(f"not a readable gzip file ({exc})", source=str(path)) from None
    if b"\x00" in raw[:65536]:
        raise InputError("looks like binary data, not text (NUL bytes)", source=str(path))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError("not valid UTF-8 text", source=str(path), line=line) from None
    return io.StringIO(text)


def _kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    last = suffixes[-1] if suffixes else ""
    if last in {".jsonl", ".ndjson", ".json"}:
        return "jsonl"
    if last in {".csv", ".tsv"}:
        return last[1:]
    if last == ".txt":
        return "txt"
    raise InputError(
        "unknown file type; use .csv, .tsv, .jsonl (optionally .gz), .txt or a directory of .txt",
        source=str(path),
    )


def _pick(columns: list[str], wanted: str | None, fallbacks: tuple[str, ...], what: str,
          source: str) -> str | None:
    if wanted is not None:
        if wanted not in columns:
            raise InputError(f"{what} column {wanted!r} not found; columns are {columns}",
                             source=source)
        return wanted
    for name in fallbacks:
        if name in columns:
            return name
    return None


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each non-blank line; bad JSON names the line."""
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON ({exc.msg})", source=str(path),
                                 line=lineno) from None
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", source=str(path),
                                 line=lineno)
            yield lineno, obj


def _text_of(value: Any, *, source: str, line: int, field: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    raise InputError("expected a string", source=source, line=line, field=field)


def read_texts(
    path: str | Path,
    *,
    text_col: str | None = None,
    id_col: str | None = None,
    text_fallbacks: tuple[str, ...] = ("text", "content", "question"),
) -> Texts:
    """Read every text of a CSV/TSV/JSONL file, a .txt file (one text) or a directory of .txt files.

    The text column defaults to the first of ``text_fallbacks`` present; the id column to
    the first of :data:`ID_FIELDS` present, else the texts are named ``line N`` (and
    ``id_source`` says so). A record without the id field of the others is an error, never
    named by its line. Multiple-choice records with ``options`` have the options appended to
    the question text.
    """
    p = Path(path)
    src = str(p)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.txt") if f.is_file())
        if not files:
            raise InputError("directory holds no .txt files", source=src)
        out = [TextRecord(str(f.relative_to(p)), _open_text(f).read()) for f in files]
        return Texts(src, out, "file names")
    if not p.is_file():
        raise InputError("no such file or directory", source=src)
    kind = _kind(p)
    records: list[TextRecord] = []
    id_source = "line numbers"
    if kind == "txt":
        records.append(TextRecord(p.name, _open_text(p).read()))
        id_source = "file names"
    elif kind == "jsonl":
        tcol: str | None = None
        icol: str | None = None
        for lineno, obj in read_jsonl(p):
            if tcol is None:
                cols = list(obj)
                tcol = _pick(cols, text_col, text_fallbacks, "text", src)
                if tcol is None:
                    raise InputError(f"no text field (tried {list(text_fallbacks)}; "
                                     f"use --text-col); fields are {cols}", source=src,
                                     line=lineno)
                icol = _pick(cols, id_col, ID_FIELDS, "id", src)
                if icol is not None:
                    id_source = f"column {icol!r}"
            if tcol not in obj:
                raise InputError("field missing", source=src, line=lineno, field=tcol)
            if icol is not None and icol not in obj:
                raise InputError("id field missing (the first record has it)", source=src,
                                 line=lineno, field=icol)
            text = _text_of(obj[tcol], source=src, line=lineno, field=tcol)
            if isinstance(obj.get("options"), list):
                text = text + "\n" + "\n".join(str(o) for o in obj["options"])
            rid = str(obj[icol]) if icol is not None else f"line {lineno}"
            records.append(TextRecord(rid, text))
    else:
        with _open_text(p) as fh:
            reader = csv.reader(fh, delimiter="\t" if kind == "tsv" else ",")
            try:
                header = next(reader)
            except StopIteration:
                raise InputError("file is empty", source=src) from None
            except csv.Error as exc:
                raise InputError(f"unreadable CSV ({exc})", source=src, line=1) from None
            tc = _pick(header, text_col, text_fallbacks, "text", src)
            if tc is None:
                raise InputError(f"no text column (tried {list(text_fallbacks)}; use "
                                 f"--text-col); columns are {header}", source=src, line=1)
            ic = _pick(header, id_col, ID_FIELDS, "id", src)
            ti = header.index(tc)
            ii = header.index(ic) if ic is not None else None
            if ic is not None:
                id_source = f"column {ic!r}"
            try:
                for lineno, row in enumerate(reader, start=2):
                    if not row:
                        continue
                    if len(row) != len(header):
                        raise InputError(f"expected {len(header)} fields, got {len(row)}",
                                         source=src, line=lineno)
                    rid = row[ii] if ii is not None else f"line {lineno}"
                    records.append(TextRecord(rid, row[ti]))
            except csv.Error as exc:
                raise InputError(f"unreadable CSV ({exc})", source=src,
                                 line=reader.line_num) from None
    if not records:
        raise InputError("no texts found (empty file?)", source=src)
    return Texts(src, records, id_source)
