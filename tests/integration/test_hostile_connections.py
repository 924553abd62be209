"""Connection hygiene of a real ``llm-monitor run``: idle and half-sent connections are
closed, a low ``ulimit -n`` is not exhausted by idle sockets, the count of open connections
stays exact whatever clients do, a stalled body is cut off, slow bodies give their slot up to
a valid POST, and a large batch is processed off the event loop while another client polls
/healthz."""

from __future__ import annotations

import http.client
import json
import resource
import socket
import struct
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


def _nofile_high() -> None:
    # This process holds more than a thousand sockets at once below.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))


_HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def _status_of(sock: socket.socket) -> bytes:
    head = b""
    while b"\r\n" not in head:
        chunk = sock.recv(1024)
        if not chunk:
            break
        head += chunk
    return head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"none"


def _one_connection(port: int, pattern: int) -> bytes:
    """One /healthz on a fresh connection, left in one of five ways; the status read."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if pattern == 4:  # a reset before any request
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return b"reset"
        if pattern == 1:  # the server closes it
            s.sendall(_HEALTHZ.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        else:
            s.sendall(_HEALTHZ)
        try:
            if pattern == 3:  # half-closed: nothing more will be sent
                s.shutdown(socket.SHUT_WR)
            status = _status_of(s)
        except OSError as exc:  # closed by the server first (refused)
            return f"error {exc.errno}".encode()
        if pattern == 2:  # a reset after the answer
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return status
    finally:
        s.close()


def test_the_connection_count_is_exact_under_any_pattern(tmp_path: Path) -> None:
    """Under ``ulimit -n 256`` (128 connections): 5,000 fresh connections one after another,
    closed by the client, by the server, reset or half-closed, never fill the cap; then 1,050
    connections stuck in the middle of their headers are closed (the oldest to make room, the
    rest after idle_timeout) while a well-behaved client keeps getting answers; and the count
    of open connections comes back to exactly the ones still open."""
    _nofile_high()
    config = tmp_path / "c.toml"
    config.write_text("idle_timeout = 3\n")
    srv = Server(tmp_path / "c.db", "--config", str(config), preexec_fn=_nofile_256).start()
    stuck: list[socket.socket] = []
    try:
        with HealthProbe(srv.port) as probe:
            t0 = time.perf_counter()
            statuses: dict[tuple[int, bytes], int] = {}
            for k in range(5000):
                key = (k % 5, _one_connection(srv.port, k % 5))
                statuses[key] = statuses.get(key, 0) + 1
            sequential = time.perf_counter() - t0
            for _ in range(1050):
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
                stuck.append(s)
            opened = time.perf_counter()
            for s in stuck:
                s.setblocking(False)
            closed = 0
            while time.perf_counter() < opened + 3 + 5:
                closed = sum(_drain_closed(s) for s in stuck)
                if closed == len(stuck):
                    break
                time.sleep(0.25)
            waited = time.perf_counter() - opened
        figures = (f"5,000 connections in {sequential:.1f} s: {statuses}; {closed} of "
                   f"{len(stuck)} stuck connections closed by the server {waited:.1f} s after "
                   f"they were opened; {probe.summary()}")
        print(f"\nconnection patterns, ulimit -n 256: {figures}")
        # Every answered /healthz is a 200 (a half-closed connection may be closed unanswered).
        assert {status for (_, status) in statuses} <= {b"200", b"none", b"reset"}, figures
        assert all(statuses.get((p, b"200")) == 1000 for p in (0, 1, 2)), figures
        assert probe.failures == 0 and probe.p99() <= 0.25, figures
        assert closed == len(stuck), figures
        for s in stuck:
            s.close()
        stuck.clear()
        # Exact: only the connection of this scrape is open (the probe's is gone).
        deadline = time.monotonic() + 5
        while (open_now := metric_value(srv.metrics(), "llm_monitor_http_connections")) != 1:
            assert time.monotonic() < deadline, f"{open_now} connections counted; {figures}"
            time.sleep(0.2)
        assert srv.request("GET", "/healthz")[0] == 200
    finally:
        for s in stuck:
            s.close()
        srv.kill()


def _slow_body(port: int) -> socket.socket:
    """A POST announcing 100,000 bytes of body and sending its first one."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
              b"application/json\r\nContent-Length: 100000\r\n\r\n[")
    return s


def test_slow_bodies_do_not_delay_a_valid_post(tmp_path: Path) -> None:
    """Eight bodies that trickle in (the default max_concurrent_bodies is 8) hold every body
    slot; a valid POST must still be answered within a second, twice (the slow ones opened
    again), and each slow one is told why it was cut off."""
    srv = Server(tmp_path / "c.db").start()
    slow: list[socket.socket] = []
    try:
        took = []
        for round_ in range(2):
            slow += [_slow_body(srv.port) for _ in range(8)]
            time.sleep(1.0)  # they hold the slots, below any useful rate
            for s in slow[-8:]:
                s.sendall(b" ")  # still alive, a byte at a time
            t0 = time.perf_counter()
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)  # not 59 s
            event = {"benchmark": "b", "item_id": str(round_), "model": "m", "score": 1}
            conn.request("POST", "/v1/results", json.dumps(event),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            reply = json.loads(resp.read())
            conn.close()
            took.append(time.perf_counter() - t0)
            assert resp.status == 202 and reply["accepted"] == 1, reply
        answers = []
        for s in slow:
            s.settimeout(15)
            answers.append(s.recv(1 << 16))
        cut = [a for a in answers if a.startswith(b"HTTP/1.1 408")]
        figures = f"valid POSTs answered in {[f'{t:.2f} s' for t in took]}; {len(cut)} of " \
                  f"{len(slow)} slow bodies cut off with 408"
        print(f"\neight slow bodies: {figures}")
        assert max(took) <= 1.0, figures
        # One slow body made room for each valid POST; the others, cut when they stalled
        # (idle_timeout), or still waiting: every slow body is refused, none applied.
        by_rate = [a for a in cut if b"min_body_rate" in a]
        assert len(by_rate) >= 2, (figures, cut[:1])
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers), figures
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_requests_refused_total", cap="min_body_rate") >= 2
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == 2
        assert b"Traceback" not in srv.log.read_bytes(), srv.log.read_text()[-2000:]
    finally:
        for s in slow:
            s.close()
        srv.kill()
