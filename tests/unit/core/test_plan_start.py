"""The plan at the start of an evaluation: a model with no result yet, a model alone on its
board (monitor.core.plan)."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.contracts import ItemResult
from monitor.core.config import CoreConfig
from monitor.core.monitor import Monitor
from monitor.core.plan import item_keys


def _board(models: dict[str, int], items: int = 50) -> Monitor:
    mon = Monitor(CoreConfig())
    mon.apply([ItemResult(benchmark="b", item_id=f"q{i}", model=m, score=float((i * 7 + s) % 3 == 0))
               for m, s in models.items() for i in range(items)])
    return mon


def test_a_model_with_no_result_starts_at_the_first_items_of_the_order() -> None:
    mon = _board({"x": 0, "y": 1})
    plan = mon.plan("b", "newcomer", count=10)
    ids = [f"q{i}" for i in range(50)]
    first = [ids[i] for i in np.argsort(item_keys("b", ids), kind="stable")[:10]]
    assert plan.action == "continue" and plan.reason == "no result of 'newcomer' yet"
    assert (plan.items_done, plan.items_total) == (0, 50) and plan.pairs == ()
    assert list(plan.next_items) == first
    # Narrowed to one model: the same start, over that model's items.
    assert mon.plan("b", "newcomer", against=["y"], count=10).next_items == plan.next_items
    with pytest.raises(KeyError, match="nobody"):
        mon.plan("b", "newcomer", against=["nobody"])
    with pytest.raises(KeyError, match="nonesuch"):
        mon.plan("nonesuch", "newcomer")


def test_a_model_alone_on_its_board_goes_on() -> None:
    # It has done every item the other models have (there are none): not a reason to stop.
    plan = _board({"solo": 0}).plan("b", "solo")
    assert plan.action == "continue" and plan.items_done == 50 and plan.next_items == ()
    assert plan.reason == "no pair with the compared models yet"
