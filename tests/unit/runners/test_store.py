"""SQLite store of the embedded monitor: one transaction per batch, order kept, ids increasing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.contracts import ItemResult, RankingChange, dead_letter
from monitor.runners.replay import benchmark_from_path
from monitor.runners.store import SqliteStore


def _ev(i: int, model: str = "m", **kw: object) -> ItemResult:
    return ItemResult(benchmark="b", item_id=str(i), model=model, score=float(i % 2), **kw)  # type: ignore[arg-type]


def _ranking(models: list[str]) -> RankingChange:
    return RankingChange(change_id=0, benchmark="b", resolved=False, models=models,
                         unresolved_pairs=1, ts=datetime.now(UTC))


def test_round_trip_in_commit_order(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    first = [_ev(i) for i in range(5)]
    second = [_ev(7, "x", cluster="c", run_id="r1", flags=["leak-suspect"],
                  variant="perturbed:paraphrase", ts=datetime(2024, 5, 1, tzinfo=UTC))]
    ids = store.commit(results=first, changes=[_ranking(["m"]), _ranking(["x", "m"])],
                       dead_letters=[dead_letter("schema", "event 3: bad", "{}", source="http[3]",
                                                 index=3)],
                       counts={"accepted": 5, "invalid": 1})
    assert ids == [1, 2]
    assert store.commit(results=second, counts={"accepted": 1}) == []
    store.close()

    store = SqliteStore(tmp_path / "s.db")
    assert [e for batch in store.iter_results(batch_size=2) for e in batch] == first + second
    assert store.n_results() == 6
    assert store.counters() == {"accepted": 6, "invalid": 1}
    assert [c["change_id"] for c in store.changes_since(0)] == [1, 2]
    assert [c["models"] for c in store.changes_since(1)] == [["x", "m"]]
    assert store.change_counts() == {("b", "ranking"): 2}
    _, rankings = store.last_states()
    assert rankings == {"b": (("x", "m"), False)}
    assert [d["reason"] for d in store.dead_letters()] == ["schema"]


def test_failed_batch_leaves_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")

    class Boom:
        benchmark = "b"

        def model_dump_json(self, **_: object) -> str:
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        store.commit(results=[_ev(1)], changes=[Boom()], counts={"accepted": 1})
    assert store.n_results() == 0 and store.counters() == {}


@pytest.mark.parametrize(("name", "bench"), [
    ("mmlu_pro_item_correctness_wide.csv", "mmlu_pro"),
    ("gsm8k_long.jsonl.gz", "gsm8k"), ("scores.csv", "scores"),
])
def test_benchmark_from_file_name(name: str, bench: str) -> None:
    assert benchmark_from_path(Path(name)) == bench
