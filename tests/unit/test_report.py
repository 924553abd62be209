"""build_report: ranking, families, multiplicity and the verdict definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from monitor.errors import InputError
from monitor.io.tables import ScoreTable
from monitor.offline.replay import with_anytime
from monitor.offline.report import build_report, headline
from monitor.stats import power as pw

CONTRACT = ("model_a", "model_b", "n", "delta", "sigma_d2", "rho", "fixed_n")
FIXED_N = ("n_star", "n_star_exact", "q", "mde", "design_effect", "n_clusters", "n_star_cluster",
           "q_cluster", "q_strata", "p_value", "p_adjusted", "significant")


def _table(scores: np.ndarray, *, groups: np.ndarray | None = None,
           kind: str | None = None) -> ScoreTable:
    k = scores.shape[1]
    return ScoreTable(source="t.csv", benchmark="b", item_ids=np.arange(len(scores)).astype(str),
                      models=tuple(f"m{j}" for j in range(k)), scores=scores, groups=groups,
                      group_kind=kind, group_col=None if kind is None else "g")  # type: ignore[arg-type]


def _board(seed: int = 0, n: int = 3000, k: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ability = np.linspace(0.3, 1.2, k)
    difficulty = rng.normal(0, 1.2, n)
    p = 1 / (1 + np.exp(-(ability[None, :] - difficulty[:, None])))
    return (rng.random((n, k)) < p).astype(float)


@pytest.mark.parametrize("correction", ["none", "bonferroni", "holm", "bh"])
def test_adjacent_family_and_correction(correction: str) -> None:
    x = _board()
    rng = np.random.default_rng(1)
    groups = rng.choice(np.array(list("abcdefghij")), size=len(x))
    rep = build_report(_table(x, groups=groups, kind="cluster"), correction=correction).as_dict()
    means = x.mean(axis=0)
    assert [r["model"] for r in rep["ranking"]] == [f"m{j}" for j in np.argsort(-means)]
    assert [r["rank"] for r in rep["ranking"]] == list(range(1, 7))
    pairs = rep["pairs"]
    assert len(pairs) == 5
    for k, pair in enumerate(pairs):
        assert pair["model_a"] == rep["ranking"][k]["model"]
        assert pair["model_b"] == rep["ranking"][k + 1]["model"]
        for key in CONTRACT:
            assert key in pair
        # The fixed-N figures, apart: no key of them is a "resolved" verdict.
        assert tuple(pair["fixed_n"]) == FIXED_N
        assert not any(key.startswith("resolved") for key in pair)
    pairs = [p | p["fixed_n"] for p in pairs]
    # Adjusted p-values equal statsmodels' multipletests on the family.
    raw = np.array([p["p_value"] for p in pairs])
    adj = np.array([p["p_adjusted"] for p in pairs])
    sm = {"bonferroni": "bonferroni", "holm": "holm", "bh": "fdr_bh"}
    expected = raw if correction == "none" else multipletests(raw, method=sm[correction])[1]
    np.testing.assert_allclose(adj, expected, rtol=1e-12)
    # N* is sized at α/m under the FWER corrections, at α otherwise.
    level = 0.05 / 5 if correction in ("bonferroni", "holm") else 0.05
    assert rep["fixed_n"]["alpha_per_pair"] == pytest.approx(level)
    for pair in pairs:
        # Sizing estimates (Agresti & Min 2005 pseudo-items; docs/contract.md): from the
        # reported plug-in δ̂ and σ̂², S = nδ̂ and V = n(σ̂² + δ̂²).
        n, d, s2 = pair["n"], pair["delta"], pair["sigma_d2"]
        d_size = n * d / (n + 2)
        s2_size = (n * (s2 + d * d) + 1) / (n + 2) - d_size**2
        exact = float(pw.n_star(d_size, s2_size, alpha=level))
        assert pair["n_star_exact"] == pytest.approx(exact, rel=1e-10)
        assert pair["n_star"] == math.ceil(exact)
        # the small-sample factor G/(G − 1) of the cluster-robust variance (G = 10 clusters),
        # and q_cluster never above q
        inflation = max(pair["design_effect"] * 10 / 9, 1.0)
        assert pair["q_cluster"] == pytest.approx(pair["q"] / inflation, rel=1e-12)
        assert pair["q_cluster"] <= pair["q"]
        assert pair["significant"] == (pair["p_adjusted"] < 0.05)
        assert pair["q_strata"] is None
    # Without the decisions the report counts pairs, no verdict.
    assert rep["verdicts"] == {"pairs": 5}


def test_all_family_and_strata() -> None:
    x = _board(k=5)
    groups = np.repeat(np.array(list("abc")), 1000)
    rep = build_report(_table(x, groups=groups, kind="strata"), family="all").as_dict()
    assert len(rep["pairs"]) == 10
    assert rep["groups"] == {"kind": "strata", "column": "g", "n_groups": 3}
    for pair in rep["pairs"]:
        assert pair["rank_a"] < pair["rank_b"]
        fixed = pair["fixed_n"]
        assert fixed["design_effect"] <= 1 + 1e-12
        assert fixed["q_cluster"] is None and fixed["q_strata"] > 0


def test_no_groups_leaves_design_effect_empty() -> None:
    rep = build_report(_table(_board(k=3))).as_dict()
    assert rep["groups"] is None
    assert all(p["fixed_n"]["design_effect"] is None and p["fixed_n"]["q_cluster"] is None
               for p in rep["pairs"])
    assert rep["design"] == "items"


def test_zero_gap_reports_infinite_n_star() -> None:
    x = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=float)
    pair = build_report(_table(x)).as_dict()["pairs"][0]
    fixed = pair["fixed_n"]
    assert pair["delta"] == 0 and math.isinf(fixed["n_star"])
    assert fixed["q"] == 0 and fixed["p_value"] == 1.0


def test_pair_without_shared_items_is_named() -> None:
    x = np.array([[1.0, np.nan], [np.nan, 0.0]])
    with pytest.raises(InputError, match="'m0' and 'm1' share no item"):
        build_report(_table(x)).as_dict()
    # Ranking m0 (1.0), m2 (2/3), m1 (0.0): both adjacent pairs share items, (m0, m1) does not.
    x2 = np.array([[1.0, np.nan, 1.0], [np.nan, 0.0, 0.0], [1.0, np.nan, 1.0]])
    assert len(build_report(_table(x2)).as_dict()["pairs"]) == 2
    with pytest.raises(InputError, match="share no item"):
        build_report(_table(x2), family="all").as_dict()


def test_bad_options() -> None:
    t = _table(_board(k=3))
    with pytest.raises(ValueError, match="`method`"):
        build_report(t, correction="sidak").as_dict()
    with pytest.raises(ValueError, match="`family`"):
        build_report(t, family="some").as_dict()
    with pytest.raises(ValueError, match="`alpha`"):
        build_report(t, alpha=1.5).as_dict()


def test_ranking_entries_carry_rank_sets_and_tiers() -> None:
    x = _board(seed=3)
    rep = build_report(_table(x), rank_method="simultaneous").as_dict()
    ranks = rep["fixed_n"]["rank_sets"]
    assert ranks["method"] == "simultaneous" and ranks["procedure"] == "max-|t| stepdown"
    assert ranks["covariance"] == "iid" and ranks["draws"] == 2000 and ranks["seed"] == 20240601
    tiers = [e["fixed_n_tier"] for e in rep["ranking"]]
    assert tiers == sorted(tiers) and tiers[0] == 1 and ranks["tiers"] == tiers[-1]
    for e in rep["ranking"]:
        assert e["fixed_n_rank_low"] <= e["rank"] <= e["fixed_n_rank_high"]
        assert e["rank_low"] is None  # the decisions' rank sets come with the decisions
    # Same table, same default seed: same sets; the stats function on the same order agrees.
    again = build_report(_table(x), rank_method="simultaneous").as_dict()
    assert ([e["fixed_n_rank_high"] for e in again["ranking"]]
            == [e["fixed_n_rank_high"] for e in rep["ranking"]])


def test_rank_sets_follow_the_groups_and_the_method() -> None:
    x = _board(seed=4)
    groups = np.repeat(np.arange(30), 100)
    sim_m = "simultaneous"
    cl = build_report(_table(x, groups=groups, kind="cluster"), rank_method=sim_m).as_dict()
    st = build_report(_table(x, groups=groups, kind="strata"), rank_method=sim_m).as_dict()
    assert cl["fixed_n"]["rank_sets"]["covariance"] == "cluster-robust"
    assert cl["fixed_n"]["rank_sets"]["draw_distribution"] == "multivariate t, df = 29"
    assert st["fixed_n"]["rank_sets"]["covariance"] == "stratified"
    assert st["fixed_n"]["rank_sets"]["draw_distribution"] == "normal"
    marg = build_report(_table(x), rank_method="marginal").as_dict()
    sim = build_report(_table(x), rank_method=sim_m).as_dict()
    assert marg["fixed_n"]["rank_sets"]["method"] == "marginal"
    for m, s in zip(marg["ranking"], sim["ranking"], strict=True):
        assert (s["fixed_n_rank_low"] <= m["fixed_n_rank_low"]
                and m["fixed_n_rank_high"] <= s["fixed_n_rank_high"])
    none = build_report(_table(x)).as_dict()  # the library default: pair figures only
    assert none["fixed_n"]["rank_sets"] is None and none["ranking"][0]["fixed_n_rank_low"] is None
    with pytest.raises(ValueError, match="`rank_method`"):
        build_report(_table(x), rank_method="bootstrap")


def test_rank_sets_say_why_they_are_missing() -> None:
    # m0 and m1 share no item: the adjacent family is fine, the rank sets (all pairs) are not.
    x2 = np.array([[1.0, np.nan, 1.0], [np.nan, 0.0, 0.0], [1.0, np.nan, 1.0]])
    rep = build_report(_table(x2), rank_method="simultaneous").as_dict()
    assert "share no item" in rep["fixed_n"]["rank_sets"]["unavailable"]
    assert all(e["fixed_n_rank_low"] is None and e["fixed_n_tier"] is None
               for e in rep["ranking"])


def test_human_table_keeps_names_and_rank_sets_at_80_columns() -> None:
    from rich.console import Console

    from monitor.commands.report import _human

    x = _board(seed=5, k=5)
    t = _table(x)
    t = ScoreTable(source=t.source, benchmark=t.benchmark, item_ids=t.item_ids,
                   models=tuple(f"Meta-Llama-3_1-70B-Instruct-{j}" for j in range(5)),
                   scores=x, groups=None, group_kind=None, group_col=None)
    rep = with_anytime(build_report(t, rank_method="simultaneous"), t).as_dict()
    console = Console(width=80, force_terminal=True, color_system=None, record=True)
    _human(rep)(console)
    out = console.export_text()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    for k, e in enumerate(rep["ranking"]):  # each name on one line, rank set, tier, verdict
        line = next(line for line in lines if e["model"] in line)
        assert f"[{e['rank_low']}, {e['rank_high']}]" in line and f" {e['tier']} " in line
        if k < len(rep["pairs"]):
            pair = rep["pairs"][k]
            word = "resolved" if pair["verdict"].startswith("resolved:") else "open"
            assert word in line, line
            if pair["decided"] is not None:
                assert f"n={pair['decided']['n']:,}" in line, line
    words = " ".join(out.split())  # the text as read, whatever the line breaks
    assert "ranks" in out and "tier" in out
    assert "items replayed in a seeded shuffled order (seed 0)" in words
    assert any(p["decided"] for p in rep["pairs"]) and not all(p["decided"] for p in rep["pairs"])
    # The one count, last, and no second "resolved" one beside it.
    v = rep["verdicts"]
    assert words.endswith(headline(rep))
    assert headline(rep).startswith(f"{v['resolved']} of 4 adjacent pairs resolved (decided, "
                                    f"final) · {v['unresolved']} unresolved · {rep['tiers']} ")
    assert words.count(" resolved (") == 1
