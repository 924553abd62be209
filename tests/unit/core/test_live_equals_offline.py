"""Live = offline: the figures and verdicts the live core shows equal ``llm-monitor report``'s.

Both go through the one pair kernel (monitor.stats.figures), fed from different storage: the
live core's incremental Gram matrices and the report's dense score matrix. The equality is
therefore exact up to float summation order (0/1 sums are exact integers).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.io.tables import ScoreTable, read_table
from monitor.offline.report import build_report
from monitor.stats.paired import paired_summary

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
MMLU = DATA / "mmlu_pro_item_correctness_wide.csv"
SEED = 7


@pytest.mark.slow
def test_live_core_equals_report_anytime_on_real_mmlu_pro(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """MMLU-Pro's 14 subjects are fixed strata: the report's --strata-col and a live benchmark
    declared ``strata`` take the same item-level decisions."""
    assert MMLU.exists(), f"the real MMLU-Pro table is missing: {MMLU}"
    assert main(["report", str(MMLU), "--exclude", "src", "--strata-col", "category",
                 "--seed", str(SEED), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)

    # The same table streamed item by item in the replay's shuffled order.
    table = read_table(MMLU, exclude=["src"], cluster_col="category")
    assert table.groups is not None
    x = table.scores
    perm = np.random.default_rng(SEED).permutation(x.shape[0])
    events = [ItemResult(benchmark="mmlu_pro", item_id=str(table.item_ids[i]), model=m,
                         score=float(x[i, j]), cluster=str(table.groups[i]))
              for i in perm for j, m in enumerate(table.models) if not np.isnan(x[i, j])]
    assert len(events) > 380_000
    mon = Monitor(CoreConfig(alpha=0.05, power=0.8, family="adjacent", design="strata"))
    for start in range(0, len(events), 20_000):
        mon.apply(events[start:start + 20_000])
    live = mon.ranking("mmlu_pro").to_json()

    assert [r["model"] for r in rep["ranking"]] == [r["model"] for r in live["models"]]
    assert len(rep["pairs"]) == len(live["pairs"]) == 31
    for off, on in zip(rep["pairs"], live["pairs"], strict=True):
        assert (off["model_a"], off["model_b"]) == (on["model_a"], on["model_b"])
        assert off["n"] == on["n"]
        # one serializer: the same keys, the same figures
        assert set(on) - {"rank_a", "rank_b"} <= set(off) and set(on["fixed_n"]) <= set(
            off["fixed_n"])
        for key in ("delta", "sigma_d2", "log_e", "cs_low", "cs_high", "mean_a", "mean_b"):
            assert on[key] == pytest.approx(off[key], rel=1e-9, abs=1e-12), key
        for key in ("n_star_exact", "q", "q_strata", "mde", "design_effect"):
            assert on["fixed_n"][key] == pytest.approx(off["fixed_n"][key], rel=1e-9,
                                                       abs=1e-12), key
        if math.isfinite(on["e_value"]):
            assert on["e_value"] == pytest.approx(off["e_value"], rel=1e-9)
        # The same verdict, decided at the same paired item, at the same fixed share of α.
        assert on["e_threshold"] == pytest.approx(off["e_threshold"], rel=1e-12)
        assert on["verdict"] == off["verdict"]
        assert (on["decided"] or {}).get("n") == (off["decided"] or {}).get("n")
    resolved = sum(p["verdict"].startswith("resolved:") for p in rep["pairs"])
    assert rep["verdicts"]["resolved"] == resolved and resolved >= 5
    # The ranking's state, rank sets and tiers: the report's are the live board's.
    for key in ("resolved", "unresolved_pairs", "top_resolved", "tiers", "design"):
        assert rep[key] == live[key], key
    assert [(e["rank_low"], e["rank_high"], e["tier"]) for e in rep["ranking"]] == [
        (m["rank_low"], m["rank_high"], m["tier"]) for m in live["models"]]


def _clustered_board(seed: int, *, clusters: int, per: int, gaps: tuple[float, ...]
                     ) -> tuple[np.ndarray, np.ndarray]:
    """0/1 scores of models with the given abilities on ``clusters`` sampled clusters of
    ``per`` items each (a random effect per cluster and model), and each item's cluster."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(clusters), per)
    effect = rng.normal(0.0, 0.4, size=(clusters, len(gaps)))[g]
    logit = np.asarray(gaps)[None, :] + effect + rng.normal(0.0, 0.3, size=(g.size, 1))
    return (rng.random(logit.shape) < 1.0 / (1.0 + np.exp(-logit))).astype(float), g


@pytest.mark.slow
def test_live_core_equals_report_anytime_under_sampled_clusters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Under --cluster-col (sampled clusters) the verdict is the clustered decision, taken at
    the same paired item live (batch after batch) and in the report's replay."""
    x, g = _clustered_board(5, clusters=260, per=6, gaps=(1.2, 0.2, 0.0, -1.0))
    models = ["m0", "m1", "m2", "m3"]
    path = tmp_path / "board.csv"
    with path.open("w") as fh:
        fh.write("item_id,cluster," + ",".join(models) + "\n")
        for i in range(x.shape[0]):
            fh.write(f"q{i},c{g[i]}," + ",".join(str(int(v)) for v in x[i]) + "\n")
    assert main(["report", str(path), "--cluster-col", "cluster", "--seed", str(SEED),
                 "--json", "--family", "all"]) == 0
    rep = json.loads(capsys.readouterr().out)
    perm = np.random.default_rng(SEED).permutation(x.shape[0])
    events = [ItemResult(benchmark="b", item_id=f"q{i}", model=m, score=float(x[i, j]),
                         cluster=f"c{g[i]}")
              for i in perm for j, m in enumerate(models)]
    mon = Monitor(CoreConfig(family="all", design="clusters"))
    rng = np.random.default_rng(1)
    start = 0
    while start < len(events):  # uneven batches: the decisions do not depend on them
        stop = start + int(rng.integers(1, 700))
        mon.apply(events[start:stop])
        start = stop
    live = {(p["model_a"], p["model_b"]): p for p in [p.as_dict() for p in mon.pairs("b", "all")]}
    decided = 0
    for off in rep["pairs"]:
        on = live[(off["model_a"], off["model_b"])]
        assert on["design"] == off["design"] == "clusters"
        assert on["clusters"]["observations"] == off["clusters"]["observations"]
        assert on["clusters"]["e_value"] == pytest.approx(off["clusters"]["e_value"], rel=1e-9)
        assert on["verdict"] == off["verdict"]
        assert (on["decided"] or {}).get("n") == (off["decided"] or {}).get("n")
        decided += off["decided"] is not None
    # m0 against m3 (2.2 logits apart) is decided on 260 clusters; m2 against m1 is not.
    assert decided >= 1
    assert live[("m1", "m2")]["verdict"] == "unresolved"


def test_every_item_favouring_one_model_gives_the_same_q_everywhere() -> None:
    # N*'s plug-in variance is 0 here; every face must still agree on one finite q.
    n = 30
    xa, xb = np.ones(n), np.zeros(n)
    q_summary = paired_summary(xa, xb).q()
    table = ScoreTable(source="t", benchmark=None,
                       item_ids=np.array([str(i) for i in range(n)]), models=("A", "B"),
                       scores=np.column_stack([xa, xb]))
    q_report = build_report(table).as_dict()["pairs"][0]["fixed_n"]["q"]
    mon = Monitor()
    mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, score=s)
               for i in range(n) for m, s in (("A", 1.0), ("B", 0.0))])
    q_live = mon.ranking("b").to_json()["pairs"][0]["fixed_n"]["q"]
    assert q_summary == q_report == pytest.approx(q_live, rel=1e-12)
    assert 1.0 < q_live < math.inf  # 30:0 is decisive (exact McNemar p = 1.9e-9)
    # and one such item is not
    mon1 = Monitor()
    mon1.apply([ItemResult(benchmark="b", item_id="0", model=m, score=s)
                for m, s in (("A", 1.0), ("B", 0.0))])
    assert 0.0 < mon1.ranking("b").to_json()["pairs"][0]["fixed_n"]["q"] < 0.1
