"""A batch resent by a client unsure of its reply does not count its conflicts again: a
conflicting result sent again with the same score is a duplicate of its earlier report."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import CollectorRegistry

from monitor.runners.embedded_service import EmbeddedService
from monitor.runners.settings import Settings


def _body(*events: dict) -> bytes:
    return b"\n".join(json.dumps(e).encode() for e in events)


def _ev(item: str, score: int) -> dict:
    return {"benchmark": "b", "item_id": item, "model": "m", "score": score}


def test_a_resent_conflict_counts_once(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    svc = EmbeddedService(Settings(db=tmp_path / "c.db"), registry=registry, log=lambda _: None)
    try:
        assert svc.ingest_body(_body(_ev("1", 1), _ev("2", 0))).accepted == 2
        batch = _body(_ev("1", 0), _ev("2", 0), _ev("3", 1))
        first = svc.ingest_body(batch)
        assert (first.accepted, first.duplicate, first.conflict) == (1, 1, 1)
        again = svc.ingest_body(batch)
        assert (again.accepted, again.duplicate, again.conflict) == (0, 3, 0)
        assert again.rejected == [] and again.events == 3
        # Another score for the same result is a new conflict; the same one twice in a batch
        # is one conflict and one duplicate.
        other = svc.ingest_body(_body(_ev("1", 1), _ev("3", 0), _ev("3", 0)))
        assert (other.accepted, other.duplicate, other.conflict) == (0, 2, 1)
        assert [r["index"] for r in other.rejected] == [1]
        total = registry.get_sample_value("llm_monitor_events_total", {"outcome": "conflict"})
        assert total == 2
        assert len(svc.store.dead_letters(limit=100)) == 2
    finally:
        svc.close()
