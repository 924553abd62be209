"""Scaling by partitions: two ``llm-monitor worker`` processes in one consumer group on a
4-partition results topic carrying six benchmarks (MMLU-Pro and GSM8K, each split by item into
three benchmarks whose keys hash to all four partitions). The second worker joins mid-ingest
(rebalance: partitions handed over after a checkpoint), then the first one is SIGKILLed
mid-ingest (rebalance after the session timeout: the survivor restores the dead worker's
partitions from the state topic and replays what followed its last checkpoint). The union of
the durable per-benchmark states equals the Monitor applied offline to each benchmark:
nothing lost (``accepted = N``), nothing counted twice (``duplicate = 0``)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from kafka.partitioner.default import murmur2

from monitor.core import CoreConfig
from monitor.runners.kafka.core import RESULTS_TOPIC
from monitor.runners.kafka.worker import ensure_topics
from monitor.runners.replay import Block, ReplayStream, load_blocks
from tests.integration.kafka_harness import (
    Broker,
    Worker,
    committed_offsets,
    offline_monitors,
    produce_at_rate,
    read_topic,
    scrape,
    snapshot_cells,
    wait_until,
    worker_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 4
N_MODELS = 12
N_INVALID = 8
RATE = 2000.0  # results/s: ~30k results span ~15 s, long enough for two rebalances
HELD = 0.15  # the share of the results produced only after the first worker's SIGKILL
ACCEPTED = 'llm_monitor_events_total{outcome="accepted"}'
_READY = re.compile(r"worker ready: partitions \[([0-9, ]*)\]")


def _split(block: Block, name: str, parts: int, n_items: int) -> list[Block]:
    """``block``'s first ``n_items`` items and ``N_MODELS`` models as ``parts`` benchmarks
    ``name/part1`` … (items dealt round-robin), so one data set gives several keys."""
    out = []
    for k in range(parts):
        rows = np.arange(k, min(n_items, len(block.item_ids)), parts)
        out.append(Block(
            source=block.source, benchmark=f"{name}/part{k + 1}", item_ids=block.item_ids[rows],
            models=block.models[:N_MODELS], scores=block.scores[rows, :N_MODELS],
            clusters=None if block.clusters is None else block.clusters[rows]))
    return out



def _partition(key: bytes) -> int:
    """kafka-python's default partitioner (murmur2 of the key), as the producer applies it."""
    return (murmur2(key) & 0x7FFFFFFF) % PARTITIONS


def _partitions_of(text: str) -> list[list[int]]:
    """The partition lists of every ``worker ready`` line of a worker log, in order."""
    return [[int(p) for p in m.group(1).split(",") if p.strip()] for m in _READY.finditer(text)]


def _accepted(worker: Worker) -> float:
    try:
        return scrape(worker.metrics_port).get(ACCEPTED, 0.0)
    except OSError:
        return 0.0


def test_two_workers_rebalance_and_sigkill_equal_offline(tmp_path: Path,
                                                         shared_data: Path) -> None:
    started = time.monotonic()
    (mmlu,) = load_blocks([shared_data / "mmlu_pro_item_correctness_wide.csv"],
                          exclude=("src",), cluster_col="category")
    (gsm,) = load_blocks([shared_data / "zeroeval_gsm8k_item_correctness_wide.csv"],
                         exclude=("gold",))
    blocks = _split(mmlu, "mmlu_pro", 3, 1200) + _split(gsm, "gsm8k", 3, 1319)
    # the six keys land on all four partitions, so both workers get benchmarks to own
    assert {_partition(b.benchmark.encode()) for b in blocks} == set(range(PARTITIONS))
    stream = ReplayStream(blocks, seed=5)
    n_results = len(stream)
    payloads = [(ev.benchmark.encode(), ev.model_dump_json(exclude_defaults=True).encode())
                for ev in stream.events(0, n_results)]
    rng = np.random.default_rng(20261130)
    for pos in sorted(rng.choice(n_results, N_INVALID, replace=False).tolist(), reverse=True):
        key = blocks[int(rng.integers(len(blocks)))].benchmark.encode()
        payloads.insert(int(pos), (key, b'{"benchmark": "' + key + b'", "score": '))

    broker = Broker(tmp_path / "tansu.log").start()
    ensure_topics([broker.bootstrap], PARTITIONS)
    args = ("--partitions", str(PARTITIONS), "--checkpoint-interval", "0.3",
            "--batch-size", "500", "--group", "scale")
    first = Worker(broker, tmp_path / "worker1.log", *args)
    second = Worker(broker, tmp_path / "worker2.log", *args)
    try:
        first.start(timeout=30)
        assert _partitions_of(first.text())[-1] == list(range(PARTITIONS))
        done = threading.Event()
        killed = threading.Event()  # the last HELD share of the results waits for the kill
        errors: list[BaseException] = []
        ends: dict[int, int] = {}
        hold = (int((1 - HELD) * len(payloads)), killed)
        thread = threading.Thread(target=produce_at_rate, args=(broker.bootstrap, payloads),
                                  kwargs={"rate": RATE, "done": done, "errors": errors,
                                          "ends": ends, "hold": hold}, daemon=True)
        thread.start()

        # 1. a second worker joins mid-ingest: the group splits the partitions between them
        wait_until(lambda: _accepted(first) >= 0.1 * n_results, timeout=20,
                   what="10% of the results accepted by the first worker", log=first.text)
        second.start(timeout=30)
        mine = _partitions_of(second.text())[-1]
        wait_until(lambda: len(_partitions_of(first.text())) >= 2, timeout=15,
                   what="the first worker's reassignment", log=first.text)
        theirs = _partitions_of(first.text())[-1]
        assert mine and theirs and sorted(mine + theirs) == list(range(PARTITIONS)), (mine, theirs)
        base = _accepted(second)
        wait_until(lambda: _accepted(second) >= base + 500, timeout=15,
                   what="results accepted by the second worker", log=second.text)

        # 2. the first worker dies mid-ingest: the survivor takes over all partitions
        assert not done.is_set()
        first.kill()
        killed.set()
        wait_until(lambda: _partitions_of(second.text())[-1] == list(range(PARTITIONS)),
                   timeout=25, what="the survivor owning every partition", log=second.text)

        # 3. finish: every record processed and committed (commits follow durable state)
        thread.join(timeout=30)
        assert done.is_set() and not errors, errors
        # ends from the acknowledgements, not ListOffsets (short on Tansu: read_topic)
        assert sum(ends.values()) == n_results + N_INVALID
        end = {p: ends.get(p, 0) for p in range(PARTITIONS)}
        wait_until(lambda: committed_offsets(broker.bootstrap, "scale", RESULTS_TOPIC) == end,
                   timeout=25, what="offsets committed up to the end of every partition",
                   log=second.text)
        assert second.stop() == 0
    finally:
        first.kill()
        second.kill()

    try:
        config = CoreConfig()
        records = read_topic(broker.bootstrap, RESULTS_TOPIC, ends=end)
        offline = offline_monitors(records, config)
        core = worker_state(broker.bootstrap, config)
        assert sorted(core.monitors) == sorted(offline) == sorted(b.benchmark for b in blocks)
        assert core.counters() == {"accepted": n_results, "duplicate": 0, "conflict": 0,
                                   "invalid": N_INVALID}
        for name, want in offline.items():
            live = core.monitors[name]
            assert live.counters == want.counters, name
            assert snapshot_cells(live) == snapshot_cells(want), name
            w, g = want.ranking(name).to_json(), live.ranking(name).to_json()
            assert [(m["model"], m["n"], m["mean"]) for m in g["models"]] == [
                (m["model"], m["n"], m["mean"]) for m in w["models"]], name
            assert [(p["n"], p["verdict"], p["e_value"]) for p in g["pairs"]] == [
                (p["n"], p["verdict"], p["e_value"]) for p in w["pairs"]], name
    finally:
        broker.stop()
    print(f"\nscaling test: {time.monotonic() - started:.1f} s")
