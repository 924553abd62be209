"""Caps against a real ``llm-monitor run``: a request that would take the process past a cap
on benchmarks, models, clusters, perturbation kinds or events per request is refused whole
with a 4xx naming the cap, nothing accepted before is lost, and names with control
characters are rejected line by line."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.embedded_harness import HealthProbe, Server, metric_value

pytestmark = pytest.mark.integration


def _ev(bench: str, item: str, model: str, **extra: object) -> dict:
    return {"benchmark": bench, "item_id": item, "model": model, "score": 1, **extra}


def _ndjson(events: list[dict]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_each_cap_refuses_with_its_name_and_keeps_what_was_accepted(tmp_path: Path) -> None:
    config = tmp_path / "caps.toml"
    config.write_text("max_benchmarks = 3\nmax_models_per_benchmark = 4\n"
                      "max_clusters_per_benchmark = 2\nmax_perturbation_kinds = 2\n"
                      "max_batch_events = 50\n")
    srv = Server(tmp_path / "caps.db", "--config", str(config)).start()
    try:
        ok = [_ev(b, "1", m, cluster="c1") for b in ("a", "b", "c") for m in ("x", "y")]
        status, reply = srv.post(_ndjson(ok))
        assert status == 202 and reply["accepted"] == 6, reply

        def refused(events: list[dict], cap: str, code: int = 429) -> None:
            status, reply = srv.post(_ndjson(events))
            assert status == code and reply["cap"] == cap, (status, reply)
            assert cap in json.dumps(reply) and "nothing of this request" in reply["detail"]

        # One new benchmark past the cap refuses its whole request, valid neighbours too.
        refused([_ev("a", "2", "x"), _ev("d", "1", "x")], "max_benchmarks")
        refused([_ev("a", "2", m) for m in ("x", "y", "z", "w", "v")], "max_models_per_benchmark")
        refused([_ev("a", str(i), "x", cluster=f"c{i}") for i in range(2, 4)],
                "max_clusters_per_benchmark")
        refused([_ev("a", "1", "x", variant=f"perturbed:k{i}") for i in range(3)],
                "max_perturbation_kinds")
        refused([_ev("a", str(i), "x") for i in range(51)], "max_batch_events", 413)
        # Up to the caps is fine, and names already held never count twice.
        fine = ([_ev("a", "2", m, cluster="c2") for m in ("x", "y", "z", "w")]
                + [_ev("a", "1", "x", variant=f"perturbed:k{i}") for i in range(2)])
        status, reply = srv.post(_ndjson(fine))
        assert status == 202 and reply["accepted"] == 6, reply
        # Nothing accepted before a refusal is lost.
        assert srv.get_json("/v1/benchmarks")[1]["benchmarks"] == ["a", "b", "c"]
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == 12
        for cap in ("max_benchmarks", "max_models_per_benchmark", "max_batch_events"):
            assert metric_value(text, "llm_monitor_requests_refused_total", cap=cap) == 1
        # Control characters (a newline included) in a name reject that line only.
        bad = [_ev("a\nb", "1", "x"), _ev("a", "1\t", "x"), _ev("a", "3", "x\x7f"),
               _ev("a", "3", "x", cluster="c\u0085"), _ev("a", "4", "y")]
        status, reply = srv.post(_ndjson(bad))
        assert status == 202 and reply["accepted"] == 1 and reply["invalid"] == 4, reply
        assert [r["index"] for r in reply["rejected"]] == [0, 1, 2, 3], reply
        assert all("control character" in r["detail"] for r in reply["rejected"]), reply
        srv.kill()
        srv.start()  # the caps hold against what a restart rebuilt
        refused([_ev("e", "1", "x")], "max_benchmarks")
        refused([_ev("a", "9", "v")], "max_models_per_benchmark")
    finally:
        srv.kill()



def test_a_hundred_thousand_benchmarks_are_refused_past_the_cap(tmp_path: Path) -> None:
    """100,000 one-result benchmarks (the default cap is 1,000) in requests of 1,000, while
    another client polls /healthz."""
    srv = Server(tmp_path / "many.db").start()
    statuses: dict[int, int] = {}
    try:
        t0 = time.perf_counter()
        with HealthProbe(srv.port) as probe:
            for lo in range(0, 100_000, 1000):
                body = _ndjson([_ev(f"bench-{i}", "1", "m") for i in range(lo, lo + 1000)])
                status, _ = srv.request("POST", "/v1/results", body)
                statuses[status] = statuses.get(status, 0) + 1
        took = time.perf_counter() - t0
        rss, peak = srv.memory_kib()
        figures = (f"{statuses} in {took:.1f} s, RSS {rss / 1024:.0f} MB (peak "
                   f"{peak / 1024:.0f} MB); {probe.summary()}")
        print(f"\n100k benchmarks: {figures}")
        assert statuses == {202: 1, 429: 99}, figures
        assert probe.p99() <= 0.100 and probe.failures == 0, figures
        assert len(srv.get_json("/v1/benchmarks")[1]["benchmarks"]) == 1000
        t1 = time.perf_counter()
        status, _ = srv.request("GET", "/metrics")
        assert status == 200 and time.perf_counter() - t1 < 2.0, figures
    finally:
        srv.kill()


def test_the_budget_bounds_all_benchmarks_together_and_holds_after_a_restart(
        tmp_path: Path) -> None:
    config = tmp_path / "budget.toml"
    config.write_text("max_total_models = 6\nmax_total_items = 8\nmax_total_cells = 14\n")
    srv = Server(tmp_path / "budget.db", "--config", str(config)).start()
    try:
        # Three benchmarks of two models and two items: 6 models, 6 items, 12 scores.
        ok = [_ev(b, i, m) for b in "abc" for i in "12" for m in "xy"]
        status, reply = srv.post(_ndjson(ok))
        assert status == 202 and reply["accepted"] == 12, reply

        def refused(events: list[dict], cap: str) -> None:
            status, reply = srv.post(_ndjson(events))
            assert status == 429 and reply["cap"] == cap, (status, reply)
            assert "all benchmarks" in reply["detail"] and cap in reply["detail"], reply

        # Each benchmark is far below every per-benchmark cap; together they are at the budget.
        refused([_ev("d", "1", "x")], "max_total_models")
        refused([_ev("a", "3", "x"), _ev("b", "3", "x"), _ev("c", "3", "x")], "max_total_items")
        refused([_ev("a", "3", "x"), _ev("a", "3", "y"), _ev("b", "3", "x")], "max_total_cells")
        # What adds nothing is never refused (a resent batch), nor what fits.
        status, reply = srv.post(_ndjson(ok))
        assert status == 202 and reply["duplicate"] == 12, reply
        status, reply = srv.post(_ndjson([_ev("a", "3", "x"), _ev("a", "3", "y")]))
        assert status == 202 and reply["accepted"] == 2, reply
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_state_models") == 6
        assert metric_value(text, "llm_monitor_state_items") == 7
        assert metric_value(text, "llm_monitor_state_cells") == 14
        assert metric_value(text, "llm_monitor_requests_refused_total",
                            cap="max_total_cells") == 1
        srv.kill()
        srv.start()  # rebuilt from the database: the same figures, the same budget
        assert metric_value(srv.metrics(), "llm_monitor_state_cells") == 14
        refused([_ev("b", "3", "x")], "max_total_cells")
        assert metric_value(srv.metrics(), "llm_monitor_events_total", outcome="accepted") == 14
    finally:
        srv.kill()


def test_wide_benchmarks_stop_at_the_state_budget(tmp_path: Path) -> None:
    """The report's pattern with the default settings: requests of 1,000 models × 3 items,
    each on a new benchmark (~95 MB of pair arrays each), went to 3 GB within 22 s. The budget
    (max_state_bytes, 2 GB) refuses the benchmark that would pass it, the process stays under
    the budget + 0.5 GB, /healthz keeps answering and nothing accepted is lost."""
    srv = Server(tmp_path / "wide.db").start()
    statuses: dict[int, int] = {}
    replies = []
    try:
        rss0, _ = srv.memory_kib()
        with HealthProbe(srv.port) as probe:
            for b in range(29):
                body = _ndjson([_ev(f"wide-{b}", str(i), f"model-{m}", score=(i + m) % 2)
                                for m in range(1000) for i in range(3)])
                status, reply = srv.post(body)
                statuses[status] = statuses.get(status, 0) + 1
                replies.append(reply)
        rss, peak = srv.memory_kib()
        text = srv.metrics()
        held = metric_value(text, "llm_monitor_state_bytes")
        figures = (f"{statuses}; state {held / 1e6:.0f} MB; RSS {rss0 / 1024:.0f} MB → "
                   f"{rss / 1024:.0f} MB (peak {peak / 1024:.0f} MB); {probe.summary()}")
        print(f"\n29 benchmarks of 1,000 models: {figures}")
        accepted = statuses.get(202, 0)
        assert 15 <= accepted < 29 and statuses.get(429) == 29 - accepted, figures
        assert all(r["cap"] == "max_state_bytes" for r in replies[accepted:]), replies[-1]
        assert held <= 2e9 and peak * 1024 <= 2e9 + 0.5e9, figures
        assert probe.failures == 0 and probe.p99() <= 0.25, figures
        assert srv.get_json("/v1/benchmarks")[1]["benchmarks"] == [
            f"wide-{b}" for b in range(accepted)]
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == \
            3000 * accepted
    finally:
        srv.kill()
