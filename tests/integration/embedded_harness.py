"""Start ``llm-monitor run`` as a real process on a free loopback port and talk HTTP to it."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


def cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``llm-monitor ARGS`` to completion."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


class Server:
    """One ``llm-monitor run --port 0`` process; the port is read from its first output line."""

    def __init__(self, db: Path, *args: str, token: str | None = None,
                 preexec_fn: Callable[[], None] | None = None) -> None:
        self.db = db
        self.args = args
        self.token = token
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. to set an rlimit)
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = db.with_name(db.name + f".{os.getpid()}.log")
        self._conn: http.client.HTTPConnection | None = None

    # -- life cycle ------------------------------------------------------------------------
    def start(self, *, timeout: float = 30.0) -> Server:
        self.log.write_bytes(b"")
        out = self.log.open("ab")
        cmd = [sys.executable, "-m", "monitor.cli", "run", "--db", str(self.db),
               "--host", "127.0.0.1", "--port", "0", "--no-view", *self.args]
        # The monitor's own settings come from the arguments only, not from the caller's shell.
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=out,
                                     stdin=subprocess.DEVNULL, env=env,
                                     preexec_fn=self.preexec_fn)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _LISTENING.search(self.log.read_text(errors="replace"))
            if m:
                self.port = int(m.group(1))
                self._conn = None
                status, _ = self.request("GET", "/healthz")
                if status == 200:
                    return self
            if self.proc.poll() is not None:
                pytest.fail(f"llm-monitor run exited with {self.proc.returncode}:\n"
                            f"{self.log.read_text(errors='replace')}")
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"llm-monitor run did not start within {timeout}s:\n"
                    f"{self.log.read_text(errors='replace')}")

    def kill(self) -> None:
        """SIGKILL: no chance to flush or clean up."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._close()

    def stop(self) -> int:
        """SIGTERM and wait for a clean exit; returns the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._close()
        return int(self.proc.returncode)

    def memory_kib(self) -> tuple[int, int]:
        """The process's resident set now and at its peak (VmRSS, VmHWM in /proc), in KiB."""
        assert self.proc is not None
        fields = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
        return fields["VmRSS"], fields["VmHWM"]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- HTTP ------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: bytes | Iterable[bytes] | None = None,
                headers: dict[str, str] | None = None, *, timeout: float = 60.0
                ) -> tuple[int, bytes]:
        hdrs = dict(headers or {})
        if self.token is not None and "Authorization" not in hdrs:
            hdrs["Authorization"] = f"Bearer {self.token}"
        reused = self._conn is not None
        if self._conn is None:
            self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            try:
                self._conn.request(method, path, body=body, headers=hdrs,
                                   encode_chunked="Transfer-Encoding" in hdrs)
                resp = self._conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                if not reused or not isinstance(body, (bytes, type(None))):
                    raise
                # The server closes a keep-alive connection idle for idle_timeout (10 s): a
                # request on one it has closed was never read, so it is sent again once.
                self._conn.close()
                self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
                self._conn.request(method, path, body=body, headers=hdrs,
                                   encode_chunked="Transfer-Encoding" in hdrs)
                resp = self._conn.getresponse()
            data = resp.read()
            if resp.getheader("Connection", "").lower() == "close":
                self._close()
            return resp.status, data
        except BaseException:
            self._close()
            raise

    def send_only(self, method: str, path: str, body: bytes) -> None:
        """Send a request without reading the reply (to kill the server before it is read)."""
        hdrs = {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}
        self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self._conn.request(method, path, body=body, headers=hdrs)

    def post(self, body: bytes | str | list[Any] | dict[str, Any],
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        if isinstance(body, (list, dict)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        status, data = self.request("POST", "/v1/results", body, headers)
        return status, json.loads(data)

    def get_json(self, path: str) -> tuple[int, Any]:
        status, data = self.request("GET", path)
        return status, json.loads(data)

    def ranking(self, benchmark: str, *, timeout: float = 240.0) -> dict[str, Any]:
        """The benchmark's ranking route once its models' standings follow the state
        (``standings.current``): the standings are read in rounds of their own, so a board
        read before that can still change without a new result."""
        deadline = time.monotonic() + timeout
        while True:
            status, route = self.get_json(f"/v1/benchmarks/{benchmark}/ranking")
            assert status == 200, route
            if route["standings"]["current"]:
                return dict(route)
            assert time.monotonic() < deadline, f"the standings of {benchmark} did not catch up"
            time.sleep(0.1)

    def metrics(self) -> str:
        status, data = self.request("GET", "/metrics")
        assert status == 200, data
        return data.decode()


_PROBE = r"""
import http.client, json, select, sys, time
port, timeout, pause = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
latencies, failures, conn, ready = [], 0, None, False
while not select.select([sys.stdin], [], [], pause)[0]:  # until stdin is closed
    t0, ok = time.perf_counter(), False
    try:
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        conn.request("GET", "/healthz")
        resp = conn.getresponse()
        resp.read()
        ok = resp.status == 200
    except (OSError, http.client.HTTPException):
        if conn is not None:
            conn.close()
        conn = None
    took = time.perf_counter() - t0
    if not ready:  # the first answer says the probe is up; it is not counted
        ready = ok
        print("ready" if ok else "not ready", flush=True)
        if not ok:
            break
        continue
    if not ok:
        failures += 1
        took = max(took, timeout)
    latencies.append(took)
print(json.dumps({"latencies": latencies, "failures": failures}))
"""


class HealthProbe:
    """GET /healthz in a loop from a process of its own (so that the test's own work does not
    delay it), on its own connection, recording each answer's latency (a timeout or a failure
    is recorded as ``timeout`` seconds)."""

    def __init__(self, port: int, *, timeout: float = 5.0, pause: float = 0.005) -> None:
        self.port, self.timeout, self.pause = port, timeout, pause
        self.latencies: list[float] = []
        self.failures = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HealthProbe:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _PROBE, str(self.port), str(self.timeout), str(self.pause)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline()  # the probe's first /healthz answer
        assert first == b"ready\n", f"the /healthz probe did not get a first answer: {first!r}"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._proc is not None
        out, _ = self._proc.communicate(timeout=self.timeout + 30)
        data = json.loads(out)
        self.latencies, self.failures = data["latencies"], data["failures"]

    def p99(self) -> float:
        """The 99th percentile latency in seconds (inf when nothing was measured)."""
        if not self.latencies:
            return float("inf")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(0.99 * len(xs)))]

    def summary(self) -> str:
        xs = sorted(self.latencies) or [float("nan")]
        return (f"/healthz: {len(self.latencies)} probes, {self.failures} failed, median "
                f"{1000 * xs[len(xs) // 2]:.1f} ms, p99 {1000 * self.p99():.1f} ms, max "
                f"{1000 * xs[-1]:.1f} ms")


def offline_report(acknowledged: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    """``llm-monitor report`` on the acknowledged events, in acknowledgement order (the
    order the monitor took them in: ``--order file``), with the item-level decisions the
    monitor takes under its default design (the clusters read as strata: `--cluster-col`
    would declare sampled clusters, another verdict)."""
    import csv

    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "model", "score", "cluster"])
        for ev in acknowledged:
            w.writerow([ev["item_id"], ev["model"], ev["score"], ev["cluster"]])
    res = cli("report", str(path), "--order", "file", "--strata-col", "cluster",
              "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text output (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        if head == name and not want:
            return float(value)
        if head.startswith(name + "{"):
            got = ",".join(sorted(head[len(name) + 1:-1].split(",")))
            if got == want:
                return float(value)
    return 0.0
