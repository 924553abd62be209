"""Results/s through one distributed worker on a local Tansu broker, 20 models.

Ours: :class:`monitor.runners.kafka.worker.KafkaWorker` (decode, key check, fold into the
per-benchmark Monitor, verdict evaluation every 0.25 s, state checkpoints with snapshot +
offsets every 2 s, offset commits) consuming a pre-filled ``llm-monitor.results`` topic.
Peer: "plain kafka-python decode loop" — a KafkaConsumer over the same topic that only
``json.loads`` each value (no validation, no state, no commits): the ceiling set by the
client library. Both are timed from the first record received to the last one processed.

Ours, second engine: ``llm-monitor worker --engine faust`` (a checkpoint per ``take_events``
batch), as a process on the same pre-filled topic, timed by scraping its /metrics every 100 ms.

Run: ``.venv/bin/python -m bench.bench_worker [--results 200000] [--engine kafka|faust|both]
[--compression zstd|none]``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench._record import record


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


def _fill(bootstrap: str, payloads: list[tuple[bytes, bytes]], compression: str) -> float:
    from kafka import KafkaProducer

    from monitor.runners.kafka.admin import ensure_topics
    from monitor.runners.kafka.core import RESULTS_PRODUCER, RESULTS_TOPIC

    ensure_topics([bootstrap], 3)
    t0 = time.perf_counter()
    options = {**RESULTS_PRODUCER,  # as `llm-monitor produce` sends results
               "compression_type": None if compression == "none" else compression}
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, **options)
    for key, value in payloads:
        producer.send(RESULTS_TOPIC, key=key, value=value)
    producer.flush(timeout=300)
    producer.close()
    return len(payloads) / (time.perf_counter() - t0)


def _ours(bootstrap: str, n: int) -> tuple[float, dict[str, int]]:
    from monitor.runners.kafka.worker import KafkaWorker
    from monitor.runners.settings import Settings

    worker = KafkaWorker(Settings.build(serve_http=False, broker=bootstrap, metrics_port=0,
                                        group="bench-ours"))
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


def _ours_faust(broker: Any, n: int, log: Path) -> tuple[float, dict[str, float]]:
    """``llm-monitor worker --engine faust`` as a process (Faust owns its event loop and
    signal handlers), timed by scraping /metrics every 100 ms from the first accepted result
    to the last one (the results before the first scrape are left out of the rate). A scrape
    collects every pair gauge under the worker's lock: every 20 ms it took ~14% of the
    worker's samples; every 100 ms the end is still known to 0.1 s of a ~40 s run."""
    from tests.integration.kafka_harness import Worker, scrape

    def counts() -> dict[str, float]:
        got = scrape(worker.metrics_port)
        return {o: got.get(f'llm_monitor_events_total{{outcome="{o}"}}', 0.0)
                for o in ("accepted", "duplicate", "conflict", "invalid")}

    worker = Worker(broker, log, "--engine", "faust", "--group", "bench-faust")
    worker.start(timeout=60)
    try:
        deadline = time.monotonic() + 600
        a0, t0 = 0.0, 0.0
        while True:
            got = counts()
            if not t0 and got["accepted"] >= n:
                raise RuntimeError("the Faust worker restored a finished state: not a fresh topic")
            if not t0 and got["accepted"] > 0:
                a0, t0 = got["accepted"], time.perf_counter()
            if got["accepted"] >= n:
                end = time.perf_counter()
                break
            if time.monotonic() > deadline or worker.proc is None or worker.proc.poll() is not None:
                raise RuntimeError(f"the Faust worker did not finish; log:\n{worker.text()[-2000:]}")
            time.sleep(0.1)
        return (n - a0) / (end - t0), got
    finally:
        worker.stop(timeout=60)


def _peer(bootstrap: str, n: int) -> float:
    from kafka import KafkaConsumer

    from monitor.runners.kafka.core import CONSUMER_FETCH, RESULTS_TOPIC
    from monitor.runners.settings import Settings

    # the worker's own consumer options: the peer differs from it only in what it does with
    # each record
    consumer = KafkaConsumer(RESULTS_TOPIC, bootstrap_servers=bootstrap, group_id="bench-peer",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=6000, **CONSUMER_FETCH,
                             max_poll_records=Settings.model_fields["batch_size"].default)
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
    parser.add_argument("--engine", choices=("kafka", "faust", "both"), default="both",
                        help="which worker engine(s) to measure (default: both)")
    parser.add_argument("--compression", choices=("zstd", "none"), default="zstd",
                        help="record batches as `llm-monitor produce` sends them (zstd), or "
                             "uncompressed")
    args = parser.parse_args()
    import pytest  # the broker harness fails loudly through pytest.fail

    from tests.conftest import _data_dir
    from tests.integration.kafka_harness import Broker

    payloads = _payloads(args.results, _data_dir())
    n = len(payloads)
    engines = ("kafka", "faust") if args.engine == "both" else (args.engine,)
    ours: dict[str, tuple[float, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # a fresh broker per engine: both use the same state topic, and a worker restores
        # whatever state it finds there
        for i, engine in enumerate(engines):
            broker = Broker(Path(tmp) / f"tansu-{engine}.log")
            try:
                broker.start()
            except pytest.fail.Exception as exc:
                raise SystemExit(str(exc)) from None
            try:
                produce_rate = _fill(broker.bootstrap, payloads, args.compression)
                if engine == "kafka":
                    ours[engine] = _ours(broker.bootstrap, n)
                else:
                    ours[engine] = _ours_faust(broker, n, Path(tmp) / "faust-worker.log")
                if i == len(engines) - 1:
                    peer = _peer(broker.bootstrap, n)
            finally:
                broker.stop()
    print(f"results: {n} (MMLU-Pro, 20 models, shuffled), 3 partitions, local Tansu broker, "
          f"record batches {args.compression}; load average {os.getloadavg()[0]:.2f}")
    print(f"fill (kafka-python producer):       {produce_rate:10,.0f} results/s")
    for engine, (rate, counters) in ours.items():
        label = f"ours (llm-monitor worker, {engine}):"
        print(f"{label:<36}{rate:10,.0f} results/s  counters="
              f"{ {k: int(v) for k, v in counters.items()} }")
    print(f"peer (plain kafka-python decode):   {peer:10,.0f} results/s")
    for engine, (rate, _) in ours.items():
        print(f"ratio ours/peer ({engine}): {rate / peer:.2f}  (target: ours >= 50,000 results/s "
              "per worker)")
        goal = 50_000 if engine == "kafka" else 10_000
        record(f"Kafka worker ({engine} engine), 20 models, {args.compression} batches",
               goal=f"≥ {goal:,} results/s per worker", figure=f"{rate:,.0f} results/s",
               peer=f"{rate / peer:.2f}× a plain kafka-python decode loop",
               met=rate >= goal, command=f"python -m bench.bench_worker --engine {engine}")



if __name__ == "__main__":
    main()
