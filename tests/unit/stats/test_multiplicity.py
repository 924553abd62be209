"""Adjusted p-values against statsmodels' multipletests, the reference implementation."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from monitor.stats.multiplicity import adjust_pvalues, family_alpha, reject

SM_NAME = {"bonferroni": "bonferroni", "holm": "holm", "bh": "fdr_bh"}


def _families(rng: np.random.Generator) -> list[np.ndarray]:
    fams = [rng.uniform(size=m) for m in (1, 2, 5, 20, 200)]
    fams.append(rng.beta(0.3, 4.0, size=50))  # many small p-values
    fams.append(np.round(rng.uniform(size=40), 1))  # heavy ties
    fams.append(np.array([1.0, 1.0, 0.5, 0.0, 0.02, 1.0]))  # p = 1 and p = 0
    fams.append(np.full(7, 0.01))  # all tied
    return fams


@pytest.mark.parametrize("method", ["bonferroni", "holm", "bh"])
def test_equals_statsmodels(method: str) -> None:
    rng = np.random.default_rng(20240611)
    for p in _families(rng):
        ours = adjust_pvalues(p, method=method)
        ref = multipletests(p, alpha=0.05, method=SM_NAME[method])
        np.testing.assert_allclose(ours, ref[1], rtol=0, atol=1e-15)
        np.testing.assert_array_equal(reject(p, alpha=0.05, method=method), ref[0])


def test_none_is_identity_and_empty_family() -> None:
    p = np.array([0.3, 0.01])
    np.testing.assert_array_equal(adjust_pvalues(p, method="none"), p)
    assert adjust_pvalues([], method="holm").size == 0


@pytest.mark.parametrize("bad", [[0.1, np.nan], [1.2], [-0.1]])
def test_bad_pvalues_are_rejected(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="`p` must hold p-values"):
        adjust_pvalues(bad, method="holm")


def test_unknown_method() -> None:
    with pytest.raises(ValueError, match="`method` must be one of"):
        adjust_pvalues([0.1], method="sidak")


def test_family_alpha() -> None:
    assert family_alpha(0.05, 9, method="bonferroni") == pytest.approx(0.05 / 9)
    assert family_alpha(0.05, 9, method="holm") == pytest.approx(0.05 / 9)
    assert family_alpha(0.05, 9, method="bh") == 0.05
    assert family_alpha(0.05, 9, method="none") == 0.05
    with pytest.raises(ValueError, match="`m`"):
        family_alpha(0.05, 0, method="holm")
