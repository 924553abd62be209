"""The distributed worker as a Faust app (``llm-monitor worker --engine faust``).

Same engine-neutral shell (:class:`monitor.runners.kafka_core.WorkerCore`) as the
kafka-python runner; one agent: decode → key → step (a batch from ``stream.take_events``) →
store → emit.

Ordering under ``processing_guarantee="at_least_once"``: Faust acks the events of a
``take`` batch only when the agent asks for the next batch, and commits only acked offsets.
The agent therefore writes the batch's state records (snapshots + offsets) to the state topic
and waits for their acknowledgement *inside* the loop body — so state is durable before the
offsets of its events can be committed. A redelivered event (after a SIGKILL or a rebalance
Faust replays up to a commit interval) has an offset at or below the stored one and is
skipped. The price is one checkpoint per batch, which is why the kafka-python runner (which
checkpoints on an interval and seeks to the stored offsets itself) is the default engine;
docs/distributed.md compares the two.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

import faust
from prometheus_client import CollectorRegistry, start_http_server

from monitor.core import CoreConfig
from monitor.runners.kafka_core import (
    CHANGES_TOPIC,
    DEAD_LETTER_TOPIC,
    RESULTS_TOPIC,
    STATE_TOPIC,
    Record,
    StepOutput,
    WorkerCore,
)
from monitor.runners.kafka_worker import (
    MAX_STATE_BYTES,
    CoreCollector,
    WorkerOptions,
    ensure_topics,
    read_state,
)


def build_app(options: WorkerOptions) -> tuple[faust.App, WorkerCore, CollectorRegistry]:
    """The Faust app, its core and its metrics registry (topics must exist: ensure_topics)."""
    from monitor.sinks.prometheus import Metrics, change_kind

    app = faust.App(
        f"{options.group}-faust",
        broker=options.broker,
        processing_guarantee="at_least_once",
        broker_session_timeout=6,
        broker_heartbeat_interval=1,
        consumer_auto_offset_reset="earliest",
        producer_max_request_size=MAX_STATE_BYTES,
        topic_allow_declare=False,
        web_enabled=False,
    )
    results = app.topic(RESULTS_TOPIC, key_type=bytes, value_type=bytes,
                        key_serializer="raw", value_serializer="raw")
    changes = app.topic(CHANGES_TOPIC, key_type=bytes, value_type=bytes,
                        key_serializer="raw", value_serializer="raw")
    dead = app.topic(DEAD_LETTER_TOPIC, key_type=bytes, value_type=bytes,
                     key_serializer="raw", value_serializer="raw")
    core = WorkerCore(
        CoreConfig(alpha=options.alpha, power=options.power, family=options.family),  # type: ignore[arg-type]
        eval_interval=options.eval_interval,
    )
    lock = threading.Lock()
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    registry.register(CoreCollector(core, lock))
    restored: set[int] = set()
    # One checkpoint at a time: two interleaved ones could store a partition offset before
    # the benchmark snapshot it covers.
    storing = asyncio.Lock()

    async def restore(partitions: set[int]) -> None:
        state = await asyncio.to_thread(read_state, options.bootstrap)
        with lock:
            before = core.counters()
            core.restore(state, partitions)
            after = core.counters()
        restored.update(partitions)
        for outcome, n in after.items():  # the totals durable in the restored state
            if n > before[outcome]:
                metrics.events_total.labels(outcome=outcome).inc(n - before[outcome])
        print(f"llm-monitor: restored partitions {sorted(partitions)} at "
              f"{ {p: core.part_offset.get(p, -1) for p in sorted(partitions)} }",
              file=sys.stderr, flush=True)

    async def emit(out: StepOutput) -> None:
        for ch in out.changes:
            await changes.send(key=ch.benchmark.encode(), value=ch.model_dump_json().encode())
            metrics.state_changes_total.labels(benchmark=ch.benchmark, kind=change_kind(ch)).inc()
        for letter in out.dead_letters:
            await dead.send(key=letter.source.encode(), value=letter.model_dump_json().encode())
        for outcome in ("accepted", "duplicate", "conflict", "invalid"):
            if out.counts[outcome]:
                metrics.events_total.labels(outcome=outcome).inc(out.counts[outcome])

    async def store() -> None:
        async with storing:
            with lock:
                state = core.checkpoint()
            await app.producer.flush()  # outputs before the state that follows them
            for key, value in state:
                await app.producer.send_and_wait(STATE_TOPIC, key, value, partition=0,
                                                 timestamp=None, headers=None)

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        revoked = args[0] if args else kwargs["revoked"]
        # Every batch was checkpointed before its events were acked; the next owner
        # restores from the state topic, and so does this worker if it gets them back.
        parts = {tp.partition for tp in revoked if tp.topic == RESULTS_TOPIC}
        async with storing:
            with lock:
                core.drop(parts)
            restored.difference_update(parts)

    @app.agent(results)
    async def step(stream: Any) -> Any:
        async for events in stream.take_events(options.batch_size,
                                               within=options.checkpoint_interval):
            records = [Record(e.message.topic, e.message.partition, e.message.offset,
                              e.message.key, e.message.value) for e in events]
            missing = {r.partition for r in records} - restored
            if missing:
                await restore(missing)
            with lock:
                out = core.step(records)
            await emit(out)
            await store()  # durable before this batch's events are acked and committed

    @app.timer(interval=max(options.eval_interval, 0.25))
    async def evaluate() -> None:
        with lock:
            out = StepOutput(changes=core.evaluate())
        if out.changes:
            await emit(out)
            await store()

    @app.task
    async def announce() -> None:
        print("llm-monitor: worker ready (faust)", file=sys.stderr, flush=True)

    return app, core, registry


def run_faust(options: WorkerOptions) -> int:
    """Start the Faust worker (blocks until SIGTERM/SIGINT)."""
    ensure_topics(options.bootstrap, options.partitions)
    app, _core, registry = build_app(options)
    server, _ = start_http_server(options.metrics_port, addr=options.metrics_host,
                                  registry=registry)
    print(f"llm-monitor: metrics on http://{options.metrics_host}:{server.server_address[1]}"
          "/metrics", file=sys.stderr, flush=True)
    worker = faust.Worker(app, loglevel="WARNING", quiet=True)
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
