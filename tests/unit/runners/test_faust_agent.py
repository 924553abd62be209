"""The Faust agent in-process (``agent.test_context()``, memory store, no broker).

Results go in through the agent's test channel; the state topic, the change topic and the
dead-letter topic are an in-memory :class:`WorkerIO`. The agent must fold the results, send
the change events and dead letters, and store a checkpoint that a fresh worker restores from
— skipping the records it already holds when they are delivered again.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence

import pytest
from prometheus_client import CollectorRegistry

from monitor.contracts import ItemResult
from monitor.runners.host import MonitorHost
from monitor.runners.kafka.core import CHANGES_TOPIC, DEAD_LETTER_TOPIC
from monitor.runners.kafka.faust_app import FaustWorker, build_app
from monitor.runners.settings import Settings


class MemoryIO:
    def __init__(self, state: list[tuple[bytes, bytes]] | None = None) -> None:
        self.state = list(state or [])
        self.sent: dict[str, list[tuple[bytes, bytes]]] = {CHANGES_TOPIC: [],
                                                           DEAD_LETTER_TOPIC: []}
        self.reads = 0

    async def read_state(self) -> list[tuple[bytes, bytes]]:
        self.reads += 1
        return list(self.state)

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.sent[topic].append((key, value))

    async def write_state(self, records: Sequence[tuple[bytes, bytes]]) -> None:
        self.state.extend(records)


def worker(io: MemoryIO) -> FaustWorker:
    # two planned models: the one pair spends α/2 and 40 one-sided items decide it
    settings = Settings.build(serve_http=False, group="agent-test", batch_size=8, planned_models=2,
                              checkpoint_interval=0.05, eval_interval=0.0)
    host = MonitorHost(settings.core_config(), eval_interval=settings.eval_interval,
                       registry=CollectorRegistry(), log=lambda _: None)
    return build_app(settings, io=io, host=host)


def payloads(n_items: int) -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(n_items):
        for model, score in (("a", 1.0), ("z", 0.0)):
            ev = ItemResult(benchmark="b", item_id=str(i), model=model, score=score)
            out.append((b"b", ev.model_dump_json().encode()))
    return out


async def feed(w: FaustWorker, records: list[tuple[bytes, bytes]], until: int) -> None:
    """Put ``records`` through the agent and wait until ``until`` offsets are checkpointed."""
    async with w.agent.test_context() as agent:
        for key, value in records:
            await agent.put(key=key, value=value, partition=0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if w.core.part_offset.get(0, -1) >= until - 1 and not w.core.dirty:
                return
            await asyncio.sleep(0.01)
    pytest.fail(f"the agent did not process {until} records: {w.core.part_offset}")


def test_agent_folds_emits_and_checkpoints_and_a_restart_skips_the_replay() -> None:
    io = MemoryIO()
    first = worker(io)
    records = [*payloads(40), (b"other", payloads(1)[0][1])]  # the last key is wrong
    asyncio.run(feed(first, records, until=len(records)))

    assert first.core.counters() == {"accepted": 80, "duplicate": 0, "conflict": 0,
                                     "invalid": 1}
    (dead,) = io.sent[DEAD_LETTER_TOPIC]
    letter = json.loads(dead[1])
    assert letter["reason"] == "schema" and letter["source"] == "llm-monitor.results/0/80"
    verdicts = [json.loads(v) for _, v in io.sent[CHANGES_TOPIC]]
    assert {"verdict": "resolved:a", "model_a": "a", "model_b": "z"}.items() <= next(
        v for v in verdicts if "verdict" in v).items()
    assert io.reads == 1  # the partition's state was read once, at its first record
    assert first.host.metrics.events_total.labels(outcome="accepted")._value.get() == 80.0

    # A fresh worker restores from the stored state; Faust redelivers the whole partition
    # (at least once) plus two new records: only the new ones count.
    second = worker(MemoryIO(io.state))
    more = payloads(41)[80:]
    asyncio.run(feed(second, records + more, until=len(records) + len(more)))
    assert second.core.counters() == {"accepted": 82, "duplicate": 0, "conflict": 0,
                                      "invalid": 1}
    assert second.host.metrics.events_total.labels(outcome="accepted")._value.get() == 82.0
    assert len({item for item, _ in second.core.monitors["b"].scores("b")}) == 41
