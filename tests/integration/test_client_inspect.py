"""inspect_ai logs written by inspect_ai itself, read into the same figures as its scorers.

A tiny arithmetic task is evaluated by inspect_ai on two mock models (``mockllm``, offline:
inspect's tiktoken token counter, which downloads its encoding at run time, is replaced by a
length estimate) with two epochs each. The logs it writes (``.eval``, and ``.json`` through
inspect_ai's own ``write_eval_log``) are read back with llm-monitor: each model's mean score
is inspect_ai's ``accuracy`` metric, in ``report`` and in a live monitor fed with ``post``.
A sample metadata field (``subject``) groups the items for ``--cluster-col``/``--strata-col``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.embedded_harness import Server, cli

pytestmark = pytest.mark.integration

_EVALUATE = r'''
import json, sys
import inspect_ai.model._model as mm
import inspect_ai.model._tokens as tokens
estimate = lambda text: max(1, len(text) // 4)  # offline: no tiktoken download
tokens.count_text_tokens = estimate
mm.count_text_tokens = estimate
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import write_eval_log
from inspect_ai.model import ModelOutput, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

out = sys.argv[1]
n = 12
dataset = [Sample(input=f"What is {i} + 1?", target=str(i + 1), id=f"q{i}",
                  metadata={"subject": f"s{i % 4}"}) for i in range(n)]
metrics = {}
for name, wrong in (("alpha", {1, 4, 7}), ("beta", {0, 2, 3, 5, 6, 9, 10})):
    # Two epochs; some items wrong in one epoch only, so item means of 0.5 occur.
    outputs = [ModelOutput.from_content(f"mockllm/{name}",
                                        "0" if i in wrong and (e == 0 or i % 2 == 0) else str(i + 1))
               for e in range(2) for i in range(n)]
    log = inspect_eval(Task(name="tiny_arith", dataset=dataset, solver=generate(), scorer=match()),
                       model=get_model(f"mockllm/{name}", custom_outputs=outputs),
                       log_dir=f"{out}/eval", display="none", epochs=2)[0]
    write_eval_log(log, f"{out}/json/{name}.json", format="json")
    metrics[log.eval.model] = {m.name: m.value for m in log.results.scores[0].metrics.values()}
print(json.dumps(metrics))
'''


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, float]]]:
    """(directory with eval/ and json/ logs, inspect_ai's own metrics per model)."""
    out = tmp_path_factory.mktemp("inspect")
    res = subprocess.run([sys.executable, "-c", _EVALUATE, str(out)], capture_output=True,
                         text=True, timeout=300)
    if res.returncode != 0:
        pytest.fail(f"inspect_ai could not evaluate the tiny task:\n{res.stderr[-3000:]}")
    return out, json.loads(res.stdout.strip().splitlines()[-1])


def _same_as_inspect(live: dict[str, Any], metrics: dict[str, dict[str, float]]) -> None:
    """The live ranking has inspect_ai's accuracy as each model's mean, over all 12 items."""
    assert {m["model"]: m["mean"] for m in live["models"]} == pytest.approx(
        {k: v["accuracy"] for k, v in metrics.items()}, abs=1e-12)
    assert {m["model"]: m["n"] for m in live["models"]} == dict.fromkeys(metrics, 12)


def test_reader_gives_inspects_own_accuracy(
        inspect_logs: tuple[Path, dict[str, dict[str, float]]]) -> None:
    from monitor.io.inspect import is_inspect_log, read_inspect_log

    out, metrics = inspect_logs
    assert set(metrics) == {"mockllm/alpha", "mockllm/beta"}
    for fmt in ("eval", "json"):
        logs = sorted((out / fmt).iterdir())
        assert len(logs) == 2 and all(is_inspect_log(p) for p in logs)
        for path in logs:
            log = read_inspect_log(path)
            assert (log.task, log.scorer, log.status) == ("tiny_arith", "match", "success")
            assert len(log) == 24 and sorted(set(log.epochs.tolist())) == [1, 2]
            ids, means = log.item_means()
            assert len(ids) == 12
            assert float(means.mean()) == pytest.approx(metrics[log.model]["accuracy"], abs=1e-12)
    assert 0.0 < metrics["mockllm/beta"]["accuracy"] < metrics["mockllm/alpha"]["accuracy"] < 1.0


def test_report_and_a_live_monitor_show_the_same_means(
        inspect_logs: tuple[Path, dict[str, dict[str, float]]], tmp_path: Path) -> None:
    out, metrics = inspect_logs
    res = cli("report", str(out / "eval"), "--json")
    assert res.returncode == 0, res.stderr
    offline = json.loads(res.stdout)
    assert offline["benchmark"] == "tiny_arith" and offline["n_items"] == 12
    assert {m["model"]: m["mean"] for m in offline["ranking"]} == pytest.approx(
        {k: v["accuracy"] for k, v in metrics.items()}, abs=1e-12)
    # No --samples: each result states the log's two epochs as its benchmark's K (k = 2), and
    # a one-sample benchmark shares the monitor.
    srv = Server(tmp_path / "m.db").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        res = cli("post", *map(str, sorted((out / "json").iterdir())), "--url", url, "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["accepted"] == 48  # 2 models × 12 items × 2 epochs
        status, live = srv.get_json("/v1/benchmarks/tiny_arith/ranking")
        one = [{"benchmark": "one_sample", "item_id": str(i), "model": m, "score": 1}
               for i in range(3) for m in "xy"]
        assert srv.post(one)[1]["accepted"] == 6
    finally:
        srv.stop()
    assert status == 200
    _same_as_inspect(live, metrics)


def test_a_scorer_that_is_not_there_is_named(
        inspect_logs: tuple[Path, dict[str, dict[str, float]]]) -> None:
    from monitor.errors import InputError
    from monitor.io.inspect import read_inspect_log

    path = sorted((inspect_logs[0] / "eval").iterdir())[0]
    with pytest.raises(InputError, match=r"no score of scorer 'nonesuch' \(scorers: \['match'\]"):
        read_inspect_log(path, scorer="nonesuch")


def test_watch_posts_new_inspect_samples_once(
        inspect_logs: tuple[Path, dict[str, dict[str, float]]], tmp_path: Path) -> None:
    import shutil

    out, metrics = inspect_logs
    watched = tmp_path / "logs"
    watched.mkdir()
    first, second = sorted((out / "eval").iterdir())
    shutil.copy(first, watched / first.name)
    srv = Server(tmp_path / "w.db").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        res = cli("watch", str(watched), "--url", url, "--once")
        assert res.returncode == 0, res.stderr
        assert "24 results: accepted 24, duplicate 0" in res.stderr
        shutil.copy(second, watched / second.name)  # a second log appears; the first is done
        res = cli("watch", str(watched), "--url", url, "--once")
        assert res.returncode == 0, res.stderr
        assert f"{second.name}: 24 results: accepted 24" in res.stderr
        assert first.name not in res.stderr
        status, live = srv.get_json("/v1/benchmarks/tiny_arith/ranking")
    finally:
        srv.stop()
    assert status == 200
    _same_as_inspect(live, metrics)


def test_a_sample_metadata_field_groups_the_items(
        inspect_logs: tuple[Path, dict[str, dict[str, float]]], tmp_path: Path) -> None:
    """``report LOGDIR --cluster-col subject`` reads the samples' metadata field ``subject`` (the
    option was silently ignored: no groups, no design effect); the figures are those of the
    long table of the same scores with a subject column, and ``post --cluster-col`` gives the
    live monitor the same clusters."""
    from monitor.io.inspect import read_inspect_log

    out, _ = inspect_logs
    logs = sorted((out / "eval").iterdir())
    res = cli("report", str(out / "eval"), "--cluster-col", "subject", "--json")
    assert res.returncode == 0, res.stderr
    grouped = json.loads(res.stdout)
    assert (grouped["groups"]["kind"], grouped["groups"]["column"],
            grouped["groups"]["n_groups"]) == ("cluster", "subject", 4)
    rows = ["item_id,model,sample,score,subject"]
    for path in logs:
        log = read_inspect_log(path)
        rows += [f"{i},{log.model},{e - 1},{s:g},s{int(i[1:]) % 4}"
                 for i, e, s in zip(log.item_ids, log.epochs, log.scores, strict=True)]
    table = tmp_path / "tiny_arith_long.csv"
    table.write_text("\n".join(rows) + "\n")
    for option, kind in (("--cluster-col", "cluster"), ("--strata-col", "strata")):
        res = cli("report", str(out / "eval"), option, "subject", "--json")
        assert res.returncode == 0, res.stderr
        got = json.loads(res.stdout)
        ref = json.loads(cli("report", str(table), option, "subject", "--json").stdout)
        assert got["groups"]["kind"] == kind
        for a, b in zip(got["pairs"], ref["pairs"], strict=True):
            a, b = a["fixed_n"], b["fixed_n"]
            assert a["design_effect"] == pytest.approx(b["design_effect"], rel=1e-12)
            assert a[f"q_{kind}"] == pytest.approx(b[f"q_{kind}"], rel=1e-12)
    res = cli("report", str(out / "eval"), "--cluster-col", "nonesuch")
    assert res.returncode == 2
    assert "has no metadata field 'nonesuch' (its fields: subject" in res.stderr
    assert str(logs[0]) in res.stderr
    srv = Server(tmp_path / "m.db").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        res = cli("post", *map(str, logs), "--url", url, "--cluster-col", "subject", "--json")
        assert res.returncode == 0, res.stderr
        _, live = srv.get_json("/v1/benchmarks/tiny_arith/ranking")
    finally:
        srv.stop()
    (pair,) = live["pairs"]
    # the four subjects reached the live board as the items' clusters (the design effect's)
    assert pair["design"] == "items" and pair["fixed_n"]["n_clusters"] == 4
    assert pair["fixed_n"]["design_effect"] == pytest.approx(
        grouped["pairs"][0]["fixed_n"]["design_effect"], rel=1e-9)
