"""A model's standing: the plan's stop signal in one sentence, and the record of when it
settled (monitor.core.standing)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.core.standing import SettledAt, Standing, settle, standing

N = 1000
REFERENCES = {"r1": 0.9, "r2": 0.6, "r3": 0.3}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def scores(j: int, p: float) -> list[float]:
    """Model j's 0/1 scores on the N items: right with probability p, independently (seeded)."""
    return (np.random.default_rng(j).random(N) < p).astype(float).tolist()


def board() -> Monitor:
    mon = Monitor(CoreConfig())
    mon.apply([ItemResult(benchmark="b", item_id=f"q{i}", model=m, score=s)
               for j, (m, p) in enumerate(REFERENCES.items())
               for i, s in enumerate(scores(j, p))])
    return mon


def post(mon: Monitor, model: str, items: tuple[str, ...], p: float = 0.75) -> None:
    x = scores(len(model) + 10 * ord(model[0]), p)
    mon.apply([ItemResult(benchmark="b", item_id=i, model=model, score=x[int(i[1:])])
               for i in items])


@pytest.mark.slow
def test_a_model_evaluated_until_its_plan_says_stop() -> None:
    mon = board()
    post(mon, "x", mon.plan("b", "x", count=100).next_items)
    while (plan := mon.plan("b", "x", count=100)).action == "continue":
        st = standing(plan, settle(None, plan, T0))
        k = len(plan.open)
        assert not st.settled and st.saved is None and st.settled_at is None
        assert (st.items_done, st.items_total, st.open_pairs) == (plan.items_done, N, k)
        need = plan.items_needed()
        assert st.text() == (f"{k} pair{'' if k == 1 else 's'} open, "
                             + (f"~{need:,} items to go" if need is not None
                                else f"{N - plan.items_done:,} items left"))
        post(mon, "x", plan.next_items)
    n = plan.items_done
    assert 0 < n < N, plan.reason  # stopped early: the scenario saves items
    rec = settle(None, plan, T0)
    assert rec == SettledAt(n, T0)
    st = standing(plan, rec)
    assert st.settled and st.reason == plan.reason and st.saved == (N - n) / N
    left = f"; {len(plan.open)} pair{'' if len(plan.open) == 1 else 's'} left open"
    assert st.text() == (f"settled at item {n:,} of 1,000 ({(N - n) / N:.0%} saved)"
                         + (left if plan.open else ""))
    assert st.to_json()["settled_at"] == {"items": n, "ts": T0.isoformat()}

    # Its evaluation runs on: the record stays where the plan first said stop.
    ids = [f"q{i}" for i in range(N)]
    more = tuple(i for i in ids if (i, "x") not in mon.scores("b"))[:100]
    post(mon, "x", more)
    later = mon.plan("b", "x", count=0)
    assert later.action == "stop" and later.items_done == n + 100
    assert settle(rec, later, datetime(2026, 1, 2, tzinfo=UTC)) is rec
    assert standing(later, rec).text().startswith(
        f"settled at item {n:,} of 1,000 ({(N - n - 100) / N:.0%} saved; {n + 100:,} done)")

    # A reference model evaluated in full: nothing was saved, nothing is left to save.
    ref = mon.plan("b", "r1", count=0)
    assert ref.action == "stop" and ref.items_done == N
    text = standing(ref, settle(None, ref, T0)).text()
    k = len(ref.open)
    assert text == "all 1,000 items done; " + (
        f"{k} pair{'' if k == 1 else 's'} open" if k else "every pair decided")


def test_a_new_pair_drops_the_record() -> None:
    mon = board()
    while (plan := mon.plan("b", "x", count=200)).action == "continue":
        post(mon, "x", plan.next_items)
    rec = settle(None, plan, T0)
    assert rec is not None
    # A new model with items x has not done: x has a pair to decide again.
    done = {i for (i, m) in mon.scores("b") if m == "x"}
    post(mon, "y", tuple(f"q{i}" for i in range(N) if f"q{i}" not in done)[:50], p=0.3)
    again = mon.plan("b", "x", count=0)
    assert again.action == "continue", again.reason
    assert settle(rec, again, T0) is None
    assert standing(again, rec).settled_at is None  # a record never shows while open


def _standing(**kw: object) -> Standing:
    base: dict[str, object] = dict(model="m", settled=True, reason="r", items_done=600,
                                   items_total=2000, pairs=3, open_pairs=0, items_to_go=None,
                                   settled_at=SettledAt(600, T0))
    base.update(kw)
    return Standing(**base)  # type: ignore[arg-type]


def test_the_sentences() -> None:
    assert _standing().text() == "settled at item 600 of 2,000 (70% saved)"
    assert _standing(items_done=1100).text() == (
        "settled at item 600 of 2,000 (45% saved; 1,100 done)")
    assert _standing(open_pairs=1).text() == (
        "settled at item 600 of 2,000 (70% saved); 1 pair left open")
    full = SettledAt(2000, T0)
    assert _standing(items_done=2000, settled_at=full).text() == (
        "all 2,000 items done; every pair decided")
    assert _standing(items_done=2000, settled_at=full, open_pairs=2).text() == (
        "all 2,000 items done; 2 pairs open")
    assert _standing(settled=False, settled_at=None, open_pairs=3, items_to_go=400).text() == (
        "3 pairs open, ~400 items to go")
    assert _standing(settled=False, settled_at=None, open_pairs=1).text() == (
        "1 pair open, 1,400 items left")
    assert _standing(settled=False, settled_at=None, pairs=0).text() == (
        "no other model to compare with yet")
    assert _standing(settled=False).saved is None
    assert _standing(items_done=1100).saved == 0.45
