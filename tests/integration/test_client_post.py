"""monitor.client and ``llm-monitor post`` against a real embedded monitor on loopback.

The account (accepted, duplicate, conflict, invalid per line), idempotent re-sending, the
token, the async client, and retries with backoff against a real HTTP server that fails
(503, a reply slower than the timeout) before it answers.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.client import AsyncMonitorClient, ClientError, MonitorClient
from monitor.io.tables import read_table
from tests.integration.embedded_harness import Server, cli

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lmeval"


@pytest.fixture()
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "m.db").start()
    yield srv
    srv.stop()


def _events(n: int, *, model: str, p: float, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"benchmark": "toy", "item_id": f"q{i}", "model": model,
             "score": int(rng.random() < p)} for i in range(n)]


def test_post_accounts_for_every_line_and_resending_is_idempotent(server: Server) -> None:
    events = _events(300, model="a", p=0.7, seed=1) + _events(300, model="b", p=0.4, seed=2)
    url = f"http://127.0.0.1:{server.port}"
    with MonitorClient(url, batch_size=128) as client:
        first = client.post(events, sources=[f"e:{i}" for i in range(len(events))])
        assert first.counts() == {"events": 600, "accepted": 600, "duplicate": 0,
                                  "conflict": 0, "invalid": 0}
        assert first.batches == math.ceil(600 / 128)
        again = client.post(events)
        assert again.counts() == {"events": 600, "accepted": 0, "duplicate": 600,
                                  "conflict": 0, "invalid": 0}
        # One bad score, one changed score for a held result: each traced to its line.
        bad = [dict(events[0], item_id="new1"), dict(events[1], score=1.5),
               dict(events[2], score=1 - events[2]["score"]), dict(events[3], item_id="new2")]
        mixed = client.post(bad, sources=["f.jsonl:1", "f.jsonl:2", "f.jsonl:3", "f.jsonl:4"])
        assert mixed.counts() == {"events": 4, "accepted": 2, "duplicate": 0,
                                  "conflict": 1, "invalid": 1}
        assert [(r.index, r.source, r.reason) for r in mixed.rejected] == [
            (1, "f.jsonl:2", "schema"), (2, "f.jsonl:3", "conflict")]
        assert mixed.rejected_unlisted == 0
        ranking = client.get("/v1/benchmarks/toy/ranking")
    assert {m["model"] for m in ranking["models"]} == {"a", "b"}


def test_async_client_gives_the_same_account(server: Server) -> None:
    events = _events(200, model="c", p=0.5, seed=3)

    async def go() -> tuple[dict[str, int], dict[str, int]]:
        async with AsyncMonitorClient(f"http://127.0.0.1:{server.port}", batch_size=64) as client:
            a = await client.post(events)
            b = await client.post(events)
            return a.counts(), b.counts()

    first, again = asyncio.run(go())
    assert first == {"events": 200, "accepted": 200, "duplicate": 0, "conflict": 0, "invalid": 0}
    assert again == {"events": 200, "accepted": 0, "duplicate": 200, "conflict": 0, "invalid": 0}


def test_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("a-token-of-some-length\n")
    srv = Server(tmp_path / "t.db", "--token-file", str(tmp_path / "token")).start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        with pytest.raises(ClientError, match="HTTP 401"), MonitorClient(url, token="wrong") as c:
            c.post(_events(3, model="a", p=0.5, seed=0))
        with MonitorClient(url, token="a-token-of-some-length") as c:
            assert c.post(_events(3, model="a", p=0.5, seed=0)).accepted == 3
        res = cli("post", str(_table(tmp_path)), "--url", url,
                  "--token-file", str(tmp_path / "token"), "--json")
        assert res.returncode == 0, res.stderr
    finally:
        srv.stop()


def _table(tmp_path: Path) -> Path:
    path = tmp_path / "toy_long.csv"
    rng = np.random.default_rng(5)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "model", "score", "cluster"])
        for i in range(120):
            for m, p in (("x", 0.8), ("y", 0.5), ("z", 0.45)):
                w.writerow([f"i{i}", m, int(rng.random() < p), f"c{i % 6}"])
    return path


def test_post_command_table_and_lmeval_files(server: Server, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server.port}"
    table = _table(tmp_path)
    res = cli("post", str(table), "--url", url, "--cluster-col", "cluster", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert (out["events"], out["accepted"]) == (360, 360)
    # Live = offline: the monitor's ranking has the table's model means.
    t = read_table(table, cluster_col="cluster")
    status, ranking = server.get_json("/v1/benchmarks/toy/ranking")
    assert status == 200
    means = {m["model"]: m["mean"] for m in ranking["models"]}
    for j, model in enumerate(t.models):
        assert means[model] == pytest.approx(float(np.nanmean(t.scores[:, j])))
    # lm-eval samples: model from the directory, items = doc_ids; twice = all duplicates.
    files = sorted(str(p) for p in FIXTURES.rglob("samples_arc_easy_*.jsonl"))
    res = cli("post", *files, "--url", url, "--json")
    out = json.loads(res.stdout)
    assert res.returncode == 0, res.stderr
    assert out["accepted"] == out["events"] > 0
    res = cli("post", *files, "--url", url)
    assert res.returncode == 0, res.stderr
    assert f"duplicate {out['events']}," in res.stdout
    # A directory: every samples file under it (arc_easy's again, gsm8k's new).
    res = cli("post", str(FIXTURES), "--url", url, "--json")
    assert res.returncode == 0, res.stderr
    again = json.loads(res.stdout)
    gsm = sum(1 for p in FIXTURES.rglob("samples_gsm8k_*.jsonl")
              for line in p.read_text().splitlines() if '"strict-match"' in line)
    assert (again["duplicate"], again["accepted"]) == (out["events"], gsm)


def test_post_command_names_rejected_lines_and_fails(server: Server, tmp_path: Path) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    path = d / "samples_toy2_2024-01-01T00-00-00.jsonl"
    path.write_text("".join(json.dumps({"doc_id": i, "acc": s}) + "\n"
                            for i, s in enumerate([1, 0, 1])))
    url = f"http://127.0.0.1:{server.port}"
    assert cli("post", str(path), "--url", url).returncode == 0
    path.write_text("".join(json.dumps({"doc_id": i, "acc": s}) + "\n"
                            for i, s in enumerate([1, 1, 1])))  # line 2 changed its score
    res = cli("post", str(path), "--url", url)
    assert res.returncode == 1
    assert f"rejected {path}:2: conflict" in res.stdout
    assert "accepted 0, duplicate 2, conflict 1, invalid 0" in res.stdout
    # Posted again, the conflict is still one: the monitor holds another score for line 2.
    again = cli("post", str(path), "--url", url, "--json")
    assert again.returncode == 1, again.stdout
    account = json.loads(again.stdout)
    assert (account["duplicate"], account["conflict"]) == (2, 1)
    assert [(r["source"], r["reason"]) for r in account["rejected"]] == [(f"{path}:2", "conflict")]


# -- retries against a real HTTP server that fails first -----------------------------------
class _Flaky:
    """A loopback HTTP server whose first ``fail`` POSTs get 503 and the next ``slow`` ones
    a reply later than the client's timeout; then 202 with the monitor's reply shape."""

    def __init__(self, *, fail: int, slow: int, delay: float) -> None:
        self.fail, self.slow, self.delay = fail, slow, delay
        self.bodies: list[bytes] = []
        self.content_types: list[str | None] = []
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                flaky.bodies.append(body)
                flaky.content_types.append(self.headers.get("Content-Type"))
                n = len(flaky.bodies)
                if n <= flaky.fail:
                    self._reply(503, {"error": "unavailable", "detail": "retry"})
                    return
                if n <= flaky.fail + flaky.slow:
                    time.sleep(flaky.delay)
                lines = body.count(b"\n")
                self._reply(202, {"events": lines, "accepted": lines, "duplicate": 0,
                                  "conflict": 0, "invalid": 0, "rejected": [], "reasons": {}})

            def _reply(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> _Flaky:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_retries_on_5xx_and_timeouts_with_backoff_then_gives_up() -> None:
    events = _events(10, model="a", p=0.5, seed=0)
    with _Flaky(fail=2, slow=1, delay=6.0) as flaky:
        t0 = time.monotonic()
        with MonitorClient(flaky.url, retries=4, backoff=0.2, timeout=2.0,
                           rng=random.Random(0)) as client:
            report = client.post(events)
        elapsed = time.monotonic() - t0
        # 503, 503, a timeout, then the answer: the same body each time, four attempts.
        assert len(flaky.bodies) == 4 and len(set(flaky.bodies)) == 1
        assert set(flaky.content_types) == {"application/x-ndjson"}
        assert (report.accepted, report.retries, report.batches) == (10, 3, 1)
        # Waits of at least half of 0.2, 0.4 and 0.8 s, plus the 2 s timeout.
        assert elapsed >= 0.1 + 0.2 + 0.4 + 2.0
    with _Flaky(fail=100, slow=0, delay=0) as flaky, \
            MonitorClient(flaky.url, retries=2, backoff=0.01) as client:
        with pytest.raises(ClientError, match="gave up after 3 attempts"):
            client.post(events)
        assert len(flaky.bodies) == 3


def test_connection_refused_is_retried_until_the_monitor_is_up(tmp_path: Path) -> None:
    srv = Server(tmp_path / "late.db")
    srv.start()
    port = srv.port
    srv.stop()
    with MonitorClient(f"http://127.0.0.1:{port}", retries=1, backoff=0.01) as client, \
            pytest.raises(ClientError, match="ConnectionRefusedError"):
        client.post(_events(2, model="a", p=0.5, seed=0))


@pytest.mark.parametrize(("args", "mean", "other"), [
    ((), 1 / 3, "flexible-extract"), (("--filter", "flexible-extract"), 2 / 3, "strict-match")])
def test_replay_and_post_choose_the_lmeval_filter(tmp_path: Path, args: tuple[str, ...],
                                                  mean: float, other: str) -> None:
    gsm = next(FIXTURES.rglob("samples_gsm8k_*.jsonl"))  # strict 0,1,0; flexible 1,1,0
    replayed = Server(tmp_path / "r.db", "--replay", str(gsm), *args).start()
    posted = Server(tmp_path / "p.db").start()
    try:
        res = cli("post", str(gsm), "--url", f"http://127.0.0.1:{posted.port}", *args)
        assert res.returncode == 0, res.stderr
        # The other filter's lines are in the account: 3 posted + 3 passed over = 6 lines.
        assert (f"accepted 3, duplicate 0, conflict 0, invalid 0; passed over 3 lines "
                f"(3 lm-eval filter '{other}')") in res.stdout
        res = cli("post", str(gsm), "--url", f"http://127.0.0.1:{posted.port}", *args, "--json")
        account = json.loads(res.stdout)
        assert (account["events"], account["passed_over"]) == (
            3, {f"lm-eval filter '{other}'": 3})
        for srv in (replayed, posted):
            assert _wait_ranked(srv, "gsm8k"), "the results never reached the ranking"
            _, ranking = srv.get_json("/v1/benchmarks/gsm8k/ranking")
            assert [(m["n"], m["mean"]) for m in ranking["models"]] == [(3, pytest.approx(mean))]
    finally:
        replayed.stop()
        posted.stop()


def _wait_ranked(srv: Server, bench: str, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = srv.get_json(f"/v1/benchmarks/{bench}/ranking")
        if status == 200 and body["models"]:
            return True
        time.sleep(0.1)
    return False
