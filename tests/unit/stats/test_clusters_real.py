"""The MMLU-Pro design effects quoted in docs/clusters-vs-strata.md, recomputed."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.io.tables import read_table
from monitor.stats.clusters import design_effect, strata_design_effect
from monitor.stats.paired import paired_summary


@pytest.mark.parametrize(
    ("a", "b", "de", "kish", "sde"),
    [
        # docs/clusters-vs-strata.md table, rows 3 and 9 (the two ends of the DE range)
        ("Meta-Llama-3_1-70B", "Meta-Llama-3-70B", 4.49, 4.04, 0.996),
        ("Yi-34B", "mathstral-7B", 40.21, 35.70, 0.962),
    ],
)
def test_mmlu_pro_adjacent_pair_design_effects(
    shared_data: Path, a: str, b: str, de: float, kish: float, sde: float
) -> None:
    t = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                   cluster_col="category")
    xa, xb, g = t.pair(a, b)
    assert g is not None and len(set(g)) == 14 and xa.size == 12032
    res = design_effect(xa - xb, g)
    assert res.de == pytest.approx(de, abs=0.005)
    assert res.kish_de == pytest.approx(kish, abs=0.005)
    assert strata_design_effect(xa - xb, g) == pytest.approx(sde, abs=0.0005)
    s = paired_summary(xa, xb)
    assert res.q_cluster(s.n, s.n_star()) < s.q()
