"""A conflicting result sent again is a conflict again: the monitor still holds another score
for it, so a producer that posts the same file twice hears ``conflict`` both times (it used to
hear ``duplicate`` the second time and exit 0)."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry

from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.settings import Settings


def _body(*events: dict) -> bytes:
    return b"\n".join(json.dumps(e).encode() for e in events)


def _ev(item: str, score: int) -> dict:
    return {"benchmark": "b", "item_id": item, "model": "m", "score": score}


def test_a_resent_conflict_is_reported_each_time(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    svc = EmbeddedService(Settings(db=tmp_path / "c.db"), registry=registry, log=lambda _: None)
    try:
        assert svc.ingest_body(_body(_ev("1", 1), _ev("2", 0))).accepted == 2
        batch = _body(_ev("1", 0), _ev("2", 0), _ev("3", 1))
        first = svc.ingest_body(batch)
        assert (first.accepted, first.duplicate, first.conflict) == (1, 1, 1)
        again = svc.ingest_body(batch)
        assert (again.accepted, again.duplicate, again.conflict) == (0, 2, 1)
        assert [(r["index"], r["reason"]) for r in again.rejected] == [(0, "conflict")]
        assert again.events == 3
        # The same conflicting result twice in one batch: two lines, two conflicts.
        other = svc.ingest_body(_body(_ev("1", 0), _ev("3", 0), _ev("3", 0)))
        assert (other.accepted, other.duplicate, other.conflict) == (0, 0, 3)
        assert [r["index"] for r in other.rejected] == [0, 1, 2]
        total = registry.get_sample_value("llm_monitor_events_total", {"outcome": "conflict"})
        assert total == 5
        assert len(svc.store.dead_letters(limit=100)) == 5
    finally:
        svc.close()
