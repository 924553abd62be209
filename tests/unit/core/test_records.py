"""One serializer, one vocabulary: the ranking route and ``report --json`` name every pair
figure alike, because one function writes both."""

from __future__ import annotations

from typing import Any

import numpy as np

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.io.tables import ScoreTable
from monitor.offline.replay import with_anytime
from monitor.offline.report import build_report

#: Keys only a report has: the models' ranks, and its family's adjusted p-values.
REPORT_ONLY = {"rank_a", "rank_b", "fixed_n.p_adjusted", "fixed_n.significant"}


def _keys(pair: dict[str, Any]) -> set[str]:
    out = set()
    for key, value in pair.items():
        if isinstance(value, dict) and key in ("fixed_n", "clusters"):
            out |= {f"{key}.{k}" for k in value}
        else:
            out.add(key)
    return out


def test_the_ranking_route_and_the_report_name_every_pair_figure_alike() -> None:
    rng = np.random.default_rng(4)
    n, models = 300, ["a", "b", "c"]
    x = (rng.random((n, 3)) < np.array([0.8, 0.6, 0.55])).astype(float)
    groups = np.array([f"g{i % 5}" for i in range(n)], dtype=object)
    table = ScoreTable(source="t", benchmark="t", item_ids=np.array([str(i) for i in range(n)]),
                       models=tuple(models), scores=x, groups=groups, group_kind="strata",
                       group_col="g")
    report = with_anytime(build_report(table), table, order="file").as_dict()
    mon = Monitor(CoreConfig(design="strata", family="adjacent"))
    mon.apply([ItemResult(benchmark="t", item_id=str(i), model=m, score=float(x[i, j]),
                          cluster=str(groups[i]))
               for i in range(n) for j, m in enumerate(models)])
    live = mon.ranking("t").to_json()["pairs"]
    assert len(live) == len(report["pairs"]) == 2
    for on, off in zip(live, report["pairs"], strict=True):
        assert (on["model_a"], on["model_b"]) == (off["model_a"], off["model_b"])
        assert _keys(on) == _keys(off) - REPORT_ONLY
        assert list(on) == [k for k in off if k not in REPORT_ONLY]  # the same order, too
        assert on["verdict"] == off["verdict"]
