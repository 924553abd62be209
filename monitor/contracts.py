"""The event contract of the live monitor: the pydantic models, its one definition.

``ItemResult`` is what producers send; ``ResolutionChange`` and ``RankingChange`` are what the
monitor publishes; ``DeadLetter`` carries every rejected input with a machine-readable reason.
``schemas/`` at the top of the repository holds the JSON Schema generated from these models
(``llm-monitor schemas --out schemas``) — the contract for producers in any language.
Reading bodies into these events, fast and without raising, is :mod:`monitor.decoder`'s.
The number rule (:func:`wire_float`, :func:`read_wire_float`, :func:`jsonable`) is part of the
contract but lives in :mod:`monitor.wire`, which imports no pydantic (so ``--json`` output
need not), and is re-exported here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
)

# Re-exported: the number rule is part of the contract, defined where no pydantic is imported.
from monitor.wire import jsonable as jsonable
from monitor.wire import read_wire_float as read_wire_float
from monitor.wire import wire_float as wire_float

#: Machine-readable dead-letter reasons (the ``reason`` field of :class:`DeadLetter`).
DEAD_LETTER_REASONS = ("invalid-json", "invalid-utf8", "schema", "conflict", "too-large")

#: A dead letter keeps at most this many characters of the offending input.
PAYLOAD_LIMIT = 1024

_VARIANT_PATTERN = r"^(original|perturbed:[A-Za-z0-9_.\-]{1,64})$"
_VERDICT_PATTERN = r"^(unresolved|equivalent|resolved:.+)$"


#: A figure on the wire: a number, "inf"/"-inf", or null (see :func:`wire_float`).
WireFloat = Annotated[
    float | None,
    BeforeValidator(read_wire_float),
    PlainSerializer(lambda x: None if x is None else wire_float(x), when_used="json"),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"enum": ["inf", "-inf"]}, {"type": "null"}]}),
]


#: Names hold no control characters (C0, DEL, C1; a newline included): they are path segments
#: of the HTTP routes, metric label values and lines of logs. :func:`decode_events` enforces
#: it (a pattern validated on every field would cost ingest a third of its speed).
_NAME_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
_NAME = {"pattern": _NAME_PATTERN}
NonEmpty200 = Annotated[str, Field(min_length=1, max_length=200, json_schema_extra=_NAME)]
Label = Annotated[str, Field(min_length=1, max_length=100, json_schema_extra=_NAME)]


def _exactly_one(value: Any) -> Any:
    # 1 == True == 1.0 in Python, and a literal would take all three.
    if value == 1 and type(value) is not int:
        raise ValueError(f"must be the integer 1, got {value!r}")
    return value


class _Event(BaseModel):
    # strict: a producer sending "0.5" or true as a score is told so instead of being coerced.
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ItemResult(_Event):
    """One model's score on one benchmark item: the event producers send."""

    benchmark: NonEmpty200 = Field(description="benchmark name, e.g. 'mmlu_pro'")
    item_id: Annotated[str, Field(min_length=1, max_length=500, json_schema_extra=_NAME)] = Field(
        description="the item's identifier inside the benchmark"
    )
    model: NonEmpty200 = Field(description="the model that produced the answer")
    score: float = Field(
        ge=0.0, le=1.0, allow_inf_nan=False,
        description="score in [0, 1]; 0/1 for binary benchmarks (integers 0 and 1 accepted)",
    )
    sample: int = Field(
        default=0, ge=0, le=1_000_000,
        description="index of this answer among the model's repeated samples of the item "
                    "(avg@k, pass@k); the item's score is the mean of its samples",
    )
    k: int | None = Field(
        default=None, ge=1, le=1024,
        description="K, the samples per item and model the benchmark takes (sample 0 … K − 1); "
                    "the benchmark's first result declares it (else the monitor's settings; "
                    "default 1), and a result stating another K is a conflict",
    )
    cluster: Annotated[str, Field(max_length=200, json_schema_extra=_NAME)] | None = Field(
        default=None,
        description="grouping label of the item (e.g. subject); the first value seen for an item wins",
    )
    run_id: Annotated[str, Field(max_length=200, json_schema_extra=_NAME)] | None = Field(
        default=None, description="producer's run identifier; recorded, not part of identity"
    )
    variant: str = Field(
        default="original",
        pattern=_VARIANT_PATTERN,
        description="'original' or 'perturbed:<kind>' (e.g. 'perturbed:paraphrase')",
    )
    flags: list[Label] = Field(
        default_factory=list,
        max_length=32,
        description="item flags, e.g. 'leak-suspect' (excluded from resolution by default)",
    )
    # Not strict: JSON has no datetime type, so ISO-8601 strings must be accepted here.
    ts: datetime | None = Field(default=None, strict=False, description="when the result was produced")
    schema_version: Annotated[Literal[1], BeforeValidator(_exactly_one)] = Field(
        default=1, description="contract version")


class ResolutionChange(_Event):
    """A pair's verdict changed; ``model_a`` is ranked above ``model_b`` when emitted."""

    change_id: int = Field(ge=0, description="monotonically increasing identifier of the change")
    benchmark: NonEmpty200
    model_a: NonEmpty200
    model_b: NonEmpty200
    previous: str = Field(pattern=_VERDICT_PATTERN, description="the verdict before")
    verdict: str = Field(pattern=_VERDICT_PATTERN, description="'unresolved', 'equivalent' (tied "
                         "within the benchmark's margin) or 'resolved:<model>'")
    n: int = Field(ge=0, description="paired items")
    delta: WireFloat = Field(description="mean score of model_a minus model_b on paired items")
    cs_low: WireFloat = Field(description="lower end of the confidence sequence for delta")
    cs_high: WireFloat = Field(description="upper end of the confidence sequence for delta")
    e_value: WireFloat = Field(description="E_n of the pair's e-process (may be very large)")
    q: WireFloat = Field(description="fixed-N resolution ratio N / N* (family-corrected)")
    q_cluster: WireFloat = Field(description="q with the cluster-robust design effect")
    q_anytime: WireFloat = Field(description="N / N*_AV, the anytime-valid resolution ratio")
    mde: WireFloat = Field(description="minimum detectable effect at n (family-corrected)")
    decided_n: int | None = Field(
        default=None, ge=0,
        description="paired items when the pair was decided (its first crossing); null while "
                    "unresolved")
    decided_e_value: WireFloat = Field(
        default=None, description="E_n at the decision (at least the pair's threshold)")
    e_threshold: WireFloat = Field(
        default=None, description="1/γ: the pair's threshold, from its fixed share γ of α")
    decided_ts: datetime | None = Field(
        default=None, strict=False, description="when the decision was taken")
    ts: datetime = Field(strict=False)
    schema_version: Literal[1] = 1


class RankingChange(_Event):
    """A benchmark's ranking changed order, tiers, or became (un)resolved."""

    change_id: int = Field(ge=0)
    benchmark: NonEmpty200
    resolved: bool = Field(description="every adjacent pair resolved in the ranking's direction")
    models: list[str] = Field(description="models ordered by mean score, best first")
    unresolved_pairs: int = Field(ge=0, description="adjacent pairs not yet resolved")
    tiers: list[int] | None = Field(
        default=None, description="tier of each model of `models` (1 = top): consecutive "
        "groups not separated from each other by anytime decisions")
    top_resolved: bool | None = Field(
        default=None, description="the leader is resolved above every other model")
    ts: datetime = Field(strict=False)
    schema_version: Literal[1] = 1


class DeadLetter(_Event):
    """A rejected input with a machine-readable reason; nothing is rejected silently."""

    reason: Literal["invalid-json", "invalid-utf8", "schema", "conflict", "too-large"]
    detail: str = Field(description="human-readable explanation naming the index and field")
    payload: str = Field(max_length=PAYLOAD_LIMIT, description="the raw input, truncated to 1 KB")
    source: str = Field(description="where it came from: 'http[3]', 'file:line', 'topic/partition/offset'")
    index: int | None = Field(default=None, description="index of the event inside its request")
    ts: datetime = Field(strict=False)
    schema_version: Literal[1] = 1


EVENT_MODELS: dict[str, type[BaseModel]] = {
    "ItemResult": ItemResult,
    "ResolutionChange": ResolutionChange,
    "RankingChange": RankingChange,
    "DeadLetter": DeadLetter,
}




def _now() -> datetime:
    return datetime.now(UTC)


def _truncate(text: str) -> str:
    return text[:PAYLOAD_LIMIT]


def dead_letter(
    reason: str, detail: str, payload: str, *, source: str, index: int | None = None,
    ts: datetime | None = None,
) -> DeadLetter:
    """Build a DeadLetter, truncating the payload to 1 KB."""
    return DeadLetter(
        reason=reason,  # type: ignore[arg-type]
        detail=detail,
        payload=_truncate(payload),
        source=source,
        index=index,
        ts=ts or _now(),
    )
