"""Merged halves equal the sequential state (river's test_parallel style)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench._pair_state import PairState

binary_items = st.lists(
    st.tuples(st.sampled_from([0.0, 1.0]), st.sampled_from([0.0, 1.0]), st.sampled_from("abc")),
    min_size=0,
    max_size=60,
)
bounded_items = st.lists(
    st.tuples(
        st.floats(0.0, 1.0, allow_nan=False), st.floats(0.0, 1.0, allow_nan=False), st.sampled_from("abcd")
    ),
    min_size=0,
    max_size=60,
)


def _fold(items: list[tuple[float, float, str]]) -> PairState:
    state = PairState()
    for a, b, g in items:
        state.update(a, b, g)
    return state


@settings(max_examples=150, deadline=None)
@given(binary_items, st.integers(0, 60))
def test_binary_merge_equals_sequential_exactly(items: list[tuple[float, float, str]], cut: int) -> None:
    cut = min(cut, len(items))
    merged = _fold(items[:cut]).merge(_fold(items[cut:]))
    assert merged == _fold(items)  # integer sums: exact equality
    assert merged.log_e() == _fold(items).log_e()


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(bounded_items, st.integers(0, 60))
def test_bounded_merge_equals_sequential(items: list[tuple[float, float, str]], cut: int) -> None:
    cut = min(cut, len(items))
    left, right = _fold(items[:cut]), _fold(items[cut:])
    merged, seq = left.merge(right), _fold(items)
    assert merged.n == seq.n
    for name in ("s", "v", "sa", "sb", "saa", "sbb", "sab"):
        assert math.isclose(getattr(merged, name), getattr(seq, name), rel_tol=1e-9, abs_tol=1e-9)
    assert merged.clusters.keys() == seq.clusters.keys()
    for k in seq.clusters:
        np.testing.assert_allclose(merged.clusters[k], seq.clusters[k], rtol=1e-9, atol=1e-9)
    assert math.isclose(merged.log_e(), seq.log_e(), rel_tol=1e-7, abs_tol=1e-7)
    # Merge is commutative and the empty state is its identity.
    assert right.merge(left).n == merged.n
    assert PairState().merge(seq) == seq
    # A state rebuilt from its dict merges to the same state.
    assert PairState.from_dict(left.to_dict()).merge(right) == merged
