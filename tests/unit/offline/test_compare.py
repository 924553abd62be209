"""The compare driver against scipy/statsmodels, its clean-items rerun and the command's JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from monitor.cli import main
from monitor.contracts import jsonable
from monitor.errors import InputError
from monitor.io.tables import read_table
from monitor.offline.compare import compare_pair, compare_table

GSM = "zeroeval_gsm8k_item_correctness_wide.csv"
A, B = "Mistral-Large-2", "Qwen2-72B-Instruct"


def test_binary_pair_primary_test_is_statsmodels_exact_mcnemar(shared_data: Path) -> None:
    xa, xb, _ = read_table(shared_data / GSM, exclude=("gold",)).pair(A, B)
    r = compare_pair(xa, xb, a=A, b=B, n_resamples=500)
    n10, n01 = int(np.sum((xa == 1) & (xb == 0))), int(np.sum((xa == 0) & (xb == 1)))
    ref = mcnemar([[0, n10], [n01, 0]], exact=True).pvalue  # statsmodels, exact binomial
    assert r.primary_test == "mcnemar_exact"
    assert r.primary_pvalue == pytest.approx(ref, rel=1e-12)
    assert r.significant is bool(ref < 0.05) is True
    assert (r.tests.wins, r.tests.losses) == (n10, n01)


def test_continuous_pair_primary_test_is_scipy_paired_t() -> None:
    rng = np.random.default_rng(5)
    xa = rng.beta(3, 2, 200)
    xb = np.clip(xa - 0.03 + rng.normal(0, 0.1, 200), 0, 1)
    r = compare_pair(xa, xb, a="A", b="B", n_resamples=500, alpha=0.1)
    ref = stats.ttest_rel(xa, xb)
    assert r.primary_test == "paired_t"
    assert r.primary_pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    low, high = ref.confidence_interval(confidence_level=0.9)  # CIs at 1 − α
    tt = r.tests.ttest
    assert tt is not None
    assert (tt.ci_low, tt.ci_high) == pytest.approx((low, high), rel=1e-9)
    assert r.percentile.confidence == r.bca.confidence == pytest.approx(0.9)


def test_one_continuous_item_has_no_primary_test() -> None:
    r = compare_pair([0.7], [0.2], a="A", b="B", n_resamples=100)
    assert r.tests.ttest is None and math.isnan(r.primary_pvalue)
    assert r.significant is False
    assert r.to_dict()["tests"]["paired_t"] is None


def test_bootstrap_interval_agrees_with_scipy() -> None:
    rng = np.random.default_rng(8)
    xa = (rng.uniform(size=600) < 0.7).astype(float)
    xb = np.where(rng.uniform(size=600) < 0.25, 1 - xa, xa)
    r = compare_pair(xa, xb, a="A", b="B", n_resamples=20_000, seed=1)
    ref = stats.bootstrap((xa - xb,), np.mean, n_resamples=20_000, method="percentile",
                          rng=np.random.default_rng(2)).confidence_interval
    # Monte-Carlo error of a 2.5 % quantile of 20k resamples: well under 0.004 here.
    assert r.percentile.low == pytest.approx(ref.low, abs=0.004)
    assert r.percentile.high == pytest.approx(ref.high, abs=0.004)
    assert r.bootstrap_excludes_zero is (r.percentile.low > 0 or r.percentile.high < 0)


def test_resolution_figures_follow_alpha_and_power() -> None:
    rng = np.random.default_rng(3)
    xa = (rng.uniform(size=400) < 0.6).astype(float)
    xb = (rng.uniform(size=400) < 0.5).astype(float)
    loose = compare_pair(xa, xb, a="A", b="B", n_resamples=100)
    strict = compare_pair(xa, xb, a="A", b="B", n_resamples=100, alpha=0.01, power=0.9)
    assert strict.summary.n_star(alpha=0.01, power=0.9) > loose.summary.n_star()
    assert strict.q() == strict.summary.q(alpha=0.01, power=0.9) < loose.q()
    assert strict.n_star() == math.ceil(strict.summary.n_star(alpha=0.01, power=0.9))
    assert loose.resolved is (loose.q() >= 1.0)


def test_clean_items_are_the_pair_without_the_suspects(shared_data: Path) -> None:
    path = shared_data / GSM
    t = read_table(path, exclude=("gold",))
    suspects = {str(i) for i in t.item_ids[:40]}
    r = compare_table(path, a=A, b=B, exclude=("gold",), n_resamples=200,
                      suspect_items=suspects)
    ca, cb = t.column(A)[40:], t.column(B)[40:]
    both = ~np.isnan(ca) & ~np.isnan(cb)
    ref = compare_pair(ca[both], cb[both], a=A, b=B, n_resamples=200)
    assert r.clean_items is not None and r.clean_items.n == int(both.sum()) == r.n - 40
    assert r.clean_items.to_dict() == ref.to_dict()
    assert r.to_dict()["clean_items"]["n"] == r.n - 40
    # Suspects outside the table remove nothing: no rerun.
    none = compare_table(path, a=A, b=B, exclude=("gold",), n_resamples=200,
                         suspect_items={"not-an-item"})
    assert none.clean_items is None and "clean_items" not in none.to_dict()


def test_to_dict_is_the_command_json(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / GSM
    rc = main(["compare", str(path), "--a", A, "--b", B, "--exclude", "gold", "--B", "300",
               "--seed", "7", "--zero-method", "pratt", "--json"])
    assert rc == 0
    r = compare_table(path, a=A, b=B, exclude=("gold",), n_resamples=300, seed=7,
                      zero_method="pratt")
    assert json.loads(capsys.readouterr().out) == jsonable(r.to_dict())
    assert r.to_dict()["file"] == str(path)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"a": "m1", "b": "m1"}, "two different models"),
    ({"a": "m1", "b": "m2", "n_resamples": 50}, "--B must be at least 100"),
    ({"a": "m1", "b": "m9"}, "model 'm9' is not a column of this wide table"),
])
def test_bad_arguments(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    table = tmp_path / "t.csv"
    table.write_text("item_id,m1,m2\na,1,0\nb,0,1\nc,1,1\n")
    with pytest.raises(ValueError, match=message):
        compare_table(table, **kwargs)  # type: ignore[arg-type]


def test_a_model_missing_from_a_wide_table_lists_every_model_column(tmp_path: Path) -> None:
    """Only the id and the two compared columns are parsed, yet the error lists every column
    the table has (not just the one model that was read), with file, line and field."""
    table = tmp_path / "t.csv"
    table.write_text("item_id,gold,m1,m2,m3\na,18,1,0,1\nb,3,0,1,1\n")
    with pytest.raises(InputError) as err:
        compare_table(table, a="m1", b="m9")
    assert err.value.source == str(table) and err.value.line == 1 and err.value.field == "m9"
    assert "are gold, m1, m2, m3" in str(err.value)


def test_a_wide_jsonl_table_whose_first_record_leaves_out_a_model(tmp_path: Path) -> None:
    """The models of a wide JSONL table are the keys of all its records (as read_table reads
    them), not of its first record only."""
    table = tmp_path / "t.jsonl"
    records = [{"item_id": "a", "m1": 1, "m3": 0}, {"item_id": "b", "m1": 0, "m2": 1, "m3": 1},
               {"item_id": "c", "m1": 1, "m2": 0, "m3": 1}, {"item_id": "d", "m1": 1, "m2": 1}]
    table.write_text("".join(json.dumps(r) + "\n" for r in records))
    fig = compare_table(table, a="m1", b="m2", n_resamples=200).to_dict()
    assert (fig["n"], fig["mean_a"], fig["mean_b"]) == (3, 2 / 3, 2 / 3)
    with pytest.raises(InputError, match="are m1, m3, m2"):
        compare_table(table, a="m1", b="m9", n_resamples=200)
