"""The worker core decodes a batch of records in one call, and each record stays one event of
its own: no event runs from one record's value into the next, sources still name the record."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry

from monitor.core import CoreConfig
from monitor.runners.host import MonitorHost
from monitor.runners.kafka_core import RESULTS_TOPIC, Record, WorkerCore


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
