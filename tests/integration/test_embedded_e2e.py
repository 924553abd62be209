"""End to end: a real ``llm-monitor run`` process, real HTTP on loopback."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.embedded_harness import REPO, Server, cli, metric_value

pytestmark = pytest.mark.integration

CONTRACT_METRICS = (
    "llm_monitor_events_total", "llm_monitor_pair_items", "llm_monitor_pair_delta",
    "llm_monitor_pair_e_value", "llm_monitor_pair_resolution_ratio", "llm_monitor_pair_resolved",
    "llm_monitor_ranking_resolved", "llm_monitor_ranking_unresolved_pairs",
    "llm_monitor_state_changes_total", "llm_monitor_processing_lag_seconds",
)
FIXTURES = REPO / "tests" / "fixtures" / "lmeval"


def _events(n_items: int, models: dict[str, float], *, bench: str = "toy") -> list[dict]:
    # Deterministic 0/1 scores: model m is right on item i when (i * 7919) % 1000 < 1000 * p.
    return [
        {"benchmark": bench, "item_id": f"q{i}", "model": m,
         "score": int((i * 7919 + 13 * j) % 1000 < 1000 * p), "cluster": f"c{i % 4}"}
        for i in range(n_items) for j, (m, p) in enumerate(models.items())
    ]


@pytest.fixture()
def server(tmp_path: Path):
    srv = Server(tmp_path / "e2e.db", "--max-body-bytes", "200000", "--eval-interval", "0").start()
    yield srv
    srv.kill()


def test_ingest_duplicate_conflict_ranking_changes_metrics(server: Server, tmp_path: Path) -> None:
    # One object, then a JSON array, then NDJSON: all three body forms.
    status, body = server.post({"benchmark": "toy", "item_id": "q0", "model": "strong", "score": 1})
    assert status == 202 and body["accepted"] == 1, body
    events = _events(300, {"strong": 0.9, "weak": 0.3, "mid": 0.6})
    status, body = server.post(events[1:200])
    assert status == 202, body
    assert (body["accepted"], body["duplicate"], body["invalid"]) == (199, 0, 0), body
    ndjson = "\n".join(json.dumps(e) for e in events[200:]) + "\n"
    status, body = server.post(ndjson)
    assert status == 202 and body["accepted"] == len(events) - 200, body

    # The same results again: duplicates; one changed score: a conflict with its index.
    again = events[10:20]
    changed = dict(events[5], score=1 - events[5]["score"])
    status, body = server.post([*again, changed])
    assert (body["accepted"], body["duplicate"], body["conflict"]) == (0, 10, 1), body
    assert body["rejected"] == [{"index": 10, "reason": "conflict", "detail": body["rejected"][0]["detail"]}]

    # Invalid events never disturb valid ones in the same request.
    mixed = [
        {"benchmark": "toy", "item_id": "new1", "model": "strong", "score": 1},
        {"benchmark": "toy", "item_id": "new1", "model": "weak", "score": 1.5},
        {"benchmark": "toy", "item_id": "new1", "model": "mid"},
        {"benchmark": "toy", "item_id": "new2", "model": "weak", "score": 0},
    ]
    status, body = server.post(mixed)
    assert status == 202 and (body["accepted"], body["invalid"]) == (2, 2), body
    assert [(r["index"], r["reason"]) for r in body["rejected"]] == [(1, "schema"), (2, "schema")]
    assert "score" in body["rejected"][0]["detail"]
    # A body with nothing valid is a 400 with the reasons.
    status, body = server.post(b"{not json")
    assert status == 400 and body["rejected"][0]["reason"] == "invalid-json", body

    status, data = server.get_json("/v1/benchmarks")
    assert status == 200 and data["benchmarks"] == ["toy"]
    status, ranking = server.get_json("/v1/benchmarks/toy/ranking")
    assert status == 200
    assert [m["model"] for m in ranking["models"]] == ["strong", "mid", "weak"]
    assert len(ranking["pairs"]) == 2
    for pair in ranking["pairs"]:
        assert {"verdict", "decided", "n", "delta", "cs_low", "cs_high", "e_value",
                "q_anytime", "fixed_n"} <= set(pair)
        assert {"q", "q_cluster", "mde", "n_star"} <= set(pair["fixed_n"])
    top = ranking["pairs"][0]
    assert top["model_a"] == "strong" and top["verdict"] == "resolved:strong", top
    assert server.get_json("/v1/benchmarks/nope/ranking")[0] == 404

    status, ch = server.get_json("/v1/changes?since=0")
    ids = [c["change_id"] for c in ch["changes"]]
    assert ids and ids == sorted(ids) and len(set(ids)) == len(ids)
    assert {c["kind"] for c in ch["changes"]} == {"resolution", "ranking"}
    assert any(c.get("verdict") == "resolved:strong" for c in ch["changes"])
    assert server.get_json(f"/v1/changes?since={ids[-1]}")[1]["changes"] == []
    assert server.get_json(f"/v1/changes?since={ids[0]}")[1]["changes"][0]["change_id"] == ids[1]

    text = server.metrics()
    for name in CONTRACT_METRICS:
        assert name in text, name
    assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == len(events) + 2
    assert metric_value(text, "llm_monitor_events_total", outcome="duplicate") == 10
    assert metric_value(text, "llm_monitor_events_total", outcome="conflict") == 1
    assert metric_value(text, "llm_monitor_events_total", outcome="invalid") == 3
    assert metric_value(text, "llm_monitor_pair_resolved", benchmark="toy",
                        model_a="strong", model_b="mid") == 1
    status, dl = server.get_json("/v1/dead-letters")
    assert sorted(d["reason"] for d in dl["dead_letters"]) == [
        "conflict", "invalid-json", "schema", "schema"]

    # Restart on the same database: the state is rebuilt, not double counted.
    assert server.stop() == 0
    server.start()
    status, again_ranking = server.get_json("/v1/benchmarks/toy/ranking")
    def board(models: list[dict[str, object]]) -> list[dict[str, object]]:
        # the models without their standing (its "settled at" is checked by
        # test_until_resolved_face.py; here: the state rebuilt)
        return [{k: v for k, v in m.items() if k != "standing"} for m in models]

    assert board(again_ranking["models"]) == board(ranking["models"])
    assert [p["n"] for p in again_ranking["pairs"]] == [p["n"] for p in ranking["pairs"]]
    text = server.metrics()
    assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == len(events) + 2
    status, body = server.post(events[:50])
    assert (body["accepted"], body["duplicate"]) == (0, 50)
    assert server.get_json(f"/v1/changes?since={ids[-1]}")[1]["changes"] == []


def test_body_over_limit_is_413_and_server_survives(server: Server) -> None:
    big = json.dumps([{"benchmark": "toy", "item_id": f"{i:06d}", "model": "m", "score": 0}
                      for i in range(5000)]).encode()
    assert len(big) > 200_000
    status, body = server.request("POST", "/v1/results", big)
    assert status == 413, body
    assert json.loads(body)["error"] == "too-large"
    # Chunked, so no Content-Length to judge by: cut off once the limit is passed.
    chunks = (big[i:i + 10_000] for i in range(0, 220_000, 10_000))
    status, body = server.request("POST", "/v1/results", chunks, {"Transfer-Encoding": "chunked"})
    assert status == 413, body
    status, reply = server.post({"benchmark": "toy", "item_id": "1", "model": "m", "score": 0})
    assert status == 202 and reply["accepted"] == 1
    assert metric_value(server.metrics(), "llm_monitor_events_total", outcome="invalid") == 2


def test_token_required_when_configured(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-value\n")
    srv = Server(tmp_path / "auth.db", "--token-file", str(token_file)).start()
    try:
        ev = {"benchmark": "b", "item_id": "1", "model": "m", "score": 1}
        body = json.dumps(ev).encode()
        assert srv.request("POST", "/v1/results", body, {"Authorization": ""})[0] == 401
        assert srv.request("POST", "/v1/results", body,
                           {"Authorization": "Bearer wrong"})[0] == 401
        assert srv.request("GET", "/metrics", headers={"Authorization": "Basic eA=="})[0] == 401
        assert srv.request("GET", "/healthz", headers={"Authorization": ""})[0] == 200
        srv.token = "s3cret-token-value"
        status, out = srv.post(ev)
        assert status == 202 and out["accepted"] == 1
        assert srv.request("GET", "/metrics")[0] == 200
    finally:
        srv.kill()


def test_refuses_non_loopback_without_token(tmp_path: Path) -> None:
    res = cli("run", "--db", str(tmp_path / "x.db"), "--host", "0.0.0.0", "--port", "0",
              "--no-view", timeout=30)
    assert res.returncode == 2, res
    assert "refusing to listen on '0.0.0.0' without a token" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "x.db").exists()


def test_replay_lmeval_samples_and_table(tmp_path: Path) -> None:
    table = tmp_path / "tiny_long.csv"
    table.write_text("item_id,model,score\n" + "".join(
        f"{i},{m},{int((i * 37 + k) % 10 < t)}\n"
        for i in range(40) for k, (m, t) in enumerate((("alpha", 8), ("beta", 3)))))
    samples = sorted(FIXTURES.glob("*/samples_*.jsonl"))
    assert len(samples) == 3
    args = [arg for p in [*samples, table] for arg in ("--replay", str(p))]
    srv = Server(tmp_path / "replay.db", *args, "--shuffle", "--seed", "7").start()
    try:
        # The replay runs in the background; wait for all results to be in.
        expected = 6 + 6 + 3 + 80
        for _ in range(200):
            text = srv.metrics()
            if metric_value(text, "llm_monitor_events_total", outcome="accepted") >= expected:
                break
            time.sleep(0.05)
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == expected
        data = srv.get_json("/v1/benchmarks")[1]
        assert sorted(data["benchmarks"]) == ["arc_easy", "gsm8k", "tiny"]
        arc = srv.get_json("/v1/benchmarks/arc_easy/ranking")[1]
        # Fixture: pythia-410m right on 5 of 6 documents, pythia-160m on 3 of 6.
        assert [(m["model"], m["n"], round(m["mean"], 4)) for m in arc["models"]] == [
            ("EleutherAI/pythia-410m", 6, 0.8333), ("EleutherAI/pythia-160m", 6, 0.5)]
        gsm = srv.get_json("/v1/benchmarks/gsm8k/ranking")[1]
        # First filter in the file (strict-match): right on document 1 only.
        assert [{k: v for k, v in m.items() if k != "standing"} for m in gsm["models"]] == [
            {"model": "EleutherAI/pythia-160m", "mean": 1 / 3, "n": 3, "rank": 1,
             "rank_low": 1, "rank_high": 1, "tier": 1}]
    finally:
        srv.kill()
