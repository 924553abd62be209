"""The fold's path and the run's screening change nothing but speed: the dense and the sparse
fold (the latter with the batch's own pairs by sparse or dense products, and its
products with the scores before added into the sums in place or not), forced either way,
leave the same pair sums (exactly for 0/1 scores, to rounding for
other scores), and a run that reads every pair leaves the state one that skips the pairs it
cannot decide (``BenchmarkState.recheck``) leaves."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts import ItemResult, ResolutionChange
from monitor.core import CoreConfig, Monitor
from monitor.core import board as board_module
from monitor.core import paths as paths_module
from monitor.core.board import BenchmarkState
from monitor.core.snapshot import bench_to_snapshot


@st.composite
def boards(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores (items × models, NaN absent) already folded, and a batch of new cells: a mask
    over the absent ones and the batch's scores."""
    items, models = draw(st.integers(1, 25)), draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**32 - 1))
    fractional = draw(st.booleans())
    rng = np.random.default_rng(seed)
    scores = (rng.random((items, models)) < 0.6).astype(float)
    if fractional:
        some = rng.random((items, models)) < 0.3
        scores[some] = rng.random(int(some.sum()))
    present = rng.random((items, models)) < draw(st.sampled_from([0.0, 0.3, 0.8]))
    new = ~present & (rng.random((items, models)) < draw(st.sampled_from([0.2, 0.6, 1.0])))
    return np.where(present, scores, np.nan), new, scores


def _folded(before: np.ndarray, new: np.ndarray, scores: np.ndarray, *, dense: bool,
            own_dense: bool = False, in_place: bool = True) -> BenchmarkState:
    state = BenchmarkState("b")
    items, models = before.shape
    for j in range(models):
        state.col_of(f"m{j}")
    for i in range(items):
        state.row_of(str(i), None)
    r0, c0 = np.nonzero(~np.isnan(before))
    if r0.size:
        state.fold_new(r0, c0, before[r0, c0])
    state = copy.deepcopy(state)
    r, c = np.nonzero(new)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(board_module, "_DENSE_BYTES", 1 << 40 if dense else -1)
        mp.setattr(board_module, "dense_fold_cheaper", lambda *a, **k: dense)
        mp.setattr(board_module, "dense_own_cheaper", lambda *a, **k: own_dense)
        if not in_place:  # the sparse fold of 0/1 scores by a product and an add
            mp.setattr(board_module, "_csr_matvecs", lambda: None)
        if r.size:
            state.fold_new(r, c, scores[r, c])
    return state


@settings(max_examples=200, deadline=None)
@given(boards())
def test_dense_and_sparse_folds_leave_the_same_sums(
        board: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    before, new, scores = board
    dense = _folded(before, new, scores, dense=True)
    sparse = _folded(before, new, scores, dense=False)
    own_dense = _folded(before, new, scores, dense=False, own_dense=True)
    product = _folded(before, new, scores, dense=False, in_place=False)
    k = dense.k
    for other in (sparse, own_dense, product):
        np.testing.assert_array_equal(dense.X, other.X)
        assert dense.binary == other.binary
        for name in ("n", "sx", "p", "sx2"):
            d, s = getattr(dense, name), getattr(other, name)
            if d is None:
                assert s is None
            elif dense.binary:  # integer counts: equal
                np.testing.assert_array_equal(d.full(k), s.full(k), err_msg=name)
            else:
                np.testing.assert_allclose(d.full(k), s.full(k), rtol=1e-12, atol=1e-12,
                                           err_msg=name)
    # and every path's equal the sums recomputed from the score matrix
    x = dense.X[:before.shape[0], :k]
    m = (~np.isnan(x)).astype(float)
    xv = np.nan_to_num(x)
    for state in (dense, sparse, own_dense, product):
        np.testing.assert_allclose(state.n.full(k), m.T @ m, atol=1e-9)
        np.testing.assert_allclose(state.sx.full(k), xv.T @ m, atol=1e-9)
        np.testing.assert_allclose(state.p.full(k), xv.T @ xv, atol=1e-9)
        if state.sx2 is not None:
            np.testing.assert_allclose(state.sx2.full(k), (xv * xv).T @ m, atol=1e-9)


MODELS = [f"m{i}" for i in range(5)]


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[ItemResult], list[int]]:
    """Streams long enough for pairs to be decided, some with scores other than 0/1."""
    score = st.sampled_from([0.0, 1.0]) if draw(st.booleans()) else st.sampled_from(
        [0.0, 1.0, 1.0, 0.0, 0.5])
    skill = draw(st.lists(st.floats(0.05, 0.95), min_size=len(MODELS), max_size=len(MODELS)))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_items = draw(st.integers(5, 120))
    cells = list(itertools.product(range(n_items), range(len(MODELS))))
    order = rng.permutation(len(cells))
    events = []
    for k in order.tolist():
        i, j = cells[k]
        s = float(rng.random() < skill[j])
        if draw(score) == 0.5:
            s = 0.5
        events.append(ItemResult(benchmark="b", item_id=str(i), model=MODELS[j], score=s))
    cuts = sorted(draw(st.sets(st.integers(1, len(events) - 1), max_size=8)))
    return events, cuts


def _run(events: list[ItemResult], cuts: list[int]) -> tuple[object, ...]:
    mon = Monitor(CoreConfig())
    outcomes: list[str] = []
    for lo, hi in itertools.pairwise([0, *cuts, len(events)]):
        outcomes.extend(mon.apply(events[lo:hi], evaluate=False).outcomes)
    head, arrays = bench_to_snapshot(mon._benches["b"])
    head["times"] = len(head["times"])  # wall-clock times of the decisions: their number
    return (outcomes, head, {k: v.tobytes() for k, v in arrays.items()},
            [(c.model_a, c.model_b, c.verdict, c.n) for c in mon.evaluate()
             if isinstance(c, ResolutionChange)])


@settings(max_examples=60, deadline=None)
@given(streams())
def test_skipping_the_pairs_a_run_cannot_decide_changes_nothing(
        stream: tuple[list[ItemResult], list[int]]) -> None:
    events, cuts = stream
    skipping = _run(events, cuts)
    with pytest.MonkeyPatch.context() as mp:  # every pair read at every run
        mp.setattr(paths_module, "items_to_decide",
                   lambda kind, n, *a, **k: np.zeros(np.shape(n), dtype=np.int64))
        reading = _run(events, cuts)
    assert skipping == reading
