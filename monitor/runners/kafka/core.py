"""Engine-neutral shell of the distributed worker: records in, outputs and checkpoints out.

The Kafka runners (``kafka_worker`` on kafka-python, ``faust_app`` on Faust) only move bytes;
everything between a consumed record and the state is here, with no I/O and no Kafka client:

- decode → key → step: a batch of source records (topic, partition, offset, key, value) is
  decoded (:func:`monitor.decoder.decode_events` semantics), each event's key must equal its
  benchmark, and the events of each benchmark are folded into that benchmark's monitor (held
  by the :class:`~monitor.runners.host.MonitorHost`) in offset order;
- one invalid path: a rejected record goes through :meth:`MonitorHost.on_invalid` (counted,
  logged with ``topic/partition/offset``, a :class:`~monitor.contracts.DeadLetter` with that
  source); conflicts come back from the core as dead letters with reason ``conflict``;
- idempotency: per benchmark the last applied source offset and per partition the last
  processed offset; a record at or below them is skipped, so a redelivered record is never
  counted twice;
- checkpoints: :meth:`WorkerCore.checkpoint` returns the state records (one per touched
  benchmark: snapshot + partition + offset; then one per touched partition: offset + invalid
  count) that a runner writes to the compacted state topic *before* committing the consumer
  offsets; :meth:`WorkerCore.restore` rebuilds from them and says where to resume.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from monitor.contracts import DeadLetter, RankingChange, ResolutionChange
from monitor.core import Monitor
from monitor.core.monitor import OUTCOMES
from monitor.decoder import Result, Results, decode_events, fast_results
from monitor.runners.host import MonitorHost, Sources

RESULTS_TOPIC = "llm-monitor.results"
CHANGES_TOPIC = "llm-monitor.resolution-changes"
DEAD_LETTER_TOPIC = "llm-monitor.dead-letter"
STATE_TOPIC = "llm-monitor.state"

#: Snapshots of big benchmarks are megabytes; state producers and readers allow this much.
MAX_STATE_BYTES = 64 << 20

#: kafka-python consumer options of a worker: fetches of up to 4 MB per partition (Tansu
#: answers one partition per fetch; 1 MB ≈ 9,500 results) and a socket buffer to match.
#: With ``Settings.batch_size`` records per poll (BENCHMARKS.md "Distributed worker").
CONSUMER_FETCH: dict[str, Any] = {"max_partition_fetch_bytes": 4 << 20,
                                  "receive_buffer_bytes": 4 << 20}

#: kafka-python producer options for results: zstd batches of up to 512 KB. A broker handles a
#: compressed batch as one blob (Tansu: ~0.1 µs per record, against 5–10 µs uncompressed),
#: and the consumer decompresses it in one C call.
RESULTS_PRODUCER: dict[str, Any] = {"compression_type": "zstd", "linger_ms": 20,
                                    "batch_size": 512 << 10}

_BENCH_PREFIX = b"bench:"
_PART_PREFIX = b"partition:"


class SourceRecord(Protocol):
    """What the core reads of a consumed record: kafka-python's ``ConsumerRecord``, Faust's
    message or a :class:`Record` (passed as they come: no copy per record)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


class Record(NamedTuple):
    """One consumed source record."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def source_of(rec: SourceRecord) -> str:
    """Where a record came from: ``topic/partition/offset``."""
    return f"{rec.topic}/{rec.partition}/{rec.offset}"


@dataclass
class StepOutput:
    """What one batch produced: outcome counts, change events and dead letters."""

    counts: dict[str, int] = field(default_factory=lambda: {
        "accepted": 0, "duplicate": 0, "conflict": 0, "invalid": 0, "skipped": 0})
    changes: list[ResolutionChange | RankingChange] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


def encode_state(obj: dict[str, Any]) -> bytes:
    """A state record value: zlib-compressed JSON (0/1 score snapshots shrink ~5×)."""
    return zlib.compress(json.dumps(obj, separators=(",", ":")).encode(), 1)


def decode_state(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(zlib.decompress(raw))
    return out


def _sources(records: Sequence[SourceRecord]) -> Sources:
    return Sources(len(records), lambda k: source_of(records[k]))


class WorkerCore:
    """Source offsets and partition ownership of the benchmarks a worker's host holds."""

    def __init__(self, host: MonitorHost) -> None:
        self.host = host
        self.bench_partition: dict[str, int] = {}
        self.bench_offset: dict[str, int] = {}  # last source offset folded into the benchmark
        self.part_offset: dict[int, int] = {}  # last source offset processed in the partition
        self.invalid: dict[int, int] = {}  # invalid records per partition (durable count)
        self._touched_benches: set[str] = set()
        self._touched_parts: set[int] = set()
        self._ever_owned: set[int] = set()  # partitions whose durable counters were restored

    @property
    def monitors(self) -> dict[str, Monitor]:
        """The monitor of every benchmark the worker owns."""
        return self.host.monitors

    # -- restore ---------------------------------------------------------------------------
    def restore(self, records: Iterable[tuple[bytes, bytes]], partitions: Iterable[int]
                ) -> dict[int, int]:
        """Rebuild the state of ``partitions`` from state records (last value per key wins).

        Returns the offset to resume each partition from (0 when it has no checkpoint). The
        counters of partitions this process never owned before continue from their durable
        totals (:meth:`MonitorHost.restore_counters`); a partition that comes back after a
        rebalance was counted already.
        """
        owned = set(partitions)
        latest: dict[bytes, bytes] = {}
        for key, value in records:
            latest[key] = value
        with self.host.lock:
            for key, value in latest.items():
                if value is None:
                    continue
                obj = decode_state(value)
                if key.startswith(_PART_PREFIX):
                    p = int(obj["partition"])
                    if p in owned:
                        self.part_offset[p] = int(obj["offset"])
                        self.invalid[p] = int(obj["invalid"])
                elif key.startswith(_BENCH_PREFIX):
                    p = int(obj["partition"])
                    if p in owned:
                        name = obj["benchmark"]
                        self.host.put(name, Monitor.load_snapshot(
                            base64.b64decode(obj["snapshot"]), self.host.config))
                        self.bench_partition[name] = p
                        self.bench_offset[name] = int(obj["offset"])
            new = owned - self._ever_owned
            self._ever_owned |= owned
            if new:
                self.host.restore_counters(self.counters(new))
        return {p: self.part_offset.get(p, -1) + 1 for p in owned}

    def drop(self, partitions: Iterable[int]) -> None:
        """Forget the state of partitions this worker no longer owns (after a checkpoint)."""
        gone = set(partitions)
        with self.host.lock:
            names = [b for b, p in self.bench_partition.items() if p in gone]
            self.host.drop(names)
            for name in names:
                del self.bench_partition[name]
                self.bench_offset.pop(name, None)
                self._touched_benches.discard(name)
            for p in gone:
                self.part_offset.pop(p, None)
                self.invalid.pop(p, None)
                self._touched_parts.discard(p)

    # -- step ------------------------------------------------------------------------------
    def step(self, records: Sequence[SourceRecord], *, force_evaluate: bool = False
             ) -> StepOutput:
        """Decode, key, and fold one batch; evaluate verdicts when the host's cadence says so."""
        with self.host.lock:
            return self._step(records, force_evaluate)

    def _step(self, records: Sequence[SourceRecord], force_evaluate: bool) -> StepOutput:
        out = StepOutput()
        part_offset = self.part_offset
        fresh = [r for r in records if r.offset > part_offset.get(r.partition, -1)]
        out.counts["skipped"] += len(records) - len(fresh)
        recs, events = self._decode(fresh, out)
        if not self._step_whole(recs, events, out):
            self._step_each(recs, events, out)
        for rec in fresh:
            if rec.offset > part_offset.get(rec.partition, -1):
                part_offset[rec.partition] = rec.offset
            self._touched_parts.add(rec.partition)
        out.changes.extend(self.host.evaluate_if_due(force=force_evaluate))
        return out

    def _step_whole(self, recs: Sequence[SourceRecord], events: Results, out: StepOutput
                    ) -> bool:
        """Fold ``events`` at once when they are one benchmark's, every record keyed by it,
        of the partition that owns it and past its offset (the common case); else False."""
        name = events.benchmark
        if name is None:
            return False
        keys = [r.key for r in recs]
        parts = [r.partition for r in recs]
        owner = self.bench_partition.get(name, parts[0])
        if (keys.count(name.encode()) != len(keys) or parts.count(owner) != len(parts)
                or min(r.offset for r in recs) <= self.bench_offset.get(name, -1)):
            return False
        self.bench_partition[name] = owner
        self._apply(name, events, recs, out)
        return True

    def _step_each(self, recs: Sequence[SourceRecord], events: Sequence[Result],
                   out: StepOutput) -> None:
        by_bench: dict[str, tuple[list[Result], list[SourceRecord]]] = {}
        keys: dict[bytes, str] = {}  # record keys already matched to a benchmark name
        for rec, ev in zip(recs, events, strict=True):
            name = ev.benchmark
            if rec.key is None or keys.get(rec.key) != name:
                if rec.key is None or rec.key != name.encode():
                    out.dead_letters.append(self._on_invalid(
                        rec, "schema",
                        f"key {rec.key!r} is not the event's benchmark {name!r}", out))
                    continue
                keys[rec.key] = name
            # Ownership first: offsets of another partition are not comparable.
            owner = self.bench_partition.setdefault(name, rec.partition)
            if owner != rec.partition:
                out.dead_letters.append(self._on_invalid(
                    rec, "schema", f"benchmark {name!r} belongs to partition "
                    f"{owner}; the topic was repartitioned", out))
                continue
            if rec.offset <= self.bench_offset.get(name, -1):
                out.counts["skipped"] += 1  # already in the benchmark's snapshot
                continue
            evs, rs = by_bench.setdefault(name, ([], []))
            evs.append(ev)
            rs.append(rec)
        for name, (evs, rs) in by_bench.items():
            self._apply(name, Results(evs), rs, out)

    def _apply(self, name: str, events: Results, recs: Sequence[SourceRecord],
               out: StepOutput) -> None:
        """Fold one benchmark's events (of ``recs``, in offset order)."""
        result = self.host.apply(events, sources=_sources(recs))
        for o in OUTCOMES:
            out.counts[o] += result.count(o)
        out.dead_letters.extend(result.dead_letters)
        self.bench_offset[name] = max(r.offset for r in recs)
        self._touched_benches.add(name)

    def _decode(self, records: Sequence[SourceRecord], out: StepOutput
                ) -> tuple[Sequence[SourceRecord], Results]:
        """The valid events of ``records`` in order, and the record of each (a record may hold
        several); each rejected record becomes a dead letter."""
        if not records:
            return [], Results()
        values = [r.value for r in records]
        if None not in values:
            # Fast path: the whole batch decoded in one call, as NDJSON of one line per value:
            # as many lines as records (no value holds a newline), each one object, or the
            # batch is not taken (see fast_results) and each record is decoded and named below.
            events = fast_results(b"\n".join(values),  # type: ignore[arg-type]
                                  count=len(records), lines=True)
            if events is not None:
                return records, events
        recs: list[SourceRecord] = []
        decoded = Results()
        for rec in records:
            if rec.value is None:
                out.dead_letters.append(self._on_invalid(rec, "invalid-json",
                                                         "record without a value", out))
                continue
            d = decode_events(rec.value, source=source_of(rec))
            if d.invalid:
                first = d.invalid[0]
                out.dead_letters.append(self._on_invalid(rec, first.reason, first.detail, out,
                                                         payload=first.payload))
                continue
            decoded._extend(d.results)
            recs.extend([rec] * len(d.results))
        return recs, decoded

    def _on_invalid(self, rec: SourceRecord, reason: str, detail: str, out: StepOutput, *,
                    payload: str | None = None) -> DeadLetter:
        """A rejected record: the host's invalid path, plus the partition's durable count."""
        out.counts["invalid"] += 1
        self.invalid[rec.partition] = self.invalid.get(rec.partition, 0) + 1
        self._touched_parts.add(rec.partition)
        if payload is None:
            payload = (rec.value or b"")[:2048].decode("utf-8", "replace")
        return self.host.on_invalid(reason, detail, payload, source=source_of(rec))

    # -- checkpoint ------------------------------------------------------------------------
    @property
    def dirty(self) -> bool:
        return bool(self._touched_benches or self._touched_parts)

    def checkpoint(self, partitions: Iterable[int] | None = None) -> list[tuple[bytes, bytes]]:
        """State records of what changed since the last checkpoint, benchmarks first.

        The runner must write them in this order to one state-topic partition and wait for
        them to be durable before committing the source offsets (see docs/distributed.md).
        """
        only = None if partitions is None else set(partitions)
        out: list[tuple[bytes, bytes]] = []
        with self.host.lock:
            for name in sorted(self._touched_benches):
                p = self.bench_partition[name]
                if only is not None and p not in only:
                    continue
                out.append((_BENCH_PREFIX + name.encode(), encode_state({
                    "benchmark": name, "partition": p, "offset": self.bench_offset[name],
                    "snapshot": base64.b64encode(
                        self.host.monitors[name].dump_snapshot()).decode("ascii"),
                })))
            for p in sorted(self._touched_parts):
                if only is not None and p not in only:
                    continue
                out.append((_PART_PREFIX + str(p).encode(), encode_state({
                    "partition": p, "offset": self.part_offset.get(p, -1),
                    "invalid": self.invalid.get(p, 0),
                })))
            if only is None:
                self._touched_benches.clear()
                self._touched_parts.clear()
            else:
                self._touched_benches = {b for b in self._touched_benches
                                         if self.bench_partition[b] not in only}
                self._touched_parts -= only
        return out

    def resume_offsets(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """The next source offset of each (given) partition: what a commit should store."""
        only = None if partitions is None else set(partitions)
        with self.host.lock:
            return {p: off + 1 for p, off in self.part_offset.items()
                    if only is None or p in only}

    def counters(self, partitions: Iterable[int] | None = None) -> dict[str, int]:
        """Durable-consistent totals (accepted/duplicate/conflict of the monitors, invalid) of
        the given partitions (all owned when omitted)."""
        only = None if partitions is None else set(partitions)
        with self.host.lock:
            names = [b for b, p in self.bench_partition.items() if only is None or p in only]
            tot = self.host.counters(names)
            tot["invalid"] = sum(n for p, n in self.invalid.items() if only is None or p in only)
        return tot
