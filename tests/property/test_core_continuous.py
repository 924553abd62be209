"""No valid score crashes the live core, and its figures equal the offline kernel's.

Continuous, mixed 0/1 + continuous and near-constant scores, in random batchings: rounding in
the Gram matrices (ΣD² = Σx_A² + Σx_B² − 2Σx_Ax_B) must never make a variance negative or an
e-value raise, and every pair figure must equal ``monitor.stats.board.board`` on the same
score matrix (the same kernel, fed from a dense matrix instead of incremental sums).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts import ItemResult
from monitor.core import Monitor
from monitor.io.tables import ScoreTable
from monitor.offline.replay import anytime_replay
from monitor.stats.board import board

MODELS = ("A", "B", "C")


def test_beta_scores_in_ten_item_batches_do_not_break_the_monitor() -> None:
    # The reproduction of the crash: the diagonal of V came out near −9e-16 and the bounded
    # e-process rejected it, after which every batch and ranking() raised.
    rng = np.random.default_rng(1)
    mon = Monitor()
    for _ in range(10):
        x = rng.beta(2, 2, (10, 2))
        res = mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, score=float(x[i, j]))
                         for i in range(10) for j, m in enumerate("AB")])
        assert len(res.outcomes) == 20
    pair = mon.ranking("b").to_json()["pairs"][0]
    assert pair["n"] == 10 and 0.0 <= pair["fixed_n"]["q"] < 1.0


@st.composite
def score_streams(draw: st.DrawFn) -> tuple[np.ndarray, list[int]]:
    n_items = draw(st.integers(2, 25))
    kind = draw(st.sampled_from(["continuous", "mixed", "near-constant"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "continuous":
        x = rng.beta(2, 2, (n_items, len(MODELS)))
    elif kind == "mixed":
        x = rng.integers(0, 2, (n_items, len(MODELS))).astype(float)
        cont = rng.random((n_items, len(MODELS))) < 0.3
        x[cont] = rng.random(int(cont.sum()))
    else:  # every model scores c + tiny noise: σ̂_D² ≈ 0 and the sums cancel
        c = draw(st.floats(0.0, 1.0))
        x = np.clip(c + rng.normal(0.0, 1e-9, (n_items, len(MODELS))), 0.0, 1.0)
        x[:, 1] = x[:, 0]  # one pair with D ≡ 0 exactly
    holes = rng.random(x.shape) < 0.1
    x[holes] = np.nan
    n_cells = int((~np.isnan(x)).sum())
    cuts = sorted(set(draw(st.lists(st.integers(0, max(n_cells - 1, 0)), max_size=6))))
    return x, cuts


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(score_streams())
def test_any_valid_scores_in_any_batching_match_the_offline_kernel(
    data: tuple[np.ndarray, list[int]],
) -> None:
    x, cuts = data
    cells = [(i, j) for i in range(x.shape[0]) for j in range(x.shape[1])
             if not np.isnan(x[i, j])]
    events = [ItemResult(benchmark="b", item_id=str(i), model=MODELS[j], score=float(x[i, j]),
                         cluster=f"c{i % 3}") for i, j in cells]
    mon = Monitor()
    start = 0
    for cut in [*cuts, len(events)]:
        mon.apply(events[start:cut])
        start = cut
    table = mon.table("b")
    assert table is not None
    mon.ranking("b").to_json()
    [p.as_dict() for p in mon.pairs("b", "all")]

    # The same matrix through the offline board (columns in the monitor's model order).
    cols = [MODELS.index(m) for m in table.models]
    xm = x[:, cols]
    keep = ~np.all(np.isnan(xm), axis=1)
    k = len(table.models)
    a, b = np.nonzero(~np.eye(k, dtype=bool))
    shared = (~np.isnan(xm[:, a]) & ~np.isnan(xm[:, b])).sum(axis=0)
    a, b = a[shared > 0], b[shared > 0]
    if a.size == 0:
        return
    groups = np.array([f"c{i % 3}" for i in range(x.shape[0])])[keep]
    off = board(xm[keep], pairs=(a, b), groups=groups, alpha=table.family_alpha)
    # q = n/N* rather than N*: where δ̂ is a rounding-level number N* is ~1e19 and noisy.
    for name in ("n", "delta", "sigma_d2", "q", "mde"):
        live = getattr(table.all_figures(), name).reshape(k, k)[a, b]
        np.testing.assert_allclose(live, getattr(off, name), rtol=1e-9, atol=1e-9,
                                   err_msg=name)
    # The e-process depends on the order (its kind is fixed at a pair's first item): the
    # replay of the same rows in the same order gives the same e-values and decisions.
    sub = ScoreTable(source="t", benchmark=None, item_ids=np.arange(int(keep.sum())).astype(str),
                     models=tuple(table.models), scores=xm[keep])
    rep = anytime_replay(sub, (a, b), order="file", seed=None,
                         planned_models=mon.config.planned_models)
    np.testing.assert_allclose(table.all_figures().log_e.reshape(k, k)[a, b], rep.figures.log_e,
                               rtol=1e-9, atol=1e-9, err_msg="log_e")
    assert rep.figures.decided is not None
    np.testing.assert_array_equal(table.code[a, b], rep.figures.decided)
    # The design effect is a ratio of two sums of squares: where n σ̂² is within ~1e-6 of the
    # rounding scale Σx_A² + Σx_B² it is a ratio of rounding noise in either path.
    both = ~np.isnan(xm[keep][:, a]) & ~np.isnan(xm[keep][:, b])
    scale = np.where(both, xm[keep][:, a] ** 2 + xm[keep][:, b] ** 2, 0.0).sum(axis=0)
    sound = off.n * off.sigma_d2 > 1e-6 * scale
    for name in ("design_effect", "q_grouped"):
        live = getattr(table.all_figures(), name).reshape(k, k)[a, b]
        np.testing.assert_allclose(live[sound], getattr(off, name)[sound], rtol=1e-9,
                                   atol=1e-9, err_msg=name)
