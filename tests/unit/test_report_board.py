"""The vectorised board equals the single-pair reference functions, pair by pair."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import ttest_rel
from statsmodels.stats.contingency_tables import mcnemar

from monitor.io import read_table
from monitor.stats.board import all_pairs, board
from monitor.stats.clusters import design_effect, strata_design_effect
from monitor.stats.paired import paired_summary


def _check_against_reference(scores: np.ndarray, groups: np.ndarray | None,
                             picks: list[tuple[int, int]], *, alpha: float = 0.05) -> None:
    a = np.array([p[0] for p in picks])
    b = np.array([p[1] for p in picks])
    res = board(scores, pairs=(a, b), groups=groups, alpha=alpha)
    strata = board(scores, pairs=(a, b), groups=groups, group_kind="strata", alpha=alpha)
    for k, (ia, ib) in enumerate(picks):
        both = ~np.isnan(scores[:, ia]) & ~np.isnan(scores[:, ib])
        xa, xb = scores[both, ia], scores[both, ib]
        s = paired_summary(xa, xb)
        assert res.n[k] == s.n
        assert res.mean_a[k] == pytest.approx(s.mean_a, rel=1e-12)
        assert res.delta[k] == pytest.approx(s.delta, rel=1e-10, abs=1e-15)
        assert res.sigma_d2[k] == pytest.approx(s.sigma_d2, rel=1e-10)
        assert res.rho[k] == pytest.approx(s.rho, rel=1e-9)
        assert res.n_star[k] == pytest.approx(s.n_star(alpha=alpha), rel=1e-9)
        assert res.q[k] == pytest.approx(s.q(alpha=alpha), rel=1e-9)
        assert res.mde[k] == pytest.approx(s.mde(alpha=alpha), rel=1e-10)
        if res.binary[k]:
            assert (res.n11[k], res.n10[k], res.n01[k], res.n00[k]) == (
                s.n11, s.n10, s.n01, s.n00)
            # statsmodels' exact McNemar (binomial on the discordant pairs) as the peer.
            table = [[s.n11, s.n10], [s.n01, s.n00]]
            assert res.p_value[k] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
        else:
            assert res.p_value[k] == pytest.approx(ttest_rel(xa, xb).pvalue, rel=1e-8)
        if groups is not None:
            g = groups[both]
            assert res.design_effect is not None and strata.design_effect is not None
            assert res.design_effect[k] == pytest.approx(design_effect(xa - xb, g).de, rel=1e-9)
            assert strata.design_effect[k] == pytest.approx(
                strata_design_effect(xa - xb, g), rel=1e-9)


@pytest.mark.slow
def test_board_equals_single_pair_on_real_mmlu(shared_data: Path) -> None:
    t = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                   cluster_col="category")
    idx = {m: j for j, m in enumerate(t.models)}
    picks = [
        (idx["gemini-1.5-pro-002"], idx["gemini-1.5-flash-002"]),  # both miss a few items
        (idx["DeepSeek-Coder-V2"], idx["Meta-Llama-3_1-70B-Instruct"]),  # 1,681 absent
        (idx["Meta-Llama-3_1-70B"], idx["Meta-Llama-3-70B"]),  # complete pair
        (idx["Yi-34B"], idx["mathstral-7B"]),  # tiny gap, huge N*
        (idx["deepseek(2024-05, per-category upload)"], idx["DeepSeek-Coder-V2"]),
    ]
    assert t.groups is not None
    _check_against_reference(t.scores, t.groups, picks)
    _check_against_reference(t.scores, t.groups, picks, alpha=0.05 / 31)


def test_board_equals_single_pair_on_real_gsm8k(shared_data: Path) -> None:
    t = read_table(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv", exclude=("gold",))
    a, b = all_pairs(len(t.models))
    picks = list(zip(a[::97].tolist(), b[::97].tolist(), strict=True))
    _check_against_reference(t.scores, None, picks)


def test_board_continuous_scores_with_gaps() -> None:
    rng = np.random.default_rng(11)
    x = rng.beta(2, 3, size=(500, 5))
    x[:, 1] = np.clip(x[:, 0] + rng.normal(0.03, 0.2, 500), 0, 1)
    x[rng.random(x.shape) < 0.1] = np.nan
    groups = rng.choice(np.array(list("abcdefg")), size=500)
    a, b = all_pairs(5)
    _check_against_reference(x, groups, list(zip(a.tolist(), b.tolist(), strict=True)))


def test_full_board_is_every_pair_once() -> None:
    rng = np.random.default_rng(3)
    x = (rng.random((200, 6)) < 0.6).astype(float)
    res = board(x)
    assert len(res) == 15
    assert {(int(i), int(j)) for i, j in zip(res.a, res.b, strict=True)} == {
        (i, j) for i in range(6) for j in range(i + 1, 6)}


def test_one_item_per_cluster_gives_de_one() -> None:
    rng = np.random.default_rng(5)
    x = (rng.random((300, 4)) < 0.5).astype(float)
    res = board(x, groups=np.arange(300))
    assert res.design_effect is not None
    np.testing.assert_allclose(res.design_effect, 1.0, rtol=1e-12)


def test_zero_gap_is_infinite_n_star() -> None:
    x = np.array([[1, 0], [0, 1], [1, 1], [0, 0]], dtype=float)
    res = board(x, groups=np.array(["u", "u", "v", "v"]))
    assert res.delta[0] == 0
    assert math.isinf(res.n_star[0])
    assert res.q[0] == 0 and res.q_grouped is not None and res.q_grouped[0] == 0
    assert res.p_value[0] == 1.0


def test_item_permutation_leaves_the_board_unchanged() -> None:
    rng = np.random.default_rng(8)
    x = (rng.random((400, 5)) < 0.55).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan
    g = rng.choice(np.array(list("pqrs")), size=400)
    perm = rng.permutation(400)
    r1, r2 = board(x, groups=g), board(x[perm], groups=g[perm])
    for name in ("n", "delta", "sigma_d2", "q", "p_value", "design_effect"):
        np.testing.assert_allclose(getattr(r1, name), getattr(r2, name), rtol=1e-10)


def test_bad_arguments_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="`scores`"):
        board(np.array([[1.5, 0.0]]))
    with pytest.raises(ValueError, match="`group_kind`"):
        board(np.zeros((3, 2)), groups=np.zeros(3), group_kind="blocks")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="share no item"):
        board(np.array([[1.0, np.nan], [np.nan, 0.0]]))


def _boards(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """0/1 complete with clusters, 0/1 with gaps, scores in [0, 1] with gaps."""
    rng = np.random.default_rng(seed)
    ability = np.linspace(-0.5, 0.8, 7)
    p = 1 / (1 + np.exp(-(ability[None, :] - rng.normal(0, 1, (600, 1)))))
    binary = (rng.random(p.shape) < p).astype(float)
    gaps = binary.copy()
    gaps[rng.random(gaps.shape) < 0.08] = np.nan
    graded = np.where(np.isnan(gaps), np.nan, np.round(np.clip(p + rng.normal(0, 0.2, p.shape),
                                                               0, 1), 3))
    groups = rng.choice(np.array([f"g{k}" for k in range(9)]), size=600)
    return [(binary, groups), (gaps, groups), (graded, groups)]


def _assert_identical(r1: object, r2: object) -> None:
    from dataclasses import fields

    for f in fields(r1):  # type: ignore[arg-type]
        x, y = getattr(r1, f.name), getattr(r2, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("kind", ["cluster", "strata"])
def test_board_in_chunks_equals_one_call(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel and the group sums are elementwise over pairs: chunks of 4 change no bit.
    from monitor.stats import board as board_module

    for x, groups in _boards(1):
        whole = board(x, groups=groups, group_kind=kind)  # type: ignore[arg-type]
        monkeypatch.setattr(board_module, "_CHUNK_PAIRS", 4)
        chunked = board(x, groups=groups, group_kind=kind)  # type: ignore[arg-type]
        monkeypatch.undo()
        assert len(whole) == 21
        _assert_identical(whole, chunked)


def test_float32_grams_of_0_1_scores_equal_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0/1 scores: every Gram entry is an integer count, exact in float32 (below 2²⁴ items).
    from monitor.stats import board as board_module

    wide = board_module._gram
    for x, groups in _boards(2)[:2]:
        narrow = board(x, groups=groups)
        monkeypatch.setattr(board_module, "_gram",
                            lambda u, v, *, exact32: wide(u, v, exact32=False))
        assert board_module.board_sums(x).exact32
        _assert_identical(narrow, board(x, groups=groups))
        monkeypatch.undo()


def test_shared_board_sums_equal_a_board_of_its_own() -> None:
    from monitor.stats.board import board_sums

    rng = np.random.default_rng(4)
    for x, groups in _boards(3):
        a = rng.integers(0, 7, 30)
        b = (a + rng.integers(1, 7, 30)) % 7
        sums = board_sums(x, groups=groups)
        _assert_identical(board(x, pairs=(a, b), groups=groups),
                          board(x, pairs=(a, b), groups=groups, sums=sums))
        # without the groups: the same matrices, no design effect
        _assert_identical(board(x, pairs=(a, b)), board(x, pairs=(a, b), sums=sums))


def test_the_p_values_are_scipy_stats_own_without_importing_it() -> None:
    """The exact McNemar p-value from the regularised incomplete beta equals scipy.stats'
    binomial tail to 1e-13 relative, and the paired t's equals t.sf bit for bit, over counts
    from 0 to 40,000 (no discordant item: p = 1)."""
    from scipy.stats import binom
    from scipy.stats import t as student_t

    from monitor.stats.figures import _mcnemar_exact_p, _paired_t_p

    rng = np.random.default_rng(3)
    k10 = np.r_[0.0, 0.0, 1.0, 5.0, rng.integers(0, 20_000, 50_000).astype(float)]
    k01 = np.r_[0.0, 3.0, 1.0, 5.0, rng.integers(0, 20_000, 50_000).astype(float)]
    ref = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(k10, k01), k10 + k01, 0.5))
    ours = _mcnemar_exact_p(k10, k01)
    assert ours[0] == 1.0 and ours[3] == 1.0
    np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=0.0)
    n = rng.integers(2, 5000, 50_000).astype(float)
    delta = rng.normal(0.0, 0.05, n.size)
    sigma2 = rng.uniform(0.01, 0.5, n.size)
    se = np.sqrt(sigma2 / (n - 1.0))
    expect = 2.0 * student_t.sf(np.abs(delta) / se, n - 1.0)
    assert np.array_equal(_paired_t_p(delta, sigma2, n), expect)
