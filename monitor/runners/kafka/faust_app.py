"""The distributed worker as a Faust app (``llm-monitor worker --engine faust``).

The Faust transport around the same :class:`~monitor.runners.kafka.core.WorkerCore` and
:class:`~monitor.runners.host.MonitorHost` as the kafka-python engine; one agent: decode →
key → step (a batch from ``stream.take_events``) → emit → store.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import faust

from monitor.runners.host import MonitorHost
from monitor.runners.kafka.core import (
    CHANGES_TOPIC,
    DEAD_LETTER_TOPIC,
    MAX_STATE_BYTES,
    RESULTS_TOPIC,
    STATE_TOPIC,
    Record,
    StepOutput,
    WorkerCore,
)
from monitor.runners.settings import Settings


class WorkerIO(Protocol):
    """What the agent reads and writes besides its input stream."""

    async def read_state(self) -> list[tuple[bytes, bytes]]:
        """Every record of the state topic."""

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        """Queue one output record (change event or dead letter)."""

    async def write_state(self, records: Sequence[tuple[bytes, bytes]]) -> None:
        """Flush the queued outputs, then write ``records`` and return once they are durable."""


def _raw_topic(app: faust.App, name: str) -> Any:
    return app.topic(name, key_type=bytes, value_type=bytes, key_serializer="raw",
                     value_serializer="raw")


class _KafkaIO:
    """:class:`WorkerIO` on the broker: Faust's producer, the state topic read at restore."""

    def __init__(self, app: faust.App, settings: Settings) -> None:
        self.app = app
        self.bootstrap = settings.bootstrap
        self.topics = {name: _raw_topic(app, name) for name in (CHANGES_TOPIC,
                                                                  DEAD_LETTER_TOPIC)}

    async def read_state(self) -> list[tuple[bytes, bytes]]:
        from monitor.runners.kafka.admin import read_state

        return await asyncio.to_thread(read_state, self.bootstrap)

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.topics[topic].send(key=key, value=value)

    async def write_state(self, records: Sequence[tuple[bytes, bytes]]) -> None:
        await self.app.producer.flush()  # outputs before the state that follows them
        for key, value in records:
            await self.app.producer.send_and_wait(STATE_TOPIC, key, value, partition=0,
                                                  timestamp=None, headers=None)


@dataclass
class FaustWorker:
    """The Faust app with its agent, and the host and worker core the agent steps."""

    app: faust.App
    agent: Any
    host: MonitorHost
    core: WorkerCore


def build_app(settings: Settings, *, io: WorkerIO | None = None,
              host: MonitorHost | None = None) -> FaustWorker:
    """The Faust app of ``settings`` (topics must exist: ``kafka_admin.ensure_topics``).

    ``io`` and ``host`` replace the broker-side reads and writes and the host (tests).
    """
    app = faust.App(
        f"{settings.group}-faust",
        broker=settings.broker,
        processing_guarantee="at_least_once",
        broker_session_timeout=6,
        broker_heartbeat_interval=1,
        consumer_auto_offset_reset="earliest",
        producer_max_request_size=MAX_STATE_BYTES,
        topic_allow_declare=False,
        web_enabled=False,
        store="memory://",  # the state lives in the state topic, not in Faust tables
    )
    results = _raw_topic(app, RESULTS_TOPIC)
    out_io: WorkerIO = io if io is not None else _KafkaIO(app, settings)
    host = host if host is not None else MonitorHost(settings.core_config(),
                                                     eval_interval=settings.eval_interval)
    core = WorkerCore(host)
    restored: set[int] = set()
    # One checkpoint at a time: two interleaved ones could store a partition offset before
    # the benchmark snapshot it covers.
    storing = asyncio.Lock()

    async def restore(partitions: set[int]) -> None:
        state = await out_io.read_state()
        core.restore(state, partitions)
        restored.update(partitions)
        host.metrics.ensure_benchmarks(host.benchmarks())
        print(f"llm-monitor: restored partitions {sorted(partitions)} at "
              f"{ {p: core.part_offset.get(p, -1) for p in sorted(partitions)} }",
              file=sys.stderr, flush=True)

    async def emit(out: StepOutput, lag_seconds: float | None = None) -> None:
        for ch in out.changes:
            await out_io.send(CHANGES_TOPIC, ch.benchmark.encode(), ch.model_dump_json().encode())
        for letter in out.dead_letters:
            await out_io.send(DEAD_LETTER_TOPIC, letter.source.encode(),
                              letter.model_dump_json().encode())
        host.observe(out.counts, out.changes, lag_seconds=lag_seconds)

    async def store() -> None:
        async with storing:
            await out_io.write_state(core.checkpoint())

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        revoked = args[0] if args else kwargs["revoked"]
        # Every batch was checkpointed before its events were acked; the next owner
        # restores from the state topic, and so does this worker if it gets them back.
        parts = {tp.partition for tp in revoked if tp.topic == RESULTS_TOPIC}
        async with storing:
            core.drop(parts)
            restored.difference_update(parts)

    @app.agent(results)
    async def step(stream: Any) -> Any:
        loop = asyncio.get_running_loop()
        async for events in stream.take_events(settings.batch_size,
                                               within=settings.checkpoint_interval):
            t0 = loop.time()
            records = [Record(e.message.topic, e.message.partition, e.message.offset,
                              e.message.key, e.message.value) for e in events]
            missing = {r.partition for r in records} - restored
            if missing:
                await restore(missing)
            out = core.step(records)
            await emit(out, loop.time() - t0)
            await store()  # durable before this batch's events are acked and committed

    @app.timer(interval=host.tick_seconds)
    async def evaluate() -> None:
        # The stream paused: evaluate what arrived within the last interval.
        out = StepOutput(changes=host.evaluate_if_due())
        if out.changes:
            await emit(out)
            await store()
        host.refresh_standings()  # the models' stop signals (in memory, as in kafka_worker)

    @app.task
    async def announce() -> None:
        print("llm-monitor: worker ready (faust)", file=sys.stderr, flush=True)

    return FaustWorker(app=app, agent=step, host=host, core=core)


def run_faust(settings: Settings) -> int:
    """Start the Faust worker (blocks until SIGTERM/SIGINT)."""
    from monitor.runners.kafka.admin import ensure_topics

    ensure_topics(settings.bootstrap, settings.partitions)
    worker = build_app(settings)
    server = worker.host.serve_metrics(settings.metrics_host, settings.metrics_port)
    try:
        faust.Worker(worker.app, loglevel="WARNING", quiet=True).execute_from_commandline()
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        server.shutdown()
    return 0
