"""End to end on a real Tansu broker: produce real results, malformed records and a conflict
through ``llm-monitor produce`` / kafka-python into ``llm-monitor worker``; the worker's
durable state equals the Monitor applied offline to the same events, resolution changes
reach the changes topic and every rejected record reaches the dead-letter topic."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from kafka import KafkaProducer

from monitor.core import CoreConfig
from monitor.runners.kafka.core import CHANGES_TOPIC, DEAD_LETTER_TOPIC, RESULTS_TOPIC
from tests.integration.kafka_harness import (
    Broker,
    Worker,
    cli,
    offline_monitors,
    read_topic,
    scrape,
    snapshot_cells,
    wait_until,
    worker_state,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

MMLU_RESULTS = 3200  # 100 items × 32 models, file order
GSM8K_RESULTS = 1200


def _same(x: float, y: float) -> bool:
    # a pair with no paired item has NaN figures on both sides
    return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def test_worker_matches_offline_and_dead_letters(tmp_path: Path, shared_data: Path) -> None:
    broker = Broker(tmp_path / "tansu.log").start()
    worker = Worker(broker, tmp_path / "worker.log", "--family", "all",
                    "--checkpoint-interval", "0.5", "--eval-interval", "0")
    try:
        worker.start()
        res = cli("produce", str(shared_data / "mmlu_pro_item_correctness_wide.csv"),
                  "--broker", broker.url, "--exclude", "src", "--cluster-col", "category",
                  "--limit", str(MMLU_RESULTS))
        assert res.returncode == 0, res.stderr
        res = cli("produce", str(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv"),
                  "--broker", broker.url, "--exclude", "gold", "--benchmark", "gsm8k",
                  "--shuffle", "--seed", "3", "--limit", str(GSM8K_RESULTS))
        assert res.returncode == 0, res.stderr

        # The first produced MMLU-Pro result, sent again with the other score: a conflict.
        first = next(r for r in read_topic(broker.bootstrap, RESULTS_TOPIC)
                     if r.key == b"mmlu_pro")
        ev = json.loads(first.value)
        conflict = dict(ev, score=1.0 - ev["score"])
        bad = [
            (b"mmlu_pro", b'{"benchmark": "mmlu_pro", "item_id": '),  # invalid-json
            (b"mmlu_pro", b"\xff\xfe not utf-8"),  # invalid-utf8
            (b"mmlu_pro", json.dumps(dict(ev, score=2.0)).encode()),  # schema
            (b"gsm8k", json.dumps(ev).encode()),  # key is not the benchmark
            (b"mmlu_pro", json.dumps(conflict).encode()),  # conflict
            (b"mmlu_pro", json.dumps(ev).encode()),  # duplicate: no effect
        ]
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        sent = [producer.send(RESULTS_TOPIC, key=k, value=v).get(timeout=10) for k, v in bad]
        producer.close()
        where = {f"{RESULTS_TOPIC}/{m.partition}/{m.offset}": i for i, m in enumerate(sent)}

        total = MMLU_RESULTS + GSM8K_RESULTS
        key = 'llm_monitor_events_total{outcome="%s"}'

        def caught_up() -> bool:
            m = scrape(worker.metrics_port)
            return (m[key % "accepted"] == total and m[key % "invalid"] == 4
                    and m[key % "conflict"] == 1 and m[key % "duplicate"] == 1)

        wait_until(caught_up, timeout=40, what="all records processed", log=worker.text)
        metrics = scrape(worker.metrics_port)
        assert worker.stop() == 0
    finally:
        worker.kill()

    try:
        config = CoreConfig(family="all")
        records = read_topic(broker.bootstrap, RESULTS_TOPIC)
        offline = offline_monitors(records, config)
        core = worker_state(broker.bootstrap, config)
        assert sorted(core.monitors) == sorted(offline) == ["gsm8k", "mmlu_pro"]
        for name, mon in offline.items():
            live = core.monitors[name]
            assert snapshot_cells(live) == snapshot_cells(mon)
            want, got = mon.ranking(name).to_json(), live.ranking(name).to_json()
            assert [(m["model"], m["n"]) for m in got["models"]] == [
                (m["model"], m["n"]) for m in want["models"]]
            for p, q in zip(got["pairs"], want["pairs"], strict=True):
                assert (p["model_a"], p["model_b"], p["n"], p["verdict"]) == (
                    q["model_a"], q["model_b"], q["n"], q["verdict"])
                for f in ("delta", "e_value", "q_anytime"):
                    assert _same(p[f], q[f]), (f, p, q)
        assert core.counters() == {"accepted": total, "duplicate": 1, "conflict": 1,
                                   "invalid": 4}
        # /metrics shows the same ranking state as the durable state.
        for name, mon in offline.items():
            resolved = metrics[f'llm_monitor_ranking_resolved{{benchmark="{name}"}}']
            assert resolved == (1.0 if mon.ranking(name).to_json()["resolved"] else 0.0)

        changes = [json.loads(r.value) for r in read_topic(broker.bootstrap, CHANGES_TOPIC)]
        resolutions = [c for c in changes if "verdict" in c]
        assert resolutions, "no resolution change was published"
        assert all(c["verdict"] != "unresolved" or c["previous"] != "unresolved"
                   for c in resolutions)
        final = {(c["benchmark"], c["model_a"], c["model_b"]): c["verdict"] for c in resolutions}
        # the last published verdict of each pair is the offline verdict of that pair
        for (bench, a, b), verdict in final.items():
            view = next(p for p in offline[bench].pairs(bench, "all")
                        if {p.model_a, p.model_b} == {a, b})
            assert view.verdict == verdict, (bench, a, b)

        letters = [json.loads(r.value) for r in read_topic(broker.bootstrap, DEAD_LETTER_TOPIC)]
        reasons = {where[d["source"]]: d["reason"] for d in letters if d["source"] in where}
        assert reasons == {0: "invalid-json", 1: "invalid-utf8", 2: "schema", 3: "schema",
                           4: "conflict"}, letters
        assert len(letters) == 5
        assert "not the event's benchmark" in next(
            d["detail"] for d in letters if where.get(d["source"]) == 3)
    finally:
        broker.stop()
