"""The distributed worker on kafka-python: consume → step → emit → state → commit.

The transport around :class:`monitor.runners.kafka.core.WorkerCore` (offsets, keys,
checkpoints) and :class:`monitor.runners.host.MonitorHost` (monitors, metrics, cadence,
invalid input). The loop, per poll:

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

import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.structs import OffsetAndMetadata

from monitor.runners.host import GC_SECONDS, MonitorHost, batch_collection, collect_frozen
from monitor.runners.kafka.admin import ensure_topics, read_state
from monitor.runners.kafka.core import (
    CHANGES_TOPIC,
    CONSUMER_FETCH,
    DEAD_LETTER_TOPIC,
    MAX_STATE_BYTES,
    RESULTS_TOPIC,
    STATE_TOPIC,
    SourceRecord,
    StepOutput,
    WorkerCore,
)
from monitor.runners.settings import Settings


class KafkaWorker:
    """One worker process: a consumer-group member owning some partitions of the results."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.host = MonitorHost(settings.core_config(), eval_interval=settings.eval_interval)
        self.core = WorkerCore(self.host)
        self.stop = threading.Event()
        self.consumer: KafkaConsumer | None = None
        self.producer: KafkaProducer | None = None
        self._last_checkpoint = time.monotonic()
        self._last_gc = time.monotonic()
        self.ready = False

    # -- life cycle ------------------------------------------------------------------------
    def run(self) -> int:
        opts = self.settings
        ensure_topics(opts.bootstrap, opts.partitions)
        server = self.host.serve_metrics(opts.metrics_host, opts.metrics_port)
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
            max_poll_records=opts.batch_size, max_poll_interval_ms=300_000, **CONSUMER_FETCH,
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
        t0 = time.perf_counter()
        records: list[SourceRecord] = []
        with batch_collection():  # the events of a batch are freed by reference counting
            for recs in polled.values():
                records.extend(recs)  # kafka-python's records, as they are
            if records:
                out = self.core.step(records)
            else:  # the stream paused: evaluate what arrived within the last interval
                out = StepOutput(changes=self.host.evaluate_if_due())
        # The models' stop signals follow the state (kept in memory: after a
        # restart, a settled model's item is taken again at the first reading).
        self.host.refresh_standings()
        if time.monotonic() - self._last_gc >= GC_SECONDS:
            self._last_gc = time.monotonic()
            collect_frozen()
        self._emit(out, lag_seconds=time.perf_counter() - t0 if records else None)
        if time.monotonic() - self._last_checkpoint >= self.settings.checkpoint_interval:
            self.checkpoint()

    def _shutdown(self) -> None:
        self._emit(StepOutput(changes=self.host.evaluate_if_due(force=True)))
        self.checkpoint()
        print("llm-monitor: worker stopped after a final checkpoint", file=sys.stderr, flush=True)

    # -- outputs and state -------------------------------------------------------------------
    def _emit(self, out: StepOutput, *, lag_seconds: float | None = None) -> None:
        assert self.producer is not None
        for ch in out.changes:
            self.producer.send(CHANGES_TOPIC, key=ch.benchmark.encode(),
                               value=ch.model_dump_json().encode())
        for letter in out.dead_letters:
            self.producer.send(DEAD_LETTER_TOPIC, key=letter.source.encode(),
                               value=letter.model_dump_json().encode())
        self.host.observe(out.counts, out.changes, lag_seconds=lag_seconds)

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
        with self.host.lock:
            if not self.core.dirty:
                return
            state = self.core.checkpoint(partitions)
            positions = self.core.resume_offsets(partitions)
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
        resume = self.core.restore(read_state(self.settings.bootstrap), parts)
        for p, pos in resume.items():
            self.consumer.seek(TopicPartition(RESULTS_TOPIC, p), pos)
        self.ready = True
        print(f"llm-monitor: worker ready: partitions {sorted(parts)}, resuming at "
              f"{dict(sorted(resume.items()))}", file=sys.stderr, flush=True)

    def revoked(self, partitions: list[TopicPartition]) -> None:
        parts = [tp.partition for tp in partitions if tp.topic == RESULTS_TOPIC]
        if not parts:
            return
        self.checkpoint(parts, in_rebalance=True)
        self.core.drop(parts)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, worker: KafkaWorker) -> None:
        self.worker = worker

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.worker.revoked(list(revoked))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.worker.assigned(list(assigned))


def run_worker(settings: Settings) -> int:
    """Run until SIGTERM/SIGINT, then evaluate, checkpoint and exit 0."""
    worker = KafkaWorker(settings)

    def _stop(signum: int, frame: Any) -> None:
        worker.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return worker.run()
