"""A shuffled live replay meets the items in the report's order, so both take the same
decisions; ``report`` shuffles by default, says so, and marks the file order when asked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.core import CoreConfig, Monitor
from monitor.core.config import BenchmarkSpec
from monitor.io.tables import read_table
from monitor.offline.replay import replay_arrival
from monitor.runners.replay import ReplayStream, load_blocks


def _write(path: Path, *, items: int = 900, seed: int = 4) -> Path:
    """A wide table sorted by subject (the file order is not random), some cells empty."""
    rng = np.random.default_rng(seed)
    ability = np.array([0.9, 0.35, 0.3, -0.2])
    subject = np.sort(rng.integers(0, 6, items))
    logit = ability[None, :] + 0.8 * (subject[:, None] - 2.5) / 2.5
    x = (rng.random(logit.shape) < 1 / (1 + np.exp(-logit))).astype(int).astype(str)
    x[rng.random(x.shape) < 0.05] = ""
    lines = ["item_id,subject,m0,m1,m2,m3"]
    lines += [f"q{i},s{subject[i]}," + ",".join(x[i]) for i in range(items)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("seed", [0, 7])
def test_the_shuffled_stream_is_the_reports_item_order(tmp_path: Path, seed: int) -> None:
    path = _write(tmp_path / "b.csv")
    table = read_table(path, cluster_col="subject")
    perm, arrival = replay_arrival(table, order="shuffle", seed=seed)
    assert perm is not None
    present = np.argwhere(arrival >= 0)  # (row of the permuted table, model column)
    want = [(str(table.item_ids[perm[r]]), table.models[c])
            for r, c in present[np.argsort(arrival[arrival >= 0], kind="stable")].tolist()]
    stream = ReplayStream(load_blocks([path], cluster_col="subject"), seed=seed)
    got = [(e.item_id, e.model) for e in stream.events(0, len(stream))]
    assert got == want
    in_file = ReplayStream(load_blocks([path], cluster_col="subject"))
    assert got != [(e.item_id, e.model)  # the file order differs: the check has teeth
                   for e in in_file.events(0, len(in_file))]


def test_a_shuffled_live_replay_takes_the_decisions_of_report_with_its_seed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "b.csv", items=1500)
    seed = 3
    assert main(["report", str(path), "--strata-col", "subject", "--seed", str(seed),
                 "--family", "all", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["anytime"]["order"] == "shuffle" and rep["anytime"]["seed"] == seed
    stream = ReplayStream(load_blocks([path], benchmark="b", cluster_col="subject"), seed=seed)
    mon = Monitor(CoreConfig(family="all", benchmarks={"b": BenchmarkSpec(design="strata")}))
    for lo in range(0, len(stream), 997):  # batches do not matter to the decisions
        mon.apply(stream.events(lo, min(lo + 997, len(stream))))
    live = {(p["model_a"], p["model_b"]): p for p in [p.as_dict() for p in mon.pairs("b", "all")]}
    decided = 0
    for off in rep["pairs"]:
        on = live[(off["model_a"], off["model_b"])]
        assert on["verdict"] == off["verdict"], off
        assert (on["decided"] or {}).get("n") == (off["decided"] or {}).get("n"), off
        decided += off["decided"] is not None
    assert 0 < decided < len(rep["pairs"])
    ranking = mon.ranking("b").to_json()
    assert [m["model"] for m in ranking["models"]] == [e["model"] for e in rep["ranking"]]
    assert [(m["rank_low"], m["rank_high"], m["tier"]) for m in ranking["models"]] == [
        (e["rank_low"], e["rank_high"], e["tier"]) for e in rep["ranking"]]


def test_report_shuffles_by_default_and_marks_the_file_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "b.csv")
    assert main(["report", str(path), "--strata-col", "subject", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert (default["anytime"]["order"], default["anytime"]["seed"]) == ("shuffle", 0)
    assert not any(w["kind"] == "file-order" for w in default["warnings"])
    # --anytime, once needed for the decisions, is accepted and changes nothing.
    assert main(["report", str(path), "--strata-col", "subject", "--anytime", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == default
    assert main(["report", str(path), "--strata-col", "subject", "--order", "file",
                 "--json"]) == 0
    filed = json.loads(capsys.readouterr().out)
    assert (filed["anytime"]["order"], filed["anytime"]["seed"]) == ("file", None)
    assert [w["kind"] for w in filed["warnings"]] == ["file-order"]
    assert main(["report", str(path), "--strata-col", "subject", "--order", "file"]) == 0
    words = " ".join(capsys.readouterr().out.split())
    assert "WARNING: the decisions were taken in the table's own order (--order file)" in words
    assert "items replayed in the file's own order" in words
    assert main(["report", str(path), "--order", "sorted"]) == 2
    assert "--order must be shuffle or file" in capsys.readouterr().err


def test_several_files_of_one_benchmark_replay_their_items_together() -> None:
    # One model per file (lm-eval samples): an item's results from both files arrive
    # together, the items in the seeded permutation of the benchmark's items; a second
    # benchmark's stream is interleaved with it and keeps its own order.
    from monitor.runners.replay import Block

    ids = np.array([f"q{i}" for i in range(50)], dtype=object)

    def block(bench: str, model: str, rows: slice) -> Block:
        return Block(source=f"{bench}-{model}", benchmark=bench, item_ids=ids[rows],
                     models=(model,), scores=np.ones((len(ids[rows]), 1)), clusters=None)

    blocks = [block("a", "m1", slice(0, 50)), block("a", "m2", slice(0, 50)),
              block("b", "m1", slice(0, 20))]
    events = list(ReplayStream(blocks, seed=5).events(0, 120))
    a = [(e.item_id, e.model) for e in events if e.benchmark == "a"]
    perm = np.random.default_rng(5).permutation(50)
    assert a == [(f"q{i}", m) for i in perm.tolist() for m in ("m1", "m2")]
    b = [e.item_id for e in events if e.benchmark == "b"]
    assert b == [f"q{i}" for i in np.random.default_rng(5).permutation(20).tolist()]
    first_b = next(k for k, e in enumerate(events) if e.benchmark == "b")
    assert first_b < 10  # interleaved, not after the whole of "a"
