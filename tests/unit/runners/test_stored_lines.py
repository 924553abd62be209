"""NDJSON lines are stored as they came: each accepted line is one event on its own, the
stored rows read back as the events that were accepted, and a restart rebuilds the same state."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import zstandard
from prometheus_client import CollectorRegistry

from monitor.contracts import ItemResult, jsonable
from monitor.decoder import as_item, decode_events
from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.settings import Settings


def line(**kw: object) -> bytes:
    return json.dumps({"benchmark": "b", "item_id": "1", "model": "m", "score": 1, **kw},
                      separators=(",", ":")).encode()


def service(db: Path) -> EmbeddedService:
    return EmbeddedService(Settings(db=db, eval_interval=60.0), registry=CollectorRegistry())


def stored_rows(db: Path) -> list[bytes]:
    """The JSON of each stored results row (rows are zstd-compressed)."""
    con = sqlite3.connect(db)
    try:
        rows = [bytes(b) for (b,) in con.execute("SELECT events FROM results ORDER BY seq")]
    finally:
        con.close()
    assert all(r[:4] == b"\x28\xb5\x2f\xfd" for r in rows)
    return [zstandard.ZstdDecompressor().decompress(r) for r in rows]


def test_a_string_cannot_run_from_one_line_into_the_next() -> None:
    # Line 0 ends inside a string that line 1 closes; line 2 holds two objects. Joined with
    # bare commas the three lines were three "valid" events, none of them a line's own.
    first = line()[:-1] + b',"run_id":"x'
    second = b'{","cluster":"c"}'
    third = line(item_id="2") + b"," + line(item_id="3")
    d = decode_events(b"\n".join([first, second, third]), source="http")
    assert d.events == 3 and not d.valid
    assert [(x.index, x.reason) for x in d.invalid] == [
        (0, "invalid-json"), (1, "invalid-json"), (2, "invalid-json")]
    assert "Unterminated string" in d.invalid[0].detail and "Extra data" in d.invalid[2].detail


def test_lines_are_kept_only_when_each_event_was_validated_from_its_own_line() -> None:
    good = [line(item_id=str(i), model=m) for i in range(3) for m in ("m", "n")]
    d = decode_events(b"\n\n".join(good) + b"\n", source="http")
    assert d.lines == good and len(d.valid) == len(good)
    for i, ev in d.valid:
        assert as_item(ev) == ItemResult.model_validate_json(d.lines[i])
    with_bad = decode_events(b"\n".join([good[0], b"{oops", good[1]]), source="http")
    assert [i for i, _ in with_bad.valid] == [0, 2] and with_bad.lines is None
    assert decode_events(b"[" + b",".join(good) + b"]", source="http").lines is None


def test_stored_lines_read_back_as_the_accepted_events_and_rebuild_the_state(
        tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    svc = service(db)
    ts = "2024-06-01T12:00:00Z"
    accepted = [line(),
                b'  {"benchmark": "b", "item_id": "2", "model": "m", "score": 0.5, "flags": ["k"]}\r',
                line(model="n", score=0, cluster="c", ts=ts, run_id="r")]
    body = b"\n".join([*accepted[:2], line(), line(score=0), accepted[2]])  # a duplicate, a conflict
    report = svc.ingest_body(body)
    assert (report.accepted, report.duplicate, report.conflict) == (3, 1, 1)
    # The array body has no lines: its events are serialised, as before.
    assert svc.ingest_body(json.dumps([json.loads(line(item_id="3"))]).encode()).accepted == 1
    # A body with a rejected line is validated from parsed values: serialised too.
    mixed = svc.ingest_body(line(item_id="4") + b"\n{oops")
    assert (mixed.accepted, mixed.invalid) == (1, 1)
    rows = stored_rows(db)
    assert [len(json.loads(r)) for r in rows] == [3, 1, 1]
    assert rows[0] == b"[" + b",".join(accepted) + b"]"  # the accepted lines, byte for byte
    assert rows[1] == b'[{"benchmark":"b","item_id":"3","model":"m","score":1.0}]'
    stored = [ev for batch in svc.store.iter_results() for ev in batch]
    expected = [ItemResult.model_validate_json(x)
                for x in (*accepted, line(item_id="3"), line(item_id="4"))]
    assert [as_item(ev) for ev in stored] == expected
    before = svc.ranking("b")
    svc.close()
    again = service(db)
    try:
        # as the route writes them (a NaN figure, ρ of a constant column, is not equal to
        # itself as a float)
        assert jsonable(again.ranking("b")) == jsonable(before)
        assert again.store.n_results() == 5
    finally:
        again.close()


def test_a_body_of_valid_lines_is_stored_as_it_came_and_reads_back(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    svc = service(db)
    body = b"\n".join([line(), line(model="n", score=0, cluster="c", run_id="r"),
                       b'{"benchmark":"b","item_id":"2","model":"m","score":0.5,"sample":0}'])
    assert svc.ingest_body(body + b"\n").accepted == 3
    assert stored_rows(db) == [body]  # the body itself (stripped), not re-serialised
    stored = [as_item(ev) for batch in svc.store.iter_results() for ev in batch]
    assert stored == [ItemResult.model_validate_json(x) for x in body.split(b"\n")]
    svc.close()


def test_a_line_that_another_line_finishes_is_not_stored_as_a_line(tmp_path: Path) -> None:
    # Line 0 holds an event and the start of a second one that line 1 finishes: decoded as
    # two events, but neither line is the second one's own text, so nothing is stored as
    # lines (a fragment stored as an event would stop every later restart).
    svc = service(tmp_path / "m.db")
    assert svc.ingest_body(line()).accepted == 1
    body = line() + b',{"benchmark":"b","item_id":"2"\n"model":"m","score":0}'
    got = svc.ingest_body(body)
    assert (got.accepted, got.duplicate) == (1, 1)
    stored = [as_item(ev) for batch in svc.store.iter_results() for ev in batch]
    assert [(ev.item_id, ev.score) for ev in stored] == [("1", 1.0), ("2", 0.0)]
    svc.close()
    again = service(tmp_path / "m.db")
    assert again.store.n_results() == 2 and again.host.counters()["accepted"] == 2
    again.close()
