"""SQLite persistence of the embedded monitor: accepted results, change events, dead letters.

One transaction per ingested batch holds the accepted results, the change events they caused,
the dead letters and the outcome counters, so the database is always a prefix of the
acknowledged history and the in-memory state can be rebuilt from it on start. The accepted
results of a batch are one row (a JSON array in commit order): one insert per batch instead of
one per result keeps SQLite off the ingest critical path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from monitor.contracts import DeadLetter, ItemResult
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
"""


_EVENTS: TypeAdapter[list[ItemResult]] = TypeAdapter(list[ItemResult])


def _events_json(results: Sequence[ItemResult]) -> bytes:
    """The accepted events of one batch as one JSON array (defaults left out)."""
    return bytes(_EVENTS.dump_json(list(results), exclude_defaults=True))


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
        results: Sequence[ItemResult],
        changes: Sequence[Any] = (),
        dead_letters: Sequence[DeadLetter] = (),
        counts: Mapping[str, int] | None = None,
    ) -> list[int]:
        """Write one batch atomically; return the ids given to ``changes`` (increasing).

        When this returns, the batch is durable (committed to the WAL).
        """
        db = self._db
        ids: list[int] = []
        db.execute("BEGIN IMMEDIATE")
        try:
            if results:
                db.execute("INSERT INTO results (n, events) VALUES (?, ?)",
                           (len(results), _events_json(results)))
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

    # -- reading ---------------------------------------------------------------------------
    def n_results(self) -> int:
        return int(self._db.execute("SELECT coalesce(sum(n), 0) FROM results").fetchone()[0])

    def iter_results(self, *, batch_size: int = 100_000) -> Iterator[list[ItemResult]]:
        """All stored results in the order they were acknowledged, in batches of about
        ``batch_size`` (whole ingested batches are never split)."""
        cur = self._db.execute("SELECT events FROM results ORDER BY seq")
        out: list[ItemResult] = []
        for (blob,) in cur:
            out.extend(_EVENTS.validate_json(blob))
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
    ) -> tuple[dict[tuple[str, frozenset[str]], str], dict[str, tuple[tuple[str, ...], bool]]]:
        """The last logged verdict of every pair and the last logged ranking of every benchmark.

        Pairs are keyed by (benchmark, {model_a, model_b}); rankings by benchmark, as
        (models best first, resolved).
        """
        pairs: dict[tuple[str, frozenset[str]], str] = {}
        rankings: dict[str, tuple[tuple[str, ...], bool]] = {}
        for bench, kind, body in self._db.execute(
            "SELECT benchmark, kind, body FROM changes ORDER BY id"
        ):
            ev = json.loads(body)
            if kind == "ranking":
                rankings[bench] = (tuple(ev["models"]), bool(ev["resolved"]))
            else:
                pairs[(bench, frozenset((ev["model_a"], ev["model_b"])))] = ev["verdict"]
        return pairs, rankings

    def logged_decisions(self) -> list[dict[str, Any]]:
        """The resolution events of the log whose verdict is resolved, oldest first, with the
        benchmark: the decisions a rebuilt state must keep (a decision is final)."""
        out = []
        for bench, body in self._db.execute(
            "SELECT benchmark, body FROM changes WHERE kind = 'resolution' ORDER BY id"
        ):
            ev = json.loads(body)
            if str(ev.get("verdict", "")).startswith("resolved:"):
                out.append({**ev, "benchmark": bench})
        return out

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
