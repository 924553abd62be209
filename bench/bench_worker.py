"""Results/s through one distributed worker on a local Tansu broker, 20 models.

Ours: :class:`monitor.runners.kafka_worker.KafkaWorker` (decode, key check, fold into the
per-benchmark Monitor, verdict evaluation every 0.25 s, state checkpoints with snapshot +
offsets every 2 s, offset commits) consuming a pre-filled ``llm-monitor.results`` topic.
Peer: "plain kafka-python decode loop" — a KafkaConsumer over the same topic that only
``json.loads`` each value (no validation, no state, no commits): the ceiling set by the
client library. Both are timed from the first record received to the last one processed.

Run: ``.venv/bin/python -m bench.bench_worker [--results 200000]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def _payloads(n: int, data: Path) -> list[tuple[bytes, bytes]]:
    from monitor.runners.replay import Block, ReplayStream, load_blocks

    (block,) = load_blocks([data / "mmlu_pro_item_correctness_wide.csv"], exclude=("src",),
                           cluster_col="category")
    keep = list(range(20))  # 20 models
    block = Block(source=block.source, benchmark=block.benchmark, item_ids=block.item_ids,
                  models=tuple(block.models[i] for i in keep), scores=block.scores[:, keep],
                  clusters=block.clusters)
    stream = ReplayStream([block], seed=1)
    n = min(n, len(stream))
    return [(ev.benchmark.encode(), ev.model_dump_json(exclude_defaults=True).encode())
            for ev in stream.events(0, n)]


def _fill(bootstrap: str, payloads: list[tuple[bytes, bytes]]) -> float:
    from kafka import KafkaProducer

    from monitor.runners.kafka_core import RESULTS_TOPIC
    from monitor.runners.kafka_worker import ensure_topics

    ensure_topics([bootstrap], 3)
    t0 = time.perf_counter()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=20,
                             batch_size=512 << 10)
    for key, value in payloads:
        producer.send(RESULTS_TOPIC, key=key, value=value)
    producer.flush(timeout=300)
    producer.close()
    return len(payloads) / (time.perf_counter() - t0)


def _ours(bootstrap: str, n: int) -> tuple[float, dict[str, int]]:
    from monitor.runners.kafka_worker import KafkaWorker, WorkerOptions

    worker = KafkaWorker(WorkerOptions(broker=bootstrap, metrics_port=0, group="bench-ours"))
    first: list[float] = []
    step = worker.core.step

    def timed_step(records: Any, **kw: Any) -> Any:
        if not first:
            first.append(time.perf_counter())
        return step(records, **kw)

    worker.core.step = timed_step  # type: ignore[method-assign]
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while worker.core.counters()["accepted"] < n:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the worker did not finish")
        time.sleep(0.01)
    end = time.perf_counter()
    counters = worker.core.counters()  # before the shutdown hands the partitions back
    worker.stop.set()
    thread.join(timeout=60)
    return n / (end - first[0]), counters


def _peer(bootstrap: str, n: int) -> float:
    from kafka import KafkaConsumer

    from monitor.runners.kafka_core import RESULTS_TOPIC

    consumer = KafkaConsumer(RESULTS_TOPIC, bootstrap_servers=bootstrap, group_id="bench-peer",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, max_poll_records=5000)
    seen = 0
    t0 = 0.0
    deadline = time.monotonic() + 600
    while seen < n and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=200).values():
            if not t0:
                t0 = time.perf_counter()
            for r in recs:
                json.loads(r.value)
            seen += len(recs)
    end = time.perf_counter()
    consumer.close(autocommit=False)
    if seen < n:
        raise RuntimeError("the peer did not finish")
    return n / (end - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=int, default=200_000)
    args = parser.parse_args()
    import pytest  # the broker harness fails loudly through pytest.fail

    from tests.conftest import _data_dir
    from tests.integration.kafka_harness import Broker

    payloads = _payloads(args.results, _data_dir())
    n = len(payloads)
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "tansu.log")
        try:
            broker.start()
        except pytest.fail.Exception as exc:
            raise SystemExit(str(exc)) from None
        try:
            produce_rate = _fill(broker.bootstrap, payloads)
            ours, counters = _ours(broker.bootstrap, n)
            peer = _peer(broker.bootstrap, n)
        finally:
            broker.stop()
    print(f"results: {n} (MMLU-Pro, 20 models, shuffled), 3 partitions, local Tansu broker")
    print(f"fill (kafka-python producer):       {produce_rate:10,.0f} results/s")
    print(f"ours (llm-monitor worker):          {ours:10,.0f} results/s  counters={counters}")
    print(f"peer (plain kafka-python decode):   {peer:10,.0f} results/s")
    print(f"ratio ours/peer: {ours / peer:.2f}  (target: ours >= 10,000 results/s)")



if __name__ == "__main__":
    main()
