"""The stop signal of an evaluation: for one model of a board, ``continue`` (with the next items
to evaluate) or ``stop`` (with the reason), from the pairs' decisions and what the items left
could still decide.

Decisions are anytime-valid, so an evaluator may stop on them at no statistical cost: stopping
is a stopping time like any other, and a decision already taken stays valid; what stopping
costs is only the decisions the rest of the benchmark would have added (docs/until-resolved.md).

* **Settled pairs.** Resolved or equivalent (decided, final), or not decidable under the
  board's design (sampled clusters with too few clusters).
* **Open pairs' prospects.** For an open pair, the predictive probability that either
  decision is reached by its last item: with n paired items, δ̂ and σ̂² now, and R items of the
  other model still to pair, the final gap δ̂_N (N = n + R) is predicted as
  N(δ̂, σ̂² R/(N n)) (a flat prior on δ and the R items' mean around it: predictive power,
  Spiegelhalter et al. 1986); resolution needs |δ̂_N| beyond the half-width w_N of the pair's
  confidence sequence at N items, and equivalence |δ̂_N| + w_N < Δ. w_N is the kernel's
  confidence sequence at its share read at N items with the same σ̂² (``cs_bounded``). A pair
  whose chance is below ``FUTILITY`` is shown as futile. Before ``MIN_ITEMS`` paired items a
  pair has no estimate, and its chance counts as 1.
* **The model is settled** (the rule that decides the saving) when every pair in the question
  is settled, or when the items left are expected to decide fewer than ``FUTILITY`` of its
  pairs: every open pair past ``MIN_ITEMS`` and the sum of the open pairs' chances below
  ``FUTILITY`` × the pairs: ``stop``. The sum is the expected number of decisions the rest of
  the benchmark would add, so a stop leaves that many open on average — a pair close to the
  edge of a decision may be among them. The rule only decides when to stop asking for items;
  it takes no decision about a pair, and costs none of the decisions taken.
  The question can be narrowed: pairs with a named set of models (``against``), "is it in the
  top K" (``top``: settled when its rank set lies within 1…K or below K), an item budget.
* **A model with no result yet** (an evaluation about to start) gets ``continue`` with the
  first items of the order; an unknown benchmark has no plan.
* **Next items.** The items the compared models have and the model has not done, in a
  seeded random order fixed per benchmark (a keyed hash of each item id with the benchmark's
  name): the order in which an evaluator's results arrive then never depends on outcomes,
  which is what the anytime decisions assume.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy.special import ndtr

from monitor.core.table import PairTable, undecidable_reason
from monitor.stats.figures import PairRecord

#: The model is settled when the items left are expected to decide fewer than this share of
#: its pairs (an open pair whose own chance is below it is shown as futile).
FUTILITY = 0.05
#: No pair is futile before this many paired items (the estimates are too rough before).
MIN_ITEMS = 200
#: Next items handed out per plan by default.
NEXT_ITEMS = 100

Action = Literal["continue", "stop"]


@dataclass(frozen=True)
class PairPlan:
    """One pair of the model in the question: its state and what the items left could do."""

    model: str  # the other model
    verdict: str
    n: int
    delta: float
    cs_low: float | None
    cs_high: float | None
    items_left: int  # items the other model has that this one has not done
    chance: float | None  # predictive chance of a decision by the last item (open pairs)
    items_needed: int | None  # estimated items still needed for a decision (open pairs)
    decided_at: int | None

    @property
    def settled(self) -> bool:
        return self.verdict != "unresolved"

    @property
    def futile(self) -> bool:
        return not self.settled and self.chance is not None and self.chance < FUTILITY

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "verdict": self.verdict, "n": self.n,
                               "delta": self.delta}
        if self.settled:
            out["decided_at"] = self.decided_at
        else:
            out.update(cs_low=self.cs_low, cs_high=self.cs_high, items_left=self.items_left,
                       decision_chance=self.chance, items_needed=self.items_needed,
                       futile=self.futile)
        return out


@dataclass(frozen=True)
class Plan:
    """The stop signal of one model of a board."""

    benchmark: str
    model: str
    action: Action
    reason: str
    items_done: int
    items_total: int
    pairs: tuple[PairPlan, ...]
    next_items: tuple[str, ...]
    question: dict[str, Any] = field(default_factory=dict)
    rank: tuple[int, int] | None = None  # the model's rank set (low, high)

    @property
    def settled(self) -> tuple[PairPlan, ...]:
        return tuple(p for p in self.pairs if p.settled)

    @property
    def open(self) -> tuple[PairPlan, ...]:
        return tuple(p for p in self.pairs if not p.settled)

    def items_needed(self) -> int | None:
        """The most items any open, not futile pair is estimated to need (None: none)."""
        need = [p.items_needed for p in self.open if not p.futile and p.items_needed is not None]
        return max(need) if need else None

    def as_dict(self) -> dict[str, Any]:
        """The plan route's JSON."""
        return {
            "benchmark": self.benchmark, "model": self.model, "action": self.action,
            "reason": self.reason, "question": self.question,
            "items_done": self.items_done, "items_total": self.items_total,
            "items_remaining": max(self.items_total - self.items_done, 0),
            "rank_low": None if self.rank is None else self.rank[0],
            "rank_high": None if self.rank is None else self.rank[1],
            "settled": [p.as_dict() for p in self.settled],
            "open": [p.as_dict() for p in self.open],
            "items_needed": self.items_needed(),
            "next_items": list(self.next_items),
            "order": "keyed hash of the item ids with the benchmark's name (fixed per benchmark)",
        }


def item_keys(benchmark: str, item_ids: Sequence[str]) -> np.ndarray:
    """Each item's place in the benchmark's fixed random order (a keyed 64-bit hash)."""
    key = hashlib.blake2b(benchmark.encode(), digest_size=16).digest()
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8, key=key).digest(), "big")
         for i in item_ids), dtype=np.uint64, count=len(item_ids))


def _open_pairs(figs: Sequence[PairRecord], items_left: Sequence[int], margin: float | None
                ) -> list[tuple[float | None, float | None, float | None, int | None]]:
    """Per open pair: its confidence sequence now (low, high), the predictive chance that it
    is decided by its last item, and the items it is estimated to need (None when more than
    are left). One solve for every end: a plan reads all the open pairs of its model."""
    from monitor.stats.eprocess import cs_bounded

    if not figs:
        return []
    n = np.array([f.n for f in figs], dtype=float)
    s = np.array([f.s for f in figs])
    v = np.array([f.v for f in figs])
    delta = np.array([f.delta for f in figs])
    s2 = np.array([f.sigma_d2 for f in figs])
    left = np.asarray(items_left, dtype=float)
    level = np.array([f.e_alpha for f in figs])
    ripe = (n >= MIN_ITEMS) & np.isfinite(delta) & np.isfinite(s2)
    d0 = np.where(ripe, delta, 0.0)
    s2 = np.where(ripe, np.maximum(s2, 1e-12), 1.0)  # a stand-in where there is no estimate
    total = n + left
    # The interval now (the kernel's, as the pair's figures show it) and at the last item
    # with the variance now.
    lo, hi = cs_bounded(np.r_[n, total], np.r_[s, total * d0],
                        np.r_[v, total * (s2 + d0 * d0)], alpha=np.r_[level, level])
    lo, hi = np.atleast_1d(lo), np.atleast_1d(hi)
    k = len(figs)
    cs_low, cs_high = lo[:k], hi[:k]
    w_end = (hi[k:] - lo[k:]) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.where(ripe, np.sqrt(s2 * left / (total * np.maximum(n, 1.0))), 0.0)

    def above(x: np.ndarray) -> np.ndarray:  # P(δ̂_N > x)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(sd > 0, (d0 - x) / np.where(sd > 0, sd, 1.0), 0.0)
        return np.where(sd > 0, ndtr(z), (d0 > x).astype(float))

    chance = above(w_end) + (1.0 - above(-w_end))
    if margin is not None:
        edge = margin - w_end
        chance = chance + np.where(edge > 0, np.maximum(above(-edge) - above(edge), 0.0), 0.0)
    chance = np.where(ripe, np.minimum(chance, 1.0), 1.0)
    out: list[tuple[float | None, float | None, float | None, int | None]] = []
    for j, f in enumerate(figs):
        needed: int | None = None
        if ripe[j]:
            # The width shrinks about as 1/√N (the log factor moves slowly), so the width
            # now gives the constant.
            c = ((cs_high[j] - cs_low[j]) / 2.0) ** 2 * n[j] / s2[j]
            targets = [abs(f.delta)] + ([margin - abs(f.delta)] if margin is not None else [])
            reach = [c * s2[j] / t ** 2 for t in targets if t > 0]
            if reach:
                more = max(math.ceil(min(reach) - n[j]), 0)
                needed = more if more <= items_left[j] else None
        out.append((float(cs_low[j]), float(cs_high[j]), float(chance[j]), needed))
    return out


def build_plan(
    benchmark: str,
    model: str,
    *,
    table: PairTable,
    present: np.ndarray,
    item_ids: Sequence[str],
    keys: np.ndarray,
    margin: float | None,
    against: Sequence[str] | None = None,
    top: int | None = None,
    budget: int | None = None,
    count: int = NEXT_ITEMS,
) -> Plan:
    """The plan of ``model`` on a board (``table``: its verdicts; ``present``: items × models,
    which scores exist, excluded items left out; ``keys``: :func:`item_keys` of the items).
    A ``model`` not in the table has done no item yet."""
    col = {name: j for j, name in enumerate(table.models)}
    # A model with no result yet is an evaluation about to start: its first items are the
    # first of the benchmark's order.
    m = col.get(model, -1)
    others = [o for o in table.order if o != m]
    if against is not None:
        unknown = [a for a in against if a not in col or a == model]
        if unknown:
            raise KeyError(f"no other model {unknown[0]!r} in benchmark {benchmark!r}")
        chosen = {col[a] for a in against}
        others = [o for o in others if o in chosen]
    done = present[:, m] if m >= 0 else np.zeros(present.shape[0], dtype=bool)
    compared = present[:, others].any(axis=1) if others else np.zeros(done.shape, bool)
    universe = compared | done
    items_done, items_total = int(done.sum()), int(universe.sum())
    question: dict[str, Any] = {"against": None if against is None else list(against),
                                "top": top, "budget": budget}
    rank: tuple[int, int] | None = None
    if m in table.order:
        low, high, _ = table.rank_sets()
        r = table.order.index(m)
        rank = (low[r], high[r])
    pairs: list[PairPlan] = []
    if m in table.order and others:
        fig = table.light([(m, o) for o in others])
        figs = [fig.record(j) for j in range(len(others))]
        lefts = np.count_nonzero(present[:, others] & ~done[:, None], axis=0).tolist()
        verdicts = ["undecidable" if undecidable_reason(f) is not None else table.verdict(m, o)
                    for f, o in zip(figs, others, strict=True)]
        open_ = [j for j, v in enumerate(verdicts) if v == "unresolved"]
        reads = dict(zip(open_, _open_pairs([figs[j] for j in open_],
                                            [lefts[j] for j in open_], margin), strict=True))
        for j, (o, f) in enumerate(zip(others, figs, strict=True)):
            cs_low, cs_high, chance, needed = reads.get(j, (None, None, None, None))
            pairs.append(PairPlan(
                model=table.models[o], verdict=verdicts[j], n=f.n, delta=f.delta,
                cs_low=cs_low, cs_high=cs_high, items_left=int(lefts[j]), chance=chance,
                items_needed=needed, decided_at=f.headline_decided_n))
    todo = np.flatnonzero(compared & ~done)
    if count > 0 and todo.size:
        first = todo[np.argsort(keys[todo], kind="stable")[:count]]
        next_items = tuple(item_ids[i] for i in first.tolist())
    else:
        next_items = ()
    action, reason = _decide(pairs, items_done=items_done, items_total=items_total,
                             rank=rank, top=top, budget=budget, ranked=m in table.order)
    if m < 0 and action == "continue":
        reason = f"no result of {model!r} yet"
    return Plan(benchmark=benchmark, model=model, action=action, reason=reason,
                items_done=items_done, items_total=items_total, pairs=tuple(pairs),
                next_items=next_items if action == "continue" else (), question=question,
                rank=rank)


def _decide(pairs: list[PairPlan], *, items_done: int, items_total: int,
            rank: tuple[int, int] | None, top: int | None, budget: int | None,
            ranked: bool) -> tuple[Action, str]:
    if budget is not None and items_done >= budget:
        return "stop", f"the item budget of {budget} is reached"
    if not ranked or not pairs:
        # Before "every item done": a model alone on its board has done every item the
        # others have (none), and still has its whole benchmark to run.
        return "continue", "no pair with the compared models yet"
    if items_total and items_done >= items_total:
        return "stop", "every item the compared models have is done"
    if top is not None and rank is not None:
        if rank[1] <= top:
            return "stop", f"settled: in the top {top} (rank set {rank[0]}–{rank[1]})"
        if rank[0] > top:
            return "stop", f"settled: not in the top {top} (rank set {rank[0]}–{rank[1]})"
    open_ = [p for p in pairs if not p.settled]
    if not open_:
        return "stop", f"settled: all {len(pairs)} pairs are decided"
    young = [p for p in open_ if p.chance is None or p.n < MIN_ITEMS]
    expected = sum(p.chance or 0.0 for p in open_)
    if not young and expected < FUTILITY * len(pairs):
        return "stop", (f"{len(pairs) - len(open_)} of {len(pairs)} pairs decided; the items "
                        f"left are expected to decide {expected:.2f} of the {len(open_)} open "
                        f"(< {FUTILITY:g} of the {len(pairs)} pairs)")
    live = [p for p in open_ if not p.futile]
    return "continue", f"{len(live)} open pair(s) may still be decided"
