"""The core's fast paths change nothing but speed: a batch of one benchmark's plain results
read column by column (``Monitor._plain``) and a run of cells folded with dense products
(``BenchmarkState._fold_dense``) leave the state the general paths leave: exactly for 0/1
scores, to rounding for other scores (the float sums are added in another order)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts import ItemResult, ResolutionChange
from monitor.core import CoreConfig, Monitor
from monitor.core import board as board_module
from monitor.core.snapshot import bench_to_snapshot
from monitor.decoder import WireResult

MODELS = [f"m{i}" for i in range(6)]


@st.composite
def plain_streams(draw: st.DrawFn) -> tuple[list[ItemResult], list[int]]:
    event = st.builds(
        lambda i, m, s, c: ItemResult(benchmark="b", item_id=str(i), model=m, score=s,
                                      cluster=c),
        st.integers(0, 30), st.sampled_from(MODELS), st.sampled_from([0.0, 1.0]),
        st.sampled_from([None, "c1", "c2"]))
    events = draw(st.lists(event, min_size=1, max_size=150))
    cuts = sorted(draw(st.sets(st.integers(1, max(len(events) - 1, 1)), max_size=6)))
    return events, cuts


def _state(mon: Monitor, outcomes: list[str]) -> tuple[object, ...]:
    head, arrays = bench_to_snapshot(mon._benches["b"])
    return (outcomes, head, {k: v.tobytes() for k, v in arrays.items()},
            [(c.model_a, c.model_b, c.verdict, c.n) for c in mon.evaluate()
             if isinstance(c, ResolutionChange)])


def _run(events: list[ItemResult], cuts: list[int]) -> tuple[object, ...]:
    mon = Monitor(CoreConfig())
    outcomes: list[str] = []
    for lo, hi in itertools.pairwise([0, *cuts, len(events)]):
        if hi > lo:
            outcomes.extend(mon.apply(events[lo:hi], evaluate=False).outcomes)
    return _state(mon, outcomes)


@settings(max_examples=150, deadline=None)
@given(plain_streams())
def test_dense_fold_equals_sparse_fold(stream: tuple[list[ItemResult], list[int]]) -> None:
    events, cuts = stream
    dense = _run(events, cuts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(board_module, "_DENSE_BYTES", -1)  # every run through the sparse products
        sparse = _run(events, cuts)
    assert dense == sparse


@st.composite
def scored_streams(draw: st.DrawFn) -> tuple[list[ItemResult], list[int]]:
    """As :func:`plain_streams`, with scores anywhere in [0, 1] beside 0/1 ones."""
    score = st.one_of(st.sampled_from([0.0, 1.0, 0.5]), st.floats(0.0, 1.0))
    event = st.builds(
        lambda i, m, s, c: ItemResult(benchmark="b", item_id=str(i), model=m, score=s,
                                      cluster=c),
        st.integers(0, 30), st.sampled_from(MODELS), score, st.sampled_from([None, "c1", "c2"]))
    events = draw(st.lists(event, min_size=1, max_size=150))
    cuts = sorted(draw(st.sets(st.integers(1, max(len(events) - 1, 1)), max_size=6)))
    return events, cuts


def _sums(mon: Monitor) -> dict[str, np.ndarray]:
    st_ = mon._benches["b"]
    return {name: np.asarray(getattr(st_, name).full(st_.k), dtype=np.float64)
            for name in ("n", "sx", "p", "sx2") if getattr(st_, name) is not None}


@settings(max_examples=150, deadline=None)
@given(scored_streams())
def test_dense_fold_equals_sparse_fold_on_any_scores(
        stream: tuple[list[ItemResult], list[int]]) -> None:
    events, cuts = stream
    runs = []
    for dense_bytes in (board_module._DENSE_BYTES, -1):  # dense where small, then sparse
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(board_module, "_DENSE_BYTES", dense_bytes)
            mon = Monitor(CoreConfig())
            outcomes: list[str] = []
            for lo, hi in itertools.pairwise([0, *cuts, len(events)]):
                if hi > lo:
                    outcomes.extend(mon.apply(events[lo:hi], evaluate=False).outcomes)
            runs.append((outcomes, _sums(mon), mon._benches["b"].X.tobytes()))
    (out_d, sums_d, x_d), (out_s, sums_s, x_s) = runs
    assert out_d == out_s and x_d == x_s and sums_d.keys() == sums_s.keys()
    for name, dense in sums_d.items():
        np.testing.assert_allclose(dense, sums_s[name], rtol=1e-12, atol=1e-12, err_msg=name)


@settings(max_examples=150, deadline=None)
@given(plain_streams())
def test_plain_batches_equal_the_general_loop(
        stream: tuple[list[ItemResult], list[int]]) -> None:
    events, cuts = stream
    plain = _run(events, cuts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Monitor, "_plain", lambda self, events: None)
        general = _run(events, cuts)
    assert plain == general
    # and the fast decoder's results fold like the contract's models
    wire = [WireResult(**ev.model_dump(exclude={"ts", "schema_version"})) for ev in events]
    assert _run(wire, cuts) == plain  # type: ignore[arg-type]


def test_dense_fold_is_taken_for_few_models_and_exact_at_a_large_run() -> None:
    rng = np.random.default_rng(3)
    x = (rng.random((3000, 5)) < 0.6).astype(float)
    events = [ItemResult(benchmark="b", item_id=str(i), model=f"m{j}", score=x[i, j])
              for i, j in itertools.product(range(3000), range(5))]
    order = rng.permutation(len(events))
    events = [events[k] for k in order]
    dense = _run(events, [7_500])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(board_module, "_DENSE_BYTES", -1)
        assert _run(events, [7_500]) == dense
    mon = Monitor(CoreConfig())
    mon.apply(events)
    st_ = mon._benches["b"]
    n = st_.n.full(5)
    assert (n == 3000).all()  # every item paired once per pair: the counts are exact
