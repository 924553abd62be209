"""Perturbation stability: does a model keep answering multiple-choice items right when the
wording, option order, format or surrounding noise changes?

The flip rate is the share of (item, perturbation) pairs answered correctly in the original
form and wrongly once perturbed. Items and their perturbed renderings live in
``monitor.audit.variants``, model access (an OpenAI-compatible HTTP adapter and a deterministic
local one) in ``monitor.audit.adapters``; their public names are re-exported here, so
``monitor.audit.stability`` stays the one import for the whole audit.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from scipy.stats import binomtest

from monitor.audit.adapters import (
    AdapterError,
    EndpointConfig,
    LocalAdapter,
    ModelAdapter,
    OpenAIChatAdapter,
    Query,
)
from monitor.audit.variants import (
    KINDS,
    LETTERS,
    MCItem,
    Variant,
    load_items,
    original,
    parse_answer,
    perturb,
)

__all__ = [
    "ALARM_FLIP_RATE", "KINDS", "LETTERS", "AdapterError", "EndpointConfig", "FlipStat",
    "LocalAdapter", "MCItem", "ModelAdapter", "OpenAIChatAdapter", "Outcome", "Query",
    "StabilityReport", "Variant", "flip_alarm", "flip_stat", "load_items", "original",
    "parse_answer", "perturb", "run_stability",
]

ALARM_FLIP_RATE = 0.10


@dataclass(frozen=True)
class Outcome:
    """The scored answer to one variant."""

    item_id: str
    kind: str
    variant: str
    correct: bool
    parsed: int | None
    reply: str


@dataclass(frozen=True)
class FlipStat:
    """Flips among (item, kind) pairs answered right in the original form, with a Wilson CI."""

    kind: str
    base: int
    flips: int
    rate: float
    ci_low: float
    ci_high: float
    accuracy_perturbed: float


def flip_stat(kind: str, flips: int, base: int, acc: float, *, confidence: float = 0.95) -> FlipStat:
    """Flip rate flips/base with scipy's Wilson score interval (NaN when base = 0)."""
    if base == 0:
        return FlipStat(kind, 0, 0, math.nan, math.nan, math.nan, acc)
    ci = binomtest(flips, base).proportion_ci(confidence_level=confidence, method="wilson")
    return FlipStat(kind, base, flips, flips / base, float(ci.low), float(ci.high), acc)


def flip_alarm(rate: float) -> bool:
    """The alarm rule: a flip rate above 10 % (an undefined rate, NaN, never alarms)."""
    return bool(rate > ALARM_FLIP_RATE)


@dataclass(frozen=True)
class StabilityReport:
    """Outcomes of every variant plus flip rates overall and per perturbation."""

    model: str
    n_items: int
    kinds: tuple[str, ...]
    seed: int
    accuracy_original: float
    overall: FlipStat
    per_kind: tuple[FlipStat, ...]
    retries: int
    outcomes: tuple[Outcome, ...] = field(repr=False)

    @property
    def alarm(self) -> bool:
        """True when the overall flip rate exceeds the 10 % alarm level."""
        return flip_alarm(self.overall.rate)

    @property
    def alarm_confirmed(self) -> bool:
        """True when even the Wilson lower bound exceeds 10 %."""
        return flip_alarm(self.overall.ci_low)

    def events(self, *, benchmark: str, run_id: str | None = None) -> list[dict[str, Any]]:
        """ItemResult-shaped dicts (score 1/0) for the live monitor, one per variant."""
        out = []
        for o in self.outcomes:
            ev: dict[str, Any] = {"benchmark": benchmark, "item_id": o.item_id,
                                  "model": self.model, "score": 1.0 if o.correct else 0.0,
                                  "variant": o.variant}
            if run_id is not None:
                ev["run_id"] = run_id
            out.append(ev)
        return out

    def to_dict(self, *, outcomes: bool = False) -> dict[str, Any]:
        """JSON-able summary."""
        out: dict[str, Any] = {
            "model": self.model, "n_items": self.n_items, "kinds": list(self.kinds),
            "seed": self.seed, "accuracy_original": self.accuracy_original,
            "flip_rate": self.overall.rate, "flip_ci": [self.overall.ci_low, self.overall.ci_high],
            "flips": self.overall.flips, "flip_base": self.overall.base,
            "alarm_level": ALARM_FLIP_RATE, "alarm": self.alarm,
            "alarm_confirmed": self.alarm_confirmed, "retries": self.retries,
            "per_kind": [s.__dict__ for s in self.per_kind],
        }
        if outcomes:
            out["outcomes"] = [o.__dict__ for o in self.outcomes]
        return out


async def run_stability(
    items: Sequence[MCItem],
    adapter: ModelAdapter,
    *,
    kinds: Sequence[str] = KINDS,
    seed: int = 0,
    concurrency: int = 8,
) -> StabilityReport:
    """Ask ``adapter`` every original and perturbed variant and compute flip rates.

    Any variant that still fails after the adapter's retries aborts the run with an
    AdapterError naming the item: a flip rate over silently dropped items would be biased.
    """
    if concurrency < 1:
        raise ValueError(f"`concurrency` must be at least 1, got {concurrency}")
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(f"`kinds` must be a non-empty subset of {KINDS}, got {list(kinds)}")
    variants = [v for it in items for v in (original(it), *(perturb(it, k, seed=seed)
                                                              for k in kinds))]
    sem = asyncio.Semaphore(concurrency)

    async def ask(v: Variant) -> Outcome:
        async with sem:
            reply = await adapter.complete(Query(v.item_id, v.kind, v.prompt, v.labels))
        parsed = parse_answer(reply, v.labels)
        return Outcome(v.item_id, v.kind, v.variant, parsed == v.answer, parsed, reply)

    tasks = [asyncio.ensure_future(ask(v)) for v in variants]
    try:
        outcomes = await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        await adapter.aclose()
    by = {(o.item_id, o.kind): o for o in outcomes}
    right0 = [it.id for it in items if by[(it.id, "original")].correct]
    per_kind = []
    for k in kinds:
        flips = sum(not by[(i, k)].correct for i in right0)
        acc = sum(by[(it.id, k)].correct for it in items) / len(items)
        per_kind.append(flip_stat(k, flips, len(right0), acc))
    all_flips = sum(s.flips for s in per_kind)
    all_acc = sum(s.accuracy_perturbed for s in per_kind) / len(per_kind)
    overall = flip_stat("all", all_flips, len(right0) * len(kinds), all_acc)
    return StabilityReport(adapter.name, len(items), tuple(kinds), seed,
                           len(right0) / len(items), overall, tuple(per_kind),
                           int(getattr(adapter, "retried", 0)), tuple(outcomes))
