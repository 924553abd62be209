"""inspect_ai evaluates until resolved: a real inspect_ai eval (``mockllm`` answering each item
right or wrong as a table says, offline) with ``MonitorEarlyStopping`` against a real
``llm-monitor run`` holding three prior models. The eval stops early, and what it did is
checked against an offline replay of what it posted: the same results fed to a ``Monitor`` in
the same order, asking the plan at the same points, stop at the same sample with the same
verdicts; every sample is either evaluated and acknowledged by the monitor, or skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from tests.integration.embedded_harness import REPO, Server

pytestmark = pytest.mark.integration

ITEMS = 2000
TRUTH = {"strong": 0.85, "mid": 0.70, "weak": 0.50, "new": 0.61}
PRIOR = ("strong", "mid", "weak")
MODEL = "mockllm/new"  # the eval's model: the manager's default name on the board
PLANNED = "4"  # --planned-models of the monitor, and of the replay

#: Offline, inspect_ai's token counter (tiktoken, which downloads its encoding) is replaced.
_OFFLINE = r'''
import inspect_ai.model._model as mm
import inspect_ai.model._tokens as tokens
estimate = lambda text: max(1, len(text) // 4)
tokens.count_text_tokens = estimate
mm.count_text_tokens = estimate
'''

_EVALUATE = _OFFLINE + r'''
import json, sys
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate
from monitor.integrations.inspect_ai import MonitorEarlyStopping, in_plan_order

args = json.loads(open(sys.argv[1]).read())
right = args["right"]  # epochs × items, 1 = answers right
calls = [0] * len(right[0])

def answer(input, tools, tool_choice, config):
    i = int(input[-1].text.split()[1].rstrip(":"))
    epoch = calls[i]  # inspect runs an item's epochs in order
    calls[i] += 1
    return ModelOutput.from_content("mockllm/new", str(i + 1) if right[epoch][i] else "0")

dataset = [Sample(input=f"Item {i}: what is {i} + 1?", target=str(i + 1), id=f"q{i}")
           for i in range(len(right[0]))]
task = Task(name=args["benchmark"], dataset=in_plan_order(dataset, args["benchmark"]),
            solver=generate(), scorer=match(), epochs=len(right),
            early_stopping=MonitorEarlyStopping(args["url"], every=args["every"]))
log = inspect_eval(task, model=get_model("mockllm/new", custom_outputs=answer),
                   log_dir=args["log_dir"], display="none", max_samples=args["max_samples"])[0]
print(json.dumps({"log": log.location, "status": log.status}))
'''


def _scores(seed: int, *, items: int = ITEMS, epochs: int = 1,
            truth: dict[str, float] = TRUTH) -> dict[str, np.ndarray]:
    """0/1 scores (epochs × items) with the accuracies of ``truth``, correlated through a
    shared item difficulty."""
    rng = np.random.default_rng(seed)
    easy = rng.normal(size=items)
    return {m: (0.7 * easy + 0.714 * rng.normal(size=(epochs, items)) > norm.ppf(1 - p)
                ).astype(int) for m, p in truth.items()}


def _prior_events(benchmark: str, x: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    epochs, items = x["new"].shape
    return [{"benchmark": benchmark, "item_id": f"q{i}", "model": m, "score": int(x[m][e, i]),
             "sample": e, "k": epochs} for m in PRIOR for i in range(items) for e in range(epochs)]


def _post_prior(srv: Server, events: list[dict[str, Any]]) -> None:
    for lo in range(0, len(events), 5000):
        status, reply = srv.post(events[lo:lo + 5000])
        assert status == 202 and reply["accepted"] == len(events[lo:lo + 5000]), reply


def _evaluate(tmp_path: Path, *, url: str, benchmark: str, right: np.ndarray, every: int,
              max_samples: int) -> Any:
    """Run the inspect eval in a process of its own; its log, read with inspect_ai."""
    from inspect_ai.log import read_eval_log

    args = tmp_path / f"{benchmark}.json"
    args.write_text(json.dumps({"url": url, "benchmark": benchmark, "right": right.tolist(),
                                "every": every, "max_samples": max_samples,
                                "log_dir": str(tmp_path / "logs" / benchmark)}))
    res = subprocess.run([sys.executable, "-c", _EVALUATE, str(args)], capture_output=True,
                         text=True, timeout=600)
    if res.returncode != 0:
        pytest.fail(f"the inspect_ai eval failed:\n{res.stderr[-4000:]}")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["status"] == "success", res.stderr[-4000:]
    return read_eval_log(out["log"])


def _account(log: Any) -> tuple[list[tuple[str, int]], list[tuple[str, int]], dict[str, Any]]:
    """(evaluated (id, epoch), skipped (id, epoch), the manager's metadata) from the log."""
    stopping = log.results.early_stopping
    assert stopping is not None and stopping.manager == "llm-monitor"
    skipped = [(str(s.id), s.epoch) for s in stopping.early_stops]
    evaluated = [(str(s.id), s.epoch) for s in log.samples if s.scores]
    return evaluated, skipped, dict(stopping.metadata)


def test_a_sequential_eval_stops_where_the_offline_replay_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from monitor.contracts import ItemResult
    from monitor.core.monitor import Monitor
    from monitor.core.plan import item_keys
    from monitor.runners.settings import Settings

    x = _scores(7)
    prior = _prior_events("arith", x)
    srv = Server(tmp_path / "m.db", "--planned-models", PLANNED).start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        _post_prior(srv, prior)
        log = _evaluate(tmp_path, url=url, benchmark="arith", right=x["new"], every=100,
                        max_samples=1)
        status, live = srv.get_json(f"/v1/benchmarks/arith/models/{MODEL}/plan?count=0")
        assert status == 200
    finally:
        srv.stop()
    evaluated, skipped, meta = _account(log)
    print(f"sequential: {len(evaluated)} evaluated, {len(skipped)} skipped, stop after "
          f"{meta['stopped_after']} results: {meta['stop_reason']}")
    order = [f"q{i}" for i in np.argsort(item_keys("arith", [f"q{i}" for i in range(ITEMS)]),
                                         kind="stable")]
    done = len(evaluated)
    # One sample at a time: the samples run are the first of the monitor's order, and every
    # other sample was skipped. The stop came at a plan request (after every 100 results);
    # the samples inspect started while that request was under way ran too.
    assert sorted(i for i, _ in evaluated) == sorted(order[:done])  # the log sorts by id
    assert sorted(i for i, _ in skipped) == sorted(order[done:])
    assert meta["stopped"] and meta["skipped"] == len(skipped) and meta["completed"] == done
    stopped_after = meta["stopped_after"]
    assert 0 < stopped_after <= done < min(stopped_after + 100, ITEMS), (stopped_after, done)
    assert stopped_after % 100 == 0
    assert meta["posted"] == {"events": done, "accepted": done, "duplicate": 0, "conflict": 0,
                              "invalid": 0}
    assert live["action"] == "stop" and live["items_done"] == done
    # Every evaluated score is the one posted: the log's scores are the table's.
    scores = {str(s.id): s.scores["match"].value for s in log.samples if s.scores}
    assert all(scores[f"q{i}"] == ("C" if x["new"][0, i] else "I")
               for i in (int(k[1:]) for k in scores))

    # The offline replay: a Monitor with the monitor's settings, fed the prior results in the
    # same requests and the new model's in the manager's batches, asking the plan after each.
    for name in [k for k in os.environ if k.startswith("LLM_MONITOR_")]:
        monkeypatch.delenv(name)  # the monitor's settings are its arguments only, here too
    mon = Monitor(Settings.build(planned_models=int(PLANNED), serve_http=False).core_config())
    for lo in range(0, len(prior), 5000):
        mon.apply([ItemResult(**ev) for ev in prior[lo:lo + 5000]])
    stop_at = None
    for lo in range(0, ITEMS, 100):
        mon.apply([ItemResult(benchmark="arith", item_id=i, model=MODEL,
                              score=float(x["new"][0, int(i[1:])]), sample=0, k=1)
                   for i in order[lo:lo + 100]])
        plan = mon.plan("arith", MODEL, count=0)
        if plan.action == "stop":
            stop_at = lo + 100
            break
    assert stop_at == stopped_after, (stop_at, stopped_after)
    offline = plan.as_dict()
    assert live["reason"] == offline["reason"] == meta["stop_reason"]
    assert ({p["model"]: p["verdict"] for p in live["settled"]}
            == {p["model"]: p["verdict"] for p in offline["settled"]})
    # And no verdict against the truth.
    for p in offline["settled"]:
        better = MODEL if TRUTH["new"] > TRUTH[p["model"]] else p["model"]
        assert p["verdict"] in (f"resolved:{better}", "equivalent"), p


def test_a_concurrent_eval_loses_nothing(tmp_path: Path) -> None:
    # Many samples at once: results complete out of order and some finish after the stop;
    # each is posted and acknowledged, and each sample is either evaluated or skipped.
    x = _scores(8)
    srv = Server(tmp_path / "m.db", "--planned-models", PLANNED).start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        _post_prior(srv, _prior_events("arith2", x))
        log = _evaluate(tmp_path, url=url, benchmark="arith2", right=x["new"], every=50,
                        max_samples=40)
        _, live = srv.get_json(f"/v1/benchmarks/arith2/models/{MODEL}/plan?count=0")
        _, ranking = srv.get_json("/v1/benchmarks/arith2/ranking")
    finally:
        srv.stop()
    evaluated, skipped, meta = _account(log)
    print(f"concurrent: {len(evaluated)} evaluated, {len(skipped)} skipped, stop after "
          f"{meta['stopped_after']} results: {meta['stop_reason']}")
    assert len(evaluated) + len(skipped) == ITEMS
    assert not set(evaluated) & set(skipped)
    assert len(skipped) > 0 and meta["stopped"]
    # Some samples were running when the stop came: they finished and were posted too.
    assert meta["stopped_after"] <= len(evaluated) == meta["completed"]
    assert meta["posted"]["accepted"] == len(evaluated) and meta["posted"]["conflict"] == 0
    assert live["items_done"] == len(evaluated) and live["action"] == "stop"
    n_new = {m["model"]: m["n"] for m in ranking["models"]}[MODEL]
    assert n_new == len(evaluated)


def test_epochs_are_repeated_samples_and_the_stop_comes_in_the_last(tmp_path: Path) -> None:
    # Two epochs: each is a sample of the item (sample = epoch − 1, k = 2). inspect runs every
    # first epoch before any second, and an item counts once both are in, so the stop can
    # only skip second epochs.
    items = 600
    truth = {"strong": 0.92, "mid": 0.78, "weak": 0.25, "new": 0.55}
    x = _scores(9, items=items, epochs=2, truth=truth)
    srv = Server(tmp_path / "m.db", "--planned-models", PLANNED).start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        _post_prior(srv, _prior_events("arith3", x))
        log = _evaluate(tmp_path, url=url, benchmark="arith3", right=x["new"], every=50,
                        max_samples=1)
        _, live = srv.get_json(f"/v1/benchmarks/arith3/models/{MODEL}/plan?count=0")
    finally:
        srv.stop()
    evaluated, skipped, meta = _account(log)
    print(f"epochs: {len(evaluated)} samples evaluated, {len(skipped)} skipped: "
          f"{meta['stop_reason']}")
    first = [i for i, e in evaluated if e == 1]
    second = [i for i, e in evaluated if e == 2]
    assert len(first) == items and {e for _, e in skipped} == {2}, meta
    assert len(second) + len(skipped) == items and 0 < len(second) < items, meta
    assert meta["epochs"] == 2 and meta["stopped"]
    # Every sample run was taken as a sample of its item: none is a conflict (a wrong k or
    # sample index would be), and the items counted are those with both epochs in.
    assert meta["posted"]["accepted"] == len(evaluated) and meta["posted"]["conflict"] == 0
    assert live["items_done"] == len(second) and live["action"] == "stop"
    for p in live["settled"]:
        better = MODEL if truth["new"] > truth[p["model"]] else p["model"]
        assert p["verdict"] in (f"resolved:{better}", "equivalent"), p


def test_results_a_monitor_did_not_take_are_kept_then_sent_or_the_task_fails(
        tmp_path: Path) -> None:
    # The protocol driven directly, as inspect_ai drives it: the monitor goes away mid-run
    # and comes back at another address; the scores it missed are sent at the end. With no
    # monitor at the end, the task fails naming what was not acknowledged.
    from types import SimpleNamespace

    import anyio
    from inspect_ai.scorer import SampleScore, Score

    from monitor.client import ClientError, MonitorClient
    from monitor.integrations.inspect_ai import MonitorEarlyStopping

    def score(i: int) -> dict[str, SampleScore]:
        return {"match": SampleScore(score=Score(value="C" if i % 2 else "I"),
                                     sample_id=f"q{i}", sample_metadata={"subject": f"s{i % 3}"})}

    spec: Any = SimpleNamespace(task="kept", model="m")
    srv = Server(tmp_path / "m.db").start()
    stopping = MonitorEarlyStopping(
        "http://unused", cluster_field="subject", every=3,
        client=MonitorClient(f"http://127.0.0.1:{srv.port}", retries=1, backoff=0.01))

    async def first_half() -> None:
        assert await stopping.start_task(spec, [], 1) == "llm-monitor"
        for i in range(3):
            await stopping.complete_sample(f"q{i}", 1, score(i))

    async def second_half() -> None:
        for i in range(3, 6):
            assert await stopping.schedule_sample(f"q{i}", 1) is None
            await stopping.complete_sample(f"q{i}", 1, score(i))

    try:
        anyio.run(first_half)
        assert srv.stop() == 0
        anyio.run(second_half)  # the post fails: kept, the run goes on
        again = Server(tmp_path / "m.db").start()  # the same store, another port
        try:
            stopping.client = MonitorClient(f"http://127.0.0.1:{again.port}")
            meta = anyio.run(stopping.complete_task)
            _, ranking = again.get_json("/v1/benchmarks/kept/ranking")
            # A second model, so that a pair shows the clusters the manager sent.
            assert again.post([{"benchmark": "kept", "item_id": f"q{i}", "model": "other",
                                "score": 1} for i in range(6)])[0] == 202
            _, pairs = again.get_json("/v1/benchmarks/kept/pairs")
        finally:
            again.stop()
    finally:
        srv.stop()
    assert meta["posted"]["accepted"] == 6 and meta["completed"] == 6, meta
    assert {m["model"]: m["n"] for m in ranking["models"]} == {"m": 6}
    assert {m["model"]: m["mean"] for m in ranking["models"]} == {"m": 0.5}
    assert [(p["n"], p["fixed_n"]["n_clusters"]) for p in pairs["pairs"]] == [(6, 3)]  # subjects s0–s2

    # Nobody listening at the end: the task fails, and says what the monitor lacks.
    stopping.client = MonitorClient(f"http://127.0.0.1:{srv.port}", retries=0)

    async def lost() -> None:
        await stopping.start_task(spec, [], 1)
        await stopping.complete_sample("q9", 1, score(9))
        await stopping.complete_task()

    with pytest.raises(ClientError, match=r"did not acknowledge 1 of this task's results"):
        anyio.run(lost)
    with pytest.raises(ClientError):  # the manager is free for the next run
        anyio.run(lost)


def test_the_documented_example_runs(tmp_path: Path) -> None:
    # The inspect_ai example of docs/until-resolved.md, as written, against a real monitor.
    import re

    text = (REPO / "docs" / "until-resolved.md").read_text(encoding="utf-8")
    section = text.split("\n## inspect_ai\n", 1)[1].split("\n## ", 1)[0]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert 'URL = "http://127.0.0.1:8000"' in example
    srv = Server(tmp_path / "m.db").start()
    try:
        script = _OFFLINE + example.replace("http://127.0.0.1:8000",
                                            f"http://127.0.0.1:{srv.port}")
        res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-4000:]
        _, live = srv.get_json("/v1/benchmarks/arith/models/mockllm%2Fmodel/plan?count=0")
    finally:
        srv.stop()
    print(f"example: {res.stdout.strip()}")
    m = re.fullmatch(r"(.+): (\d+) samples run, (\d+) skipped\n", res.stdout)
    assert m is not None, res.stdout
    reason, run, skipped = m.group(1), int(m.group(2)), int(m.group(3))
    assert run + skipped == 2000 and skipped > 0 and reason == live["reason"]
    assert live["action"] == "stop" and live["items_done"] == run
