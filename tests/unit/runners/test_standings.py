"""The standings the runner host keeps (monitor.runners.standings): the first stop recorded
with the items then, dropped and taken anew, kept across a restart of the embedded monitor,
and read at bounded cost (changed boards only, the top of the ranking, a share of the time)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.host import MonitorHost
from monitor.runners.settings import Settings
from monitor.runners.standings import RecordChange, Standings

N = 1000
REFERENCES = {"r1": 0.9, "r2": 0.6, "r3": 0.3}


def scores(seed: int, p: float) -> list[float]:
    return (np.random.default_rng(seed).random(N) < p).astype(float).tolist()


def references(bench: str = "b") -> list[ItemResult]:
    return [ItemResult(benchmark=bench, item_id=f"q{i}", model=m, score=s)
            for j, (m, p) in enumerate(REFERENCES.items()) for i, s in enumerate(scores(j, p))]


def results(model: str, items: Iterator[str] | tuple[str, ...], p: float = 0.75,
            bench: str = "b") -> list[ItemResult]:
    x = scores(sum(map(ord, model)), p)
    return [ItemResult(benchmark=bench, item_id=i, model=model, score=x[int(i[1:])])
            for i in items]


class Frozen:
    """A clock that stands still: the host's cadence and the standings' budget never bind."""

    def __call__(self) -> float:
        return 1000.0


def frozen_host(config: CoreConfig | None = None) -> MonitorHost:
    return MonitorHost(config or CoreConfig(), eval_interval=0.0, registry=CollectorRegistry(),
                       log=lambda _: None, clock=Frozen())


def step(h: MonitorHost, events: list[ItemResult]) -> list[RecordChange]:
    """Apply, evaluate and refresh, as a runner's tick does; the records that changed."""
    h.apply(events)
    h.evaluate_if_due(force=True)
    return list(h.refresh_standings())


def gauges(h: MonitorHost, name: str) -> dict[str, float]:
    return {s.labels["model"]: s.value
            for fam in text_string_to_metric_families(generate_latest(h.registry).decode())
            for s in fam.samples if s.name == name}


def evaluate_x(h: MonitorHost) -> int:
    """Post x's next 100 items until its plan says stop; the items it had then."""
    while (plan := h.monitor("b").plan("b", "x", count=100)).action == "continue":
        step(h, results("x", plan.next_items))
    return plan.items_done


@pytest.mark.slow
def test_the_first_stop_is_kept_with_the_items_then() -> None:
    h = frozen_host()
    step(h, references())
    assert {m: s.settled for m, s in h.standings.of("b").items()} == dict.fromkeys(REFERENCES,
                                                                                   True)
    n = evaluate_x(h)
    assert 0 < n < N
    # The plan said stop on the state the last step read: the record holds n.
    (rec,) = [r for b, m, r in h.standings.records() if m == "x"]
    assert rec.items == n
    x = h.standings.of("b")["x"]
    assert x.settled and x.text().startswith(f"settled at item {n:,} of 1,000 (")
    assert gauges(h, "llm_monitor_model_settled")["x"] == 1.0
    assert gauges(h, "llm_monitor_model_settled_items")["x"] == float(n)
    assert gauges(h, "llm_monitor_model_items")["x"] == float(n)
    assert gauges(h, "llm_monitor_model_items_remaining")["x"] == float(N - n)
    # It runs on: the record stays, the items and the saving follow.
    done = {i for (i, m) in h.monitor("b").scores("b") if m == "x"}
    assert step(h, results("x", tuple(f"q{i}" for i in range(N) if f"q{i}" not in done)[:100]
                        )) == []
    x = h.standings.of("b")["x"]
    assert x.settled_at == rec and x.items_done == n + 100
    assert f"; {n + 100:,} done)" in x.text()
    assert gauges(h, "llm_monitor_model_settled_items")["x"] == float(n)


@pytest.mark.slow
def test_a_new_pair_drops_the_record_and_the_next_stop_is_taken_anew() -> None:
    h = frozen_host()
    step(h, references())
    n = evaluate_x(h)
    done = {i for (i, m) in h.monitor("b").scores("b") if m == "x"}
    others = tuple(f"q{i}" for i in range(N) if f"q{i}" not in done)
    # y starts on items x has not done: x's plan says continue, its record goes.
    changes = step(h, results("y", others[:50], p=0.2))
    assert ("b", "x", None) in changes
    x = h.standings.of("b")["x"]
    assert not x.settled and x.settled_at is None and x.text().startswith("1 pair open, ")
    assert "x" not in gauges(h, "llm_monitor_model_settled_items")
    assert gauges(h, "llm_monitor_model_settled")["x"] == 0.0
    # y evaluates every item: x, which did nothing meanwhile, settles again with its n.
    changes = step(h, results("y", (f"q{i}" for i in range(N)), p=0.2))
    assert [(m, r.items) for _, m, r in changes if m == "x" and r is not None] == [("x", n)]


def test_only_changed_boards_and_the_top_of_the_ranking_are_read() -> None:
    # pair_series_limit = 1: the per-model series, and the standings, cover the top 2 models.
    h = frozen_host(CoreConfig(pair_series_limit=1))
    step(h, references())
    assert list(h.standings.of("b")) == ["r1", "r2"]
    assert set(gauges(h, "llm_monitor_model_settled")) == {"r1", "r2"}
    read = h.standings.plans
    assert read == 2
    step(h, [])  # nothing changed: nothing read
    assert h.refresh_standings() == [] and h.standings.plans == read
    # A result on another board: only that board is read.
    step(h, [ItemResult(benchmark="c", item_id="q0", model="m", score=1.0)])
    assert h.standings.plans == read + 1
    step(h, [ItemResult(benchmark="b", item_id="q0", model="x", score=1.0)])
    assert h.standings.plans == read + 3


class Ticking:
    """A clock that moves by `step` seconds at every reading."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_a_round_keeps_to_its_share_of_the_time() -> None:
    mon = Monitor(CoreConfig())
    mon.apply([ItemResult(benchmark="b", item_id=f"q{i}", model=f"m{j}", score=s)
               for j in range(6) for i, s in enumerate(scores(j, 0.2 + 0.1 * j)[:200])])
    clock = Ticking(0.01)
    st = Standings(100, share=0.2, clock=clock)
    # Each plan "takes" 10 ms: a budget of 25 ms reads three before it stops (every model has
    # done every item: each is recorded as settled when read).
    assert len(st.refresh({"b": mon}, budget=0.025)) == 3 and st.plans == 3
    # The call took 40 ms (start to end), so nothing is read for the next 160 ms: 20 % of the
    # time. The clock ticks 10 ms per reading, one reading per refused call.
    for _ in range(15):
        st.refresh({"b": mon}, budget=0.025)
        assert st.plans == 3
    st.refresh({"b": mon}, budget=0.025)
    assert st.plans == 6 and len(st.of("b")) == 6  # the round is complete
    clock.t += 10.0
    st.refresh({"b": mon}, budget=1.0)
    assert st.plans == 6  # and nothing changed since


def settled_round(svc: EmbeddedService, timeout: float = 30.0) -> None:
    """Refresh until the standings are those of the state now (the rounds keep to their
    share of the time on the service's real clock)."""
    deadline = time.monotonic() + timeout
    while not svc.host.standings.current(svc.host.monitors):
        assert time.monotonic() < deadline, "the standings did not catch up"
        svc.evaluate_pending(force=True)
        svc.refresh_standings()
        time.sleep(0.005)


@pytest.mark.slow
def test_restored_records_hold_while_settled(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    def service() -> EmbeddedService:
        return EmbeddedService(Settings(db=db, eval_interval=0.0), registry=CollectorRegistry(),
                               log=lambda _: None)

    svc = service()
    svc.ingest(list(enumerate(references())), source="t")
    while (plan := svc.plan("b", "x", count=100))["action"] == "continue":
        svc.ingest(list(enumerate(results("x", plan["next_items"]))), source="t")
        settled_round(svc)
    n = plan["items_done"]
    assert [(m, r.items) for _, m, r in svc.store.settled() if m == "x"] == [("x", n)]
    # x runs on by 100 items, and the process stops: a restart folds them in one batch.
    done = {i for (i, m) in svc.host.monitor("b").scores("b") if m == "x"}
    more = tuple(f"q{i}" for i in range(N) if f"q{i}" not in done)[:100]
    svc.ingest(list(enumerate(results("x", more))), source="t")
    settled_round(svc)
    svc.close()

    svc = service()
    settled_round(svc)
    x = next(m for m in svc.ranking("b")["models"] if m["model"] == "x")
    assert x["standing"]["settled"] and x["standing"]["settled_at"]["items"] == n
    assert x["standing"]["items_done"] == n + 100
    assert x["standing"]["text"].startswith(f"settled at item {n:,} of 1,000 (")
    svc.close()


def test_a_plan_that_fails_leaves_its_model_out_and_the_loop_going() -> None:
    lines: list[str] = []
    h = MonitorHost(CoreConfig(), eval_interval=0.0, registry=CollectorRegistry(),
                    log=lines.append, clock=Frozen())
    h.monitor("empty")  # a monitor created ahead of its first result: nothing to read
    plan = Monitor.plan

    def failing(self: Monitor, benchmark: str, model: str, **kw: object) -> object:
        if model == "r2":
            raise RuntimeError("no plan today")
        return plan(self, benchmark, model, **kw)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Monitor, "plan", failing)
        step(h, references())
    assert set(h.standings.of("b")) == {"r1", "r3"}
    assert lines == ["llm-monitor: a standing was not read: 'b', model 'r2': "
                     "RuntimeError: no plan today"]
    assert h.standings.current(h.monitors)  # the round ended; the next change reads r2 again
    step(h, [ItemResult(benchmark="b", item_id="q0", model="x", score=1.0)])
    assert set(h.standings.of("b")) == {"r1", "r2", "r3", "x"}
