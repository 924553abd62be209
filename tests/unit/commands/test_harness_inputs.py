"""``report`` and ``compare`` read lm-eval samples directly (files and output directories,
group tasks as clusters, ``--filter``), and ``compare`` reads only the columns it compares."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lmeval"


def _group(tmp_path: Path, *, n: int = 60, seed: int = 0) -> Path:
    """Two models × three subtasks whose doc_ids all start at 0."""
    rng = np.random.default_rng(seed)
    out = tmp_path / "out"
    for model, p in (("org__strong", 0.8), ("org__weak", 0.5)):
        for task in ("mmlu_anatomy", "mmlu_astronomy", "mmlu_virology"):
            d = out / model
            d.mkdir(parents=True, exist_ok=True)
            with (d / f"samples_{task}_2024-01-01T00-00-00.jsonl").open("w") as fh:
                for i in range(n):
                    fh.write(json.dumps({"doc_id": i, "doc": {"question": "?"}, "acc":
                                         float(rng.random() < p), "filter": "none"}) + "\n")
    return out


def test_report_reads_a_harness_output_directory_with_subtasks_as_clusters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _group(tmp_path)
    assert main(["report", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["benchmark"] == "mmlu" and doc["n_items"] == 180
    assert doc["groups"] == {"kind": "cluster", "column": "task", "n_groups": 3}
    # The same report as on the long table with item = <task>/<doc_id>, cluster = task.
    long = tmp_path / "long.csv"
    with long.open("w") as fh:
        fh.write("item_id,model,score,cluster\n")
        for path in sorted(out.rglob("samples_*.jsonl")):
            task = path.name.split("_2024")[0].removeprefix("samples_")
            model = path.parent.name.replace("__", "/")
            for line in path.read_text().splitlines():
                rec = json.loads(line)
                fh.write(f"{task}/{rec['doc_id']},{model},{rec['acc']:g},{task}\n")
    assert main(["report", str(long), "--cluster-col", "cluster", "--json"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert doc["pairs"] == ref["pairs"] and doc["ranking"] == ref["ranking"]
    assert doc["pairs"][0]["fixed_n"]["design_effect"] != 1.0  # the clusters were used


def test_report_on_one_samples_file_says_what_is_missing(
        capsys: pytest.CaptureFixture[str]) -> None:
    path = next(FIXTURES.rglob("samples_arc_easy_*.jsonl"))
    assert main(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert "needs at least two models" in err and "field 'doc'" not in err


def test_compare_reads_samples_with_the_chosen_filter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gsm"
    for model, (strict, flex) in {"org__a": ([1, 0, 1, 0], [1, 1, 1, 1]),
                                  "org__b": ([0, 0, 1, 0], [0, 1, 0, 1])}.items():
        (out / model).mkdir(parents=True)
        lines = [json.dumps({"doc_id": i, "filter": f, "exact_match": s})
                 for i in range(4) for f, s in (("strict-match", strict[i]),
                                                ("flexible-extract", flex[i]))]
        (out / model / "samples_gsm8k_2024-01-01T00-00-00.jsonl").write_text("\n".join(lines) + "\n")
    for filt, diff in ((None, 0.25), ("flexible-extract", 0.5)):
        args = ["compare", str(out), "--a", "org/a", "--b", "org/b", "--B", "200", "--json"]
        assert main([*args, *(["--filter", filt] if filt else [])]) == 0
        assert json.loads(capsys.readouterr().out)["mean_diff"] == pytest.approx(diff)


def test_compare_ignores_columns_it_was_not_asked_about(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "wide.csv"
    path.write_text("item_id,gold,a,b,c\n" + "".join(
        f"q{i},answer {i} text,{i % 2},{i % 3 == 0:d},{'x' if i == 2 else 1}\n"
        for i in range(30)))
    assert main(["compare", str(path), "--a", "a", "--b", "b", "--B", "200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n"] == 30
    assert doc["mean_a"] == pytest.approx(15 / 30) and doc["mean_b"] == pytest.approx(10 / 30)
    # The model columns still are checked.
    assert main(["compare", str(path), "--a", "a", "--b", "c", "--B", "200"]) == 2
    assert "line 4, field 'c'" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--cluster-col", "--strata-col"])
def test_a_group_column_of_lmeval_samples_is_refused_with_the_reason(
        tmp_path: Path, option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """lm-eval samples have no item column: --cluster-col is refused, naming where their
    clusters come from, instead of a report that silently says "groups: none"."""
    out = _group(tmp_path, n=5)
    assert main(["report", str(out), option, "subject"]) == 2
    err = capsys.readouterr().err
    assert f"{option}: lm-eval samples files have no item column" in err
    assert "the subtasks of a group are its clusters" in err
    assert main(["post", str(out), "--url", "http://127.0.0.1:1", "--cluster-col", "subject"]) == 2
    assert "--cluster-col: lm-eval samples files have no item column" in capsys.readouterr().err


def test_files_whose_first_filters_differ_are_not_mixed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default filter is each file's first: two models' files that list their filters in
    another order would put one model's strict-match beside the other's flexible-extract."""
    for model, order in (("org__a", ("strict-match", "flexible-extract")),
                         ("org__b", ("flexible-extract", "strict-match"))):
        d = tmp_path / model
        d.mkdir()
        (d / "samples_gsm8k.jsonl").write_text("".join(
            json.dumps({"doc_id": i, "doc": {}, "filter": f, "exact_match": float(i % 2)}) + "\n"
            for i in range(4) for f in order))
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "the files' first filters differ (flexible-extract in" in err
    assert "pass --filter to read one of them" in err
    assert main(["report", str(tmp_path), "--filter", "strict-match", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_items"] == 4
