"""Broker-side set-up shared by both worker engines: the topics and the state topic's content.

Both engines call these at start and on partition assignment, off their hot path, so one
client library (kafka-python) serves both; neither engine imports the other.
"""

from __future__ import annotations

import contextlib
import time

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from monitor.errors import MonitorError
from monitor.runners.kafka.core import (
    CHANGES_TOPIC,
    DEAD_LETTER_TOPIC,
    MAX_STATE_BYTES,
    RESULTS_TOPIC,
    STATE_TOPIC,
)


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
