"""What the state holds, and what a batch would make of it before it is applied: the monitor's
budget (max_state_bytes …) refuses a batch on this prediction, so it must equal the state the
batch really leaves, and the cheap bound must never be below it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.core.board import BenchmarkState


def _real_nbytes(st: BenchmarkState) -> int:
    """The bytes of every array of the numeric state, as numpy counts them."""
    arrays = [st.X, st.group, st.excluded_rows, st.codes, st.decided_at,
              st.recheck, st.nonbinary, *(getattr(st.paths, f) for f in st.paths.__dataclass_fields__)]
    arrays += [a for s in (st.n, st.sx, st.p, st.sx2) if s is not None for a in s.arrays()]
    arrays += [st.Y] if st.Y is not None else []
    blocks = st.blocks[1].nbytes if st.blocks is not None else st.cap * st.cap
    return int(sum(a.nbytes for a in arrays)) + blocks


def ev(bench: str, item: str, model: str, score: float, **kw: Any) -> ItemResult:
    return ItemResult(benchmark=bench, item_id=item, model=model, score=score, **kw)


def _batches(rng: np.random.Generator) -> list[list[ItemResult]]:
    """Batches that grow rows and columns past their capacities, repeat and contradict
    earlier results, bring perturbed variants and, last, the first score other than 0/1."""
    first = [ev("a", f"i{i}", f"m{j}", float(rng.random() < 0.5))
             for i in range(300) for j in range(9)]
    more_models = [ev("a", f"i{i}", f"m{j}", 1.0) for i in range(3) for j in range(9, 40)]
    mixed = (first[:50]  # duplicates
             + [ev("a", "i0", "m0", 1.0 - first[0].score)]  # a conflict
             + [ev("a", f"new{i}", "m1", 0.0) for i in range(400)]
             + [ev("a", f"new{i}", "m1", 0.0) for i in range(10)]  # twice in the batch
             + [ev("a", f"i{i}", "m2", 1.0, variant="perturbed:para") for i in range(30)]
             + [ev("b", "x", "y", 1.0), ev("a", "i1", "m3", 1.0, sample=1)])
    fractional = [ev("a", f"i{i}", "m50", 0.25) for i in range(20)]
    return [first, more_models, mixed, fractional]


@pytest.mark.parametrize("samples", [1, 2])
def test_the_predicted_footprint_is_the_one_the_batch_leaves(samples: int) -> None:
    rng = np.random.default_rng(7)
    mon = Monitor(CoreConfig(samples=samples))
    for batch in _batches(rng):
        if samples > 1:
            # the second sample of each cell differs on some: means of 1/2 on those cells
            batch = [e.model_copy(update={"sample": s, "score": e.score if s == 0 or k % 7
                                          else 1.0 - e.score})
                     for k, e in enumerate(batch) for s in range(samples)]
        growth = mon.growth(batch)
        bound = mon.growth(batch, exact=False)
        predicted = mon.footprint(growth)
        upper = mon.footprint(bound)
        mon.apply(batch)
        after = mon.footprint()
        assert predicted == after, (predicted, after)
        for field in ("models", "items", "cells", "nbytes"):
            assert getattr(upper, field) >= getattr(after, field), (field, upper, after)
        for st in mon._benches.values():
            assert st.nbytes() == _real_nbytes(st)
        assert after.cells == mon.counters["accepted"]
    assert not mon._benches["a"].binary  # the last batch's scores turned the sums to float
    assert mon._benches["a"].cap > 8 and mon._benches["a"].X.shape[0] > 256  # both grew


def test_a_thousand_models_on_three_items_cost_what_the_budget_counts() -> None:
    # The report's pattern: each such benchmark holds ~95 MB of pair arrays.
    mon = Monitor()
    batch = [ev("c2", str(i), f"m{m}", float((i + m) % 2)) for m in range(1000) for i in range(3)]
    predicted = mon.footprint(mon.growth(batch, exact=False))
    mon.apply(batch, evaluate=False)
    st = mon._benches["c2"]
    assert predicted.nbytes >= mon.footprint().nbytes == st.footprint().nbytes
    assert 90e6 < st.nbytes() == _real_nbytes(st) < 110e6
