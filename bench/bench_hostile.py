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

Run: ``.venv/bin/python -m bench.bench_hostile [--repo PATH] [--only ones,idle,...]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import resource
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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
    """The tests' /healthz prober (``HealthProbe``), started now and read by :meth:`finish`."""

    def __init__(self, port: int) -> None:
        self._probe = HealthProbe(port).__enter__()

    def finish(self) -> str:
        self._probe.__exit__(None, None, None)
        return self._probe.summary()


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


PROBES = {"ones": ones, "first-line": first_line, "browser": browser, "idle": idle,
          "big": big, "benchmarks": benchmarks}


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
