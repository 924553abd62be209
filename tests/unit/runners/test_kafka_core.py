"""The transport-free worker core, without a broker: offsets, keys, partitions, checkpoints."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry

from monitor.contracts import ItemResult
from monitor.core import CoreConfig
from monitor.runners.host import MonitorHost
from monitor.runners.kafka.core import RESULTS_TOPIC, Record, WorkerCore, decode_state


def new_core(log: list[str] | None = None) -> WorkerCore:
    return WorkerCore(MonitorHost(CoreConfig(), eval_interval=0.0, registry=CollectorRegistry(),
                                  log=(log if log is not None else []).append))


def rec(partition: int, offset: int, item: int, model: str, score: float,
        bench: str = "b", key: str | None = None) -> Record:
    value = ItemResult(benchmark=bench, item_id=str(item), model=model,
                       score=score).model_dump_json().encode()
    return Record(RESULTS_TOPIC, partition, offset, (key if key is not None else bench).encode(),
                  value)


def stream(partition: int, n_items: int, bench: str = "b", start: int = 0) -> list[Record]:
    out = []
    for i in range(n_items):
        for j, (m, s) in enumerate((("a", 1.0), ("z", float(i % 3 == 0)))):
            out.append(rec(partition, start + 2 * i + j, i, m, s, bench))
    return out


def test_redelivered_records_are_skipped_not_counted_twice() -> None:
    core = new_core()
    records = stream(0, 10)
    first = core.step(records[:12])
    assert first.counts["accepted"] == 12
    # A redelivery after a crash replays from an earlier offset: the applied prefix is skipped.
    again = core.step(records[6:])
    assert again.counts["skipped"] == 6
    assert again.counts["accepted"] == 8 and again.counts["duplicate"] == 0
    assert core.counters() == {"accepted": 20, "duplicate": 0, "conflict": 0, "invalid": 0}
    assert core.part_offset == {0: 19}


def test_key_must_be_the_events_benchmark() -> None:
    lines: list[str] = []
    core = new_core(lines)
    out = core.step([rec(1, 0, 0, "a", 1.0, bench="b", key="other"),
                     rec(1, 1, 0, "a", 1.0, bench="b")])
    assert out.counts["invalid"] == 1 and out.counts["accepted"] == 1
    (letter,) = out.dead_letters
    assert letter.reason == "schema" and letter.source == f"{RESULTS_TOPIC}/1/0"
    assert "is not the event's benchmark" in letter.detail
    assert lines and lines[0].startswith(f"llm-monitor: dead letter {RESULTS_TOPIC}/1/0: schema")
    # The rejection is durable: the partition's invalid count goes into its checkpoint.
    assert core.invalid == {1: 1}
    assert core.counters()["invalid"] == 1


def test_repartition_is_detected() -> None:
    core = new_core()
    core.step([rec(0, 0, 0, "a", 1.0)])
    out = core.step([rec(2, 0, 1, "a", 1.0)])  # same benchmark on another partition
    (letter,) = out.dead_letters
    assert letter.reason == "schema" and "repartitioned" in letter.detail
    assert out.counts["accepted"] == 0
    assert core.bench_partition == {"b": 0}


def test_records_without_value_or_json_are_dead_letters() -> None:
    core = new_core()
    out = core.step([Record(RESULTS_TOPIC, 0, 0, b"b", None),
                     Record(RESULTS_TOPIC, 0, 1, b"b", b"{not json"),
                     rec(0, 2, 0, "a", 1.0)])
    assert [d.reason for d in out.dead_letters] == ["invalid-json", "invalid-json"]
    assert out.counts["accepted"] == 1 and core.part_offset == {0: 2}


def test_checkpoint_restore_round_trip() -> None:
    core = new_core()
    core.step(stream(0, 40, "b") + stream(1, 30, "c") + [Record(RESULTS_TOPIC, 1, 60, b"c", b"x")])
    state = core.checkpoint()
    # Benchmarks first, then partitions: an offset is never stored before its snapshot.
    keys = [k for k, _ in state]
    assert keys == [b"bench:b", b"bench:c", b"partition:0", b"partition:1"]
    assert decode_state(state[3][1]) == {"partition": 1, "offset": 60, "invalid": 1}
    assert not core.dirty and core.checkpoint() == []

    restored = new_core()
    resume = restored.restore(state, [0, 1])
    assert resume == {0: 80, 1: 61}
    assert restored.counters() == core.counters() == {
        "accepted": 140, "duplicate": 0, "conflict": 0, "invalid": 1}
    for name in ("b", "c"):
        assert restored.monitors[name].dump_snapshot() == core.monitors[name].dump_snapshot()
    assert restored.bench_offset == core.bench_offset
    # Restored counters continue in the metrics of the new process.
    text = restored.host.metrics.events_total.labels(outcome="accepted")._value.get()
    assert text == 140.0
    # Continuing both from here gives the same state; the restored one skips the replay.
    more = stream(0, 45, "b")
    out = restored.step(more)
    core.step(more)
    assert out.counts["skipped"] == 80 and out.counts["accepted"] == 10
    assert restored.monitors["b"].dump_snapshot() == core.monitors["b"].dump_snapshot()


def test_restore_only_owned_partitions_and_last_value_wins() -> None:
    core = new_core()
    core.step(stream(0, 5, "b"))
    early = core.checkpoint()
    core.step(stream(0, 10, "b"))
    late = core.checkpoint()
    core.step(stream(1, 5, "c"))
    other = core.checkpoint()

    mine = new_core()
    assert mine.restore(early + late + other, [0]) == {0: 20}
    assert sorted(mine.monitors) == ["b"]
    assert mine.counters()["accepted"] == 20


def test_drop_then_restore_does_not_count_the_partition_twice() -> None:
    core = new_core()
    core.step(stream(0, 5))
    state = core.checkpoint()
    worker = new_core()
    worker.restore(state, [0])
    worker.drop([0])
    assert worker.monitors == {} and worker.part_offset == {}
    worker.restore(state, [0])  # the partition comes back after a rebalance
    assert worker.host.metrics.events_total.labels(outcome="accepted")._value.get() == 10.0


def test_partial_checkpoint_keeps_other_partitions_pending() -> None:
    core = new_core()
    core.step(stream(0, 3, "b") + stream(1, 3, "c"))
    only0 = core.checkpoint([0])
    assert [k for k, _ in only0] == [b"bench:b", b"partition:0"]
    assert core.dirty
    assert [k for k, _ in core.checkpoint()] == [b"bench:c", b"partition:1"]
    assert json.loads(json.dumps(core.resume_offsets())) == {"0": 6, "1": 6}


def _imports(module: str) -> set[str]:
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_engines_share_only_transport_neutral_modules() -> None:
    # The Faust engine does not import the kafka-python engine, and the shared worker core
    # imports no Kafka client at all (deferred imports included).
    assert "monitor.runners.kafka.worker" not in _imports("monitor.runners.kafka.faust_app")
    core = _imports("monitor.runners.kafka.core")
    assert not {n for n in core if n.split(".")[0] in {"kafka", "faust", "aiokafka"}}
