"""Classical paired tests agree with scipy and statsmodels on real GSM8K and MMLU-Pro pairs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from monitor.io.tables import read_table
from monitor.stats import paired_tests as pt

# Real pairs: neighbours in the ranking (close gaps) and distant ones (clear gaps).
GSM8K_PAIRS = [("Mistral-Large-2", "Qwen2-72B-Instruct"),
               ("Meta-Llama-3-8B-Instruct", "Qwen2-7B-Instruct"),
               ("Athene-70B", "Meta-Llama-3.1-70B-Instruct")]
MMLU_PAIRS = [("Meta-Llama-3-70B", "Qwen1.5-72B-Chat"),
              ("Llama-2-13b-hf", "Llama-2-7b-hf"),
              ("DeepSeek-Coder-V2", "Mixtral-8x7B-Instruct-v0.1")]


@pytest.fixture(scope="module")
def real_pairs(shared_data: Path) -> list[tuple[np.ndarray, np.ndarray]]:
    gsm = read_table(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv", exclude=("gold",))
    mmlu = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                      cluster_col="category")
    out = []
    for table, pairs in ((gsm, GSM8K_PAIRS), (mmlu, MMLU_PAIRS)):
        for a, b in pairs:
            xa, xb, _ = table.pair(a, b)
            out.append((xa, xb))
    return out


def test_mcnemar_and_sign_agree_with_statsmodels_and_binomtest(real_pairs: list) -> None:
    for xa, xb in real_pairs:
        r = pt.paired_tests(xa, xb)
        assert r.binary and r.mcnemar is not None
        n11 = int(np.sum((xa == 1) & (xb == 1)))
        n00 = int(np.sum((xa == 0) & (xb == 0)))
        ref = mcnemar([[n11, r.wins], [r.losses, n00]], exact=True)
        assert r.mcnemar.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
        assert r.mcnemar.statistic == ref.statistic
        bt = stats.binomtest(r.wins, r.wins + r.losses, 0.5)
        assert r.sign.pvalue == pytest.approx(bt.pvalue, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("zero_method", ["wilcox", "pratt", "zsplit"])
def test_wilcoxon_agrees_with_scipy_on_real_pairs(real_pairs: list, zero_method: str) -> None:
    for xa, xb in real_pairs:
        r = pt.wilcoxon_signed_rank(xa - xb, zero_method=zero_method)  # type: ignore[arg-type]
        ref = stats.wilcoxon(xa, xb, zero_method=zero_method, method="asymptotic")
        assert r.method == "asymptotic"
        assert r.statistic == pytest.approx(ref.statistic)
        assert r.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)


def test_wilcoxon_on_continuous_and_small_samples() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.uniform(size=400), rng.uniform(size=400) * 0.95
    d = np.round(a - b, 2)  # rounding creates ties and zeros
    for zm in ("wilcox", "pratt", "zsplit"):
        ref = stats.wilcoxon(d, zero_method=zm, method="asymptotic")
        assert pt.wilcoxon_signed_rank(d, zero_method=zm).pvalue == pytest.approx(ref.pvalue)
    small = rng.normal(0.3, 1, size=15)
    r = pt.wilcoxon_signed_rank(small)
    assert r.method == "exact"
    assert r.pvalue == pytest.approx(stats.wilcoxon(small, method="exact").pvalue)


def test_paired_t_agrees_with_ttest_rel(real_pairs: list) -> None:
    rng = np.random.default_rng(2)
    cont = (rng.uniform(size=300), rng.uniform(size=300))
    for xa, xb in [*real_pairs, cont]:
        r = pt.paired_t(xa - xb)
        ref = stats.ttest_rel(xa, xb)
        assert r.statistic == pytest.approx(ref.statistic, rel=1e-9)
        assert r.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
        ci = ref.confidence_interval(0.95)
        assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)


def test_rank_biserial() -> None:
    # 0/1 data: (n10 − n01) / (n10 + n01) by construction of the ranks.
    r = pt.paired_tests([1, 1, 1, 0, 1, 0], [0, 0, 1, 1, 1, 0])
    assert r.rank_biserial == pytest.approx((2 - 1) / 3)
    # Hand-computed: |d| ranks 0.5→1, 1→2, 2→3, 3→4, 4→5, ..., 7→8, so R− = 1 + 5 = 6,
    # R+ = 36 − 6 = 30 and r = (30 − 6) / 36 (Kerby 2014's simple difference formula).
    d = np.array([1, 2, 3, -4, 5, 6, 7, -0.5])
    assert pt.rank_biserial(d) == pytest.approx((30 - 6) / 36)


def test_warnings_small_sample_and_ties() -> None:
    r = pt.paired_tests([1, 1, 0, 1, 1], [1, 1, 0, 0, 1])
    text = " ".join(r.warnings)
    assert "small sample" in text and "many ties" in text and "discordant" in text
    big = pt.paired_tests(np.r_[np.ones(300), np.zeros(300)], np.r_[np.zeros(200), np.ones(400)])
    assert not any("small sample" in w or "many ties" in w for w in big.warnings)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="equal length"):
        pt.paired_tests([1, 0], [1])
    with pytest.raises(ValueError, match="NaN"):
        pt.paired_tests([1, np.nan], [1, 0])
    with pytest.raises(ValueError, match="zero_method"):
        pt.wilcoxon_signed_rank([1.0], zero_method="drop")  # type: ignore[arg-type]
