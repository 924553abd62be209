"""The distributed worker on kafka-python: consume → step → emit → state → commit.

A thin shell around :class:`monitor.runners.kafka_core.WorkerCore`. The loop, per poll:

1. step the polled records (decode, key, fold per benchmark) and send the change events and
   dead letters;
2. every ``checkpoint_interval`` seconds (and on revocation and shutdown): flush the outputs,
   write the state records (snapshots + offsets) to the state topic and wait until they are
   acknowledged, and only then commit the consumer offsets.

On assignment the state of the assigned partitions is read back from the state topic and the
consumer *seeks* to the offset after the checkpointed one — the state topic, not the group's
committed offset, says where to resume, so a commit that lands without its state (or a state
without its commit) can neither lose nor double count a result. docs/distributed.md has the
argument and why this runner uses kafka-python rather than Faust's own commit path.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from monitor.core import CoreConfig
from monitor.errors import MonitorError
from monitor.runners.kafka_core import (
    CHANGES_TOPIC,
    DEAD_LETTER_TOPIC,
    RESULTS_TOPIC,
    STATE_TOPIC,
    Record,
    StepOutput,
    WorkerCore,
)

#: Snapshots of big benchmarks are megabytes; the state producer and reader allow this much.
MAX_STATE_BYTES = 64 << 20


@dataclass(frozen=True)
class WorkerOptions:
    """Everything ``llm-monitor worker`` needs."""

    broker: str = "kafka://127.0.0.1:9092"
    partitions: int = 3
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9308
    group: str = "llm-monitor"
    alpha: float = 0.05
    power: float = 0.8
    family: str = "adjacent"
    eval_interval: float = 0.25
    checkpoint_interval: float = 2.0
    batch_size: int = 5000

    @property
    def bootstrap(self) -> list[str]:
        return bootstrap_servers(self.broker)


def bootstrap_servers(broker: str) -> list[str]:
    """``kafka://h1:9092,h2:9092`` (or plain ``h:p``) → ``["h1:9092", "h2:9092"]``."""
    text = broker.strip()
    for scheme in ("kafka://", "tcp://"):
        if text.startswith(scheme):
            text = text[len(scheme):]
    hosts = [h.strip().rstrip("/") for h in text.split(",") if h.strip()]
    if not hosts or any(":" not in h for h in hosts):
        raise MonitorError(f"--broker must look like kafka://host:port, got {broker!r}")
    return hosts


def ensure_topics(bootstrap: list[str], partitions: int, *, timeout: float = 20.0) -> None:
    """Create the four topics if missing (the state topic compacted, one partition)."""
    if partitions < 1:
        raise ValueError(f"`partitions` must be at least 1, got {partitions}")
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000))
    except Exception as exc:
        raise MonitorError(f"cannot reach the broker at {','.join(bootstrap)}: {exc}") from None
    try:
        existing = set(admin.list_topics())
        wanted = [
            NewTopic(RESULTS_TOPIC, partitions, 1),
            NewTopic(CHANGES_TOPIC, partitions, 1),
            NewTopic(DEAD_LETTER_TOPIC, 1, 1),
            # One partition: a checkpoint's records stay in write order (benchmarks first).
            NewTopic(STATE_TOPIC, 1, 1, topic_configs={"cleanup.policy": "compact"}),
        ]
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker was faster
                admin.create_topics(missing)
    finally:
        admin.close()


def read_state(bootstrap: list[str], *, timeout: float = 60.0) -> list[tuple[bytes, bytes]]:
    """Every record of the state topic, from the beginning to its current end."""
    tp = TopicPartition(STATE_TOPIC, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             fetch_max_bytes=MAX_STATE_BYTES,
                             max_partition_fetch_bytes=MAX_STATE_BYTES)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise MonitorError(f"reading the state topic timed out at "
                                   f"{consumer.position(tp)}/{end}")
            for recs in consumer.poll(timeout_ms=500).values():
                out.extend((r.key, r.value) for r in recs if r.key is not None)
        return out
    finally:
        consumer.close(autocommit=False)


class CoreCollector(Collector):
    """The per-pair and per-ranking gauges of every benchmark the worker owns, merged."""

    def __init__(self, core: WorkerCore, lock: threading.Lock) -> None:
        self.core = core
        self.lock = lock

    def describe(self) -> Iterable[Metric]:
        from monitor.core import Monitor
        from monitor.sinks.prometheus import MonitorCollector

        return list(MonitorCollector(Monitor(self.core.config)).describe())

    def collect(self) -> Iterator[Metric]:
        from monitor.sinks.prometheus import MonitorCollector

        merged: dict[str, Metric] = {}
        with self.lock:
            for mon in list(self.core.monitors.values()):
                for fam in MonitorCollector(mon).collect():
                    have = merged.get(fam.name)
                    if have is None:
                        merged[fam.name] = fam
                    else:
                        have.samples.extend(fam.samples)
        if not merged:
            yield from self.describe()
            return
        yield from merged.values()


class KafkaWorker:
    """One worker process: a consumer-group member owning some partitions of the results."""

    def __init__(self, options: WorkerOptions) -> None:
        from monitor.sinks.prometheus import Metrics

        self.options = options
        self.core = WorkerCore(
            CoreConfig(alpha=options.alpha, power=options.power, family=options.family),  # type: ignore[arg-type]
            eval_interval=options.eval_interval,
        )
        self.lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.registry.register(CoreCollector(self.core, self.lock))
        self.stop = threading.Event()
        self.consumer: KafkaConsumer | None = None
        self.producer: KafkaProducer | None = None
        self._last_checkpoint = time.monotonic()
        self.ready = False

    # -- life cycle ------------------------------------------------------------------------
    def run(self) -> int:
        opts = self.options
        ensure_topics(opts.bootstrap, opts.partitions)
        server, _ = start_http_server(opts.metrics_port, addr=opts.metrics_host,
                                      registry=self.registry)
        port = server.server_address[1]
        print(f"llm-monitor: metrics on http://{opts.metrics_host}:{port}/metrics",
              file=sys.stderr, flush=True)
        self.producer = KafkaProducer(
            bootstrap_servers=opts.bootstrap, acks="all", linger_ms=5,
            max_request_size=MAX_STATE_BYTES, retries=5,
            # one request in flight: a retried batch can never overtake a later one, so the
            # state records of a checkpoint stay in the order they were sent
            max_in_flight_requests_per_connection=1,
        )
        self.consumer = KafkaConsumer(
            bootstrap_servers=opts.bootstrap, group_id=opts.group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000,
            max_poll_records=opts.batch_size, max_poll_interval_ms=300_000,
        )
        self.consumer.subscribe([RESULTS_TOPIC], listener=_Listener(self))
        try:
            while not self.stop.is_set():
                self._poll_once()
            self._shutdown()
        finally:
            self.consumer.close(autocommit=False)
            self.producer.close(timeout=10)
            server.shutdown()
        return 0

    def _poll_once(self) -> None:
        assert self.consumer is not None
        polled = self.consumer.poll(timeout_ms=200)
        records: list[Record] = []
        for tp, recs in polled.items():
            records.extend(Record(tp.topic, tp.partition, r.offset, r.key, r.value)
                           for r in recs)
        t0 = time.perf_counter()
        with self.lock:
            out = self.core.step(records) if records else StepOutput(changes=self.core.evaluate())
        self._emit(out)
        if records:
            self.metrics.processing_lag_seconds.observe(time.perf_counter() - t0)
        if time.monotonic() - self._last_checkpoint >= self.options.checkpoint_interval:
            self.checkpoint()

    def _shutdown(self) -> None:
        with self.lock:
            changes = self.core.evaluate(force=True)
        self._emit(StepOutput(changes=changes))
        self.checkpoint()
        print("llm-monitor: worker stopped after a final checkpoint", file=sys.stderr, flush=True)

    # -- outputs and state -------------------------------------------------------------------
    def _emit(self, out: StepOutput) -> None:
        assert self.producer is not None
        for ch in out.changes:
            self.producer.send(CHANGES_TOPIC, key=ch.benchmark.encode(),
                               value=ch.model_dump_json().encode())
            from monitor.sinks.prometheus import change_kind

            self.metrics.state_changes_total.labels(benchmark=ch.benchmark,
                                                    kind=change_kind(ch)).inc()
        for letter in out.dead_letters:
            self.producer.send(DEAD_LETTER_TOPIC, key=letter.source.encode(),
                               value=letter.model_dump_json().encode())
        for outcome in ("accepted", "duplicate", "conflict", "invalid"):
            if out.counts[outcome]:
                self.metrics.events_total.labels(outcome=outcome).inc(out.counts[outcome])

    def checkpoint(self, partitions: Iterable[int] | None = None, *,
                   in_rebalance: bool = False) -> None:
        """Outputs flushed → state records acknowledged → consumer offsets committed.

        ``in_rebalance``: called from the rebalance listener, which kafka-python runs on its
        network thread — a blocking ``commit`` there raises and kills the worker, so the
        commit is only queued (``commit_async``). Nothing depends on it landing: the next
        owner resumes from the offsets stored with the state, not from the committed ones.
        """
        assert self.producer is not None and self.consumer is not None
        self._last_checkpoint = time.monotonic()
        with self.lock:
            if not self.core.dirty:
                return
            only = None if partitions is None else set(partitions)
            state = self.core.checkpoint(only)
            positions = {p: off + 1 for p, off in self.core.part_offset.items()
                         if only is None or p in only}
        self.producer.flush(timeout=30)
        futures = [self.producer.send(STATE_TOPIC, key=k, value=v, partition=0)
                   for k, v in state]
        self.producer.flush(timeout=30)
        for fut in futures:
            fut.get(timeout=30)  # raises: never commit offsets whose state is not stored
        if positions:
            offsets = {TopicPartition(RESULTS_TOPIC, p): OffsetAndMetadata(o, "", -1)
                       for p, o in positions.items()}
            if in_rebalance:
                self.consumer.commit_async(offsets)
            else:
                self.consumer.commit(offsets)

    def assigned(self, partitions: list[TopicPartition]) -> None:
        assert self.consumer is not None
        parts = [tp.partition for tp in partitions if tp.topic == RESULTS_TOPIC]
        state = read_state(self.options.bootstrap)
        with self.lock:
            resume = self.core.restore(state, parts)
            restored = self.core.counters()
        for p, pos in resume.items():
            self.consumer.seek(TopicPartition(RESULTS_TOPIC, p), pos)
        if not self.ready:
            for outcome, n in restored.items():
                if n:
                    self.metrics.events_total.labels(outcome=outcome).inc(n)
        self.ready = True
        print(f"llm-monitor: worker ready: partitions {sorted(parts)}, resuming at "
              f"{dict(sorted(resume.items()))}", file=sys.stderr, flush=True)

    def revoked(self, partitions: list[TopicPartition]) -> None:
        parts = [tp.partition for tp in partitions if tp.topic == RESULTS_TOPIC]
        if not parts:
            return
        self.checkpoint(parts, in_rebalance=True)
        with self.lock:
            self.core.drop(parts)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, worker: KafkaWorker) -> None:
        self.worker = worker

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.worker.revoked(list(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.worker.assigned(list(assigned))


def run_worker(options: WorkerOptions) -> int:
    """Run until SIGTERM/SIGINT, then evaluate, checkpoint and exit 0."""
    worker = KafkaWorker(options)

    def _stop(signum: int, frame: Any) -> None:
        worker.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return worker.run()
