"""The fast decoder (``WireResult``, msgspec) accepts nothing the contract (``ItemResult``,
pydantic) refuses, reads the same values, and leaves every rejection to the contract: a body
decodes to the same events, dead letters and stored lines with or without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import monitor.decoder as decoder
from monitor.commands.schemas import VALID_EXAMPLES
from monitor.contracts import ItemResult
from monitor.decoder import PlainResult, WireResult, as_item, decode_events, fast_results

REPO = Path(__file__).resolve().parents[2]
GOOD = {"benchmark": "b", "item_id": "1", "model": "m", "score": 1}
_BOUNDS = ("type", "minLength", "maxLength", "minimum", "maximum", "maxItems", "default",
           "const")


def _flat(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A property's bounds, whatever the way each library writes optional and nested types."""
    out: dict[str, Any] = {k: prop[k] for k in _BOUNDS if k in prop}
    for alt in prop.get("anyOf", []):
        if "$ref" in alt:
            alt = defs[alt["$ref"].rsplit("/", 1)[-1]]
        for k, v in _flat(alt, defs).items():
            out.setdefault(k, v) if k != "type" else out.setdefault("types", set()).add(v)
    if "items" in prop:
        out["items"] = _flat(prop["items"], defs)
    if "enum" in prop and len(prop["enum"]) == 1:
        out["const"] = prop["enum"][0]
    return out


@pytest.mark.parametrize("struct", [WireResult, PlainResult])
def test_the_fast_decoders_have_the_contracts_fields_and_bounds(struct: type) -> None:
    ours = msgspec.json.schema(struct)
    wire = ours["$defs"][struct.__name__]
    contract = ItemResult.model_json_schema()
    if struct is PlainResult:  # the fields it holds; the others read as their defaults
        held = [f for f in contract["properties"] if f in wire["properties"]]
        assert held == ["benchmark", "item_id", "model", "score", "cluster", "run_id",
                        "schema_version"]
        defaults = ItemResult(benchmark="b", item_id="1", model="m", score=1)
        assert all(tuple(getattr(PlainResult, f)) == tuple(getattr(defaults, f)) if f == "flags"
                   else getattr(PlainResult, f) == getattr(defaults, f)
                   for f in contract["properties"] if f not in held)
    else:
        assert list(wire["properties"]) == list(contract["properties"])
    assert set(wire["required"]) == set(contract["required"])
    for name, prop in contract["properties"].items():
        if name not in wire["properties"]:
            continue
        if name in ("ts", "variant"):
            continue  # read by the contract's own reader and pattern after decoding
        want = _flat(prop, contract.get("$defs", {}))
        got = _flat(wire["properties"][name], ours["$defs"])
        if "const" in got:  # a literal: its value says its type
            want.pop("type", None)
        assert {k: v for k, v in got.items() if k in want} == want, name


_STRINGS = ["x", "", "a" * 200, "a" * 201, "é", "a\nb", "\u0085", "\x7f", "perturbed:p",
            "perturbed:", "original\n", "perturbed:a b", "2024-06-01T12:00:00Z", "2024-06-01",
            "yesterday", "1"]
_VALUES: list[Any] = [*_STRINGS, 0, 1, 2, -1, 0.5, -0.0, 1.0, 1e-300, 1e400, True, False, None,
                      [], ["k"], [""], ["k"] * 33, {}, {"a": 1}, 10**30, 1_000_000, 1_000_001,
                      1.5e9]
_FIELDS = ["benchmark", "item_id", "model", "score", "sample", "cluster", "run_id", "variant",
           "flags", "ts", "schema_version", "extra"]


@st.composite
def lines(draw: st.DrawFn) -> bytes:
    obj: dict[str, Any] = dict(GOOD)
    for _ in range(draw(st.integers(0, 4))):
        field = draw(st.sampled_from(_FIELDS))
        if draw(st.booleans()) and field in obj:
            del obj[field]
        else:
            obj[field] = draw(st.sampled_from(_VALUES) | st.floats(0, 1) | st.text(max_size=8))
    text = json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()
    if draw(st.integers(0, 9)) == 0:  # now and then a broken byte string
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from([b"\xff", b"}", b",", b'"', b"\\u", b" "])) + \
            text[at:]
    return text


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_what_the_fast_decoder_accepts_the_contract_accepts_with_the_same_values(
        line: bytes) -> None:
    fast = fast_results(line, count=1, lines=True)
    try:
        want = ItemResult.model_validate_json(line)
    except ValidationError:
        assert fast is None
        return
    if fast is not None:
        assert as_item(fast[0]) == want
        assert fast[0].score == want.score and type(fast[0].score) is float


def test_every_valid_example_takes_the_fast_path() -> None:
    examples = [json.dumps(obj).encode() for model, obj in VALID_EXAMPLES.values()
                if model == "ItemResult"]
    got = fast_results(b"\n".join(examples), count=len(examples), lines=True)
    assert got is not None and len(got) == 4
    assert [as_item(ev) for ev in got] == [ItemResult.model_validate_json(x) for x in examples]


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines(), min_size=1, max_size=12), st.booleans())
def test_a_body_decodes_the_same_with_or_without_the_fast_path(
        body_lines: list[bytes], array: bool) -> None:
    body = (b"[" + b",".join(body_lines) + b"]") if array else b"\n".join(body_lines)
    fast = decode_events(body, source="http")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(decoder, "fast_results", lambda *a, **k: None)
        slow = decode_events(body, source="http")
    assert fast.events == slow.events and fast.body_error == slow.body_error
    assert [(i, as_item(ev)) for i, ev in fast.valid] == [(i, as_item(ev)) for i, ev in slow.valid]
    assert [(d.index, d.reason, d.detail, d.payload) for d in fast.invalid] == [
        (d.index, d.reason, d.detail, d.payload) for d in slow.invalid]
    # the lines kept for storage (NDJSON, every event validated from its own line's text)
    if fast.lines is not None:
        assert not array and len(fast.lines) == fast.events
        assert all(as_item(ev) == ItemResult.model_validate_json(fast.lines[i])
                   for i, ev in fast.valid)


def test_the_fast_path_names_nothing_itself() -> None:
    # A body with one bad line: the whole slice goes to the contract, whose reason names it.
    good = json.dumps(GOOD).encode()
    d = decode_events(b"\n".join([good, b'{"benchmark": "b", "item_id": "2", "model": "m", '
                                  b'"score": 1, "variant": "perturbed:a b"}', good]),
                      source="http")
    assert [i for i, _ in d.valid] == [0, 2]
    assert d.invalid[0].index == 1 and "'variant'" in d.invalid[0].detail
    assert all(isinstance(ev, ItemResult) for _, ev in d.valid)
    ok = decode_events(b"\n".join([good, good]), source="http")
    assert all(isinstance(ev, PlainResult) for _, ev in ok.valid) and ok.results.plain
    # a key PlainResult does not hold: read as a WireResult
    wire = decode_events(b"\n".join([good, json.dumps({**GOOD, "sample": 0}).encode()]),
                         source="http")
    assert all(isinstance(ev, WireResult) for _, ev in wire.valid)
    assert wire.results.plain and not wire.results.defaults  # by a pass over the events
