"""The web board's server side: the live table is the verdicts' data, the live report shows
the monitor's own verdicts with the CLI's fixed-N figures of that table, and the page's files
ship with the package."""

from __future__ import annotations

import asyncio
import html
import json
import re
import threading
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.io.tables import ScoreTable
from monitor.offline.replay import with_anytime
from monitor.offline.report import build_report
from monitor.runners.embedded.server import build_app
from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.embedded.web import (
    BOARD_FILES,
    _read,
    live_decisions,
    live_note,
    live_report,
    live_report_html,
    live_table,
)
from monitor.runners.settings import Settings

BENCH = "b (v1)"
MODELS = ("alpha (big)", "beta, small", "gamma")


def _events() -> list[ItemResult]:
    rng = np.random.default_rng(3)
    p = {"alpha (big)": 0.8, "beta, small": 0.55, "gamma": 0.3}
    return [ItemResult(benchmark=BENCH, item_id=f"q{i}", model=m, cluster=f"c{i % 4}",
                       score=float(rng.random() < p[m]),
                       flags=["leak-suspect"] if i == 7 else [])
            for i in range(300) for m in MODELS]


def test_live_table_holds_the_scores_that_enter_the_verdicts() -> None:
    mon = Monitor(CoreConfig())
    events = _events()
    mon.apply(events)
    table = live_table(mon, BENCH)
    assert table.models == MODELS and table.group_kind == "cluster"
    assert "q7" not in set(table.item_ids.tolist())  # excluded by its flag, as in the verdicts
    assert len(table.item_ids) == 299
    want = {(e.item_id, e.model): e.score for e in events if e.item_id != "q7"}
    got = {(i, m): float(table.scores[r, c]) for r, i in enumerate(table.item_ids.tolist())
           for c, m in enumerate(table.models)}
    assert got == want
    # The ranking of the live table is the monitor's ranking by mean.
    ranked = [e.model for e in build_report(table).ranking]
    assert ranked == [m["model"] for m in mon.ranking(BENCH).to_json()["models"]]


def _verdict_rows(page: str) -> list[tuple[str, str]]:
    return [(html.unescape(p), html.unescape(v))
            for p, v in re.findall(r'<tr data-pair="([^"]*)" data-verdict="([^"]*)">', page)]


def test_live_report_shows_the_monitors_verdicts_with_the_cli_figures_of_the_live_table(
        ) -> None:
    config = CoreConfig()
    mon = Monitor(config)
    mon.apply(_events())
    table = live_table(mon, BENCH)
    decisions = live_decisions(mon, BENCH)
    page = live_report_html(table, decisions, config)
    ranking = mon.ranking(BENCH).to_json()
    # The verdicts, ranking, rank sets and tiers are the ranking route's…
    assert _verdict_rows(page) == [(f"{p['model_a']}|{p['model_b']}", p["verdict"])
                                   for p in ranking["pairs"]]
    assert any(p["verdict"].startswith("resolved:") for p in ranking["pairs"])
    rep = live_report(table, decisions, config).as_dict()
    assert [(e["model"], e["rank_low"], e["rank_high"], e["tier"]) for e in rep["ranking"]] == [
        (m["model"], m["rank_low"], m["rank_high"], m["tier"]) for m in ranking["models"]]
    for key in ("resolved", "unresolved_pairs", "top_resolved", "tiers", "design"):
        assert rep[key] == ranking[key], key
    for off, on in zip(rep["pairs"], ranking["pairs"], strict=True):
        assert off["verdict"] == on["verdict"] and off["decided"] == on["decided"]
        assert off["e_value"] == pytest.approx(on["e_value"], rel=1e-12)
    assert rep["anytime"]["order"] == "live" and rep["anytime"]["seed"] is None
    # … and the fixed-N figures the CLI's report of the live table.
    cli = build_report(table, family=config.family, correction=config.correction,
                       alpha=config.alpha, power=config.power,
                       rank_method="simultaneous").as_dict()
    assert [p["fixed_n"] for p in rep["pairs"]] == [p["fixed_n"] for p in cli["pairs"]]
    assert live_note(BENCH) in html.unescape(page)


def test_board_files_ship_and_reference_only_each_other() -> None:
    page = _read(BOARD_FILES["/"][0]).decode()
    for path in BOARD_FILES:
        assert _read(BOARD_FILES[path][0])  # present as package data
    refs = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert set(refs) == {"data:,", "/static/board.css", "/static/board.js"}
    script = _read("board.js").decode()
    assert "console.log" not in script  # nothing, the token least of all, goes to the console
    assert not re.search(r"https?://", page + script + _read("board.css").decode())


def test_live_table_of_scores_without_clusters_has_no_groups() -> None:
    mon = Monitor(CoreConfig())
    mon.apply([ItemResult(benchmark="x", item_id=str(i), model=m, score=float(i % 2))
               for i in range(10) for m in ("a", "b")])
    table = live_table(mon, "x")
    assert isinstance(table, ScoreTable) and table.groups is None and table.group_kind is None


def test_live_report_shows_the_decision_the_monitor_took_not_a_replay_of_its_table() -> None:
    # Model A sends its items first to last, model B last to first: the monitor meets the
    # pair's items in B's order, a replay of the live table in A's (the items' first
    # arrival), which decides at another n. The page shows the monitor's decision.
    rng = np.random.default_rng(5)
    n = 3000
    x = rng.random((n, 2)) < np.array([0.62, 0.55])
    config = CoreConfig()
    mon = Monitor(config)
    ev = [{"benchmark": "order", "item_id": f"q{i}", "model": "A", "score": int(x[i, 0])}
          for i in range(n)]
    ev += [{"benchmark": "order", "item_id": f"q{i}", "model": "B", "score": int(x[i, 1])}
           for i in reversed(range(n))]
    mon.apply([ItemResult.model_validate(e) for e in ev])
    live_n = mon.ranking("order").to_json()["pairs"][0]["decided"]["n"]
    table = live_table(mon, "order")
    replayed = with_anytime(build_report(table, rank_method="simultaneous"), table,
                            order="file")
    assert replayed.anytime is not None
    assert replayed.anytime.first_resolved_at[0] not in (None, live_n)  # they differ here
    page = live_report_html(table, live_decisions(mon, "order"), config)
    assert f"resolved, decided at n={live_n:,}, final" in page
    assert f"n={replayed.anytime.first_resolved_at[0]:,}," not in page
    assert "GET /v1/benchmarks/order/ranking" in page


def test_live_table_reads_the_labels_as_the_benchmarks_design() -> None:
    from monitor.core.config import BenchmarkSpec

    mon = Monitor(CoreConfig(benchmarks={BENCH: BenchmarkSpec(design="strata")}))
    mon.apply(_events())
    table = live_table(mon, BENCH)
    assert table.group_kind == "strata"
    rep = live_report(table, live_decisions(mon, BENCH), mon.config).as_dict()
    assert rep["design"] == "strata" and rep["groups"]["kind"] == "strata"
    assert rep["pairs"][0]["fixed_n"]["q_strata"] == pytest.approx(
        mon.ranking(BENCH).to_json()["pairs"][0]["fixed_n"]["q_strata"], rel=1e-12)


class _WatchedLock:
    """The state lock (reentrant), telling when a thread asks for it while another holds it."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self.contended.set()
        return blocking and self._lock.acquire(True, timeout)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_report_route_waits_for_the_state_lock_off_the_event_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # While a batch holds the state lock (here: a thread, until /healthz has answered or 30 s
    # passed), the report route must wait for it in a thread, as every other read does: taken
    # on the event loop it stalled every request of the server, /healthz included, for as long
    # as the batch took.
    service = EmbeddedService(Settings(db=tmp_path / "m.db", eval_interval=0.0),
                              registry=CollectorRegistry())
    lock = _WatchedLock()
    monkeypatch.setattr(service.host, "lock", lock)
    rng = np.random.default_rng(1)
    results = [{"benchmark": "b", "item_id": f"q{i}", "model": m, "score": int(rng.random() < p)}
               for i in range(200) for m, p in (("a", 0.8), ("z", 0.4))]

    async def scenario() -> tuple[bool, bool, int]:
        async with TestClient(TestServer(build_app(service))) as client:
            resp = await client.post("/v1/results", json=results)
            assert resp.status == 202, await resp.text()
            held, release, timed_out = threading.Event(), threading.Event(), threading.Event()

            def hold() -> None:
                with service.host.lock:
                    held.set()
                    if not release.wait(30.0):
                        timed_out.set()

            holder = threading.Thread(target=hold)
            holder.start()
            assert held.wait(30.0)
            lock.contended.clear()
            report = asyncio.create_task(client.get("/v1/benchmarks/b/report.html"))
            # /healthz is asked only once the report request waits for the lock: asked
            # before, it would answer even from a server whose event loop the report blocks.
            # (Waited for in a thread: a loop blocked on the lock still gets the timeout.)
            reached = await asyncio.to_thread(lock.contended.wait, 30.0)
            health = await client.get("/healthz")
            answered_while_held = not timed_out.is_set() and holder.is_alive()
            release.set()
            assert health.status == 200
            status = (await report).status
            holder.join()
            return reached, answered_while_held, status

    reached, answered_while_held, status = asyncio.run(scenario())
    assert reached, "the report request never waited for the state lock"
    assert status == 200
    assert answered_while_held, "/healthz waited for the report route's lock"


def test_report_route_errors_are_json_for_any_benchmark_name(tmp_path: Path) -> None:
    service = EmbeddedService(Settings(db=tmp_path / "m.db", eval_interval=0.0),
                              registry=CollectorRegistry())
    one = 'one "model" \\ only'

    async def scenario() -> list[tuple[int, str]]:
        async with TestClient(TestServer(build_app(service))) as client:
            resp = await client.post("/v1/results", json=[
                {"benchmark": one, "item_id": "q1", "model": "m", "score": 1}])
            assert resp.status == 202, await resp.text()
            out = []
            for bench in ('no "such" \\ board', one):
                r = await client.get(f"/v1/benchmarks/{quote(bench, safe='')}/report.html")
                out.append((r.status, await r.text()))
            return out

    (missing, missing_body), (few, few_body) = asyncio.run(scenario())
    assert missing == 404 and few == 409
    body = json.loads(missing_body)
    assert body == {"error": "unknown-benchmark",
                    "detail": "no results for benchmark " + repr('no "such" \\ board')}
    assert json.loads(few_body)["error"] == "too-few-models"


def test_report_route_renders_one_report_at_a_time(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # A report of a large board costs seconds of CPU; clicks or clients asking at once must
    # queue, not take every core from ingest.
    import monitor.runners.embedded.web as web_module

    running, most = 0, 0
    lock = threading.Lock()

    def slow(table: ScoreTable, decisions: object, config: CoreConfig, *,
             standings: object = None) -> str:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.3)
        with lock:
            running -= 1
        return "<!DOCTYPE html><title>r</title>"

    monkeypatch.setattr(web_module, "live_report_html", slow)
    service = EmbeddedService(Settings(db=tmp_path / "m.db", eval_interval=0.0),
                              registry=CollectorRegistry())

    async def scenario() -> list[int]:
        async with TestClient(TestServer(build_app(service))) as client:
            resp = await client.post("/v1/results", json=[
                {"benchmark": "b", "item_id": f"q{i}", "model": m, "score": i % 2}
                for i in range(20) for m in ("a", "z")])
            assert resp.status == 202, await resp.text()
            got = await asyncio.gather(*(client.get("/v1/benchmarks/b/report.html")
                                         for _ in range(3)))
            return [r.status for r in got]

    assert asyncio.run(scenario()) == [200, 200, 200]
    assert most == 1


def test_report_route_says_why_a_board_cannot_be_reported_yet(tmp_path: Path) -> None:
    # Early in a run two models can share no item yet: the report of their gap cannot be
    # made, and the route says so (it answered 500 Internal Server Error).
    service = EmbeddedService(Settings(db=tmp_path / "m.db", eval_interval=0.0),
                              registry=CollectorRegistry())

    async def scenario() -> tuple[int, str]:
        async with TestClient(TestServer(build_app(service))) as client:
            resp = await client.post("/v1/results", json=[
                {"benchmark": "b", "item_id": f"q{i}", "model": "a" if i < 10 else "z",
                 "score": i % 2} for i in range(20)])
            assert resp.status == 202, await resp.text()
            r = await client.get("/v1/benchmarks/b/report.html")
            return r.status, await r.text()

    status, text = asyncio.run(scenario())
    assert status == 409, text
    body = json.loads(text)
    assert body["error"] == "cannot-report" and "share no item" in body["detail"], body
