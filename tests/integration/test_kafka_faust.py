"""The Faust engine (``llm-monitor worker --engine faust``) under the same SIGKILL test: one
kill at a random point mid-ingest (a Faust restart after SIGKILL takes ~13 s, so one kill
keeps the Kafka tests within their time budget; the kafka-python engine is killed twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.core import CoreConfig, Monitor
from monitor.runners.replay import ReplayStream, load_blocks
from tests.integration.kafka_harness import Broker, Worker, cli, scrape, wait_until
from tests.integration.test_kafka_crash import crash_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_faust_sigkill_during_ingest_equals_offline(tmp_path: Path, shared_data: Path) -> None:
    crash_run(tmp_path, shared_data, engine="faust", kills=1, seed=7, n_results=15_000)


def test_faust_reads_what_produce_writes(tmp_path: Path, shared_data: Path) -> None:
    """`llm-monitor produce` with its defaults (zstd record batches) into the Faust engine:
    every result is read and folded, and the board equals the Monitor applied offline to the
    same results."""
    broker = Broker(tmp_path / "tansu.log").start()
    worker = Worker(broker, tmp_path / "worker.log", "--engine", "faust",
                    "--checkpoint-interval", "0.5", "--eval-interval", "0")
    produced = 2400
    try:
        worker.start(timeout=60)
        res = cli("produce", str(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv"),
                  "--broker", broker.url, "--exclude", "gold", "--benchmark", "gsm8k",
                  "--shuffle", "--seed", "5", "--limit", str(produced))
        assert res.returncode == 0, res.stderr
        key = 'llm_monitor_events_total{outcome="accepted"}'

        def folded() -> bool:
            assert worker.proc is not None
            if worker.proc.poll() is not None:  # the engine died (e.g. a codec it lacks)
                pytest.fail(f"the Faust worker exited; log:\n{worker.text()[-3000:]}")
            return scrape(worker.metrics_port).get(key) == produced

        wait_until(folded, timeout=90, what="every produced result folded by the Faust engine",
                   log=worker.text)
        metrics = scrape(worker.metrics_port)
        assert "UnsupportedCodecError" not in worker.text()
        assert worker.stop() == 0
    finally:
        worker.kill()
        broker.stop()
    # The same results as `produce` read them (one partition, key = benchmark: in order).
    blocks = load_blocks([shared_data / "zeroeval_gsm8k_item_correctness_wide.csv"],
                         benchmark="gsm8k", exclude=["gold"])
    mon = Monitor(CoreConfig())
    mon.apply(ReplayStream(blocks, seed=5).events(0, produced))
    offline = mon.ranking("gsm8k").to_json()
    assert metrics['llm_monitor_ranking_unresolved_pairs{benchmark="gsm8k"}'] == \
        offline["unresolved_pairs"]
    for pair in offline["pairs"]:
        labels = f'benchmark="gsm8k",model_a="{pair["model_a"]}",model_b="{pair["model_b"]}"'
        assert metrics[f"llm_monitor_pair_items{{{labels}}}"] == pair["n"]
