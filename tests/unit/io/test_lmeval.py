"""lm-evaluation-harness samples reader: file-name mapping, metric and filter choice, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.errors import InputError
from monitor.io.lmeval import (
    SamplesFollower,
    is_samples_file,
    looks_like_samples,
    parse_samples_name,
    read_lmeval_samples,
    samples_table,
)

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


# -- group tasks, following a file, filters ------------------------------------------------
def _subtask(tmp_path: Path, model_dir: str, task: str, scores: list[float]) -> Path:
    d = tmp_path / model_dir
    d.mkdir(exist_ok=True)
    path = d / f"samples_{task}_2024-01-01T00-00-00.jsonl"
    path.write_text("".join(json.dumps({"doc_id": i, "doc": {"q": f"{task} {i}"}, "acc": s,
                                        "filter": "none", "metrics": ["acc"]}) + "\n"
                            for i, s in enumerate(scores)))
    return path


def test_group_subtasks_namespace_ids_and_become_clusters(tmp_path: Path) -> None:
    paths = [_subtask(tmp_path, "org__a", "mmlu_anatomy", [1, 0, 1]),
             _subtask(tmp_path, "org__a", "mmlu_astronomy", [0, 0]),
             _subtask(tmp_path, "org__b", "mmlu_anatomy", [1, 1, 0]),
             _subtask(tmp_path, "org__b", "mmlu_astronomy", [1, 0])]
    one = read_lmeval_samples(paths[0], benchmark="mmlu")
    assert one.item_ids.tolist() == ["mmlu_anatomy/0", "mmlu_anatomy/1", "mmlu_anatomy/2"]
    assert one.cluster == "mmlu_anatomy"
    # Its own task as benchmark: plain doc_ids, no cluster (as before groups).
    assert read_lmeval_samples(paths[0], benchmark="mmlu_anatomy").item_ids.tolist() == ["0", "1", "2"]
    # The common prefix names the group when no benchmark is given.
    t = samples_table(paths)
    assert t.benchmark == "mmlu" and t.models == ("org/a", "org/b")
    assert t.item_ids.tolist() == ["mmlu_anatomy/0", "mmlu_anatomy/1", "mmlu_anatomy/2",
                                   "mmlu_astronomy/0", "mmlu_astronomy/1"]
    assert t.group_kind == "cluster" and t.groups is not None
    assert t.groups.tolist() == ["mmlu_anatomy"] * 3 + ["mmlu_astronomy"] * 2
    np.testing.assert_array_equal(t.scores, [[1, 1], [0, 1], [1, 0], [0, 1], [0, 0]])
    with pytest.raises(InputError, match="unrelated tasks"):
        samples_table([ARC_410M, GSM_160M])


def test_replay_blocks_of_a_group_do_not_collide(tmp_path: Path) -> None:
    from monitor.runners.replay import ReplayStream, load_blocks

    paths = [_subtask(tmp_path, "org__a", "mmlu_anatomy", [1, 0]),
             _subtask(tmp_path, "org__a", "mmlu_astronomy", [0, 1])]
    events = ReplayStream(load_blocks(paths, benchmark="mmlu")).events(0, 4)
    assert [(e.benchmark, e.item_id, e.cluster) for e in events] == [
        ("mmlu", "mmlu_anatomy/0", "mmlu_anatomy"), ("mmlu", "mmlu_anatomy/1", "mmlu_anatomy"),
        ("mmlu", "mmlu_astronomy/0", "mmlu_astronomy"), ("mmlu", "mmlu_astronomy/1", "mmlu_astronomy")]


def test_follower_reads_complete_lines_once_and_resumes_from_its_state(tmp_path: Path) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    path = d / "samples_gsm8k_2024-01-01T00-00-00.jsonl"
    lines = [json.dumps({"doc_id": i // 2, "filter": f, "exact_match": s}) + "\n"
             for i, (f, s) in enumerate([("strict", 0), ("flex", 1), ("strict", 1),
                                         ("flex", 1), ("strict", 0), ("flex", 0)])]
    path.write_text(lines[0] + lines[1] + lines[2][:10])  # the third line is half written
    f = SamplesFollower(path, model="m", filter="flex")
    assert [(e["item_id"], e["score"], label.rsplit(":", 1)[1]) for e, label in f.read_new()] == [
        ("0", 1.0, "2")]
    assert f.read_new() == []  # nothing new: the half line waits
    with path.open("a") as fh:
        fh.write(lines[2][10:] + lines[3])
    assert [e["item_id"] for e, _ in f.read_new()] == ["1"]
    # A follower rebuilt from the state goes on where this one stopped.
    g = SamplesFollower(path, model="m", offset=f.offset, lineno=f.lineno, metric=f.metric,
                        filter=f.filter)
    with path.open("a") as fh:
        fh.write(lines[4] + lines[5])
    assert [(e["item_id"], e["score"], label.rsplit(":", 1)[1]) for e, label in g.read_new()] == [
        ("2", 0.0, "6")]
    # The default filter is the first one seen, kept by the state.
    h = SamplesFollower(path, model="m")
    assert [e["score"] for e, _ in h.read_new()] == [0.0, 1.0, 0.0]
    assert h.filter == "strict"


def test_a_samples_file_under_another_name_is_read_as_samples(tmp_path: Path) -> None:
    renamed = tmp_path / "org__m" / "arc.jsonl"
    renamed.parent.mkdir()
    renamed.write_bytes(ARC_410M.read_bytes())
    assert looks_like_samples(renamed) and not looks_like_samples(tmp_path / "nothing.jsonl")
    s = read_lmeval_samples(renamed)
    assert (s.task, s.model, len(s)) == ("arc", "org/m", 6)
