"""Connection hygiene of a real ``llm-monitor run``: idle and half-sent connections are
closed, a low ``ulimit -n`` is not exhausted by idle sockets, a stalled body is cut off, and
a large batch is processed off the event loop while another client polls /healthz."""

from __future__ import annotations

import json
import resource
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.integration.embedded_harness import HealthProbe, Server, metric_value

pytestmark = pytest.mark.integration

IDLE_TIMEOUT = 10.0  # the default of idle_timeout


def _nofile_256() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))


def _drain_closed(sock: socket.socket) -> bool:
    for _ in range(4):
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if data == b"":
            return True
    return False


def test_three_hundred_idle_sockets_under_ulimit_256(tmp_path: Path) -> None:
    srv = Server(tmp_path / "c.db", preexec_fn=_nofile_256).start()
    socks: list[socket.socket] = []
    try:
        with HealthProbe(srv.port) as probe:
            for k in range(300):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
                if k % 2:  # half of them send half a request head and stop
                    s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
                socks.append(s)
            opened = time.perf_counter()
            time.sleep(1.0)
        during = probe.summary()
        p99_during, failed_during = probe.p99(), probe.failures
        with probe:
            for s in socks:
                s.setblocking(False)
            deadline = opened + IDLE_TIMEOUT + 5
            closed = 0
            while time.perf_counter() < deadline:
                closed = sum(_drain_closed(s) for s in socks)
                if closed == len(socks):
                    break
                time.sleep(0.5)
            waited = time.perf_counter() - opened
        log = srv.log.read_bytes()
        figures = (f"{closed} of {len(socks)} idle sockets closed by the server within "
                   f"{waited:.1f} s; while they were opened {during}; while they were being "
                   f"closed {probe.summary()}; log {len(log)} bytes")
        print(f"\n300 idle sockets, ulimit -n 256: {figures}")
        assert failed_during == 0 and p99_during <= 0.25, figures
        assert probe.failures == 0 and probe.p99() <= 0.25, figures
        assert closed == len(socks), figures
        assert b"Too many open files" not in log and len(log) < 100_000, figures
        assert srv.request("GET", "/healthz")[0] == 200
    finally:
        for s in socks:
            s.close()
        srv.kill()


def test_a_stalled_body_is_cut_off(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("idle_timeout = 2\n")
    srv = Server(tmp_path / "c.db", "--config", str(config)).start()
    socks = []
    try:
        rss0, _ = srv.memory_kib()
        for _ in range(12):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      b"application/x-ndjson\r\nContent-Length: 9500000\r\n\r\n"
                      + b'{"benchmark": "b", "item_id": "1", "model": "m", "score": 1}\n' * 50_000)
            socks.append(s)
        t0 = time.perf_counter()
        answers = []
        for s in socks:
            answers.append(s.recv(1 << 16).split(b"\r\n", 1)[0])
        took = time.perf_counter() - t0
        _, peak = srv.memory_kib()
        figures = (f"answers {sorted(set(answers))} after {took:.1f} s; peak RSS "
                   f"+{(peak - rss0) / 1024:.0f} MB")
        print(f"\n12 stalled 9.5 MB uploads: {figures}")
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers), figures
        assert (peak - rss0) / 1024 < 150, figures  # 8 bodies of 3 MB held at most
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_requests_refused_total", cap="body_timeout") == 12
    finally:
        for s in socks:
            s.close()
        srv.kill()


def _events(n: int, bench: str) -> list[dict]:
    return [{"benchmark": bench, "item_id": f"item-{i // 40}", "model": f"model-{i % 40}",
             "score": (i * 7919) % 3 // 2, "cluster": f"c{i % 14}"} for i in range(n)]


def test_a_nine_megabyte_batch_does_not_stall_other_clients(tmp_path: Path) -> None:
    srv = Server(tmp_path / "c.db").start()
    try:
        evs = _events(100_000, "big")
        ndjson = b"".join(json.dumps(e).encode() + b"\n" for e in evs)
        array = json.dumps(_events(100_000, "big2")).encode()
        assert len(ndjson) > 9_000_000 and len(array) > 9_000_000
        results = {}

        def post(name: str, body: bytes) -> None:
            t0 = time.perf_counter()
            status, reply = srv.post(body)
            results[name] = (status, reply["accepted"], time.perf_counter() - t0)

        with HealthProbe(srv.port) as probe:
            time.sleep(0.3)
            for name, body in (("ndjson", ndjson), ("array", array)):
                t = threading.Thread(target=post, args=(name, body))
                t.start()
                t.join(120)
            time.sleep(0.3)
        figures = (f"{ {k: f'{v[0]} {v[1]} accepted in {v[2]:.2f} s' for k, v in results.items()} }; "
                   f"{probe.summary()}")
        print(f"\n9 MB batches: {figures}")
        assert results["ndjson"][:2] == (202, 100_000) and results["array"][:2] == (202, 100_000)
        assert probe.failures == 0 and probe.p99() <= 0.250, figures
    finally:
        srv.kill()
