"""Live = offline: the figures the live core shows equal ``llm-monitor report --anytime``.

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
from monitor.stats.running import PairState

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
MMLU = DATA / "mmlu_pro_item_correctness_wide.csv"
SEED = 7


@pytest.mark.slow
def test_live_core_equals_report_anytime_on_real_mmlu_pro(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert MMLU.exists(), f"the real MMLU-Pro table is missing: {MMLU}"
    assert main(["report", str(MMLU), "--exclude", "src", "--cluster-col", "category",
                 "--anytime", "--order", "shuffle", "--seed", str(SEED), "--json"]) == 0
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
    mon = Monitor(CoreConfig(alpha=0.05, power=0.8, family="adjacent"))
    for start in range(0, len(events), 20_000):
        mon.apply(events[start:start + 20_000])
    live = mon.ranking("mmlu_pro")

    assert [r["model"] for r in rep["ranking"]] == [r["model"] for r in live["models"]]
    assert len(rep["pairs"]) == len(live["pairs"]) == 31
    for off, on in zip(rep["pairs"], live["pairs"], strict=True):
        assert (off["model_a"], off["model_b"]) == (on["model_a"], on["model_b"])
        assert off["n"] == on["n"]
        for key_off, key_on in (("delta", "delta"), ("sigma_d2", "sigma_d2"),
                                ("n_star_exact", "n_star"), ("q", "q"),
                                ("q_cluster", "q_cluster"), ("mde", "mde"),
                                ("log_e_value", "log_e"), ("cs_low", "cs_low"),
                                ("cs_high", "cs_high")):
            assert on[key_on] == pytest.approx(off[key_off], rel=1e-9, abs=1e-12), key_on
        if math.isfinite(on["e_value"]):
            assert on["e_value"] == pytest.approx(off["e_value"], rel=1e-9)
        # The same decision, taken at the same paired item, at the same fixed share of α.
        assert on["e_threshold"] == pytest.approx(off["e_threshold"], rel=1e-12)
        assert (on["decided"] is not None) == off["resolved_anytime"]
        if off["resolved_anytime"]:
            assert on["decided"]["n"] == off["first_resolved_at"]
            winner = off["model_a"] if off["anytime_direction"] > 0 else off["model_b"]
            assert on["verdict"] == f"resolved:{winner}"
        else:
            assert on["verdict"] == "unresolved"
    resolved = sum(p["resolved_anytime"] for p in rep["pairs"])
    assert rep["anytime"]["resolved_anytime"] == resolved and resolved >= 5


def test_every_item_favouring_one_model_gives_the_same_q_everywhere() -> None:
    # N*'s plug-in variance is 0 here; every face must still agree on one finite q.
    n = 30
    xa, xb = np.ones(n), np.zeros(n)
    q_summary = paired_summary(xa, xb).q()
    state = PairState()
    state.update_batch(xa, xb)
    q_state = state.figures().q
    table = ScoreTable(source="t", benchmark=None,
                       item_ids=np.array([str(i) for i in range(n)]), models=("A", "B"),
                       scores=np.column_stack([xa, xb]))
    q_report = build_report(table).as_dict()["pairs"][0]["q"]
    mon = Monitor()
    mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, score=s)
               for i in range(n) for m, s in (("A", 1.0), ("B", 0.0))])
    q_live = mon.ranking("b")["pairs"][0]["q"]
    assert q_summary == q_state == q_report == pytest.approx(q_live, rel=1e-12)
    assert 1.0 < q_live < math.inf  # 30:0 is decisive (exact McNemar p = 1.9e-9)
    # and one such item is not
    mon1 = Monitor()
    mon1.apply([ItemResult(benchmark="b", item_id="0", model=m, score=s)
                for m, s in (("A", 1.0), ("B", 0.0))])
    assert 0.0 < mon1.ranking("b")["pairs"][0]["q"] < 0.1
