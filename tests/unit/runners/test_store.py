"""SQLite store of the embedded monitor: one transaction per batch, order kept, ids increasing."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.contracts import ItemResult, RankingChange, dead_letter
from monitor.core.monitor import ranking_key
from monitor.decoder import as_item
from monitor.runners.embedded.store import SqliteStore
from monitor.runners.replay import benchmark_from_path


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
    assert [as_item(e) for batch in store.iter_results(batch_size=2) for e in batch] == first + second
    assert store.n_results() == 6
    assert store.counters() == {"accepted": 6, "invalid": 1}
    assert [c["change_id"] for c in store.changes_since(0)] == [1, 2]
    assert [c["models"] for c in store.changes_since(1)] == [["x", "m"]]
    assert store.change_counts() == {("b", "ranking"): 2}
    _, rankings = store.last_states()
    # the last ranking as its tiers say it (no tiers logged: the order itself)
    assert rankings == {"b": ranking_key(["x", "m"], False, None)}
    assert rankings["b"] == ((frozenset({"x"}), frozenset({"m"})), False)
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


def test_results_after_watermarks(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    rows = [[_ev(i), _ev(i).model_copy(update={"benchmark": "c"})] for i in range(4)]
    for row in rows:
        store.commit(results=row)
    assert store.last_seq() == 4

    def read(after: dict[str, int]) -> list[tuple[str, str]]:
        return [(e.benchmark, e.item_id) for batch in store.iter_results(after=after)
                for e in batch]

    assert read({}) == [(e.benchmark, e.item_id) for row in rows for e in row]
    # b from its snapshot at row 3, c from its snapshot at row 1.
    assert read({"b": 3, "c": 1}) == [("c", "1"), ("c", "2"), ("b", "3"), ("c", "3")]
    # c replayed in full (its snapshot unusable): every row is read.
    assert read({"b": 3, "c": 0}) == [("c", "0"), ("c", "1"), ("c", "2"), ("b", "3"), ("c", "3")]
    assert read({"b": 4, "c": 4}) == []


def test_snapshots_replace_and_restamp_in_one_transaction(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    store.commit(results=[_ev(1)])
    store.write_snapshots({"b": b"one", "c": b"c1"}, results_seq=1, change_id=0,
                          positions={"b": 0, "c": 1}, config="k")
    store.commit(results=[_ev(2)], changes=[_ranking(["m"])])
    store.write_snapshots({"b": b"two"}, results_seq=2, change_id=1,
                          positions={"b": 0, "c": 1}, config="k", restamp=["c"])
    got = [(s.benchmark, s.results_seq, s.change_id, s.position, s.state)
           for s in store.snapshots()]
    assert got == [("b", 2, 1, 0, b"two"), ("c", 2, 0, 1, b"c1")]
    # A row taken under other options is not restamped: it is not this state.
    store.commit(results=[_ev(3)])
    store.write_snapshots({}, results_seq=3, change_id=1, positions={"b": 0, "c": 1},
                          config="other", restamp=["b", "c"])
    assert [s.results_seq for s in store.snapshots()] == [2, 2]

    with pytest.raises(sqlite3.Error):  # the second row cannot be written: neither is
        store.write_snapshots({"b": b"three", "c": object()}, results_seq=3, change_id=1,  # type: ignore[dict-item]
                              positions={"b": 0, "c": 1}, config="k")
    assert [s.state for s in store.snapshots()] == [b"two", b"c1"]  # all or nothing


def test_an_old_database_gets_the_snapshot_table(tmp_path: Path) -> None:
    # Schema 1 as first released: no snapshots table, no index of the change log.
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE results (seq INTEGER PRIMARY KEY, n INTEGER NOT NULL, events BLOB NOT NULL);
        CREATE TABLE changes (id INTEGER PRIMARY KEY AUTOINCREMENT,
            benchmark TEXT NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL);
        CREATE TABLE dead_letters (id INTEGER PRIMARY KEY AUTOINCREMENT, reason TEXT NOT NULL,
            detail TEXT NOT NULL, payload TEXT NOT NULL, source TEXT NOT NULL, ts TEXT);
        CREATE TABLE counters (outcome TEXT PRIMARY KEY, total INTEGER NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
    """)
    con.execute("INSERT INTO results (n, events) VALUES (1, ?)",
                (b'[{"benchmark":"b","item_id":"1","model":"m","score":1.0}]',))
    con.commit()
    con.close()
    store = SqliteStore(path)
    assert store.snapshots() == [] and store.n_results() == 1
    assert [e.item_id for batch in store.iter_results() for e in batch] == ["1"]
    store.write_snapshots({"b": b"s"}, results_seq=1, change_id=0, positions={"b": 0},
                          config="k")
    assert [s.benchmark for s in store.snapshots()] == ["b"]


@pytest.mark.parametrize(("name", "bench"), [
    ("mmlu_pro_item_correctness_wide.csv", "mmlu_pro"),
    ("gsm8k_long.jsonl.gz", "gsm8k"), ("scores.csv", "scores"),
])
def test_benchmark_from_file_name(name: str, bench: str) -> None:
    assert benchmark_from_path(Path(name)) == bench
