"""lm-evaluation-harness samples reader: file-name mapping, metric and filter choice, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.errors import InputError
from monitor.io.lmeval import is_samples_file, parse_samples_name, read_lmeval_samples

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lmeval"
ARC_410M = FIXTURES / "EleutherAI__pythia-410m" / "samples_arc_easy_2024-05-13T12-34-56.123456.jsonl"
GSM_160M = FIXTURES / "EleutherAI__pythia-160m" / "samples_gsm8k_2024-05-13T12-40-02.654321.jsonl"


@pytest.mark.parametrize(("name", "task", "ts"), [
    ("samples_arc_easy_2024-05-13T12-34-56.123456.jsonl", "arc_easy", "2024-05-13T12-34-56.123456"),
    ("samples_mmlu_abstract_algebra_2024-06-01T00-00-00.jsonl", "mmlu_abstract_algebra",
     "2024-06-01T00-00-00"),
    ("samples_hellaswag.jsonl", "hellaswag", None),
])
def test_file_name_gives_task(name: str, task: str, ts: str | None) -> None:
    assert is_samples_file(name)
    assert parse_samples_name(name) == (task, ts)


def test_not_a_samples_file() -> None:
    assert not is_samples_file("results_2024-05-13T12-34-56.json")
    with pytest.raises(InputError, match="samples_<task>_<timestamp>"):
        parse_samples_name("results.json")


def test_fixture_mapping() -> None:
    s = read_lmeval_samples(ARC_410M)
    assert (s.task, s.model, s.metric, s.filter) == (
        "arc_easy", "EleutherAI/pythia-410m", "acc", "none")
    assert s.item_ids.tolist() == ["0", "1", "2", "3", "4", "5"]
    # The fixture's acc column for pythia-410m, written by hand.
    np.testing.assert_array_equal(s.scores, [1, 1, 1, 0, 1, 1])
    assert read_lmeval_samples(ARC_410M, model="mine").model == "mine"
    assert read_lmeval_samples(ARC_410M, metric="acc_norm").metric == "acc_norm"


def test_first_filter_by_default_and_on_request() -> None:
    strict = read_lmeval_samples(GSM_160M)
    assert (strict.metric, strict.filter) == ("exact_match", "strict-match")
    np.testing.assert_array_equal(strict.scores, [0, 1, 0])
    flexible = read_lmeval_samples(GSM_160M, filter="flexible-extract")
    np.testing.assert_array_equal(flexible.scores, [1, 1, 0])


def _write(tmp_path: Path, lines: list[object]) -> Path:
    d = tmp_path / "org__model"
    d.mkdir(exist_ok=True)
    path = d / "samples_task_2024-01-01T00-00-00.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


@pytest.mark.parametrize(("lines", "message"), [
    ([{"doc_id": 0, "acc": 1.0}, "{oops"], "line 2: invalid JSON"),
    ([{"acc": 1.0}], "field 'doc_id'"),
    ([{"doc_id": 0, "acc": 1.0}, {"doc_id": 0, "acc": 0.0}], "duplicate doc_id '0'"),
    ([{"doc_id": 0, "acc": 1.5}], "field 'acc': metric value must be a number in [0, 1]"),
    ([{"doc_id": 0, "acc": "yes"}], "metric value must be a number"),
    ([{"doc_id": 0, "bleu": 3.0}], "no per-sample metric found"),
    ([], "no samples"),
])
def test_errors_name_file_line_field(tmp_path: Path, lines: list[object], message: str) -> None:
    with pytest.raises(InputError) as info:
        read_lmeval_samples(_write(tmp_path, lines))
    assert message in str(info.value)
    assert "samples_task_2024-01-01T00-00-00.jsonl" in str(info.value)


def test_boolean_and_listed_metrics(tmp_path: Path) -> None:
    path = _write(tmp_path, [{"doc_id": 3, "metrics": ["em"], "em": True, "acc": 0.0},
                             {"doc_id": 4, "metrics": ["em"], "em": [0], "acc": 1.0}])
    s = read_lmeval_samples(path)
    assert (s.model, s.metric, s.scores.tolist()) == ("org/model", "em", [1.0, 0.0])
