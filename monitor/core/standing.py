"""Where one model's evaluation stands: settled (its plan says stop) and at which item, with
what that saved, or what is still open — the one reading of the stop signal that the web
board, the live report and the metrics show (docs/until-resolved.md, "On the board").

A plan (:mod:`monitor.core.plan`) is computed on demand and knows the state now, not when the
model became settled. The moment is recorded by whoever evaluates the board as it goes
(:class:`monitor.runners.standings.Standings`): :func:`settle` keeps the record while the plan
says stop, takes it at the first reading that says so, and drops it when the plan says
continue again (a new model opened a pair with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.core.plan import Plan


@dataclass(frozen=True)
class SettledAt:
    """The first reading of a model's plan that said stop (since one last said continue): the
    model's items then, and when."""

    items: int
    ts: datetime


@dataclass(frozen=True)
class Standing:
    """One model's stop signal as the faces show it: the plan's answer for the whole board
    (every other ranked model) and, when it says stop, the item it first said so at."""

    model: str
    settled: bool  # the plan says stop
    reason: str  # the plan's reason
    items_done: int
    items_total: int  # the items the board's models have (the model's included)
    pairs: int
    open_pairs: int
    items_to_go: int | None  # estimated items the open pairs still need (None: no estimate)
    settled_at: SettledAt | None

    @property
    def items_remaining(self) -> int:
        """Items the other models have that this one has not done."""
        return max(self.items_total - self.items_done, 0)

    @property
    def saved(self) -> float | None:
        """Share of the board's items the model has not evaluated, once settled (None before):
        what stopping at the signal saved, or what it still saves if the evaluation stops now."""
        if not self.settled or self.items_total <= 0:
            return None
        return self.items_remaining / self.items_total

    def text(self) -> str:
        """The sentence every face shows, e.g. ``settled at item 1,000 of 2,000 (50% saved)``,
        ``3 pairs open, ~400 items to go`` or ``all 2,000 items done; every pair decided``."""
        k = self.open_pairs
        pairs = f"{k} pair{'' if k == 1 else 's'}"
        if not self.settled:
            if self.pairs == 0:
                return "no other model to compare with yet"
            if self.items_to_go is not None:
                return f"{pairs} open, ~{self.items_to_go:,} items to go"
            return f"{pairs} open, {self.items_remaining:,} items left"
        at = self.settled_at.items if self.settled_at is not None else self.items_done
        total = self.items_total
        if at >= total:
            # Nothing was left to evaluate when the plan first said stop (a model evaluated
            # in full before its pairs were decided): no item to save, nothing "settled at".
            return f"all {total:,} items done; " + (f"{pairs} open" if k else
                                                     "every pair decided")
        saved = self.saved or 0.0
        done = f"; {self.items_done:,} done" if self.items_done > at else ""
        text = f"settled at item {at:,} of {total:,} ({saved:.0%} saved{done})"
        return text + (f"; {pairs} left open" if k else "")

    def to_json(self) -> dict[str, Any]:
        """The ranking route's ``standing`` of the model."""
        return {
            "settled": self.settled, "text": self.text(), "reason": self.reason,
            "items_done": self.items_done, "items_total": self.items_total,
            "items_remaining": self.items_remaining, "saved": self.saved,
            "pairs": self.pairs, "open_pairs": self.open_pairs,
            "items_to_go": self.items_to_go,
            "settled_at": None if self.settled_at is None else {
                "items": self.settled_at.items, "ts": self.settled_at.ts.isoformat()},
        }


def settle(previous: SettledAt | None, plan: Plan, now: datetime) -> SettledAt | None:
    """The record after an evaluation whose plan is ``plan``: kept while the plan says stop,
    taken now (with the model's items now) when it first does, dropped when it says
    continue."""
    if plan.action != "stop":
        return None
    return previous if previous is not None else SettledAt(plan.items_done, now)


def standing(plan: Plan, settled_at: SettledAt | None) -> Standing:
    """The standing of ``plan``'s model (a plan of the whole board: no ``against``, ``top``
    or ``budget``), with the record :func:`settle` keeps."""
    return Standing(
        model=plan.model, settled=plan.action == "stop", reason=plan.reason,
        items_done=plan.items_done, items_total=plan.items_total, pairs=len(plan.pairs),
        open_pairs=len(plan.open), items_to_go=plan.items_needed(),
        settled_at=settled_at if plan.action == "stop" else None)
