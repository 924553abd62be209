"""``llm-monitor watch`` follows a running lm-eval group task into the embedded monitor.

A fake harness appends samples lines over time — three models × three mmlu subtasks whose
doc_ids all start at 0, lines sometimes written in two halves — while ``watch`` posts them
to a real ``llm-monitor run`` on loopback. The watcher is killed (SIGKILL, mid-way) and
stopped (SIGTERM) and restarted. In the end every line is counted once, the colliding doc_ids
give no conflict, the monitor's clusters are the subtasks, and its figures are those of
``llm-monitor report`` on the same files.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration.embedded_harness import REPO, Server, cli

pytestmark = pytest.mark.integration

TASKS = ("mmlu_anatomy", "mmlu_astronomy", "mmlu_virology")
MODELS = {"org__alpha": 0.82, "org__beta": 0.62, "org__gamma": 0.45}
DOCS = 80  # per subtask


def _lines(seed: int = 7) -> list[tuple[Path, str]]:
    """(relative file, line) in the order a harness would write them: model by model, the
    subtasks interleaved (the harness logs a batch of each)."""
    rng = np.random.default_rng(seed)
    out = []
    for model, p in MODELS.items():
        for i in range(DOCS):
            for task in TASKS:
                rec = {"doc_id": i, "doc": {"question": f"{task} {i}"}, "target": "A",
                       "filter": "none", "metrics": ["acc"], "acc": float(rng.random() < p)}
                out.append((Path(model) / f"samples_{task}_2024-06-01T00-00-00.123456.jsonl",
                            json.dumps(rec) + "\n"))
    return out


def _writer(root: Path, lines: list[tuple[Path, str]], done: threading.Event,
            holds: dict[int, threading.Event]) -> None:
    """Append the lines in bursts, leaving some half written for a moment; before line k of
    ``holds`` wait for its event (so a watcher's restart lands mid-way on any machine)."""
    rng = np.random.default_rng(1)
    for k, (rel, line) in enumerate(lines):
        if k in holds:
            assert holds[k].wait(120)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            if k % 17 == 0:
                cut = len(line) // 2
                fh.write(line[:cut])
                fh.flush()
                time.sleep(0.03)
                fh.write(line[cut:])
            else:
                fh.write(line)
        if k % 40 == 0:
            time.sleep(float(rng.uniform(0.02, 0.1)))
    done.set()


def _watch(root: Path, url: str, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "watch", str(root), "--url", url,
             "--benchmark", "mmlu", "--interval", "0.1", "--batch-size", "50"],
            cwd=REPO, env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)


def _counter(metrics: str, outcome: str) -> float:
    m = re.search(rf'^llm_monitor_events_total{{outcome="{outcome}"}} (\S+)$', metrics, re.M)
    return float(m.group(1)) if m else 0.0


def _watching(log: Path, k: int) -> bool:
    """Wait until the k-th watcher's start line is in the log: its signal handlers are on."""
    return _wait_for(lambda: log.read_text().count("llm-monitor: watching") >= k, 60)


def _wait_for(pred: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_watch_a_group_task_across_restarts_counts_every_line_once(tmp_path: Path) -> None:
    root = tmp_path / "out"
    root.mkdir()
    srv = Server(tmp_path / "m.db").start()
    url = f"http://127.0.0.1:{srv.port}"
    log = tmp_path / "watch.log"
    lines = _lines()
    done = threading.Event()
    restarted = {300: threading.Event(), 600: threading.Event()}
    writer = threading.Thread(target=_writer, args=(root, lines, done, restarted), daemon=True)
    try:
        w = _watch(root, url, log)
        writer.start()
        # Mid-way, a crash: SIGKILL leaves posted lines that the state file may not record.
        assert _wait_for(lambda: _counter(srv.metrics(), "accepted") > 150, 60), log.read_text()
        w.send_signal(signal.SIGKILL)
        w.wait(10)
        w = _watch(root, url, log)
        restarted[300].set()
        # Later, a clean stop and a restart.
        assert _wait_for(lambda: _counter(srv.metrics(), "accepted") > 450, 60), log.read_text()
        assert _watching(log, 2), log.read_text()
        w.send_signal(signal.SIGTERM)
        assert w.wait(20) == 0, log.read_text()
        assert "watch stopped:" in log.read_text()
        w = _watch(root, url, log)
        restarted[600].set()
        writer.join(120)
        assert done.is_set()
        total = len(lines)
        assert _wait_for(lambda: _counter(srv.metrics(), "accepted") >= total, 60), log.read_text()
        assert _watching(log, 3), log.read_text()
        time.sleep(0.5)  # one more scan: nothing left to post
        w.send_signal(signal.SIGINT)
        assert w.wait(20) == 0, log.read_text()
        metrics = srv.metrics()
        # Every line once: no line lost, none counted twice, the collisions no conflict.
        assert _counter(metrics, "accepted") == total
        assert _counter(metrics, "conflict") == 0 and _counter(metrics, "invalid") == 0
        status, live = srv.get_json("/v1/benchmarks/mmlu/ranking")
        assert status == 200
    finally:
        srv.stop()
    # The state file remembers where each file stopped: the end of every file.
    state = json.loads((root / ".llm-monitor-watch.json").read_text())
    for rel, fs in state["files"].items():
        assert fs["offset"] == (root / rel).stat().st_size
        assert fs["lineno"] == DOCS
    # The live state is the report on the same files.
    res = cli("report", str(root), "--benchmark", "mmlu", "--family", "adjacent", "--json")
    assert res.returncode == 0, res.stderr
    offline = json.loads(res.stdout)
    assert offline["groups"] == {"kind": "cluster", "column": "task", "n_groups": len(TASKS)}
    assert [(m["model"], m["n"]) for m in live["models"]] == [
        (m["model"], m["n"]) for m in offline["ranking"]]
    for lm, om in zip(live["models"], offline["ranking"], strict=True):
        assert lm["mean"] == pytest.approx(om["mean"], abs=1e-12)
        assert lm["n"] == DOCS * len(TASKS)
    for lp, op in zip(live["pairs"], offline["pairs"], strict=True):
        assert (lp["model_a"], lp["model_b"], lp["n"]) == (op["model_a"], op["model_b"], op["n"])
        assert lp["delta"] == pytest.approx(op["delta"], abs=1e-12)
        assert lp["sigma_d2"] == pytest.approx(op["sigma_d2"], rel=1e-9)
        # Clusters = subtasks: the same design effect as the offline cluster-robust one.
        assert lp["fixed_n"]["design_effect"] == pytest.approx(
            op["fixed_n"]["design_effect"], rel=1e-9)
        assert lp["fixed_n"]["design_effect"] != pytest.approx(1.0)
