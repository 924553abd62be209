r"""Hostile and careless clients against a real ``llm-monitor run``: the figures of the
hardening of the embedded monitor, for this checkout or another one (``--repo``, e.g. an
older commit unpacked with ``git archive``) to put the two side by side.

Each probe starts a fresh server on a free loopback port with default settings and measures
from outside, as a client would:

1. ``ones``: a 2 MB body of ``1\n`` lines (1,048,576 lines that are JSON but not events) and
   one valid event: status, seconds, the server's RSS growth (VmHWM − VmRSS before, from
   /proc), dead-letter rows stored, reply bytes; once with the defaults and once with
   ``max_batch_events`` raised past the body (this checkout only).
2. ``first-line``: NDJSON whose first line is malformed, then three valid events: how many
   were accepted (3 when one bad line no longer sinks its neighbours).
3. ``browser``: a ``text/plain`` POST with ``Host: evil.example`` (the CSRF/DNS-rebinding
   pattern): status; ``gzip`` that is not gzip: status; ``schema_version: true`` and a
   model name with a newline: accepted or not.
4. ``idle``: 300 idle sockets (half of them in the middle of a request head) under
   ``ulimit -n 256``: /healthz failures and p99 while they are open, how many the server
   closed 15 s later, bytes of log.
5. ``big``: a 9.6 MB NDJSON batch of 100,000 valid events while another process polls
   /healthz: the batch's seconds and the poller's p99/max.
6. ``benchmarks``: ``BENCHES`` distinct one-result benchmarks in requests of 1,000, while
   another process polls /healthz: statuses, seconds, RSS, the poller's p99.

Issue 23's probes, each while another process polls /healthz (its p99 is printed and stated
in the probe's row of BENCHMARKS.md's table):

7. ``c1-connections``: under ``ulimit -n 256``, 5,000 /healthz on fresh connections one after
   another (closed by the client, by the server, reset after the answer, half-closed, reset
   before a request), then 1,050 connections stuck in the middle of their headers: the
   statuses, the connections the server still counts once every socket is closed
   (``llm_monitor_http_connections``; "n/a" when the checkout has no such gauge).
8. ``c2-budget``: 29 requests of 1,000 models × 3 items, each on a new benchmark, with
   ``max_state_bytes`` set to its default: statuses, seconds, RSS (peak, held to the budget
   + 0.5 GB), the state the server counts.
9. ``c3-cross-port``: the headers Chromium sends for a ``no-cors`` POST of a Blob (no
   Content-Type) from a page on another loopback port, and from ``localhost`` on the same
   port: statuses and whether the result was stored.
10. ``c4-slow-bodies``: eight POSTs announcing 100,000 bytes and sending a byte a second,
    then a valid POST: its status and seconds (the client waits up to 70 s).

Run: ``.venv/bin/python -m bench.bench_hostile [--repo PATH] [--only ones,c1-connections,...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import resource
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bench._record import record
from monitor.runners.settings import Settings
from tests.integration.embedded_harness import HealthProbe

REPO = Path(__file__).resolve().parents[1]
BENCHES = 20_000
_LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")


class Srv:
    def __init__(self, repo: Path, work: Path, *extra: str, nofile: int | None = None) -> None:
        self.db = work / f"h{time.monotonic_ns()}.db"
        self.log = self.db.with_suffix(".log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}

        def limit() -> None:
            if nofile is not None:
                _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "monitor.cli", "run", "--db", str(self.db), "--host",
                 "127.0.0.1", "--port", "0", "--no-view", *extra],
                cwd=repo, env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                preexec_fn=limit)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = _LISTENING.search(self.log.read_bytes())
            if m:
                self.port = int(m.group(1))
                time.sleep(0.3)
                return
            time.sleep(0.05)
        raise RuntimeError(f"the server did not start: {self.log.read_text()[-2000:]}")

    def memory_mb(self) -> tuple[float, float]:
        got = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                got[key] = int(value.split()[0]) / 1024
        return got["VmRSS"], got["VmHWM"]

    def post(self, body: bytes, headers: dict[str, str] | None = None,
             timeout: float = 600) -> tuple[int, bytes, float]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/v1/results", body, headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, data, time.perf_counter() - t0
        finally:
            conn.close()

    def rows(self) -> int:
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True) as con:
            return int(con.execute("SELECT count(*) FROM dead_letters").fetchone()[0])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


class Probe:
    """The tests' /healthz prober (``HealthProbe``), started now and read by :meth:`finish`;
    then :attr:`p99_ms` holds its 99th percentile latency."""

    def __init__(self, port: int) -> None:
        self._probe = HealthProbe(port).__enter__()
        self.p99_ms = float("nan")
        self.failures = 0

    def finish(self) -> str:
        self._probe.__exit__(None, None, None)
        self.p99_ms = 1000 * self._probe.p99()
        self.failures = self._probe.failures
        return self._probe.summary()

    def figure(self) -> str:
        """The p99 as the records state it, after :meth:`finish`."""
        return f"/healthz p99 {self.p99_ms:,.1f} ms"


def _event(**kw: Any) -> bytes:
    return json.dumps({"benchmark": "h", "item_id": "1", "model": "m", "score": 1, **kw}).encode()


def ones(repo: Path, work: Path, new: bool) -> None:
    body = b"1\n" * (1 << 20) + _event() + b"\n"
    configs: list[tuple[str, tuple[str, ...]]] = [("defaults", ())]
    if new:
        cfg = work / "ones.toml"
        cfg.write_text("max_batch_events = 2000000\n")
        configs.append(("max_batch_events raised", ("--config", str(cfg))))
    for name, extra in configs:
        srv = Srv(repo, work, *extra)
        try:
            rss0, _ = srv.memory_mb()
            status, data, took = srv.post(body)
            _, peak = srv.memory_mb()
            print(f"ones ({name}): {status} in {took:.2f} s, RSS +{peak - rss0:.0f} MB "
                  f"(peak {peak:.0f} MB), {srv.rows()} dead-letter rows, reply {len(data):,} "
                  "bytes")
        finally:
            srv.stop()


def first_line(repo: Path, work: Path, new: bool) -> None:
    srv = Srv(repo, work)
    try:
        body = b"{oops\n" + b"\n".join(_event(item_id=str(i)) for i in range(3))
        status, data, _ = srv.post(body)
        reply = json.loads(data)
        print(f"first-line: {status}, accepted {reply['accepted']} of 3 valid, invalid "
              f"{reply['invalid']}")
    finally:
        srv.stop()


def browser(repo: Path, work: Path, new: bool) -> None:
    import gzip as _gzip

    srv = Srv(repo, work)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.putrequest("POST", "/v1/results", skip_host=True)
        body = _event(item_id="evil")
        for k, v in (("Host", "evil.example"), ("Content-Type", "text/plain"),
                     ("Content-Length", str(len(body)))):
            conn.putheader(k, v)
        conn.endheaders(body)
        evil = conn.getresponse().status
        conn.close()
        gz = srv.post(_event(), {"Content-Encoding": "gzip"})[0]
        real = srv.post(_gzip.compress(_event(item_id="gz")), {"Content-Encoding": "gzip"})[0]
        sv = json.loads(srv.post(_event(item_id="sv", schema_version=True))[1])["accepted"]
        nl = json.loads(srv.post(_event(model="a\nb"))[1])["accepted"]
        print(f"browser: text/plain with Host evil.example → {evil}; Content-Encoding gzip "
              f"that is not gzip → {gz} (real gzip → {real}); schema_version true accepted: "
              f"{bool(sv)}; a model name with a newline accepted: {bool(nl)}")
    finally:
        srv.stop()


def idle(repo: Path, work: Path, new: bool) -> None:
    srv = Srv(repo, work, nofile=256)
    socks = []
    try:
        probe = Probe(srv.port)
        time.sleep(0.5)
        for k in range(300):
            try:
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            except OSError:
                continue
            if k % 2:
                s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            socks.append(s)
        time.sleep(2.0)
        during = probe.finish()
        time.sleep(13.0)
        closed = 0
        for s in socks:
            s.setblocking(False)
            try:
                while data := s.recv(65536):
                    del data
                closed += 1
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        print(f"idle: {len(socks)} sockets opened under ulimit -n 256; while open {during}; "
              f"{closed} closed by the server 15 s after opening; log "
              f"{srv.log.stat().st_size:,} bytes")
    finally:
        for s in socks:
            s.close()
        srv.stop()


def big(repo: Path, work: Path, new: bool) -> None:
    srv = Srv(repo, work)
    try:
        body = b"".join(json.dumps({"benchmark": "big", "item_id": f"item-{i // 40}",
                                    "model": f"model-{i % 40}", "score": (i * 7919) % 3 // 2,
                                    "cluster": f"c{i % 14}"}).encode() + b"\n"
                        for i in range(100_000))
        probe = Probe(srv.port)
        time.sleep(0.5)
        status, _, took = srv.post(body)
        time.sleep(0.5)
        print(f"big: {len(body) / 1e6:.1f} MB NDJSON batch → {status} in {took:.2f} s; "
              f"meanwhile {probe.finish()}")
    finally:
        srv.stop()


def benchmarks(repo: Path, work: Path, new: bool) -> None:
    srv = Srv(repo, work)
    try:
        probe = Probe(srv.port)
        statuses: dict[int, int] = {}
        slowest = 0.0
        t0 = time.perf_counter()
        for lo in range(0, BENCHES, 1000):
            body = b"\n".join(_event(benchmark=f"bench-{i}") for i in range(lo, lo + 1000))
            status, _, took = srv.post(body)
            statuses[status] = statuses.get(status, 0) + 1
            slowest = max(slowest, took)
        total = time.perf_counter() - t0
        rss, peak = srv.memory_mb()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        t1 = time.perf_counter()
        conn.request("GET", "/metrics")
        metrics = len(conn.getresponse().read())
        scrape = time.perf_counter() - t1
        print(f"benchmarks: {BENCHES:,} one-result benchmarks in requests of 1,000 → "
              f"{statuses} in {total:.1f} s (slowest request {slowest:.2f} s), RSS {rss:.0f} MB "
              f"(peak {peak:.0f} MB), /metrics {metrics:,} bytes in {scrape:.2f} s; meanwhile "
              f"{probe.finish()}")
    finally:
        srv.stop()


def _metric(srv: Srv, name: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return f"{float(line.split()[1]):.0f}"
    return "n/a"


_HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
_LINGER0 = struct.pack("ii", 1, 0)


def _fresh_connection(port: int, pattern: int) -> str:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        if pattern == 4:  # reset before any request
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER0)
            return "reset"
        s.sendall(_HEALTHZ if pattern != 1
                  else _HEALTHZ.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        if pattern == 3:
            s.shutdown(socket.SHUT_WR)
        head = s.recv(1024)
        if pattern == 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER0)
        return head.split(b" ", 2)[1].decode() if head.count(b" ") >= 2 else "none"
    except OSError:
        return "error"
    finally:
        s.close()


# The five ways _fresh_connection leaves a connection, by its ``pattern``.
_PATTERNS = ("client close", "server close", "reset after", "half-closed", "reset before")


def _c1_met(by_pattern: dict[int, Counter[str]], counted: str, probe: Probe) -> bool:
    """The rule of test_hostile_connections' exact-count test: every answered /healthz is a
    200 (a half-closed connection may be closed unanswered, one reset before its request gets
    none), each of the three patterns that keep the connection open for the answer got all
    of theirs, the poller never failed and its p99 is ≤ 250 ms, and once every socket is
    closed the server counts exactly one connection: the scrape's own."""
    seen = {status for got in by_pattern.values() for status in got}
    return (seen <= {"200", "none", "reset"}
            and all(by_pattern[p] == Counter({"200": 1000}) for p in (0, 1, 2))
            and probe.failures == 0 and probe.p99_ms <= 250 and counted == "1")


def c1_connections(repo: Path, work: Path, new: bool) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    srv = Srv(repo, work, nofile=256)
    stuck: list[socket.socket] = []
    try:
        probe = Probe(srv.port)
        by_pattern: dict[int, Counter[str]] = defaultdict(Counter)
        t0 = time.perf_counter()
        for k in range(5000):
            got = _fresh_connection(srv.port, k % 5)
            by_pattern[k % 5][got] += 1
        took = time.perf_counter() - t0
        for _ in range(1050):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
            stuck.append(s)
        time.sleep(1.0)
        during = probe.finish()
        for s in stuck:
            s.close()
        stuck.clear()
        # The server sees the closes asynchronously: wait up to 5 s for the count to settle.
        deadline = time.monotonic() + 5
        while (counted := _metric(srv, "llm_monitor_http_connections")) not in ("1", "n/a") \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        statuses = sum(by_pattern.values(), Counter[str]())
        patterns = "; ".join(
            f"{_PATTERNS[p]} {dict(sorted(by_pattern[p].items()))}" for p in sorted(by_pattern))
        print(f"c1-connections: 5,000 fresh connections under ulimit -n 256 in {took:.1f} s → "
              f"{dict(sorted(statuses.items()))} ({patterns}), then 1,050 stuck mid-headers; "
              f"counted once all were closed: {counted} (the scrape's own); meanwhile {during}")
        record("hostile: 5,000 fresh connections, 1,050 stuck mid-headers (ulimit -n 256)",
               goal="every answered /healthz a 200, all on connections kept open for the "
                    "answer; /healthz p99 ≤ 250 ms, none failed; the count back to 1",
               figure=f"{dict(sorted(statuses.items()))}; counted {counted}; {probe.figure()}",
               peer=f"meanwhile {during}", met=_c1_met(by_pattern, counted, probe),
               command="python -m bench.bench_hostile --only c1-connections")
    finally:
        for s in stuck:
            s.close()
        srv.stop()


# The budget C2 starts the server with: the default of max_state_bytes, written out so that
# the bound below is the one the server holds (an older checkout, without the setting, is
# started with its defaults and held to the same bound). docs/operations.md "Caps": the
# process stays under max_state_bytes + 0.5 GB.
STATE_BUDGET = int(Settings.model_fields["max_state_bytes"].default)
STATE_HEADROOM = 500_000_000


def c2_budget(repo: Path, work: Path, new: bool) -> None:
    extra: tuple[str, ...] = ()
    if new:
        cfg = work / "c2.toml"
        cfg.write_text(f"max_state_bytes = {STATE_BUDGET}\n")
        extra = ("--config", str(cfg))
    bound_mb = (STATE_BUDGET + STATE_HEADROOM) / 2**20  # memory_mb's unit (VmHWM kB / 1024)
    srv = Srv(repo, work, *extra)
    try:
        probe = Probe(srv.port)
        statuses: dict[int, int] = {}
        t0 = time.perf_counter()
        for b in range(29):
            body = b"\n".join(_event(benchmark=f"wide-{b}", item_id=str(i), model=f"m{m}",
                                     score=(i + m) % 2) for m in range(1000) for i in range(3))
            status, _, _ = srv.post(body)
            statuses[status] = statuses.get(status, 0) + 1
        took = time.perf_counter() - t0
        rss, peak = srv.memory_mb()
        state = _metric(srv, "llm_monitor_state_bytes")
        state = state if state == "n/a" else f"{float(state) / 1e6:,.0f} MB"
        during = probe.finish()
        print(f"c2-budget: 29 requests of 1,000 models × 3 items on new benchmarks → {statuses} "
              f"in {took:.1f} s, RSS {rss:,.0f} MB (peak {peak:,.0f} MB), state counted "
              f"{state}; meanwhile {during}")
        record("hostile: 29 requests of 1,000 models × 3 items on new benchmarks",
               goal=f"refused past the state budget (429), peak RSS ≤ max_state_bytes "
                    f"({STATE_BUDGET / 1e9:g} GB) + {STATE_HEADROOM / 1e9:g} GB "
                    f"({bound_mb:,.0f} MB)",
               figure=f"{statuses}, peak RSS {peak:,.0f} MB; {probe.figure()}",
               peer=f"meanwhile {during}", met=429 in statuses and peak <= bound_mb,
               command="python -m bench.bench_hostile --only c2-budget")
    finally:
        srv.stop()


def c3_cross_port(repo: Path, work: Path, new: bool) -> None:
    srv = Srv(repo, work)
    try:
        probe = Probe(srv.port)
        got = []
        for k, origin in enumerate((f"http://127.0.0.1:{srv.port + 1}",
                                    f"http://localhost:{srv.port}")):
            body = _event(item_id=f"evil{k}")
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
            conn.putrequest("POST", "/v1/results", skip_host=True, skip_accept_encoding=True)
            for key, value in (("Host", f"127.0.0.1:{srv.port}"), ("Origin", origin),
                               ("Sec-Fetch-Site", "same-site" if k == 0 else "cross-site"),
                               ("Sec-Fetch-Mode", "no-cors"), ("Sec-Fetch-Dest", "empty"),
                               ("Content-Length", str(len(body)))):
                conn.putheader(key, value)
            conn.endheaders(body)
            got.append(conn.getresponse().status)
            conn.close()
        time.sleep(1.0)  # the poller's figures over a second at least
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("GET", "/v1/benchmarks")
        stored = json.loads(conn.getresponse().read())["benchmarks"] != []
        conn.close()
        during = probe.finish()
        print(f"c3-cross-port: no-cors Blob POST from http://127.0.0.1:<other port> → {got[0]}, "
              f"from http://localhost:<same port> → {got[1]}; stored: {stored}; meanwhile "
              f"{during}")
        record("hostile: cross-origin no-cors POST from a page on another port",
               goal="refused, nothing stored", figure=f"{got[0]}, {got[1]}; stored {stored}; {probe.figure()}",
               peer=f"meanwhile {during}", met=not stored,
               command="python -m bench.bench_hostile --only c3-cross-port")
    finally:
        srv.stop()


def c4_slow_bodies(repo: Path, work: Path, new: bool) -> None:
    srv = Srv(repo, work)
    slow: list[socket.socket] = []
    try:
        probe = Probe(srv.port)
        for _ in range(8):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=90)
            s.sendall(b"POST /v1/results HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                      b"application/json\r\nContent-Length: 100000\r\n\r\n[")
            slow.append(s)
        stop = threading.Event()

        def trickle() -> None:  # a byte a second on each
            while not stop.wait(1.0):
                for s in slow:
                    with contextlib.suppress(OSError):
                        s.sendall(b" ")

        dripper = threading.Thread(target=trickle, daemon=True)
        dripper.start()
        time.sleep(2.0)
        status, _, took = srv.post(_event(item_id="valid"), {"Content-Type": "application/json"},
                                   timeout=70)
        stop.set()
        dripper.join()
        during = probe.finish()
        print(f"c4-slow-bodies: 8 bodies at a byte a second, then a valid POST → {status} in "
              f"{took:.2f} s; meanwhile {during}")
        record("hostile: 8 slow bodies, then a valid POST", goal="answered within 1 s",
               figure=f"{status} in {took:.2f} s; {probe.figure()}", peer=f"meanwhile {during}",
               met=took <= 1.0, command="python -m bench.bench_hostile --only c4-slow-bodies")
    finally:
        for s in slow:
            s.close()
        srv.stop()


PROBES = {"ones": ones, "first-line": first_line, "browser": browser, "idle": idle,
          "big": big, "benchmarks": benchmarks, "c1-connections": c1_connections,
          "c2-budget": c2_budget, "c3-cross-port": c3_cross_port,
          "c4-slow-bodies": c4_slow_bodies}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=REPO,
                    help="checkout whose `python -m monitor.cli run` is measured")
    ap.add_argument("--only", default=",".join(PROBES), help="comma-separated probes")
    args = ap.parse_args()
    new = args.repo.resolve() == REPO
    print(f"checkout: {args.repo} ({'this one' if new else 'another'})")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            PROBES[name](args.repo, Path(tmp), new)


if __name__ == "__main__":
    main()
