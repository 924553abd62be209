"""SQLite persistence of the embedded monitor: accepted results, change events, dead letters,
snapshots.

One transaction per ingested batch holds the accepted results, the change events they caused,
the dead letters and the outcome counters, so the database is always a prefix of the
acknowledged history and the in-memory state can be rebuilt from it on start. The accepted
results of a batch are one row, zstd-compressed JSON in commit order: one insert per batch
instead of one per result keeps SQLite off the ingest critical path; an NDJSON body whose
every line was accepted is stored as its text, accepted NDJSON lines as they came, anything
else serialised (a JSON array). Rows of earlier versions (uncompressed arrays) read as before;
an earlier version cannot read the compressed rows.

A snapshot row holds one benchmark's monitor state as of a results row (its watermark): a
restart loads it and replays only the rows after the watermark. Snapshots are written in their
own transaction, only of state whose results are already committed, and only the latest one
per benchmark is kept. A settled row holds the item at which a model's plan first said stop
(:mod:`monitor.runners.standings`): a restart keeps it rather than taking the moment again
after replaying in one batch. These tables (and an index of the change log) came after schema
1 without changing it: an older database gets them on open, and an older program ignores them.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import zstandard
from pydantic import TypeAdapter

from monitor.contracts import DeadLetter, ItemResult
from monitor.core.monitor import RankingKey, ranking_key
from monitor.core.standing import SettledAt
from monitor.decoder import Result, as_item, fast_results, is_wire
from monitor.sinks.prometheus import change_kind

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    seq INTEGER PRIMARY KEY,
    n INTEGER NOT NULL,
    events BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    benchmark TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    reason TEXT NOT NULL, detail TEXT NOT NULL, payload TEXT NOT NULL,
    source TEXT NOT NULL, ts TEXT
);
CREATE TABLE IF NOT EXISTS counters (outcome TEXT PRIMARY KEY, total INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots (
    benchmark TEXT PRIMARY KEY,
    results_seq INTEGER NOT NULL,
    change_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    config TEXT NOT NULL,
    state BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS changes_by_kind ON changes (kind, benchmark, id);
CREATE TABLE IF NOT EXISTS settled (
    benchmark TEXT NOT NULL,
    model TEXT NOT NULL,
    items INTEGER NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (benchmark, model)
);
"""


_EVENTS: TypeAdapter[list[ItemResult]] = TypeAdapter(list[ItemResult])


#: Events serialised per call: a call holds the interpreter (and a server's event loop, when
#: a batch is stored from a thread) for at most this many.
_DUMP_SLICE = 5000


def _events_json(results: Sequence[Result], raw: Sequence[bytes] | None = None) -> bytes:
    """The accepted events of one batch as one JSON array: their JSON texts as received
    (``raw``, one per result) joined, else each serialised (defaults left out)."""
    if raw is not None:
        if len(raw) != len(results):
            raise ValueError(f"{len(raw)} JSON texts for {len(results)} results")
        return b"[" + b",".join(raw) + b"]"
    if all(is_wire(r) for r in results):  # as the fast decoder read them
        return msgspec.json.encode(results)
    items = [as_item(r) for r in results]
    if len(items) <= _DUMP_SLICE:
        return bytes(_EVENTS.dump_json(items, exclude_defaults=True))
    parts = [_EVENTS.dump_json(items[lo:lo + _DUMP_SLICE], exclude_defaults=True)[1:-1]
             for lo in range(0, len(items), _DUMP_SLICE)]
    return b"[" + b",".join(parts) + b"]"


#: A results row written by this version is zstd-compressed JSON (an array, or NDJSON as the
#: batch came); rows of earlier versions are plain JSON arrays and read as they are.
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_COMPRESS = zstandard.ZstdCompressor(level=1)


def _pack(events: bytes) -> bytes:
    """A results row: the batch's JSON (array or NDJSON) compressed (≈ 10× for typical
    results; writing the bytes dominates a commit's cost, compressing them costs less)."""
    return _COMPRESS.compress(events)


def _unpack(blob: bytes) -> Sequence[Result]:
    """The events of a stored results row, in order."""
    if blob[:4] == _ZSTD_MAGIC:
        blob = zstandard.ZstdDecompressor().decompress(blob)
    if blob[:1] == b"[":
        # One call per stored batch, by the ingest's fast decoder (a row it does not take
        # whole, e.g. of an older version, by the contract's models).
        events: Sequence[Result] | None = fast_results(blob)
        return events if events is not None else _EVENTS.validate_json(blob)
    events = fast_results(blob, lines=True)
    if events is not None:
        return events
    return [ItemResult.model_validate_json(line) for line in blob.split(b"\n")]


@dataclass(frozen=True)
class Snapshot:
    """One stored snapshot row: a benchmark's monitor state as of results row ``results_seq``.

    ``change_id`` is the last change event logged when it was taken, ``position`` the
    benchmark's place in the order of first appearance, ``config`` the monitor core options
    it was taken under (a canonical JSON text), ``state`` the bytes of
    :meth:`monitor.core.Monitor.dump_snapshot`.
    """

    benchmark: str
    results_seq: int
    change_id: int
    position: int
    config: str
    state: bytes
    created: float


class SqliteStore:
    """The durable log of one embedded monitor (SQLite in WAL mode, one writer)."""

    def __init__(self, path: Path | str, *, synchronous: str = "FULL") -> None:
        if synchronous not in {"FULL", "NORMAL"}:
            raise ValueError(f"`synchronous` must be FULL or NORMAL, got {synchronous!r}")
        self.path = Path(path)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE … COMMIT) below.
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.executescript(_SCHEMA)
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self._db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) != SCHEMA_VERSION:
            from monitor.errors import ConfigError

            raise ConfigError(f"{self.path}: database schema {row[0]} is not {SCHEMA_VERSION}; "
                              "use a new --db file")

    def close(self) -> None:
        self._db.close()

    # -- writing ---------------------------------------------------------------------------
    def commit(
        self,
        *,
        results: Sequence[Result],
        changes: Sequence[Any] = (),
        dead_letters: Sequence[DeadLetter] = (),
        counts: Mapping[str, int] | None = None,
        raw: Sequence[bytes] | None = None,
        text: bytes | None = None,
    ) -> list[int]:
        """Write one batch atomically; return the ids given to ``changes`` (increasing).

        ``raw``: the JSON text each of ``results`` was validated from (an NDJSON line, see
        :attr:`monitor.decoder.Decoded.lines`), stored as it came instead of serialising
        the events again; ``text``: the NDJSON text whose lines are ``results``, in order
        (:attr:`monitor.decoder.Decoded.text`). When this returns, the batch is durable
        (committed to the WAL).
        """
        db = self._db
        ids: list[int] = []
        events = b""
        if results:  # packed before the transaction: the write lock is held for the writes
            events = _pack(text if text is not None else _events_json(results, raw))
        db.execute("BEGIN IMMEDIATE")
        try:
            if results:
                db.execute("INSERT INTO results (n, events) VALUES (?, ?)",
                           (len(results), events))
            for change in changes:
                body = change.model_dump_json(exclude={"change_id"})
                cur = db.execute(
                    "INSERT INTO changes (benchmark, kind, body) VALUES (?,?,?)",
                    (change.benchmark, change_kind(change), body),
                )
                ids.append(int(cur.lastrowid or 0))
            if dead_letters:
                db.executemany(
                    "INSERT INTO dead_letters (reason, detail, payload, source, ts)"
                    " VALUES (?,?,?,?,?)",
                    [
                        (d.reason, d.detail, d.payload, d.source,
                         d.ts.isoformat() if d.ts is not None else None)
                        for d in dead_letters
                    ],
                )
            if counts:
                db.executemany(
                    "INSERT INTO counters VALUES (?, ?) ON CONFLICT(outcome)"
                    " DO UPDATE SET total = total + excluded.total",
                    [(k, int(v)) for k, v in counts.items() if v],
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return ids

    def write_snapshots(
        self,
        states: Mapping[str, bytes],
        *,
        results_seq: int,
        change_id: int,
        positions: Mapping[str, int],
        config: str,
        restamp: Sequence[str] = (),
    ) -> None:
        """Store the snapshots of one round atomically, replacing each benchmark's previous one.

        ``states`` are the benchmarks whose monitors changed since their last snapshot, taken
        when the results up to row ``results_seq`` and the changes up to ``change_id`` were
        committed and nothing more was applied. ``restamp`` are benchmarks that received no
        result since their stored snapshot: it is still their state as of ``results_seq``, so
        only its watermark (and position) moves; its ``change_id`` stays, so a restart still
        adopts the decisions logged since it was taken. A crash before COMMIT leaves the
        previous snapshots untouched.
        """
        db = self._db
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        try:
            last = db.execute("SELECT coalesce(max(seq), 0) FROM results").fetchone()[0]
            if results_seq > int(last):
                raise ValueError(f"`results_seq` {results_seq} is past the last stored results "
                                 f"row {last}: a snapshot may only cover committed results")
            db.executemany(
                "INSERT OR REPLACE INTO snapshots"
                " (benchmark, results_seq, change_id, position, config, state, created)"
                " VALUES (?,?,?,?,?,?,?)",
                [(name, results_seq, change_id, positions[name], config, state, now)
                 for name, state in states.items()],
            )
            db.executemany(
                "UPDATE snapshots SET results_seq = ?, position = ? WHERE benchmark = ?"
                " AND config = ?",
                [(results_seq, positions[name], name, config) for name in restamp],
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # -- reading ---------------------------------------------------------------------------
    def write_settled(self, changes: Sequence[tuple[str, str, SettledAt | None]]) -> None:
        """Keep the settle records that changed (None: dropped), in one transaction."""
        if not changes:
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for bench, model, rec in changes:
                if rec is None:
                    db.execute("DELETE FROM settled WHERE benchmark = ? AND model = ?",
                               (bench, model))
                else:
                    db.execute("INSERT INTO settled VALUES (?, ?, ?, ?) ON CONFLICT"
                               " (benchmark, model) DO UPDATE SET items = excluded.items,"
                               " ts = excluded.ts",
                               (bench, model, rec.items, rec.ts.isoformat()))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def settled(self) -> list[tuple[str, str, SettledAt]]:
        """Every kept settle record (benchmark, model, record)."""
        return [(b, m, SettledAt(int(n), datetime.fromisoformat(ts)))
                for b, m, n, ts in self._db.execute(
                    "SELECT benchmark, model, items, ts FROM settled ORDER BY benchmark, model")]

    def n_results(self) -> int:
        return int(self._db.execute("SELECT coalesce(sum(n), 0) FROM results").fetchone()[0])

    def last_seq(self) -> int:
        """The seq of the last stored results row (0 when there is none)."""
        return int(self._db.execute("SELECT coalesce(max(seq), 0) FROM results").fetchone()[0])

    def snapshots(self) -> list[Snapshot]:
        """The stored snapshot of each benchmark, in the benchmarks' order of first appearance."""
        rows = self._db.execute(
            "SELECT benchmark, results_seq, change_id, position, config, state, created"
            " FROM snapshots ORDER BY position, benchmark")
        return [Snapshot(b, int(s), int(c), int(p), str(cfg), bytes(st), float(t))
                for b, s, c, p, cfg, st, t in rows]

    def iter_results(
        self, *, batch_size: int = 100_000, after: Mapping[str, int] | None = None,
    ) -> Iterator[list[Result]]:
        """Stored results in the order they were acknowledged, in batches of about
        ``batch_size`` (whole ingested batches are never split).

        ``after`` maps benchmarks to a results row (a snapshot's watermark, 0 for none): their
        results in that row and before are left out, and rows up to the smallest watermark are
        not read at all. So it must name every benchmark of the stored snapshots: one missing
        from it is read from the smallest watermark on only, which is right for a benchmark
        that first appeared after the last snapshot round.
        """
        after = dict(after or {})
        cur = self._db.execute("SELECT seq, events FROM results WHERE seq > ? ORDER BY seq",
                               (min(after.values(), default=0),))
        out: list[Result] = []
        for seq, blob in cur:
            events = _unpack(blob)
            if after:
                events = [ev for ev in events if seq > after.get(ev.benchmark, 0)]
            out.extend(events)
            if len(out) >= batch_size:
                yield out
                out = []
        if out:
            yield out

    def changes_since(
        self, since: int, *, limit: int = 1000, benchmark: str | None = None
    ) -> list[dict[str, Any]]:
        """Change events with id > ``since`` (oldest first), each with ``change_id`` and ``kind``."""
        sql = "SELECT id, kind, body FROM changes WHERE id > ?"
        args: list[Any] = [since]
        if benchmark is not None:
            sql += " AND benchmark = ?"
            args.append(benchmark)
        sql += " ORDER BY id LIMIT ?"
        args.append(limit)
        out = []
        for cid, kind, body in self._db.execute(sql, args):
            event = {"change_id": cid, "kind": kind}
            event.update(json.loads(body))
            event["change_id"] = cid
            out.append(event)
        return out

    def last_states(
        self,
    ) -> tuple[dict[tuple[str, frozenset[str]], str], dict[str, RankingKey]]:
        """The last logged verdict of every pair and the last logged ranking of every benchmark.

        Pairs are keyed by (benchmark, {model_a, model_b}); rankings by benchmark, as what a
        RankingChange says (:func:`monitor.core.monitor.ranking_key`: the tiers and the
        resolved flag).
        """
        pairs: dict[tuple[str, frozenset[str]], str] = {}
        rankings: dict[str, RankingKey] = {}
        # Through the index: a pair's verdict is logged about once, but ranking changes pile up
        # with the history, and only each benchmark's last one is read.
        for bench, body in self._db.execute(
            "SELECT benchmark, body FROM changes WHERE kind = 'resolution' ORDER BY id"
        ):
            ev = json.loads(body)
            pairs[(bench, frozenset((ev["model_a"], ev["model_b"])))] = ev["verdict"]
        for bench, body in self._db.execute(
            "SELECT benchmark, body FROM changes WHERE id IN"
            " (SELECT max(id) FROM changes WHERE kind = 'ranking' GROUP BY benchmark)"
        ):
            ev = json.loads(body)
            rankings[bench] = ranking_key(ev["models"], bool(ev["resolved"]), ev.get("tiers"))
        return pairs, rankings

    def logged_decisions(self, *, since: int = 0) -> list[dict[str, Any]]:
        """The resolution events of the log (with id > ``since``) whose verdict is a decision
        (resolved or equivalent), oldest first, with the benchmark: the decisions a rebuilt state must keep (a decision
        is final)."""
        out = []
        for bench, body in self._db.execute(
            "SELECT benchmark, body FROM changes WHERE kind = 'resolution' AND id > ?"
            " ORDER BY id", (since,)
        ):
            ev = json.loads(body)
            verdict = str(ev.get("verdict", ""))
            if verdict.startswith("resolved:") or verdict == "equivalent":
                out.append({**ev, "benchmark": bench})
        return out

    def last_change_ids(self, kind: str) -> dict[str, int]:
        """The id of each benchmark's last logged change event of ``kind`` (through the index)."""
        return {b: int(i) for b, i in self._db.execute(
            "SELECT benchmark, max(id) FROM changes WHERE kind = ? GROUP BY benchmark", (kind,))}

    def last_change_id(self) -> int:
        row = self._db.execute("SELECT max(id) FROM changes").fetchone()
        return int(row[0] or 0)

    def counters(self) -> dict[str, int]:
        """Persisted totals per outcome (accepted, duplicate, conflict, invalid)."""
        return {k: int(v) for k, v in self._db.execute("SELECT outcome, total FROM counters")}

    def change_counts(self) -> dict[tuple[str, str], int]:
        """Number of stored change events per (benchmark, kind)."""
        return {
            (b, k): int(n)
            for b, k, n in self._db.execute(
                "SELECT benchmark, kind, count(*) FROM changes GROUP BY benchmark, kind"
            )
        }

    def dead_letters(self, *, since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """Stored dead letters with id > ``since``, oldest first."""
        cols = ("id", "reason", "detail", "payload", "source", "ts")
        rows = self._db.execute(
            "SELECT id, reason, detail, payload, source, ts FROM dead_letters"
            " WHERE id > ? ORDER BY id LIMIT ?",
            (since, limit),
        )
        return [dict(zip(cols, row, strict=True)) for row in rows]
