"""The audit commands through the CLI: real tables, the four verdicts, and bad input → exit 2."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from monitor.audit.synthetic import planted_corpus
from monitor.cli import main

GSM = "zeroeval_gsm8k_item_correctness_wide.csv"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    rc, out, err = run([*args, "--json"], capsys)
    assert rc == 0, err
    return json.loads(out)


def test_compare_on_real_gsm8k(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fig = run_json(["compare", str(shared_data / GSM), "--a", "Mistral-Large-2", "--b",
                    "Qwen2-72B-Instruct", "--exclude", "gold", "--B", "2000", "--seed", "3"],
                   capsys)
    assert fig["n"] == 1319 and fig["binary"] is True
    assert fig["wins"] - fig["losses"] == round(fig["mean_diff"] * 1319)
    ref = stats.binomtest(fig["wins"], fig["wins"] + fig["losses"]).pvalue
    assert fig["tests"]["mcnemar_exact"]["pvalue"] == pytest.approx(ref)
    assert fig["tests"]["wilcoxon"]["zeros"] == "dropped before ranking"
    lo, hi = fig["bootstrap"]["percentile"]["low"], fig["bootstrap"]["percentile"]["high"]
    assert lo < fig["mean_diff"] < hi
    assert fig["resolution"]["q"] > 0 and "say nothing about" in fig["meaning"]


def test_human_output_has_the_meaning_sentence(shared_data: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(["compare", str(shared_data / GSM), "--a", "Athene-70B", "--b",
                      "Meta-Llama-3.1-70B-Instruct", "--exclude", "gold", "--B", "500"], capsys)
    assert rc == 0 and "McNemar exact" in out and "many ties" in out


def _json_file(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _compare(sig: bool) -> dict[str, Any]:
    return {"a": "A", "b": "B", "n": 1000, "mean_diff": 0.05 if sig else 0.01,
            "primary_test": "mcnemar_exact", "primary_pvalue": 0.001 if sig else 0.4,
            "significant": sig, "resolution": {"q": 1.5 if sig else 0.1, "alpha": 0.05}}


def _leak(share: float) -> dict[str, Any]:
    return {"leak_share": share, "counts": {"leak": int(share * 1000), "review": 3},
            "n_items": 1000, "n": 13}


def _stab(rate: float) -> dict[str, Any]:
    return {"model": "A", "flip_rate": rate, "flip_ci": [rate / 2, rate * 1.5],
            "flip_base": 800}


@pytest.mark.parametrize("sig, share, rate, scenario", [
    (True, 0.0, 0.02, "high-credibility"),
    (False, 0.0, 0.02, "not-significant"),
    (False, 0.3, 0.4, "not-significant"),
    (True, 0.2, 0.02, "likely-overfit"),
    (True, 0.2, 0.3, "likely-overfit"),
    (True, 0.01, 0.25, "partial-gain"),
])
def test_verdict_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str], sig: bool,
                           share: float, rate: float, scenario: str) -> None:
    v = run_json(["verdict", "--compare-json", str(_json_file(tmp_path, "c.json", _compare(sig))),
                  "--leakage-json", str(_json_file(tmp_path, "l.json", _leak(share))),
                  "--stability-json", str(_json_file(tmp_path, "s.json", _stab(rate)))], capsys)
    assert v["scenario"] == scenario
    assert len(v["evidence"]) >= 3


def test_verdict_running_all_three(shared_data: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Eval items named like the GSM8K item ids; two of them planted verbatim in the corpus.
    pc = planted_corpus(n_items=60, n_docs=400, n_planted=2, rng=np.random.default_rng(0))
    ids = [f"gsm8k-main-test-#{i}" for i in range(60)]
    ev = tmp_path / "eval.jsonl"
    ev.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                          for i, (_, t) in zip(ids, pc.items, strict=True)))
    co = tmp_path / "corpus.jsonl"
    co.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in pc.corpus))
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"{i}+1?",
                                         "options": [str(i + 1), str(i), "x"], "answer": 0})
                             + "\n" for i in range(40)))
    v = run_json(["verdict", "--table", str(shared_data / GSM), "--a", "Mistral-Large-2",
                  "--b", "Qwen2-72B-Instruct", "--exclude", "gold", "--B", "500",
                  "--eval", str(ev), "--corpus", str(co), "--n", "5",
                  "--items", str(items), "--model", "Mistral-Large-2", "--adapter", "local"],
                 capsys)
    assert v["scenario"] == "high-credibility" and v["missing"] == []
    assert any("items without leak status" in e for e in v["evidence"])
    # The leak share is over the compared items: the two planted ones of 1,319.
    assert any("2 of the 1319 compared items are leak suspects (0.2%" in e
               for e in v["evidence"]), v["evidence"]


def test_leakage_out_csv_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pc = planted_corpus(n_items=30, n_docs=300, n_planted=4, rng=np.random.default_rng(2))
    ev = tmp_path / "eval.csv"
    with ev.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "prompt"])
        w.writerows(pc.items)
    docs = tmp_path / "docs"
    docs.mkdir()
    for d, t in pc.corpus:
        (docs / f"{d}.txt").write_text(t)
    out = tmp_path / "report.csv"
    rep = run_json(["leakage", str(ev), str(docs), "--n", "5", "--text-col", "prompt",
                    "--out", str(out)], capsys)
    assert rep["counts"]["leak"] == 4
    assert set(rep["leak_suspects"]) == set(pc.planted)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 30
    assert {r["best_doc"] for r in rows if r["status"] == "leak"} == \
        {f"{d}.txt" for d in pc.planted.values()}


def _bad_files(tmp: Path) -> dict[str, Path]:
    empty = tmp / "empty.csv"
    empty.write_text("")
    garbage = tmp / "garbage.csv"
    garbage.write_bytes(bytes(range(256)) * 8)
    garbage_jsonl = tmp / "garbage.jsonl"
    garbage_jsonl.write_bytes(b"\xff\xfe\x00\x01" * 100)
    wrong = tmp / "wrong.csv"
    wrong.write_text("foo,bar\n1,2\n")
    badjson = tmp / "bad.jsonl"
    badjson.write_text('{"id": 1, "text": "ok"}\n{"id": 2, "text": \n')
    table = tmp / "table.csv"
    table.write_text("item_id,m1,m2\na,1,0\nb,0,1\nc,1,1\n")
    good = tmp / "good.jsonl"
    good.write_text('{"id": 1, "text": "some text here"}\n')
    return {"empty": empty, "garbage": garbage, "garbage_jsonl": garbage_jsonl, "wrong": wrong,
            "badjson": badjson, "table": table, "good": good}


@pytest.mark.parametrize("case, expect", [
    (["compare", "{empty}", "--a", "m1", "--b", "m2"], "empty"),
    (["compare", "{garbage}", "--a", "m1", "--b", "m2"], "garbage"),
    (["compare", "{table}", "--a", "m1", "--b", "m9"], "model 'm9' is not a column"),
    (["compare", "{table}", "--a", "m1", "--b", "m1"], "two different models"),
    (["compare", "{table}", "--a", "m1", "--b", "m2", "--B", "5"], "--B"),
    (["leakage", "{empty}", "{good}"], "empty"),
    (["leakage", "{garbage}", "{good}"], "binary"),
    (["leakage", "{garbage_jsonl}", "{good}"], "binary"),
    (["leakage", "{wrong}", "{good}"], "no text column"),
    (["leakage", "{good}", "{badjson}"], "line 2"),
    (["leakage", "{good}", "{good}", "--n", "7"], "--n"),
    (["leakage", "{good}", "{good}", "--threshold-review", "0.9"], "threshold_review"),
    (["stability", "{good}", "--model", "m", "--adapter", "local"], "field 'question'"),
    (["stability", "{empty}", "--model", "m", "--adapter", "local"], "empty"),
    (["stability", "{badjson}", "--model", "m", "--adapter", "local"], "field 'question'"),
    (["verdict"], "give at least one check"),
    (["verdict", "--eval", "{good}"], "--eval needs --corpus too"),
    (["verdict", "--table", "{table}", "--a", "m1", "--b", "m2", "--items", "{good}",
      "--model", "m2"], "stability --model 'm2' is not model A 'm1'"),
    (["verdict", "--compare-json", "{garbage}", "--leakage-json", "{garbage}",
      "--stability-json", "{garbage}"], "not the JSON output"),
    (["verdict", "--compare-json", "{good}", "--leakage-json", "{good}",
      "--stability-json", "{good}"], "not the JSON output of `llm-monitor leakage --json`: no leak_share"),
])
def test_bad_input_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    case: list[str], expect: str) -> None:
    files = {k: str(v) for k, v in _bad_files(tmp_path).items()}
    rc, _, err = run([a.format(**files) for a in case], capsys)
    assert rc == 2, err
    assert expect in err
    assert err.startswith("llm-monitor: error:") and "Traceback" not in err


@pytest.mark.integration
def test_bad_input_through_a_real_process(tmp_path: Path) -> None:
    garbage = tmp_path / "g.csv"
    garbage.write_bytes(b"\x00\x01\x02binary\xff" * 50)
    res = subprocess.run([sys.executable, "-m", "monitor.cli", "leakage", str(garbage),
                          str(garbage)], capture_output=True, text=True)
    assert res.returncode == 2
    assert "binary" in res.stderr and "Traceback" not in res.stderr
