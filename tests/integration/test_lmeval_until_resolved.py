"""lm-evaluation-harness evaluates until resolved: ``llm-monitor evaluate-until-resolved`` runs
the installed harness (its ``dummy`` model, on the local two-choice task of
tests/fixtures/lmeval_task, no download) round by round on the documents the plan of a real
``llm-monitor run`` hands out, posting each round's samples, until the plan says stop. Checked:
it stops before the task's end; each round ran exactly the documents asked (the next ones of
the monitor's order) under their own doc ids; the monitor holds every result; and an offline
replay of the posted rounds stops at the same round with the same verdicts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration.embedded_harness import REPO, Server, cli

pytestmark = pytest.mark.integration

TASK_DIR = REPO / "tests" / "fixtures" / "lmeval_task"
TASK = "tiny_choice"
DOCS = 1200
PRIOR = {"strong": 0.9, "mid": 0.75, "weak": 0.2}  # the dummy model is right half the time
PLANNED = "4"
HARNESS = (sys.executable, "-m", "lm_eval", "run", "--model", "dummy", "--tasks", TASK,
           "--include_path", str(TASK_DIR))


def _prior(seed: int = 11) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [{"benchmark": TASK, "item_id": str(i), "model": m, "score": int(rng.random() < p)}
            for m, p in PRIOR.items() for i in range(DOCS)]


def _harness_env(tmp_path: Path) -> dict[str, str]:
    """Offline, with the datasets cache in the test's directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               TOKENIZERS_PARALLELISM="false")
    return env


def _order() -> list[str]:
    from monitor.core.plan import item_keys

    ids = [str(i) for i in range(DOCS)]
    return [ids[i] for i in np.argsort(item_keys(TASK, ids), kind="stable")]


def test_the_harness_runs_round_by_round_until_the_plan_says_stop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.contracts import ItemResult
    from monitor.core.monitor import Monitor
    from monitor.runners.settings import Settings

    prior = _prior()
    srv = Server(tmp_path / "m.db", "--planned-models", PLANNED).start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        status, reply = srv.post(prior)
        assert status == 202 and reply["accepted"] == len(prior), reply
        work = tmp_path / "rounds"

        def loop(*harness: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "monitor.cli", "evaluate-until-resolved", "--url", url,
                 "--benchmark", TASK, "--model", "dummy", "--work-dir", str(work),
                 "--count", "100", "--json", "--", *harness],
                cwd=tmp_path, env=_harness_env(tmp_path), capture_output=True, text=True,
                timeout=900)

        # The first run breaks down in its second round (the harness fails); the same
        # command again posts the first round once more and goes on from round 3.
        failing = loop("sh", "-c", 'case "$*" in *round-002*) exit 7;; esac; exec "$@"', "sh",
                       *HARNESS)
        assert failing.returncode == 2, failing.stderr[-4000:]
        assert "round 2: the harness exited with status 7" in failing.stderr
        res = loop(*HARNESS)
        assert res.returncode == 0, res.stderr[-4000:]
        out = json.loads(res.stdout)
        status, live = srv.get_json(f"/v1/benchmarks/{TASK}/models/dummy/plan?count=0")
        assert status == 200
    finally:
        srv.stop()
    rounds = out["rounds"]
    evaluated = 100 + out["evaluated"]  # with the first run's round
    print(f"lm-eval: {evaluated} of {DOCS} documents evaluated in {1 + len(rounds)} rounds: "
          f"{out['reason']}")
    assert out["resumed"] == {"events": 100, "accepted": 0, "duplicate": 100, "conflict": 0,
                              "invalid": 0}
    assert [r["round"] for r in rounds] == list(range(3, 3 + len(rounds)))
    assert out["action"] == "stop" and 0 < evaluated < DOCS, out
    assert live["action"] == "stop" and live["items_done"] == out["items_done"] == evaluated
    assert all(r["asked"] == r["evaluated"] == r["accepted"] == 100 for r in rounds), rounds
    # Each round asked for the next 100 documents of the monitor's order, in ascending doc
    # ids, and the harness logged each document under its own id. Round 2 ran nothing, so
    # round 3 asked for the documents it had asked for.
    order = _order()
    posted: list[list[tuple[str, float]]] = []
    for k, n in enumerate([1, *(r["round"] for r in rounds)]):
        here = work / f"round-{n:03d}"
        asked = json.loads((here / "samples.json").read_text())[TASK]
        assert asked == sorted(int(i) for i in order[100 * k:100 * (k + 1)])
        (samples,) = here.joinpath("output").rglob(f"samples_{TASK}_*.jsonl")
        lines = [json.loads(x) for x in samples.read_text().splitlines()]
        assert [r["doc_id"] for r in lines] == asked
        assert all(r["doc"]["idx"] == r["doc_id"] for r in lines)
        posted.append([(str(r["doc_id"]), float(r["acc"])) for r in lines])
    assert not (work / "round-002" / "output").exists()

    # The offline replay: the monitor's settings, the prior results, then each round's
    # results in the order posted, asking the plan after each round.
    for name in [k for k in os.environ if k.startswith("LLM_MONITOR_")]:
        monkeypatch.delenv(name)
    mon = Monitor(Settings.build(planned_models=int(PLANNED), serve_http=False).core_config())
    mon.apply([ItemResult(**ev) for ev in prior])
    assert mon.plan(TASK, "dummy", count=0).action == "continue"  # no result of it yet
    stops = []
    for results in posted:
        mon.apply([ItemResult(benchmark=TASK, item_id=i, model="dummy", score=s)
                   for i, s in results])
        stops.append(mon.plan(TASK, "dummy", count=0).action == "stop")
    assert stops == [False] * (len(posted) - 1) + [True]
    offline = mon.plan(TASK, "dummy", count=0).as_dict()
    assert offline["reason"] == out["reason"] == live["reason"]
    verdicts = {p["model"]: p["verdict"] for p in offline["settled"]}
    assert verdicts == {p["model"]: p["verdict"] for p in out["settled"]}
    assert verdicts == {"strong": "resolved:strong", "mid": "resolved:mid",
                        "weak": "resolved:dummy"}


def test_plan_writes_the_harness_samples_mapping(tmp_path: Path) -> None:
    # The building block of a loop of one's own: `plan --lm-eval-samples FILE`.
    srv = Server(tmp_path / "m.db").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        assert srv.post(_prior())[0] == 202
        mapping = tmp_path / "next.json"
        res = cli("plan", "--url", url, "--benchmark", TASK, "--model", "fresh", "--count", "20",
                  "--lm-eval-samples", str(mapping), "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(mapping.read_text()) == {
            TASK: sorted(int(i) for i in _order()[:20])}
        assert json.loads(res.stdout)["next_items"] == _order()[:20]  # the plan's own order
        # Another task name for the same board, and nothing written on stop.
        res = cli("plan", "--url", url, "--benchmark", TASK, "--model", "fresh", "--count", "3",
                  "--lm-eval-samples", str(mapping), "--lm-eval-task", "other")
        assert res.returncode == 0 and list(json.loads(mapping.read_text())) == ["other"]
        stopped = tmp_path / "stopped.json"
        res = cli("plan", "--url", url, "--benchmark", TASK, "--model", "fresh",
                  "--budget", "1", "--lm-eval-samples", str(stopped))
        assert res.returncode == 0  # "fresh" has no result: the budget is not reached
        assert srv.post([{"benchmark": TASK, "item_id": "0", "model": "fresh",
                          "score": 1}])[0] == 202
        stopped.unlink()
        res = cli("plan", "--url", url, "--benchmark", TASK, "--model", "fresh",
                  "--budget", "1", "--lm-eval-samples", str(stopped))
        assert res.returncode == 3 and not stopped.exists()
        # Items that are not doc ids cannot be a harness's documents.
        assert srv.post([{"benchmark": "named", "item_id": f"q{i}", "model": "a",
                          "score": 1} for i in range(3)])[0] == 202
        res = cli("plan", "--url", url, "--benchmark", "named", "--model", "fresh",
                  "--lm-eval-samples", str(tmp_path / "named.json"))
        assert res.returncode == 2 and "item 'q" in res.stderr and "not a document index" in res.stderr
    finally:
        srv.stop()
