"""The vectorised bootstrap agrees with scipy.stats.bootstrap within Monte-Carlo error."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from monitor.io.tables import read_table
from monitor.stats import bootstrap as bs

B = 10_000


def _real_d(shared_data: Path) -> np.ndarray:
    gsm = read_table(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv", exclude=("gold",))
    xa, xb, _ = gsm.pair("Mistral-Large-2", "Qwen2-72B-Instruct")
    return xa - xb


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_agrees_with_scipy_bootstrap(shared_data: Path, method: str) -> None:
    rng = np.random.default_rng(12)
    cont = np.round(rng.beta(2, 3, size=500) - rng.beta(2, 3.3, size=500), 3)
    for d in (_real_d(shared_data), cont):
        ours = bs.bootstrap_mean_ci(d, n_resamples=B, method=method,  # type: ignore[arg-type]
                                    rng=np.random.default_rng(1))
        ref = stats.bootstrap((d,), np.mean, n_resamples=B, method=method,
                              random_state=np.random.default_rng(2))
        # Monte-Carlo sd of a 2.5 % bootstrap quantile at B = 10^4 is ≈ 0.03 SE per run;
        # two independent runs differ by ≈ 0.04 SE, so 0.2 SE is a 5-sd band.
        tol = 0.2 * ref.standard_error
        assert ours.low == pytest.approx(ref.confidence_interval.low, abs=tol)
        assert ours.high == pytest.approx(ref.confidence_interval.high, abs=tol)
        assert ours.standard_error == pytest.approx(ref.standard_error, rel=0.05)


def test_counts_and_indices_strategies_have_the_same_distribution(shared_data: Path) -> None:
    d = _real_d(shared_data)
    m1, how1 = bs.bootstrap_means(d, n_resamples=B, rng=np.random.default_rng(3))
    m2, how2 = bs.bootstrap_means(d, n_resamples=B, rng=np.random.default_rng(4),
                                  strategy="indices")
    assert (how1, how2) == ("counts", "indices")
    # Two-sample KS on 10^4 vs 10^4 draws of a lattice distribution: same law → large p.
    assert stats.ks_2samp(m1, m2).pvalue > 0.001
    assert m1.mean() == pytest.approx(d.mean(), abs=4 * d.std() / np.sqrt(len(d) * B))


def test_seeded_and_degenerate() -> None:
    d = np.array([0.2, -0.1, 0.4, 0.0, 0.3] * 10)
    a = bs.bootstrap_mean_ci(d, rng=np.random.default_rng(9))
    b = bs.bootstrap_mean_ci(d, rng=np.random.default_rng(9))
    assert a == b
    flat = bs.bootstrap_mean_ci(np.full(20, 0.5), method="bca", rng=np.random.default_rng(0))
    assert (flat.low, flat.high) == (0.5, 0.5)
    with pytest.raises(ValueError, match="n_resamples"):
        bs.bootstrap_mean_ci(d, n_resamples=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="confidence"):
        bs.bootstrap_mean_ci(d, confidence=1.5, rng=np.random.default_rng(0))
