"""The event contract: decoding never raises, rejects with reasons, and schemas/ never drifts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from monitor.commands.schemas import INVALID_EXAMPLES, VALID_EXAMPLES, write_schemas
from monitor.contracts import DEAD_LETTER_REASONS, EVENT_MODELS, PAYLOAD_LIMIT, ItemResult
from monitor.decoder import as_item, decode_events

REPO = Path(__file__).resolve().parents[2]
GOOD = {"benchmark": "b", "item_id": "1", "model": "m", "score": 1}


def body(*objs: object) -> bytes:
    return "\n".join(json.dumps(o) for o in objs).encode()


def test_one_object_array_and_ndjson() -> None:
    one = decode_events(json.dumps(GOOD).encode(), source="http")
    assert [i for i, _ in one.valid] == [0] and not one.invalid
    arr = decode_events(json.dumps([GOOD, {**GOOD, "model": "n"}]).encode(), source="http")
    assert [e.model for _, e in arr.valid] == ["m", "n"]
    nd = decode_events(body(GOOD, {**GOOD, "model": "n"}) + b"\n\n", source="http")
    assert [(i, e.model) for i, e in nd.valid] == [(0, "m"), (1, "n")]


def test_invalid_events_do_not_disturb_valid_ones() -> None:
    raw = (json.dumps(GOOD).encode() + b"\n" + b"\xff\xfe\n" + b"{not json\n"
           + json.dumps({**GOOD, "score": 1.5}).encode() + b"\n"
           + json.dumps({**GOOD, "model": "n"}).encode())
    d = decode_events(raw, source="http")
    assert [(i, e.model) for i, e in d.valid] == [(0, "m"), (4, "n")]
    assert [(x.index, x.reason, x.source) for x in d.invalid] == [
        (1, "invalid-utf8", "http[1]"), (2, "invalid-json", "http[2]"), (3, "schema", "http[3]")]
    assert "event 3" in d.invalid[2].detail and "'score'" in d.invalid[2].detail


def test_array_with_bad_elements_names_index_and_field() -> None:
    d = decode_events(json.dumps([GOOD, 7, {**GOOD, "extra": 1}, {**GOOD, "score": "1"}]).encode(),
                      source="f.json")
    assert [i for i, _ in d.valid] == [0]
    assert [(x.index, x.reason) for x in d.invalid] == [(1, "schema"), (2, "schema"),
                                                        (3, "schema")]
    assert "'extra'" in d.invalid[1].detail and "'score'" in d.invalid[2].detail


@pytest.mark.parametrize("bad", [
    {**GOOD, "score": True}, {**GOOD, "score": -0.1}, {**GOOD, "score": 1.0000001},
    {**GOOD, "benchmark": ""}, {**GOOD, "benchmark": 3}, {**GOOD, "item_id": "x" * 501},
    {**GOOD, "variant": "perturbed:"}, {**GOOD, "schema_version": 2}, {**GOOD, "flags": "x"},
    {k: v for k, v in GOOD.items() if k != "score"},
])
def test_schema_rejections(bad: dict[str, object]) -> None:
    d = decode_events(json.dumps(bad).encode(), source="http")
    assert not d.valid and d.invalid[0].reason == "schema"


def test_nan_and_infinity_are_rejected_with_the_field() -> None:
    for lit in (b"NaN", b"Infinity", b"-Infinity"):
        raw = b'[{"benchmark": "b", "item_id": "1", "model": "m", "score": ' + lit + b"}]"
        d = decode_events(raw, source="http")
        assert not d.valid and d.invalid[0].reason == "schema"
        assert "'score'" in d.invalid[0].detail


def test_ints_accepted_as_scores_and_iso_timestamps() -> None:
    d = decode_events(json.dumps({**GOOD, "score": 0, "ts": "2024-06-01T12:00:00Z"}).encode(),
                      source="http")
    ev = as_item(d.valid[0][1])
    assert ev.score == 0.0 and ev.ts is not None and ev.ts.year == 2024
    assert ev.variant == "original" and ev.flags == [] and ev.schema_version == 1


def test_payload_is_truncated_to_one_kilobyte() -> None:
    d = decode_events(json.dumps({**GOOD, "item_id": "x" * 5000}).encode(), source="http")
    assert len(d.invalid[0].payload) == PAYLOAD_LIMIT


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_decode_never_raises_on_arbitrary_bytes(raw: bytes) -> None:
    d = decode_events(raw, source="fuzz")
    for _, ev in d.valid:
        assert isinstance(ev, ItemResult)
    for letter in d.invalid:
        assert letter.reason in DEAD_LETTER_REASONS
        assert len(letter.payload) <= PAYLOAD_LIMIT


_json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20,
)
_near_events = st.fixed_dictionaries(
    {"benchmark": st.text(max_size=5) | st.integers(), "item_id": st.text(max_size=5),
     "model": st.text(max_size=5), "score": st.floats() | st.integers() | st.text(max_size=3)},
    optional={"cluster": _json_values, "variant": st.sampled_from(
        ["original", "perturbed:x", "perturbed:", "x"]), "flags": _json_values,
        "ts": _json_values, "run_id": _json_values},
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(_near_events | _json_values, max_size=8),
       st.sampled_from(["array", "ndjson"]))
def test_every_event_is_either_valid_or_rejected_with_its_index(
    objs: list[object], layout: str
) -> None:
    if layout == "array":
        raw = json.dumps(objs).encode()
    else:
        raw = b"\n".join(json.dumps(o).encode() for o in objs)
        if not objs:
            raw = b"[]"
    d = decode_events(raw, source="fuzz")
    seen = sorted([i for i, _ in d.valid] + [x.index for x in d.invalid if x.index is not None])
    if layout == "array" or len(objs) != 1:
        assert seen == list(range(len(objs)))
    for i, ev in d.valid:  # a valid event is exactly what the model accepts
        assert as_item(ev) == ItemResult.model_validate(objs[i])


def test_schemas_directory_does_not_drift(tmp_path: Path) -> None:
    write_schemas(tmp_path)
    fresh = {p.relative_to(tmp_path).as_posix(): p.read_text() for p in tmp_path.rglob("*")
             if p.is_file()}
    committed = {p.relative_to(REPO / "schemas").as_posix(): p.read_text()
                 for p in (REPO / "schemas").rglob("*") if p.is_file()}
    assert fresh == committed, "schemas/ is stale: run `make schemas` and commit the result"
    assert {f"{n}.schema.json" for n in EVENT_MODELS} <= set(fresh)


def test_examples_validate_against_the_models() -> None:
    # The committed examples are what producers copy: each file under schemas/examples/ is
    # accepted by the model it documents and means what it says (no field dropped, renamed or
    # coerced on the way in), and every event type has one.
    found = {p.name: p for p in (REPO / "schemas" / "examples").glob("*.json")}
    assert set(found) == set(VALID_EXAMPLES), "schemas/examples/ is stale: run `make schemas`"
    assert {model for model, _ in VALID_EXAMPLES.values()} == set(EVENT_MODELS)
    for name, path in sorted(found.items()):
        model_name, payload = VALID_EXAMPLES[name]
        text = path.read_text(encoding="utf-8")
        event = EVENT_MODELS[model_name].model_validate_json(text)
        assert json.loads(text) == payload, name
        assert json.loads(event.model_dump_json(exclude_unset=True)) == payload, name


def test_invalid_examples_fail_with_the_expected_reason() -> None:
    for name, spec in INVALID_EXAMPLES.items():
        d = decode_events(spec["body"].encode(), source="example")
        assert not d.valid, name
        assert d.invalid[0].reason == spec["expected"]["reason"], name
        if spec["expected"]["field"] is not None:
            assert f"'{spec['expected']['field']}'" in d.invalid[0].detail, name
            with pytest.raises(ValidationError):
                ItemResult.model_validate_json(spec["body"])


def test_schema_command_writes_files(tmp_path: Path) -> None:
    from monitor.cli import main

    assert main(["schemas", "--out", str(tmp_path / "s")]) == 0
    assert (tmp_path / "s" / "ItemResult.schema.json").is_file()
    schema = json.loads((tmp_path / "s" / "ItemResult.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"benchmark", "item_id", "model", "score"}
