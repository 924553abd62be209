"""inspect_table joins the logs of one task; logs of several tasks are not silently read as
one benchmark named after the first (post and watch feed each task's log to its own)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from monitor.errors import InputError
from monitor.io import inspect as inspect_io
from monitor.io.inspect import InspectScores, inspect_table


def _log(path: str, task: str, model: str, ids: list[str], scores: list[float]) -> InspectScores:
    return InspectScores(source=path, task=task, model=model, scorer="match", status="success",
                         item_ids=np.asarray(ids, dtype=object),
                         epochs=np.ones(len(ids), dtype=np.int64),
                         scores=np.asarray(scores, dtype=np.float64))


@pytest.fixture
def logs(monkeypatch: pytest.MonkeyPatch) -> dict[str, InspectScores]:
    by_path = {
        "a.eval": _log("a.eval", "arith", "m1", ["q0", "q1"], [1.0, 0.0]),
        "b.eval": _log("b.eval", "arith", "m2", ["q0", "q1"], [0.0, 0.0]),
        "c.eval": _log("c.eval", "spelling", "m1", ["w0", "w1", "w2"], [1.0, 1.0, 1.0]),
    }
    monkeypatch.setattr(inspect_io, "read_inspect_log",
                        lambda p, *, scorer=None, group_field=None: by_path[str(p)])
    return by_path


def test_logs_of_one_task_are_one_table(logs: dict[str, InspectScores]) -> None:
    t = inspect_table([Path("a.eval"), Path("b.eval")])
    assert t.benchmark == "arith" and t.models == ("m1", "m2")
    np.testing.assert_array_equal(t.scores, [[1.0, 0.0], [0.0, 0.0]])


def test_logs_of_several_tasks_need_a_benchmark(logs: dict[str, InspectScores]) -> None:
    with pytest.raises(InputError, match=r"logs of several tasks \(arith, spelling\)"):
        inspect_table([Path("a.eval"), Path("b.eval"), Path("c.eval")])
    t = inspect_table([Path("a.eval"), Path("c.eval")], benchmark="mixed")
    assert t.benchmark == "mixed" and t.scores.shape == (5, 1)


def test_epochs_are_repeated_samples_as_in_a_table_with_a_sample_column(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two epochs per sample: the table holds each epoch as a sample, so report states the
    between/within split — the same table as the long table of the same scores with a
    ``sample`` column (what post sends and run --samples 2 holds)."""
    from monitor.io.tables import read_table

    rng = np.random.default_rng(7)
    ids = [f"q{i}" for i in range(20)]
    logs = {}
    rows = ["item_id,model,sample,score"]
    for name in ("m1", "m2"):
        scores = (rng.uniform(size=40) < 0.6).astype(float)
        epochs = np.repeat([1, 2], 20)
        logs[f"{name}.eval"] = InspectScores(
            source=f"{name}.eval", task="arith", model=name, scorer="match", status="success",
            item_ids=np.asarray(ids * 2, dtype=object), epochs=epochs, scores=scores)
        rows += [f"{i},{name},{e - 1},{s:g}" for i, e, s in zip(ids * 2, epochs, scores,
                                                                 strict=True)]
    monkeypatch.setattr(inspect_io, "read_inspect_log",
                        lambda p, *, scorer=None, group_field=None: logs[str(p)])
    t = inspect_table([Path("m1.eval"), Path("m2.eval")])
    long = tmp_path / "long.csv"
    long.write_text("\n".join(rows) + "\n")
    ref = read_table(long, benchmark="arith")
    assert t.models == ref.models and t.item_ids.tolist() == ref.item_ids.tolist()
    for name in ("scores", "samples", "mean_var", "repeats"):
        got, want = getattr(t, name), getattr(ref, name)
        assert want is not None, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert t.sample_count() == 2.0


def test_report_and_compare_read_the_scorer_named(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A log with two scorers: report and compare take --scorer as post and watch do."""
    import json

    from monitor.cli import main

    by_scorer = {"first": ([1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]),
                 "second": ([0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0])}

    def read(p: Path, *, scorer: str | None = None, group_field: str | None = None
             ) -> InspectScores:
        name = Path(p).stem
        values = by_scorer[scorer or "first"][0 if name == "m1" else 1]
        return _log(str(p), "arith", name, [f"q{i}" for i in range(4)], values)

    monkeypatch.setattr(inspect_io, "read_inspect_log", read)
    for name in ("m1", "m2"):
        (tmp_path / f"{name}.eval").write_bytes(b"")
    for scorer, (a, b) in by_scorer.items():
        assert main(["report", str(tmp_path), "--scorer", scorer, "--json"]) == 0
        means = {r["model"]: r["mean"] for r in json.loads(capsys.readouterr().out)["ranking"]}
        assert means == {"m1": np.mean(a), "m2": np.mean(b)}
        assert main(["compare", str(tmp_path), "--a", "m1", "--b", "m2", "--scorer", scorer,
                     "--B", "200", "--json"]) == 0
        fig = json.loads(capsys.readouterr().out)
        assert (fig["mean_a"], fig["mean_b"]) == (np.mean(a), np.mean(b))


def test_post_counts_the_samples_that_ended_in_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples without a score (an error) are left out, as inspect_ai leaves them out of its
    metrics — and post's account says how many, so that every sample is accounted for."""
    from dataclasses import replace

    from monitor.commands.post import file_events

    log = replace(_log("a.eval", "arith", "m1", ["q0", "q1"], [1.0, 0.0]), errored=2)
    monkeypatch.setattr(inspect_io, "read_inspect_log",
                        lambda p, *, scorer=None, group_field=None: log)
    path = tmp_path / "a.eval"
    path.write_bytes(b"")
    passed: dict[str, int] = {}
    events = list(file_events(path, benchmark=None, model=None, metric=None,
                              filter=None, scorer=None, exclude=(), cluster_col=None,
                              passed_over=passed))
    assert [e["item_id"] for e, _ in events] == ["q0", "q1"]
    assert passed == {inspect_io.ERRORED: 2}
