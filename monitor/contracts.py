"""The event contract of the live monitor: pydantic models and a decoder that never raises.

``ItemResult`` is what producers send; ``ResolutionChange`` and ``RankingChange`` are what the
monitor publishes; ``DeadLetter`` carries every rejected input with a machine-readable reason.
``schemas/`` at the top of the repository holds the JSON Schema generated from these models
(``llm-monitor schemas --out schemas``) — the contract for producers in any language.

Just under 400 lines on purpose: the wire contract (events and the decoder) in one file, the
source of the JSON Schemas. The number rule (:func:`wire_float`, :func:`read_wire_float`,
:func:`jsonable`) is part of it but lives in :mod:`monitor.wire`, which imports no pydantic
(so ``--json`` output need not), and is re-exported here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    ValidationError,
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


#: ``ts`` as :class:`ItemResult` reads it (ISO-8601 text or a Unix time; strict=False).
_TS: TypeAdapter[datetime | None] = TypeAdapter(Annotated[datetime | None, Field(strict=False)])
_VARIANT = re.compile(_VARIANT_PATTERN.replace("$", r"\Z"))
_Str = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
_Opt = Annotated[str, msgspec.Meta(max_length=200)] | None


class _Wire(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A result as the fast decoder reads it: :class:`WireResult` or :class:`PlainResult`."""

    def item(self) -> ItemResult:
        """This result as the contract's model (the same JSON text, validated by it)."""
        return ItemResult.model_validate_json(msgspec.json.encode(self))

    def model_dump_json(self, *, exclude_defaults: bool = False) -> str:
        """The JSON text of :meth:`item`, as :meth:`ItemResult.model_dump_json` writes it."""
        return self.item().model_dump_json(exclude_defaults=exclude_defaults)


class WireResult(_Wire, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """An :class:`ItemResult` as the fast decoder reads it (:func:`fast_results`).

    The same fields and bounds as the contract, decoded by msgspec in one pass at about a
    microsecond per line; what it accepts, :class:`ItemResult` accepts with the same values
    (``tests/unit/test_wire_result.py`` holds it to that over fuzzed lines, and to the JSON
    Schema's bounds field by field). Where they could differ, the fast decoder leaves the
    check to the contract: ``variant`` is checked after decoding with the contract's own
    pattern, and ``ts`` is kept as sent (text or number) after the contract's datetime reader
    accepted it — the monitor records it and computes nothing from it. A slice with anything
    else goes to :class:`ItemResult`, whose errors name line and field.
    """

    benchmark: _Str
    item_id: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    model: _Str
    score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    sample: Annotated[int, msgspec.Meta(ge=0, le=1_000_000)] = 0
    k: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    cluster: _Opt = None
    run_id: _Opt = None
    variant: str = "original"
    flags: Annotated[list[Annotated[str, msgspec.Meta(min_length=1, max_length=100)]],
                     msgspec.Meta(max_length=32)] = []
    ts: str | int | float | None = None
    schema_version: Literal[1] = 1


class PlainResult(_Wire, frozen=True, forbid_unknown_fields=True, omit_defaults=True,
                  gc=False):
    """A :class:`WireResult` that names no ``sample``, ``k``, ``variant``, ``flags`` or ``ts``:
    an original result of sample 0 without flags, what almost every producer sends.

    The fast decoder tries it first: a line with any other key fails it (unknown field) and is
    read as a :class:`WireResult`. The fields it does not hold read as their defaults (class
    attributes), so the monitor reads both alike; knowing them from the type saves a pass per
    field over every batch. Not tracked by the cyclic collector: it holds only strings and
    numbers.
    """

    benchmark: _Str
    item_id: Annotated[str, msgspec.Meta(min_length=1, max_length=500)]
    model: _Str
    score: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    cluster: _Opt = None
    run_id: _Opt = None
    schema_version: Literal[1] = 1
    sample: ClassVar[int] = 0
    k: ClassVar[None] = None
    variant: ClassVar[str] = "original"
    flags: ClassVar[tuple[str, ...]] = ()
    ts: ClassVar[None] = None


#: A result as the monitor holds it: validated by the contract, or by the fast decoder.
Result = ItemResult | WireResult | PlainResult


def as_item(ev: Result) -> ItemResult:
    """``ev`` as the contract's model."""
    return ev.item() if isinstance(ev, _Wire) else ev


def is_wire(ev: Result) -> bool:
    """True for a result read by the fast decoder (msgspec encodes it as it came)."""
    return isinstance(ev, _Wire)


class Results(list[Result]):
    """A batch of results in order, with the columns the monitor reads, each read once.

    Every stage of ingest (the caps, the host's grouping, the core's fold, the store) asks
    the same questions of a batch: one benchmark? only original results of sample 0 without
    flags? which items, models, clusters, scores? Each is one pass over the events, taken the
    first time it is asked and kept. So a batch does not change once built: the list's
    mutators raise (``+=``, ``insert``, ``pop`` … would leave the kept answers stale); the
    decoder that builds one adds to it with :meth:`_extend` before handing it out.
    ``defaults`` says the decoder knows already that no event names a ``variant``, ``sample``
    or ``flags`` (no such key in the bytes it read), which answers the second question
    without a pass.
    """

    __slots__ = ("_memo", "defaults")

    def __init__(self, events: Any = (), *, defaults: bool = False) -> None:
        super().__init__(events)
        self.defaults = defaults
        self._memo: dict[str, Any] = {}

    def _extend(self, events: Any) -> None:
        """Add events while the batch is being built (its kept answers are dropped)."""
        self._memo.clear()
        super().extend(events)

    def _immutable(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a Results batch does not change once built: make a new one "
                        "(Results([...]))")

    append = extend = insert = pop = remove = clear = sort = reverse = _immutable
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _immutable

    @classmethod
    def of(cls, events: Any) -> Results:
        """``events`` as a batch (itself when it is one already)."""
        return events if isinstance(events, Results) else cls(events)

    def _get(self, name: str, make: Any) -> Any:
        got = self._memo.get(name)
        if got is None:
            got = self._memo[name] = make()
        return got

    @property
    def benchmarks(self) -> set[str]:
        """The distinct benchmarks of the batch."""
        def make() -> set[str]:
            names = [ev.benchmark for ev in self]
            # one benchmark (the common case): compared, not hashed (each is its own string)
            return {names[0]} if names and names.count(names[0]) == len(names) else set(names)
        return self._get("benchmarks", make)

    @property
    def benchmark(self) -> str | None:
        """The batch's one benchmark (None when it has several, or no event)."""
        names = self.benchmarks
        return next(iter(names)) if len(names) == 1 else None

    @property
    def plain(self) -> bool:
        """One benchmark's original results of sample 0 without flags and without a declared
        K (the common case)."""
        def make() -> bool:
            if self.benchmark is None:
                return False
            return self.defaults or (
                {ev.variant for ev in self} == {"original"} and {ev.sample for ev in self} == {0}
                and {ev.k for ev in self} == {None} and not any([ev.flags for ev in self]))
        return self._get("plain", make)

    def by_benchmark(self) -> dict[str, Results]:
        """The batch split by benchmark, each part in order (itself when it has one)."""
        if self.benchmark is not None:
            return {self.benchmark: self}
        groups: dict[str, list[Result]] = {}
        for ev in self:
            groups.setdefault(ev.benchmark, []).append(ev)
        return {name: Results(evs) for name, evs in groups.items()}

    @property
    def items(self) -> list[str]:
        return self._get("items", lambda: [ev.item_id for ev in self])

    @property
    def models(self) -> list[str]:
        return self._get("models", lambda: [ev.model for ev in self])

    @property
    def clusters(self) -> list[str | None]:
        return self._get("clusters", lambda: [ev.cluster for ev in self])

    @property
    def scores(self) -> list[float]:
        return self._get("scores", lambda: [ev.score for ev in self])

_FAST_LIST = msgspec.json.Decoder(list[WireResult])
_PLAIN_LIST = msgspec.json.Decoder(list[PlainResult])


def fast_results(text: bytes, *, count: int | None = None, lines: bool = False
                 ) -> Results | None:
    """The results of a JSON array of objects (``lines``: NDJSON, exactly one value on every
    line and no blank line), or None when any of them is not a valid result or they are not
    ``count`` — the caller then decodes them with :class:`ItemResult`, whose errors name each
    line and field.

    Read as :class:`PlainResult` when every event allows it (``defaults`` of the batch set),
    else as :class:`WireResult`.
    """
    if lines:
        # One array element per line, the newlines kept: a JSON string holds no raw newline
        # (so none runs from one line into the next), and a blank line or a value spread over
        # two lines makes the array invalid. Every line must start with '{' (no field takes
        # an object, so such a line cannot continue the line before) and the lines must be
        # as many as the events: a line holding two values, or the start of a second one
        # that the next line would finish, is not taken.
        newlines = text.count(b"\n")
        if text[:1] != b"{" or text.count(b"\n{") != newlines:
            return None
        if count is not None and count != newlines + 1:
            return None
        count = newlines + 1
        text = b"[" + text.replace(b"\n", b",\n") + b"]"
    try:
        events = Results(_PLAIN_LIST.decode(text), defaults=True)
    except (msgspec.ValidationError, msgspec.DecodeError):
        try:
            events = Results(_FAST_LIST.decode(text))
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        variants = {ev.variant for ev in events}
        if variants - {"original"} and not all(_VARIANT.match(v) for v in variants):
            return None
        if {ev.ts for ev in events} - {None}:
            try:
                for ev in events:
                    if ev.ts is not None:
                        _TS.validate_python(ev.ts)
            except ValidationError:
                return None
    if count is not None and len(events) != count:
        return None
    return events


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


@dataclass
class Decoded:
    """The outcome of :func:`decode_events`: valid events and dead letters, each with its index.

    ``events`` is how many events the body held (NDJSON lines that are not blank, array
    elements; a body that cannot be split into events counts as one), so that ``len(valid)
    + rejected == events``. ``invalid`` keeps at most ``keep`` dead letters (all when
    ``keep`` is None); ``rejected`` and ``reasons`` count every rejection. ``body_error``
    says why the body as a whole could not be decoded (it is then one invalid event).
    """

    #: The valid events in order, and their indices in the body (None: 0, 1, 2, … — every
    #: event of the body so far was valid).
    results: Results = field(default_factory=lambda: Results(defaults=True))
    index: list[int] | None = None
    invalid: list[DeadLetter] = field(default_factory=list)
    events: int = 0
    rejected: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    body_error: str | None = None
    keep: int | None = None
    #: The whole body, when it is NDJSON whose every line is one valid event: it can be
    #: stored as it came.
    text: bytes | None = None
    _lines: list[bytes] | None = field(default=None, repr=False)

    @property
    def lines(self) -> list[bytes] | None:
        """The lines of an NDJSON body by event index, when every valid event was validated
        from its line's JSON text as is (None otherwise, and for an object or an array): such
        a line can be stored as it came and reads back as the same event. Split from
        :attr:`text` when first read (a body stored whole never is)."""
        if self._lines is None and self.text is not None:
            self._lines = self.text.split(b"\n")
        return self._lines

    @lines.setter
    def lines(self, value: list[bytes] | None) -> None:
        self._lines = value

    @property
    def valid(self) -> list[tuple[int, Result]]:
        """(index in the body, event) of each valid event, in order."""
        index = range(len(self.results)) if self.index is None else self.index
        return list(zip(index, self.results, strict=True))

    def add(self, offset: int, events: Sequence[Result], *, defaults: bool = False) -> None:
        """Append valid events numbered from ``offset`` (``defaults``: known to name no
        variant, sample or flags, see :class:`Results`)."""
        if self.index is None and offset != len(self.results):
            self.index = list(range(len(self.results)))
        if self.index is not None:
            self.index.extend(range(offset, offset + len(events)))
        self.results._extend(events)
        self.results.defaults = self.results.defaults and defaults

    @property
    def full(self) -> bool:
        """True when no further dead letter is kept (only counted)."""
        return self.keep is not None and len(self.invalid) >= self.keep

    def count(self, reason: str) -> None:
        """Count one rejection without keeping its dead letter."""
        self.rejected += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def reject(self, reason: str, detail: str, payload: str | bytes, *, source: str,
               index: int) -> None:
        """Count one rejection and keep its dead letter while fewer than ``keep`` are kept."""
        self.count(reason)
        if not self.full:
            text = payload if isinstance(payload, str) else bytes(
                payload[:PAYLOAD_LIMIT]).decode("utf-8", "replace")
            self.invalid.append(dead_letter(reason, detail, text, source=f"{source}[{index}]",
                                            index=index))


_LIST_ADAPTER: TypeAdapter[list[ItemResult]] = TypeAdapter(list[ItemResult])


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


def _describe(err: ValidationError, index: int) -> str:
    parts = []
    for e in err.errors(include_url=False)[:5]:
        loc = ".".join(str(p) for p in e["loc"]) or "<event>"
        parts.append(f"field {loc!r}: {e['msg']}")
    return f"event {index}: " + "; ".join(parts)


def _validate_one(obj: Any, index: int, raw: str | bytes | None, source: str,
                  out: Decoded) -> None:
    if not isinstance(obj, dict):
        if out.full:
            out.count("schema")
            return
        out.reject("schema", f"event {index}: expected a JSON object, got {type(obj).__name__}",
                   raw if raw is not None else _safe_dumps(obj), source=source, index=index)
        return
    try:
        out.add(index, [ItemResult.model_validate(obj)])
    except ValidationError as exc:
        if out.full:
            out.count("schema")
            return
        out.reject("schema", _describe(exc, index), raw if raw is not None else _safe_dumps(obj),
                   source=source, index=index)


def _safe_dumps(obj: Any) -> str:
    try:
        return _truncate(json.dumps(obj, allow_nan=True, default=str))
    except (ValueError, TypeError, RecursionError):
        return _truncate(repr(obj))


def _long_int(digits: str) -> Any:
    # An integer of thousands of digits (past Python's int-from-text limit) is read as ±inf:
    # no field accepts it, so its event is rejected by the schema instead of sinking the body.
    return int(digits) if len(digits) <= 4000 else float(digits)


def _loads(text: str | bytes) -> Any:
    """One JSON document; raises JSONDecodeError (with ``msg``), RecursionError or ValueError.

    Python's json accepts NaN/Infinity; the score field rejects them with a named reason.
    Bytes must be UTF-8 (json.loads would guess UTF-16 from some invalid bytes).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer over the int-from-text limit
        return json.loads(text, parse_int=_long_int)


def _why(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nesting too deep"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {exc.start}"
    return f"invalid JSON: {exc}"


#: Events validated per call (NDJSON lines, array elements): one call holds the interpreter
#: for at most this many events, so a runner decoding in a thread keeps its loop responsive.
SLICE = 2000

#: Bytes of a JSON array validated in one call; a longer array is read element by element.
_ARRAY_AT_ONCE = 1 << 20

#: Bytes of an NDJSON body decoded in one call (≈ 40,000 results, ≈ 20 ms holding the
#: interpreter); a longer body is decoded in slices of :data:`SLICE` lines.
_LINES_AT_ONCE = 4 << 20

# A name can only hold a control character written as an escape (\n, \u001f, \u0085…), as
# a raw DEL or as a raw C1 character (UTF-8 C2 80–9F): JSON forbids raw C0 inside strings.
_CONTROL_IN_JSON = re.compile(
    rb"\\(?:[bfnrt]|u00[01][0-9a-fA-F]|u007[fF]|u00[89][0-9a-fA-F])|\x7f|\xc2[\x80-\x9f]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAME_FIELDS = ("benchmark", "item_id", "model", "cluster", "run_id")


def _control_in_names(ev: Result) -> str | None:
    """The first field of ``ev`` whose name holds a control character, with the character."""
    for name in _NAME_FIELDS:
        value = getattr(ev, name)
        if value is not None and (m := _CONTROL.search(value)):
            return f"field {name!r}: control character U+{ord(m.group()):04X} in a name"
    for flag in ev.flags:
        if m := _CONTROL.search(flag):
            return f"field 'flags': control character U+{ord(m.group()):04X} in a flag"
    return None


def _reject_control_names(body: bytes, source: str, out: Decoded) -> None:
    """Move the valid events whose names hold control characters to the rejected ones."""
    if not out.results or not (b"\\" in body or b"\x7f" in body or b"\xc2" in body):
        return  # three scans at memory speed; the pattern only where one of them may match
    if _CONTROL_IN_JSON.search(body) is None:
        return
    valid, defaults = out.valid, out.results.defaults
    out.results, out.index = Results(defaults=True), []
    for i, ev in valid:
        why = _control_in_names(ev)
        if why is None:
            out.add(i, [ev], defaults=defaults)
        elif out.full:
            out.count("schema")
        else:
            out.reject("schema", f"event {i}: {why}", ev.model_dump_json(exclude_defaults=True),
                       source=source, index=i)
    if len(out.results) < len(valid):
        out.text = None  # no longer every line of the body
    out.invalid.sort(key=lambda d: d.index if d.index is not None else -1)


def decode_events(body: bytes, *, source: str, keep: int | None = None) -> Decoded:
    """Decode one JSON object, a JSON array of objects, or NDJSON into ItemResults.

    Invalid UTF-8, invalid JSON and schema failures become DeadLetters naming the index and
    field; valid events in the same body are unaffected (NDJSON is decoded line by line). A
    JSON array that cannot be decoded as a whole is one invalid event, and ``body_error``
    says why. Names holding control characters are rejected (``schema``). Events are
    validated in slices of :data:`SLICE`. Never raises on any bytes.

    Parameters
    ----------
    body
        The raw request body or file chunk.
    source
        Where the body came from (``"http"``, ``"file.jsonl"``); each dead letter's source is
        ``f"{source}[{index}]"``.
    keep
        Keep at most this many dead letters (the rest are only counted in ``rejected`` and
        ``reasons``): the cost of a hostile body stays proportional to its size, not to the
        number of its bad lines times the size of a dead letter.

    Examples
    --------
    >>> d = decode_events(b'[{"benchmark": "b", "item_id": "1", "model": "m", "score": 1}, 7]',
    ...                   source="http")
    >>> len(d.valid), d.invalid[0].reason, d.invalid[0].source, d.events
    (1, 'schema', 'http[1]', 2)
    """
    out = Decoded(keep=keep)
    try:
        _decode(body, source, out)
        _reject_control_names(body, source, out)
    except Exception as exc:  # last resort: the decoder must never take a worker down
        why = f"undecodable body: {type(exc).__name__}"
        out = Decoded(keep=keep, events=1, body_error=why)
        out.reject("invalid-json", why, body[:PAYLOAD_LIMIT], source=source, index=0)
    return out


def _body_invalid(out: Decoded, reason: str, detail: str, body: bytes, source: str) -> None:
    out.events = 1
    out.body_error = detail
    out.reject(reason, f"event 0: {detail}", body, source=source, index=0)


def _decode(body: bytes, source: str, out: Decoded) -> None:
    stripped = body.strip()
    if not stripped:
        _body_invalid(out, "invalid-json", "empty body", b"", source)
        return
    if stripped[:1] == b"{" and len(stripped) <= _LINES_AT_ONCE:
        # NDJSON of valid events, one a line (the common case): one call for the whole body.
        fast = fast_results(stripped, lines=True)
        if fast is not None:
            out.add(0, fast, defaults=fast.defaults)
            out.events = len(fast)
            out.text = stripped
            return
    if stripped[:1] == b"[" and _decode_array(stripped, source, out):
        return
    if stripped[:1] != b"[":
        # One object (possibly spread over several lines), else NDJSON.
        try:
            obj = _loads(stripped)
        except (ValueError, RecursionError):
            pass
        else:
            out.events = 1
            _validate_one(obj, 0, stripped, source, out)
            return
    _decode_ndjson(stripped, source, out)


def _decode_array(body: bytes, source: str, out: Decoded) -> bool:
    """Decode ``body`` as one JSON array; False when it is NDJSON whose first line is one."""
    if len(body) <= _ARRAY_AT_ONCE:
        fast = fast_results(body)  # fast path: the whole array decoded in one call
        if fast is not None:
            out.add(0, fast, defaults=fast.defaults)
            out.events = len(fast)
            return True
    try:
        arr = _array_elements(body) if len(body) > _ARRAY_AT_ONCE else _loads(body)
    except (ValueError, RecursionError) as exc:
        extra = isinstance(exc, json.JSONDecodeError) and exc.msg == "Extra data"
        if extra or not body.endswith(b"]"):
            return False  # lines of JSON, the first of which is an array (or broken)
        if len(body) > _ARRAY_AT_ONCE:  # the reason as json.loads of the whole would say it
            try:
                _loads(body)
            except (ValueError, RecursionError) as whole:
                exc = whole
        reason = "invalid-utf8" if isinstance(exc, UnicodeDecodeError) else "invalid-json"
        _body_invalid(out, reason, f"{_why(exc)}; the JSON array cannot be decoded and is "
                      "counted as one invalid event", body, source)
        return True
    if not isinstance(arr, list):  # pragma: no cover - a body starting with '[' parses to a list
        out.events = 1
        _validate_one(arr, 0, body, source, out)
        return True
    out.events = len(arr)
    for lo in range(0, len(arr), SLICE):
        _validate_objects(arr[lo:lo + SLICE], lo, None, source, out)
    return True


_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_int=_long_int)


def _array_elements(body: bytes) -> list[Any]:
    """The elements of a JSON array, parsed one by one (each a short call, not one long one).

    Raises like ``json.loads`` would (JSONDecodeError, RecursionError, UnicodeDecodeError).
    """
    text = body.decode("utf-8")
    items: list[Any] = []
    i = _WS.match(text, 1).end()  # type: ignore[union-attr]
    if text[i:i + 1] == "]":
        i += 1
    else:
        while True:
            obj, i = _DECODER.raw_decode(text, i)
            items.append(obj)
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            c = text[i:i + 1]
            if c == "]":
                i += 1
                break
            if c != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if _WS.match(text, i).end() != len(text):  # type: ignore[union-attr]
        raise json.JSONDecodeError("Extra data", text, i)
    return items


def _validate_objects(objs: list[Any], offset: int, raws: list[bytes] | None, source: str,
                      out: Decoded) -> None:
    """Validate parsed values (one slice) numbered from ``offset``."""
    if all(type(o) is dict for o in objs):
        try:
            events = _LIST_ADAPTER.validate_python(objs)
        except ValidationError:
            pass
        else:
            out.add(offset, events)
            return
    others = 0  # values that are not objects, once no more dead letters are kept
    for k, obj in enumerate(objs):
        if type(obj) is dict or not out.full:
            _validate_one(obj, offset + k, None if raws is None else raws[k], source, out)
        else:
            others += 1
    if others:
        out.rejected += others
        out.reasons["schema"] = out.reasons.get("schema", 0) + others


# Newlines followed by a blank line (only whitespace).
_BLANK_LINE = re.compile(rb"\n[ \t\r\x0b\x0c]*(?=\n)")


def _decode_ndjson(body: bytes, source: str, out: Decoded) -> None:
    compact = _BLANK_LINE.sub(b"", body)  # body is stripped: no blank first or last line
    lines = compact.split(b"\n")
    out.events = len(lines)
    out.lines = lines
    # Every line starts with '{' (counted at memory speed): no line needs looking at.
    objects = compact[:1] == b"{" and compact.count(b"\n{") + 1 == len(lines)
    for lo in range(0, len(lines), SLICE):
        _decode_lines(lines[lo:lo + SLICE], lo, source, out, objects=objects)


#: What JSON calls whitespace inside a line (bytes.strip() would also take \x0b and \x0c).
_JSON_BLANKS = b" \t\r"


def _decode_lines(lines: list[bytes], offset: int, source: str, out: Decoded, *,
                  objects: bool = False) -> None:
    if objects or all(ln.lstrip(_JSON_BLANKS)[:1] == b"{" for ln in lines):
        # Fast path: every line valid (each line is one JSON value: a line such as
        # '{...},{...}' fails it, and takes the path below, which names it). Joined with a
        # newline: JSON forbids a raw newline inside a string, so no string (and, as no field
        # takes an object, no event) can run from one line into the next; each line's leading
        # blanks left out, which changes no value (the lines are stored as they came).
        joined = b"\n".join(lines if objects else [ln.lstrip(_JSON_BLANKS) for ln in lines])
        events = fast_results(joined, count=len(lines), lines=True)
        if events is not None:
            out.add(offset, events, defaults=events.defaults)
            return
    joined = b"[" + b",\n".join(lines) + b"]"
    out.lines = None  # validated from parsed values below, not from the JSON text itself
    try:
        # Every line is JSON (some are not valid events): parsed at once, checked one by one.
        objs = _loads(joined)
    except (ValueError, RecursionError):
        objs = None
    if isinstance(objs, list) and len(objs) == len(lines):
        _validate_objects(objs, offset, lines, source, out)
        return
    for k, raw in enumerate(lines):
        i = offset + k
        try:
            obj = _loads(raw)
        except (ValueError, RecursionError) as exc:
            if out.full:
                out.count("invalid-utf8" if isinstance(exc, UnicodeDecodeError) else "invalid-json")
                continue
            if isinstance(exc, UnicodeDecodeError):
                out.reject("invalid-utf8", f"event {i}: {_why(exc)}", raw, source=source, index=i)
            else:
                out.reject("invalid-json", f"event {i}: {_why(exc)}", raw, source=source, index=i)
            continue
        _validate_one(obj, i, raw, source, out)
