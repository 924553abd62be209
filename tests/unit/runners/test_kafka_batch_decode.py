"""The worker core decodes a batch of records in one call, and each record stays one event of
its own: no event runs from one record's value into the next, sources still name the record."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from monitor.core import CoreConfig
from monitor.runners.host import MonitorHost
from monitor.runners.kafka.core import RESULTS_TOPIC, Record, WorkerCore


def value(**kw: object) -> bytes:
    return json.dumps({"benchmark": "b", "item_id": "1", "model": "m", "score": 1, **kw},
                      separators=(",", ":")).encode()


def core() -> WorkerCore:
    log: list[str] = []
    return WorkerCore(MonitorHost(CoreConfig(), eval_interval=0.0, registry=CollectorRegistry(),
                                  log=log.append))


def records(values: list[bytes], *, key: bytes = b"b") -> list[Record]:
    return [Record(RESULTS_TOPIC, 0, k, key, v) for k, v in enumerate(values)]


def test_a_string_cannot_run_from_one_record_into_the_next() -> None:
    # Record 0 ends inside a string that record 1 closes; record 2 holds two objects.
    # Joined with bare commas the batch read as three valid events, none a record's own.
    first = value()[:-1] + b',"run_id":"x'
    out = core().step(records([first, b'{","cluster":"c"}',
                               value(item_id="2") + b"," + value(item_id="3")]))
    assert out.counts["accepted"] == 0 and out.counts["invalid"] == 3
    assert [d.source for d in out.dead_letters] == [f"{RESULTS_TOPIC}/0/{k}" for k in range(3)]
    assert all(d.reason == "invalid-json" for d in out.dead_letters)


def test_a_batch_is_folded_in_one_pass_and_a_conflict_names_its_record() -> None:
    c = core()
    good = [value(item_id=str(i), model=m, score=i % 2) for i in range(50) for m in ("m", "n")]
    out = c.step(records([*good, value(item_id="7", model="n", score=0)]))  # 7 % 2 = 1 first
    assert out.counts["accepted"] == 100 and out.counts["conflict"] == 1
    (letter,) = out.dead_letters
    assert letter.reason == "conflict" and letter.source == f"{RESULTS_TOPIC}/0/100"
    wrong_key = c.step([Record(RESULTS_TOPIC, 0, 101, b"other", value(item_id="99"))])
    assert wrong_key.counts["invalid"] == 1 and "is not the event's benchmark" in \
        wrong_key.dead_letters[0].detail


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["m", "n", "o"]),
                          st.integers(0, 1), st.sampled_from([b"b", b"b", b"b", b"c", None]),
                          st.sampled_from([0, 0, 0, 1])), min_size=1, max_size=40),
       st.integers(1, 15))
def test_a_batch_folded_at_once_equals_the_step_per_record(
        cells: list[tuple[int, str, int, bytes | None, int]], size: int) -> None:
    # Keys that are not the benchmark, records of another partition, re-sent offsets and
    # conflicts: the whole-batch fold gives the same counters, dead letters and state as the
    # step per record, whatever the batching.
    recs = [Record(RESULTS_TOPIC, part, off, key, value(item_id=str(i), model=m, score=s))
            for off, (i, m, s, key, part) in enumerate(cells)]
    recs += recs[: len(recs) // 3]  # redelivered
    fast, slow = core(), core()
    slow._step_whole = lambda *a: False  # type: ignore[method-assign]
    got = [[], []]  # type: ignore[var-annotated]
    for c, out in ((fast, got[0]), (slow, got[1])):
        for lo in range(0, len(recs), size):
            o = c.step(recs[lo:lo + size])
            out.append((dict(o.counts), [(d.reason, d.source, d.detail) for d in o.dead_letters]))
    assert got[0] == got[1]
    assert fast.counters() == slow.counters()
    assert fast.bench_offset == slow.bench_offset and fast.part_offset == slow.part_offset
    for name, mon in fast.monitors.items():
        assert mon.scores(name) == slow.monitors[name].scores(name)


def test_an_event_cannot_be_made_of_two_records() -> None:
    # Record 0 ends with the start of an event that record 1 finishes: two invalid records,
    # not an event built from both.
    out = core().step(records([value() + b',{"benchmark":"b","item_id":"2"',
                               b'"model":"m","score":0}']))
    assert out.counts["accepted"] == 0 and out.counts["invalid"] == 2
    assert [d.source for d in out.dead_letters] == [f"{RESULTS_TOPIC}/0/{k}" for k in range(2)]
