"""`llm-monitor report` end to end: the real tables, the JSON contract, clean errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.cli import main
from tests.conftest import terminal_env

CONTRACT = ("model_a", "model_b", "verdict", "decided", "design", "n", "delta", "sigma_d2", "rho",
            "e_value", "e_threshold", "cs_low", "cs_high", "q_anytime", "fixed_n")
FIXED_N = ("n_star", "q", "mde", "design_effect", "q_cluster", "p_value", "p_adjusted")


def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    # The width is given, never inherited: piped output is laid out for it (or for 120
    # columns when it is narrower), whatever terminal runs the tests.
    return subprocess.run([sys.executable, "-m", "monitor.cli", "report", *args],
                          capture_output=True, text=True, timeout=120,
                          env=terminal_env(columns), stdin=subprocess.DEVNULL)


@pytest.mark.integration
def test_mmlu_wide_json_contract(shared_data: Path) -> None:
    res = _cli(str(shared_data / "mmlu_pro_item_correctness_wide.csv"), "--exclude", "src",
               "--cluster-col", "category", "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert len(rep["ranking"]) == 32 and len(rep["pairs"]) == 31
    assert set(rep["ranking"][0]) >= {"model", "mean", "n"}
    means = [r["mean"] for r in rep["ranking"]]
    assert means == sorted(means, reverse=True)
    for pair in rep["pairs"]:
        for key in CONTRACT:
            assert key in pair, key
        for key in FIXED_N:
            assert key in pair["fixed_n"], key
        assert pair["fixed_n"]["q_cluster"] is not None and pair["fixed_n"]["design_effect"] > 0
        # Sampled clusters, 14 of them: no decision is valid, and each pair says why.
        assert pair["verdict"] == "undecidable" and "14 clusters" in pair["undecidable"]
        assert pair["decided"] is None and pair["clusters"]["seen"] == 14
    assert rep["groups"] == {"kind": "cluster", "column": "category", "n_groups": 14}
    assert rep["design"] == "clusters" and rep["verdicts"]["undecidable"] == 31
    assert rep["family"] == "adjacent" and rep["fixed_n"]["correction"] == "holm"


@pytest.mark.integration
def test_human_output_states_family_correction_and_groups(shared_data: Path,
                                                          columns: int) -> None:
    res = _cli(str(shared_data / "mmlu_pro_item_correctness_wide.csv"), "--exclude", "src",
               "--cluster-col", "category", columns=columns)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "family: adjacent pairs of the ranking (31 pairs)" in out
    words = " ".join(out.split())
    assert "design: sampled clusters ('category', 14 groups)" in words
    assert "items replayed in a seeded shuffled order (seed 0)" in words
    assert "0 of 31 adjacent pairs resolved (decided, final) · 0 unresolved · 31 undecidable" \
        in words
    assert "RESOLVED" not in out and "fixed-N only" not in out
    # Piped output takes the terminal's width, and at least 120 columns (a narrower one would
    # squeeze the model names out): the longest name sits on one line only when wider.
    width = max(columns, 120)
    assert max(len(line) for line in out.splitlines()) <= width
    longest = "merged(2026-02, probably gemini-3.1-pro)"
    assert (longest in out) == (width > 120), out


@pytest.mark.integration
@pytest.mark.parametrize("groups", [(), ("--cluster-col", "category"),
                                    ("--strata-col", "category")])
@pytest.mark.parametrize("family", ["adjacent", "all"])
def test_human_table_has_one_layout_per_family(
    shared_data: Path, groups: tuple[str, ...], family: str, columns: int
) -> None:
    # Every combination of family and grouping renders one table: a row per model for the
    # adjacent family, a row per pair (A and B columns) for all pairs — never both.
    res = _cli(str(shared_data / "mmlu_pro_item_correctness_wide.csv"), "--exclude",
               "src" if groups else "src,category", "--top", "5", "--family", family, *groups,
               columns=columns)
    assert res.returncode == 0, res.stderr
    header = next(line for line in res.stdout.splitlines() if " mean " in line or " A " in line)
    cols = header.split()
    assert ("A" in cols and "B" in cols) == (family == "all"), header
    assert ("model" in cols) == (family == "adjacent"), header
    assert cols.count("q¹") == 1 and cols.count("verdict") == 1, header
    rows = [line for line in res.stdout.splitlines() if re.match(r"\s*\d+\.?\s", line)
            and "pairs resolved (decided, final)" not in line]  # the headline
    # All pairs: 10 pair rows, then the ranking with its rank sets (5 rows) in its own table.
    assert len(rows) == (5 if family == "adjacent" else 10 + 5), res.stdout
    assert sum(bool(re.search(r"\[\d+, \d+\]", line)) for line in rows) == 5, res.stdout


def test_long_and_gsm8k_tables_through_the_cli(
    shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["report", str(shared_data / "zeroeval_gsm8k_item_correctness_long.csv.gz"),
               "--family", "all", "--correction", "bh", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(rep["pairs"]) == 42 * 41 // 2
    rc = main(["report", str(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv"),
               "--exclude", "gold", "--json"])
    wide = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(wide["pairs"]) == 41
    rc = main(["report", str(shared_data / "mmlu_pro_item_correctness_long.csv.gz"),
               "--strata-col", "category", "--na-as-absent", "--json"])
    rep = json.loads(capsys.readouterr().out)
    assert rc == 0 and rep["groups"]["kind"] == "strata" and rep["design"] == "strata"
    assert all(p["fixed_n"]["q_strata"] is not None for p in rep["pairs"])


@pytest.mark.parametrize(
    ("text", "args", "message"),
    [
        ("item_id,a,b\ni1,1,0\ni2,x,0\n", [], "line 3, field 'a': score 'x' is not a number"),
        ("item_id,a,b\ni1,1,0\ni2,1,3\n", [], "line 3, field 'b': score '3' is outside [0, 1]"),
        ("item_id,model,score\ni1,a,1\ni1,a,0\n", [], "line 3, field 'score'"),
        ("item_id,a,b\ni1,1,\ni2,,0\n", [], "'a' and 'b' share no item"),
        ("item_id,a\ni1,1\n", ["--exclude", "src"], "line 1, field 'src': missing column"),
        ("", [], "empty file"),
        ("item_id,a,b\ni1,1,0\n", ["--cluster-col", "a", "--strata-col", "b"], "not both"),
        ("item_id,a,b\ni1,1,0\n", ["--correction", "sidak"], "--correction must be one of"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, args: list[str], message: str
) -> None:
    path = tmp_path / "t.csv"
    path.write_text(text)
    rc = main(["report", str(path), *args])
    _, err = capsys.readouterr()
    assert rc == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
def test_bad_input_in_a_real_process(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("item_id,a,b\ni1,1,0\ni2,1,0.5\ni3,1,NaN\n")
    res = _cli(str(path))
    assert res.returncode == 2
    assert f"{path}, line 4, field 'b'" in res.stderr
    assert "Traceback" not in res.stderr


def test_mmlu_top10_figures_quoted_in_docs(shared_data: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    # docs/mmlu-pro-top10.md quotes these fixed-N counts; they must stay what the CLI prints.
    base = ["report", str(shared_data / "mmlu_pro_item_correctness_wide.csv"), "--exclude",
            "src", "--complete-only", "--top", "10", "--json"]
    assert main([*base, "--cluster-col", "category"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [r["n"] for r in rep["ranking"]] == [12_032] * 10
    assert rep["ranking"][0]["model"] == "gpt-4o(2024-05, per-category upload)"
    fixed = [p["fixed_n"] for p in rep["pairs"]]
    counts = (len(fixed), sum(f["q"] >= 1 for f in fixed), sum(f["q_cluster"] >= 1 for f in fixed),
              sum(f["significant"] for f in fixed))
    assert counts == (9, 6, 2, 6)
    des = [f["design_effect"] for f in fixed]
    assert 4.4 < min(des) < 4.6 and 40 < max(des) < 40.5


def test_mmlu_rank_sets_and_tiers(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 9's acceptance: every model of the real table has rank_low ≤ rank ≤ rank_high and
    # a tier; tiers run 1, 2, … down the ranking. Default seed: two runs print the same sets.
    args = ["report", str(shared_data / "mmlu_pro_item_correctness_wide.csv"), "--exclude",
            "src", "--cluster-col", "category", "--json"]
    assert main(args) == 0
    rep = json.loads(capsys.readouterr().out)
    assert len(rep["ranking"]) == 32
    for e in rep["ranking"]:
        assert 1 <= e["fixed_n_rank_low"] <= e["rank"] <= e["fixed_n_rank_high"] <= 32, e
        assert isinstance(e["fixed_n_tier"], int) and e["fixed_n_tier"] >= 1
        # No decision under 14 sampled clusters: every rank is open, one tier.
        assert (e["rank_low"], e["rank_high"], e["tier"]) == (1, 32, 1)
    tiers = [e["fixed_n_tier"] for e in rep["ranking"]]
    assert tiers == sorted(tiers) and tiers[0] == 1
    info = rep["fixed_n"]["rank_sets"]
    assert info["method"] == "simultaneous" and info["covariance"] == "cluster-robust"
    assert info["alpha"] == 0.05 and info["draws"] == 2000 and info["tiers"] == tiers[-1]
    assert info["exact_correlation"] is False  # some models lack items
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["ranking"] == rep["ranking"]
    assert main([*args, "--rank-sets", "marginal", "--rank-seed", "7"]) == 0
    marg = json.loads(capsys.readouterr().out)
    marg_sets = marg["fixed_n"]["rank_sets"]
    assert marg_sets["method"] == "marginal" and marg_sets["seed"] == 7
    assert main([*args, "--rank-sets", "bootstrap"]) == 2
    assert "--rank-sets must be one of simultaneous, marginal" in capsys.readouterr().err
