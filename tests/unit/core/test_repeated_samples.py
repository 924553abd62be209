"""Repeated samples per (item, model): identity per sample, item means in the core, live =
offline on a repeated-sample table, snapshots and the store keep the samples."""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.core.config import BenchmarkSpec
from monitor.io.tables import read_table
from monitor.runners.embedded.store import SqliteStore
from monitor.stats.samples import cell_means, mean_variance
from tests.repeated_samples import draw_samples, item_probabilities

K = 4


def _ev(item: str, model: str, score: float, sample: int = 0, **kw: object) -> ItemResult:
    return ItemResult(benchmark="b", item_id=item, model=model, score=score, sample=sample,
                      **kw)  # type: ignore[arg-type]


def _table_rows(seed: int, *, items: int = 400) -> list[dict[str, object]]:
    """A long table of K samples per (item, model), rows in a random order (cells complete
    at random points), 12 clusters."""
    rng = np.random.default_rng(seed)
    p = item_probabilities(rng, items=items, offsets=[2.0, 0.55, 0.45, -1.0, -1.05])
    y = draw_samples(rng, p, K)
    models = ["m0", "m1", "m2", "m3", "m4"]
    rows = [{"item_id": f"q{i}", "model": models[m], "sample": s, "score": int(y[i, m, s]),
             "category": f"c{i % 12}"}
            for i in range(items) for m in range(len(models)) for s in range(K)]
    order = rng.permutation(len(rows))
    return [rows[j] for j in order]


def test_live_core_equals_report_anytime_on_a_repeated_sample_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    rows = _table_rows(3)
    path = tmp_path / "samples.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    # The file's rows are the order the monitor gets the samples in: --order file.
    assert main(["report", str(path), "--strata-col", "category", "--order", "file",
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)

    mon = Monitor(CoreConfig(samples=K, design="strata"))
    events = [_ev(str(r["item_id"]), str(r["model"]), float(r["score"]),  # type: ignore[arg-type]
                  int(r["sample"]), cluster=r["category"]) for r in rows]  # type: ignore[call-overload]
    outcomes = []
    for start in range(0, len(events), 777):
        outcomes += mon.apply(events[start:start + 777]).outcomes
    assert outcomes.count("accepted") == len(events)
    live = mon.ranking("b").to_json()

    assert not rep["binary"] and not live["binary"]
    assert [r["model"] for r in rep["ranking"]] == [r["model"] for r in live["models"]]
    for off, on in zip(rep["ranking"], live["models"], strict=True):
        assert on["mean"] == pytest.approx(off["mean"], rel=1e-12)
    assert len(rep["pairs"]) == len(live["pairs"]) == 4
    for off, on in zip(rep["pairs"], live["pairs"], strict=True):
        assert (off["model_a"], off["model_b"]) == (on["model_a"], on["model_b"])
        assert off["n"] == on["n"] == 400
        for key in ("delta", "sigma_d2", "log_e", "cs_low", "cs_high", "sigma_between2",
                    "sigma_within2", "within_share", "within_share_1"):
            assert on[key] == pytest.approx(off[key], rel=1e-9, abs=1e-12), key
        for key in ("n_star_exact", "q", "q_strata", "mde"):
            assert on["fixed_n"][key] == pytest.approx(off["fixed_n"][key], rel=1e-9,
                                                       abs=1e-12), key
        assert off["samples"] == on["samples"] == K
        assert 0.0 < on["within_share"] < 1.0
        assert on["sigma_between2"] + on["sigma_within2"] == pytest.approx(on["sigma_d2"])
        assert on["verdict"] == off["verdict"]
        # The same decision (the live one also says when it was taken).
        assert (on["decided"] or {}) | {"ts": None} == (off["decided"] or {}) | {"ts": None}
    assert sum(p["decided"] is not None for p in rep["pairs"]) >= 1
    assert sum(p["decided"] is None for p in rep["pairs"]) >= 1


def test_the_table_reader_means_the_samples_and_keeps_their_split(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("item_id,model,sample,score\n"
                    "1,A,0,1\n1,A,1,0\n1,B,0,1\n1,B,1,1\n"
                    "2,A,0,1\n2,B,1,0\n2,A,1,1\n2,B,0,0\n2,B,0,0\n")
    t = read_table(path)
    assert t.scores.tolist() == [[0.5, 1.0], [1.0, 0.0]]
    assert t.samples is not None and t.samples.tolist() == [[2, 2], [2, 2]]
    # s²/K with ddof 1: samples (1, 0) have s² = 0.5, so 0.25; agreeing samples 0.
    assert t.mean_var is not None and t.mean_var.tolist() == [[0.25, 0.0], [0.0, 0.0]]
    # cells are complete at their last sample's row (the repeated (2, B, 0) row is a duplicate)
    assert t.arrival is not None and t.arrival.tolist() == [[1, 3], [6, 7]]
    assert t.born is not None and t.born.tolist() == [0, 2]
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,model,sample,score\n1,A,0,1\n1,A,0,0\n")
    with pytest.raises(Exception, match="sample 0 has two different scores"):
        read_table(bad)
    neg = tmp_path / "neg.csv"
    neg.write_text("item_id,model,sample,score\n1,A,-1,1\n")
    with pytest.raises(Exception, match="not an integer"):
        read_table(neg)


def test_duplicates_and_conflicts_are_judged_per_sample() -> None:
    mon = Monitor(CoreConfig(samples=2))
    res = mon.apply([_ev("1", "A", 1.0, 0), _ev("1", "A", 0.0, 1), _ev("1", "A", 1.0, 0),
                     _ev("1", "A", 1.0, 1), _ev("1", "A", 1.0, 2),
                     _ev("1", "A", 1.0, 1, variant="perturbed:p")])
    assert res.outcomes == ["accepted", "accepted", "duplicate", "conflict", "conflict",
                            "conflict"]
    details = [d.detail for d in res.dead_letters]
    assert "sample 1) already has score 0.0; got 1.0" in details[0]
    assert "sample 2 is outside 0…1" in details[1]
    assert "perturbed variant takes one answer" in details[2]
    assert mon.scores("b") == {("1", "A"): 0.5}  # the item's mean, once both samples are in
    # One sample of B leaves B without items (not ranked yet); the second completes its cell.
    mon.apply([_ev("1", "B", 1.0, 1)])
    assert [m["model"] for m in mon.ranking("b").to_json()["models"]] == ["A"]
    mon.apply([_ev("1", "B", 1.0, 0)])
    pair = mon.ranking("b").to_json()["pairs"][0]
    assert pair["n"] == 1 and pair["delta"] == pytest.approx(0.5)
    assert mon.counters == {"accepted": 4, "duplicate": 1, "conflict": 3}


def test_one_sample_boards_take_sample_zero_only_and_are_unchanged() -> None:
    mon = Monitor()
    res = mon.apply([_ev("1", "A", 1.0), _ev("1", "A", 1.0, 1), _ev("1", "B", 0.0)])
    assert res.outcomes == ["accepted", "conflict", "accepted"]
    assert "takes 1 sample(s)" in res.dead_letters[0].detail
    st = mon._benches["b"]
    assert st.Y is None and st.binary  # the 0/1 fast path: integer counts, no sample array
    assert "samples" not in mon.ranking("b").to_json()["pairs"][0]


def test_snapshots_keep_waiting_samples_and_refuse_another_declared_sample_count() -> None:
    rows = _table_rows(5, items=60)
    events = [_ev(str(r["item_id"]), str(r["model"]), float(r["score"]),  # type: ignore[arg-type]
                  int(r["sample"])) for r in rows]  # type: ignore[call-overload]
    whole = Monitor(CoreConfig(samples=K))
    whole.apply(events)
    half = Monitor(CoreConfig(samples=K))
    half.apply(events[:500])
    data = half.dump_snapshot()
    assert Monitor.load_snapshot(data, CoreConfig(samples=K)).dump_snapshot() == data
    resumed = Monitor.load_snapshot(data, CoreConfig(samples=K))
    res = resumed.apply(events[500:] + events[:3])
    assert res.outcomes[-3:] == ["duplicate"] * 3
    assert resumed.scores("b") == whole.scores("b")
    assert resumed.ranking("b").to_json()["pairs"] == whole.ranking("b").to_json()["pairs"]
    # K is fixed when the benchmark's first result arrived: another default does not change
    # it, another declaration for the benchmark is refused.
    assert Monitor.load_snapshot(data, CoreConfig(samples=2))._benches["b"].samples == K
    with pytest.raises(ValueError, match=r"holds 4 sample.*declare samples = 2"):
        Monitor.load_snapshot(data, CoreConfig(benchmarks={"b": BenchmarkSpec(samples=2)}))


def test_one_monitor_holds_benchmarks_of_different_sample_counts() -> None:
    """K per benchmark: declared by the first result (k), by the settings, or the default;
    a sample outside K, or a result stating another K, is a conflict saying how to declare."""
    mon = Monitor(CoreConfig(benchmarks={"declared": BenchmarkSpec(samples=3)}))
    one = [ItemResult(benchmark="one", item_id="1", model=m, score=1.0) for m in "AB"]
    five = [ItemResult(benchmark="five", item_id="1", model=m, score=float(s % 2), sample=s, k=5)
            for m in "AB" for s in range(5)]
    three = [ItemResult(benchmark="declared", item_id="1", model=m, score=1.0, sample=s)
             for m in "AB" for s in range(3)]
    res = mon.apply(one + five + three)
    assert res.count("accepted") == len(one + five + three)
    assert [mon._benches[b].samples for b in ("one", "five", "declared")] == [1, 5, 3]
    assert mon.ranking("five").to_json()["pairs"][0]["n"] == 1
    assert mon.ranking("declared").to_json()["pairs"][0]["n"] == 1
    # Later results need not repeat k; a different k, or a sample past K, is a conflict.
    res = mon.apply([
        ItemResult(benchmark="five", item_id="2", model="A", score=1.0, sample=4),
        ItemResult(benchmark="five", item_id="2", model="A", score=1.0, sample=0, k=2),
        ItemResult(benchmark="one", item_id="2", model="A", score=1.0, sample=1),
        ItemResult(benchmark="declared", item_id="2", model="A", score=1.0, k=1),
    ])
    assert res.outcomes == ["accepted", "conflict", "conflict", "conflict"]
    k2, sample1, k1 = (d.detail for d in res.dead_letters)
    assert "states k = 2, but 'five' takes 5 sample(s)" in k2
    assert "as its first result declared (field k)" in k2
    assert "sample 1 is outside 0…0: 'one' takes 1 sample(s)" in sample1
    assert "the monitor's default (--samples)" in sample1
    assert "declare K on it (field k)" in sample1
    assert "as the settings declare (benchmarks.<name>.samples)" in k1
    # The declarations survive a snapshot.
    again = Monitor.load_snapshot(mon.dump_snapshot(), mon.config)
    assert {b: (st.samples, st.declared) for b, st in again._benches.items()} == {
        "one": (1, "default"), "five": (5, "result"), "declared": (3, "settings")}


def test_the_store_keeps_the_sample_and_reads_older_rows(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = SqliteStore(db)
    store.commit(results=[_ev("1", "A", 1.0, 3), _ev("1", "A", 0.0)])
    store.close()
    # A row written before the field existed (no "sample" key) reads as sample 0.
    con = sqlite3.connect(db)
    con.execute("INSERT INTO results (n, events) VALUES (1, ?)",
                (b'[{"benchmark":"b","item_id":"2","model":"A","score":1.0}]',))
    con.commit()
    con.close()
    store = SqliteStore(db)
    got = [ev for batch in store.iter_results() for ev in batch]
    store.close()
    assert [(e.item_id, e.sample) for e in got] == [("1", 3), ("1", 0), ("2", 0)]


def test_cell_means_and_mean_variance_match_numpy() -> None:
    rng = np.random.default_rng(0)
    y = rng.random((50, 6))
    y[rng.random(y.shape) < 0.2] = np.nan
    y[0] = np.nan
    for row, mean, var in zip(y, cell_means(y), mean_variance(y), strict=True):
        present = row[~np.isnan(row)]
        if present.size == 0:
            assert math.isnan(mean)
            continue
        assert mean == pytest.approx(present.mean(), rel=1e-12)
        if present.size >= 2:
            assert var == pytest.approx(np.var(present, ddof=1) / present.size, rel=1e-12)
        else:
            assert math.isnan(var)


def test_snapshot_key_of_one_sample_boards_is_the_key_from_before_samples() -> None:
    from monitor.runners.embedded.service import config_key

    assert "samples" not in json.loads(config_key(CoreConfig()))
    assert json.loads(config_key(CoreConfig(samples=3)))["samples"] == 3


def test_a_repeated_sample_table_replays_as_its_samples(tmp_path: Path) -> None:
    from monitor.runners.replay import ReplayStream, load_blocks

    rows = _table_rows(9, items=50)
    path = tmp_path / "samples.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    stream = ReplayStream(load_blocks([path], benchmark="b"), seed=4)
    events = [ev for batch in stream.batches(333) for ev in batch]
    assert len(events) == len(rows)
    assert sorted((e.item_id, e.model, e.sample, e.score) for e in events) == sorted(
        (str(r["item_id"]), str(r["model"]), int(r["sample"]), float(r["score"]))  # type: ignore[call-overload, arg-type]
        for r in rows)
    mon = Monitor(CoreConfig(samples=K))
    assert mon.apply(events).count("accepted") == len(rows)
    table = read_table(path)
    live = {m["model"]: m["mean"] for m in mon.ranking("b").to_json()["models"]}
    assert live == pytest.approx(dict(zip(table.models, np.nanmean(table.scores, axis=0),
                                          strict=True)), rel=1e-12)
