"""The core's fast paths change nothing but speed: a batch of one benchmark's plain results
read column by column (``Monitor._plain``) and a run of 0/1 cells folded with dense products
(``BenchmarkState._fold_dense``) leave exactly the state the general paths leave."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts import ItemResult, ResolutionChange, WireResult
from monitor.core import CoreConfig, Monitor
from monitor.core import board as board_module
from monitor.core.snapshot import bench_to_snapshot

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
        mp.setattr(board_module, "_DENSE_CELLS", -1)  # every run through the sparse products
        sparse = _run(events, cuts)
    assert dense == sparse


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
        mp.setattr(board_module, "_DENSE_CELLS", -1)
        assert _run(events, [7_500]) == dense
    mon = Monitor(CoreConfig())
    mon.apply(events)
    st_ = mon._benches["b"]
    n = np.asarray(st_.n[:5, :5])
    assert (n == 3000).all()  # every item paired once per pair: the counts are exact
