"""SIGKILL the worker at two random points while results stream in, restart it each time,
finish: the durable state equals the Monitor applied offline to the same events — every
result accepted exactly once (no duplicates counted, since none were sent), nothing lost."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from monitor.core import CoreConfig
from monitor.runners.kafka.core import RESULTS_TOPIC
from monitor.runners.replay import ReplayStream, load_blocks
from tests.integration.kafka_harness import (
    Broker,
    Worker,
    offline_monitors,
    produce_at_rate,
    read_topic,
    scrape,
    snapshot_cells,
    wait_until,
    worker_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

N_RESULTS = 24_000
RATE = 3000.0  # results/s: ingest spans ~8 s, so the kills land while results arrive
N_INVALID = 12
ACCEPTED = 'llm_monitor_events_total{outcome="accepted"}'



def _accepted(worker: Worker) -> float:
    try:
        return scrape(worker.metrics_port).get(ACCEPTED, 0.0)
    except OSError:
        return 0.0


def test_sigkill_twice_during_ingest_equals_offline(tmp_path: Path, shared_data: Path) -> None:
    crash_run(tmp_path, shared_data, engine="kafka", kills=2, seed=20261130)


def crash_run(tmp_path: Path, shared_data: Path, *, engine: str, kills: int, seed: int,
              n_results: int = N_RESULTS) -> None:
    """Stream ``n_results`` real results (+ invalid records), SIGKILL the worker ``kills``
    times at random points mid-ingest, finish, and compare the state with the offline one."""
    rng = np.random.default_rng(seed)
    blocks = load_blocks([shared_data / "mmlu_pro_item_correctness_wide.csv"],
                         exclude=("src",), cluster_col="category")
    events = ReplayStream(blocks, seed=11).events(0, n_results)
    payloads = [(ev.benchmark.encode(), ev.model_dump_json(exclude_defaults=True).encode())
                for ev in events]
    for pos in sorted(rng.choice(n_results, N_INVALID, replace=False).tolist(), reverse=True):
        payloads.insert(int(pos), (b"mmlu_pro", b'{"benchmark": "mmlu_pro", "score": '))
    # One kill point in each of ``kills`` equal slices of the ingest, drawn at random.
    kill_at = [int(rng.uniform((i + 0.2) / kills, (i + 0.8) / kills) * n_results * 0.9)
               for i in range(kills)]

    # The end offsets acknowledged to the producer: Tansu's ListOffsets can fall short of them.
    ends: dict[int, int] = {}
    broker = Broker(tmp_path / "tansu.log").start()
    worker = Worker(broker, tmp_path / "worker.log", "--checkpoint-interval", "0.3",
                    "--batch-size", "500", "--engine", engine)
    try:
        worker.start(timeout=40)
        done = threading.Event()
        # Production waits while the worker is down, so that a worker that restarts slowly
        # and catches up fast does not find every result already sent when its next kill is due.
        running = threading.Event()
        running.set()
        errors: list[BaseException] = []
        thread = threading.Thread(target=produce_at_rate, args=(broker.bootstrap, payloads),
                                  kwargs={"rate": RATE, "done": done, "errors": errors,
                                          "ends": ends, "pace_every": 300,
                                          "running": running}, daemon=True)
        thread.start()
        killed_at: list[float] = []
        for target in kill_at:
            wait_until(lambda t=target: _accepted(worker) >= t, timeout=40,
                       what=f"{target} accepted results before a kill", log=worker.text)
            # a random extra delay so the kill does not always follow a scrape
            time.sleep(float(rng.uniform(0.0, 0.3)))
            running.clear()
            killed_at.append(_accepted(worker))
            worker.kill()
            worker.start(timeout=40)
            running.set()
        thread.join(timeout=40)
        assert done.is_set() and not errors, errors
        wait_until(lambda: _accepted(worker) >= n_results, timeout=40,
                   what="all results accepted after the restarts", log=worker.text)
        assert _accepted(worker) == n_results  # overshooting would mean double counting
        assert worker.stop() == 0
    finally:
        worker.kill()

    try:
        config = CoreConfig()
        records = read_topic(broker.bootstrap, RESULTS_TOPIC, ends=ends)
        assert len(records) == n_results + N_INVALID
        offline = offline_monitors(records, config)["mmlu_pro"]
        core = worker_state(broker.bootstrap, config)
        live = core.monitors["mmlu_pro"]
        assert core.counters() == {"accepted": n_results, "duplicate": 0, "conflict": 0,
                                   "invalid": N_INVALID}
        assert snapshot_cells(live) == snapshot_cells(offline)
        want, got = offline.ranking("mmlu_pro").to_json(), live.ranking("mmlu_pro").to_json()
        assert [(m["model"], m["n"], m["mean"]) for m in got["models"]] == [
            (m["model"], m["n"], m["mean"]) for m in want["models"]]
        assert [(p["n"], p["verdict"], p["e_value"]) for p in got["pairs"]] == [
            (p["n"], p["verdict"], p["e_value"]) for p in want["pairs"]]
        # both kills landed mid-ingest: some results were in, some were still to come
        assert len(killed_at) == kills and all(0 < k < n_results for k in killed_at), killed_at
    finally:
        broker.stop()
