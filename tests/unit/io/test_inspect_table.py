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
                        lambda p, *, scorer=None: by_path[str(p)])
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
