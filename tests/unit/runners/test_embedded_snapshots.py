"""Restarts of the embedded service from snapshots: the latest snapshot of each benchmark plus
the results stored after it give the state of the process before, and of a full replay."""

from __future__ import annotations

import math
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts import ItemResult, RankingChange
from monitor.core import Monitor
from monitor.core.monitor import ranking_key
from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.host import MonitorHost
from monitor.runners.settings import Settings

MODELS = [f"m{j}" for j in range(6)]
P_RIGHT = np.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.93])


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _events(rng: np.random.Generator, lo: int, hi: int, bench: str = "b"
            ) -> list[tuple[int, ItemResult]]:
    """Items lo..hi-1 for every model, in a shuffled order; a few flagged leak-suspect, a few
    perturbed variants (stability), clusters by item."""
    evs = []
    for i in range(lo, hi):
        flags = ["leak-suspect"] if i % 17 == 5 else []
        for j, m in enumerate(MODELS):
            evs.append(ItemResult(benchmark=bench, item_id=f"i{i}", model=m,
                                  score=float(rng.random() < P_RIGHT[j]), cluster=f"c{i % 4}",
                                  flags=flags))
            if i % 7 == 0:
                evs.append(ItemResult(benchmark=bench, item_id=f"i{i}", model=m,
                                      variant="perturbed:paraphrase",
                                      score=float(rng.random() < P_RIGHT[j] - 0.1)))
    order = rng.permutation(len(evs))
    return list(enumerate(evs[k] for k in order.tolist()))


def _service(db: Path, *, log: list[str] | None = None, clock: Clock | None = None,
             **options: Any) -> EmbeddedService:
    options.setdefault("eval_interval", 0.0)
    options.setdefault("snapshot_interval", 0.0)
    return EmbeddedService(Settings(db=db, **options), registry=CollectorRegistry(),
                           clock=clock or Clock(),
                           log=(log.append if log is not None else lambda _: None))


def _rounded(value: Any) -> Any:
    """Floats to 12 significant digits (a sum folded in other batches may differ in the last
    bit) and NaN as a string, containers element by element.

    The time of a decision is left out: a decision the replay of the tail takes again is
    stamped with the replay's time, as in a full replay (the core keeps a decision it already
    has when the log's is adopted); its n and e-value are compared.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return value if not math.isfinite(value) or value == 0 else float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()
                if not (k == "ts" and "e_value" in value and "n" in value)}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _state(svc: EmbeddedService) -> dict[str, Any]:
    """What a reader can see of the service: every benchmark's ranking, all pairs with their
    verdicts and decisions, contamination and stability figures, counters, the change log."""
    out: dict[str, Any] = {"benchmarks": svc.benchmarks(), "counters": svc.store.counters(),
                           "changes": svc.store.changes_since(0, limit=100_000),
                           "accepted": svc.host.counters()["accepted"]}
    for b in svc.benchmarks():
        mon = svc.host.monitors[b]
        out[b] = {"ranking": svc.ranking(b), "pairs": [p.as_dict() for p in mon.pairs(b, "all")],
                  "contamination": svc.contamination(b), "stability": svc.stability(b)}
    return _rounded(out)


def _without_snapshots(db: Path, copy: Path) -> Path:
    shutil.copy(db, copy)
    for suffix in ("-wal", "-shm"):
        if Path(str(db) + suffix).exists():
            shutil.copy(str(db) + suffix, str(copy) + suffix)
    con = sqlite3.connect(copy)
    con.execute("DELETE FROM snapshots")
    con.commit()
    con.close()
    return copy


def test_restart_from_snapshot_and_tail_equals_the_state_before_and_a_full_replay(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(5)
    db = tmp_path / "m.db"
    log: list[str] = []
    clock = Clock()
    svc = _service(db, log=log, clock=clock, snapshot_every=1000)
    for lo in range(0, 400, 40):  # 10 batches of ~275 results
        svc.ingest(_events(rng, lo, lo + 40), source="t")
        clock.now += 10.0
        svc.snapshot_if_due()
    svc.ingest(_events(rng, 0, 40, bench="other"), source="t")  # a second benchmark, in the tail
    snaps = svc.store.snapshots()
    assert [s.benchmark for s in snaps] == ["b"]
    assert 0 < snaps[0].results_seq < svc.store.last_seq()  # a tail after the snapshot
    before = _state(svc)
    assert any(c["kind"] == "resolution" for c in before["changes"])  # decisions to keep
    svc.close()

    log.clear()
    svc = _service(db, log=log, snapshot_every=1000)
    assert _state(svc) == before
    assert svc.rebuilt == before["accepted"]
    restored = [line for line in log if "restored" in line]
    assert len(restored) == 1 and "1 benchmark snapshot(s)" in restored[0]
    tail = int(restored[0].split(" results replayed")[0].rsplit(" ", 1)[1])
    assert 0 < tail < 1000 + 2 * 300  # below the interval, plus the last batch and `other`
    svc.close()

    full = _service(_without_snapshots(db, tmp_path / "full.db"), snapshot_every=1000)
    assert _state(full) == before
    full.close()


def test_snapshots_follow_the_settings_and_unchanged_benchmarks_are_restamped(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(6)
    clock = Clock()
    svc = _service(tmp_path / "m.db", clock=clock, snapshot_every=500, snapshot_interval=60.0)
    svc.ingest(_events(rng, 0, 40, bench="a"), source="t")  # ~275 results: not due
    assert not svc.snapshot_due() and not svc.snapshot_if_due()
    svc.ingest(_events(rng, 0, 40, bench="z"), source="t")  # ~550 since the start: due
    assert svc.snapshot_if_due()
    first = {s.benchmark: s for s in svc.store.snapshots()}
    assert list(first) == ["a", "z"]
    assert {s.results_seq for s in first.values()} == {svc.store.last_seq()}

    # By time: one batch (below the count) and the interval passes; only `a` changed.
    svc.ingest(_events(rng, 40, 50, bench="a"), source="t")
    clock.now += 30.0
    assert not svc.snapshot_if_due()
    clock.now += 31.0
    assert svc.snapshot_if_due()
    second = {s.benchmark: s for s in svc.store.snapshots()}
    assert second["a"].state != first["a"].state
    assert second["z"].state == first["z"].state  # not dumped again ...
    assert second["a"].results_seq == second["z"].results_seq == svc.store.last_seq()  # restamped
    assert second["z"].change_id == first["z"].change_id
    # Nothing new: nothing due, however long it waits.
    clock.now += 3600.0
    assert not svc.snapshot_if_due() and not svc.snapshot_if_due(force=True)
    svc.close()


def test_snapshots_off_when_both_settings_are_zero(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    clock = Clock()
    svc = _service(tmp_path / "m.db", clock=clock, snapshot_every=0, snapshot_interval=0.0)
    svc.ingest(_events(rng, 0, 40), source="t")
    clock.now += 1e6
    assert not svc.snapshot_if_due() and not svc.snapshot_if_due(force=True)
    assert svc.store.snapshots() == []
    svc.close()


def test_an_unreadable_snapshot_falls_back_to_the_full_replay_with_a_warning(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(8)
    db = tmp_path / "m.db"
    svc = _service(db, snapshot_every=1)
    for lo in range(0, 200, 50):
        svc.ingest(_events(rng, lo, lo + 50), source="t")
        svc.ingest(_events(rng, lo, lo + 10, bench="other"), source="t")
        svc.snapshot_if_due()
    before = _state(svc)
    svc.close()

    con = sqlite3.connect(db)
    con.execute("UPDATE snapshots SET state = ? WHERE benchmark = 'b'", (b"\x00garbage",))
    con.commit()
    con.close()
    log: list[str] = []
    svc = _service(db, log=log, snapshot_every=1)
    warnings = [line for line in log if "warning" in line]
    assert len(warnings) == 1 and "'b'" in warnings[0] and "cannot be read" in warnings[0]
    assert _state(svc) == before  # the order of the benchmarks too
    # The next round writes a readable one again.
    assert svc.snapshot_if_due(force=True)
    assert Monitor.load_snapshot(svc.store.snapshots()[0].state).benchmarks() == ["b"]
    svc.close()


def test_a_snapshot_taken_under_other_options_is_not_used(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    db = tmp_path / "m.db"
    svc = _service(db, snapshot_every=1)
    svc.ingest(_events(rng, 0, 200), source="t")
    assert svc.snapshot_if_due()
    svc.close()

    log: list[str] = []
    svc = _service(db, log=log, snapshot_every=1, include_leak_suspect=True)
    assert any("other monitor options" in line for line in log)
    assert svc.contamination("b")["excluded_items"] == 0
    rebuilt = _state(svc)
    svc.close()
    fresh = _service(_without_snapshots(db, tmp_path / "full.db"), snapshot_every=1,
                     include_leak_suspect=True)
    assert _state(fresh) == rebuilt
    fresh.close()


def test_the_change_log_ends_in_the_restored_ranking_when_it_moved_on_after_the_snapshot(
    tmp_path: Path,
) -> None:
    # After the snapshot the process logged a ranking that later results (committed, not yet
    # evaluated at the crash) undid: the restored monitor emits nothing for a ranking with
    # the snapshot's tiers, so the restart must compare it with the log itself.
    rng = np.random.default_rng(11)
    db = tmp_path / "m.db"
    svc = _service(db, snapshot_every=1)
    svc.ingest(_events(rng, 0, 300), source="t")
    assert svc.snapshot_if_due()
    now = svc.ranking("b")
    undone = RankingChange(change_id=0, benchmark="b", resolved=False,
                           models=list(reversed([m["model"] for m in now["models"]])),
                           unresolved_pairs=len(MODELS) - 1, ts=datetime.now(UTC))
    svc.store.commit(results=(), changes=[undone])
    svc.close()

    svc = _service(db, snapshot_every=1)
    last = [c for c in svc.store.changes_since(0) if c["kind"] == "ranking"][-1]
    assert last["models"] == [m["model"] for m in svc.ranking("b")["models"]]
    assert last["tiers"] == [m["tier"] for m in svc.ranking("b")["models"]]
    n_changes = len(svc.store.changes_since(0))
    svc.close()
    svc = _service(db, snapshot_every=1)  # and nothing more the next time
    assert len(svc.store.changes_since(0)) == n_changes
    svc.close()


def test_a_snapshot_only_covers_committed_results(tmp_path: Path) -> None:
    svc = _service(tmp_path / "m.db")
    with pytest.raises(ValueError, match="past the last stored results row"):
        svc.store.write_snapshots({"b": b"x"}, results_seq=1, change_id=0,
                                  positions={"b": 0}, config="{}")
    assert svc.store.snapshots() == []
    svc.close()


def test_the_ranking_change_built_for_a_restored_monitor_is_the_one_the_core_emits() -> None:
    # A board with decisions and several tiers: the host's rebuilt event must carry the same
    # order, tiers and flags as the core's own RankingChange for the same state.
    rng = np.random.default_rng(10)
    host = MonitorHost(Settings(eval_interval=0.0).core_config(), eval_interval=0.0,
                       registry=CollectorRegistry())
    host.apply([ev for _, ev in _events(rng, 0, 400)])
    emitted = [c for c in host.evaluate_if_due(force=True) if isinstance(c, RankingChange)]
    assert len(emitted) == 1 and len(set(emitted[0].tiers or [])) > 1
    built = host.ranking_change("b")
    assert built is not None
    skip = {"change_id", "ts"}
    assert built.model_dump(exclude=skip) == emitted[0].model_dump(exclude=skip)
    # The log saying otherwise (other tiers): the current ranking is what it misses.
    stale = {"b": ranking_key(built.models, built.resolved, [1] * len(built.models))}
    missing = host.reconcile([], {}, stale, check_rankings=["b"])
    assert [c.model_dump(exclude=skip) for c in missing] == [built.model_dump(exclude=skip)]
    assert host.reconcile([], {}, {"b": ranking_key(built.models, built.resolved, built.tiers)},
                          check_rankings=["b"]) == []
    # The same tiers in another order inside a tier is the same ranking (nothing missing).
    swapped = list(built.models)
    tiers = list(built.tiers or [])
    first = [i for i, t in enumerate(tiers) if t == tiers[0]]
    if len(first) > 1:
        swapped[first[0]], swapped[first[1]] = swapped[first[1]], swapped[first[0]]
    assert host.reconcile([], {}, {"b": ranking_key(swapped, built.resolved, tiers)},
                          check_rankings=["b"]) == []
    assert isinstance(missing[0].ts, datetime) and missing[0].ts.tzinfo == UTC
