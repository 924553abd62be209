"""The embedded service in-process: change log reconciled with the rebuilt state on restart."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from monitor.contracts import ItemResult
from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.settings import Settings


def _batch(start: int, n: int, a_score: int, b_score: int) -> list[tuple[int, ItemResult]]:
    evs = []
    for i in range(start, start + n):
        evs.append(ItemResult(benchmark="b", item_id=str(i), model="a", score=a_score))
        evs.append(ItemResult(benchmark="b", item_id=str(i), model="z", score=b_score))
    return list(enumerate(evs))


def _service(db: Path) -> EmbeddedService:
    # A long cadence: nothing is evaluated during ingest unless forced.
    return EmbeddedService(Settings(db=db, eval_interval=60.0), registry=CollectorRegistry())


def _verdicts(svc: EmbeddedService) -> list[tuple[str, str]]:
    return [(c["previous"], c["verdict"]) for c in svc.store.changes_since(0)
            if c["kind"] == "resolution"]


def test_changes_not_yet_logged_at_a_crash_are_logged_on_restart(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    svc = _service(db)
    svc.ingest(_batch(0, 60, 1, 0), source="t")  # a always right, z always wrong: resolved
    assert svc.ingest(_batch(60, 1, 1, 0), source="t").change_ids == []  # not evaluated yet
    assert svc.store.changes_since(0) == []
    svc.close()  # the process dies before the next evaluation point

    svc = _service(db)
    assert svc.rebuilt == 122
    assert _verdicts(svc) == [("unresolved", "resolved:a")]
    ranking = [c for c in svc.store.changes_since(0) if c["kind"] == "ranking"]
    assert [c["models"] for c in ranking] == [["a", "z"]]
    svc.close()

    # Restarting again logs nothing new: the log already ends in the current state.
    svc = _service(db)
    assert len(svc.store.changes_since(0)) == 2
    # Now the gap closes (z right, a wrong on many more items) and the process dies again.
    # The decision was taken at a stopping time and stays, across the restart too.
    svc.ingest(_batch(100, 60, 0, 1), source="t")
    svc.close()
    svc = _service(db)
    assert _verdicts(svc) == [("unresolved", "resolved:a")]
    pair = svc.ranking("b")["pairs"][0]
    assert pair["verdict"] == "resolved:a" and pair["n"] == 121
    assert pair["decided"]["n"] < 61
    svc.close()


def test_forced_evaluation_logs_changes_once(tmp_path: Path) -> None:
    svc = _service(tmp_path / "m.db")
    svc.ingest(_batch(0, 60, 1, 0), source="t")
    assert svc.evaluate_pending(force=True) == 2  # the pair and the ranking
    assert svc.evaluate_pending(force=True) == 0
    assert _verdicts(svc) == [("unresolved", "resolved:a")]
    svc.close()
