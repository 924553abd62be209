"""The embedded service with repeated samples: HTTP bodies with `sample`, the SQLite log and a
restart keep the samples waiting for their cell, and judge duplicates per sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.errors import ConfigError
from monitor.runners.embedded.service import EmbeddedService
from monitor.runners.settings import Settings


def _service(db: Path) -> EmbeddedService:
    return EmbeddedService(Settings(db=db, samples=2, eval_interval=0.0),
                           registry=CollectorRegistry())


def _body(*rows: tuple[str, str, float, int]) -> bytes:
    return "\n".join(json.dumps({"benchmark": "b", "item_id": i, "model": m, "score": s,
                                 "sample": k}) for i, m, s, k in rows).encode()


def test_samples_wait_for_their_cell_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    svc = _service(db)
    rep = svc.ingest_body(_body(("1", "a", 1, 0), ("1", "a", 0, 1), ("1", "z", 0, 0),
                                ("1", "a", 1, 5)))
    assert (rep.accepted, rep.conflict) == (3, 1)
    assert [m["model"] for m in svc.ranking("b")["models"]] == ["a"]  # z has 1 of 2 samples
    svc.close()

    svc = _service(db)  # rebuilt from the log: z's sample 0 is still waiting
    assert svc.rebuilt == 3
    rep = svc.ingest_body(_body(("1", "z", 0, 0), ("1", "z", 1, 0), ("1", "z", 0, 1)))
    assert (rep.accepted, rep.duplicate, rep.conflict) == (1, 1, 1)
    pair = svc.ranking("b")["pairs"][0]
    assert (pair["model_a"], pair["n"], pair["delta"], pair["samples"]) == ("a", 1, 0.5, 2)
    svc.close()


def test_the_samples_setting_reaches_the_core_and_is_validated(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.build(samples=3, serve_http=False).core_config().samples == 3
    monkeypatch.setenv("LLM_MONITOR_SAMPLES", "5")
    assert Settings.build(serve_http=False).core_config().samples == 5
    with pytest.raises(ConfigError, match="samples"):
        Settings.build(samples=0, serve_http=False)


def test_benchmarks_of_different_sample_counts_share_one_monitor_across_a_restart(
        tmp_path: Path) -> None:
    """pass@5 beside a one-sample benchmark: the first result's `k` declares K, the log keeps
    it, and a restart (replaying the log) judges the next results the same way."""
    db = tmp_path / "m.db"

    def service() -> EmbeddedService:
        return EmbeddedService(Settings(db=db, eval_interval=0.0), registry=CollectorRegistry())

    five = "\n".join(json.dumps({"benchmark": "pass5", "item_id": "1", "model": m, "score": s % 2,
                                 "sample": s, "k": 5}) for m in "ab" for s in range(5))
    one = "\n".join(json.dumps({"benchmark": "one", "item_id": "1", "model": m, "score": 1})
                    for m in "ab")
    svc = service()
    rep = svc.ingest_body(f"{five}\n{one}".encode())
    assert (rep.accepted, rep.conflict) == (12, 0)
    svc.close()

    svc = service()
    assert svc.rebuilt == 12
    later = [{"benchmark": "pass5", "item_id": "2", "model": "a", "score": 1, "sample": 3},
             {"benchmark": "one", "item_id": "2", "model": "a", "score": 1, "sample": 3}]
    rep = svc.ingest_body("\n".join(map(json.dumps, later)).encode())
    assert (rep.accepted, rep.conflict) == (1, 1)
    assert svc.ranking("pass5")["pairs"][0]["samples"] == 5
    svc.close()


def test_a_settings_file_declares_a_benchmark_s_sample_count(tmp_path: Path) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text("[benchmarks.humaneval]\nsamples = 5\n")
    settings = Settings.build(config=cfg, serve_http=False)
    assert settings.core_config().spec("humaneval").samples == 5
    assert settings.core_config().spec("other").samples == 1
    cfg.write_text("[benchmarks.humaneval]\nsamples = 0\n")
    with pytest.raises(ConfigError, match="benchmarks"):
        Settings.build(config=cfg, serve_http=False)
