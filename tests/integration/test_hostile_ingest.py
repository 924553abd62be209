"""Hostile bodies against a real ``llm-monitor run``: a body of a million bad lines costs
O(body) time and O(1) stored rows, and the reply lists a bounded number of rejections while
still accounting for every line."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.integration.embedded_harness import Server, metric_value

pytestmark = pytest.mark.integration

GOOD = {"benchmark": "hostile", "item_id": "i", "model": "m", "score": 1}
PER_REQUEST = 20  # the default of dead_letters_per_request
MB = 1 << 20


def _rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return int(con.execute("SELECT count(*) FROM dead_letters").fetchone()[0])


def test_two_megabytes_of_bad_lines_cost_o1_rows(tmp_path: Path) -> None:
    # The events cap (max_batch_events, 200,000 by default) would refuse this body whole
    # (test_the_events_cap_refuses_a_million_lines): raised here to reach the dead letters.
    config = tmp_path / "h.toml"
    config.write_text("max_batch_events = 2000000\n")
    srv = Server(tmp_path / "h.db", "--config", str(config)).start()
    try:
        body = b"1\n" * MB  # 2 MB, 1,048,576 lines that are JSON but not events
        body += json.dumps(GOOD).encode() + b"\n"
        rss0, _ = srv.memory_kib()
        t0 = time.perf_counter()
        status, reply = srv.post(body)
        took = time.perf_counter() - t0
        rss1, peak = srv.memory_kib()
        rows = _rows(srv.db)
        growth = (peak - rss0) / 1024
        figures = (f"{took:.2f} s, RSS {rss0 / 1024:.0f} → {rss1 / 1024:.0f} MB (peak "
                   f"{peak / 1024:.0f} MB, +{growth:.0f} MB), {rows} dead-letter rows, reply "
                   f"{len(json.dumps(reply))} bytes")
        print(f"\n2 MB of '1\\n': {figures}")
        assert status == 202, reply
        assert reply["events"] == MB + 1 and reply["accepted"] == 1, reply
        assert reply["invalid"] == MB and reply["reasons"] == {"schema": MB}, figures
        assert [r["index"] for r in reply["rejected"]] == list(range(PER_REQUEST)), figures
        assert reply["rejected_total"] == MB and reply["rejected_truncated"], figures
        assert took <= 2.0, f"answered in more than 2 s: {figures}"
        assert growth <= 50, f"RSS grew by more than 50 MB: {figures}"
        assert rows <= PER_REQUEST + 1, f"not O(1) rows: {figures}"
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="invalid") == MB
        assert metric_value(text, "llm_monitor_dead_letters_unstored_total") == MB - PER_REQUEST
        assert srv.request("GET", "/healthz")[0] == 200
    finally:
        srv.kill()


def test_dead_letters_stored_per_window_are_bounded(tmp_path: Path) -> None:
    config = tmp_path / "h.toml"
    config.write_text("dead_letters_per_request = 5\ndead_letters_per_window = 12\n"
                      "dead_letter_window = 3600\n")
    srv = Server(tmp_path / "h.db", "--config", str(config)).start()
    try:
        for k in range(10):
            status, reply = srv.post(b"7\n" * 30 + json.dumps({**GOOD, "item_id": str(k)}).encode())
            assert status == 202 and reply["invalid"] == 30 and len(reply["rejected"]) == 5, reply
        rows = _rows(srv.db)
        # Two requests of 5 letters + 1 summary each, then the window's budget of 12 is spent.
        assert rows == 12, f"{rows} dead-letter rows stored for 300 rejected events"
        status, dl = srv.get_json("/v1/dead-letters?limit=100")
        summaries = [d for d in dl["dead_letters"] if "more rejected events" in d["detail"]]
        assert len(summaries) == 2 and "25 more" in summaries[0]["detail"], summaries
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="invalid") == 300
        assert metric_value(text, "llm_monitor_dead_letters_unstored_total") == 300 - 10
    finally:
        srv.kill()


def test_the_events_cap_refuses_a_million_lines(tmp_path: Path) -> None:
    srv = Server(tmp_path / "h.db").start()
    try:
        t0 = time.perf_counter()
        status, reply = srv.post(b"1\n" * MB)
        took = time.perf_counter() - t0
        assert status == 413 and reply["cap"] == "max_batch_events", reply
        assert took <= 2.0 and _rows(srv.db) == 0, f"{took:.2f} s, {_rows(srv.db)} rows"
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_requests_refused_total",
                            cap="max_batch_events") == 1
    finally:
        srv.kill()
