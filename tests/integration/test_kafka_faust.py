"""The Faust engine (``llm-monitor worker --engine faust``) under the same SIGKILL test: one
kill at a random point mid-ingest (a Faust restart after SIGKILL takes ~13 s, so one kill
keeps the Kafka tests within their time budget; the kafka-python engine is killed twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_kafka_crash import crash_run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_faust_sigkill_during_ingest_equals_offline(tmp_path: Path, shared_data: Path) -> None:
    crash_run(tmp_path, shared_data, engine="faust", kills=1, seed=7, n_results=15_000)
