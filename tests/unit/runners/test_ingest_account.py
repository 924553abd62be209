"""Every body is accounted for line by line: valid + rejected = events, a bad line never
takes its neighbours down, and at most ``keep`` dead letters are built however bad the body."""

from __future__ import annotations

import json

import numpy as np

from monitor.decoder import decode_events

GOOD = {"benchmark": "b", "item_id": "i", "model": "m", "score": 1}
LINE = json.dumps(GOOD).encode()
BAD_LINES = [b"{oops", b"7", b"\xff\xfe", b"[" * 1500, b'{"score": ' + b"9" * 5000 + b"}",
             json.dumps({**GOOD, "score": 2}).encode(), b"null", b'"x"', b"{" * 50]


def test_a_bad_first_line_does_not_sink_the_body() -> None:
    d = decode_events(b"{oops\n" + LINE + b"\n" + LINE + b"\n", source="http")
    assert [i for i, _ in d.valid] == [1, 2]
    assert [(x.index, x.reason) for x in d.invalid] == [(0, "invalid-json")]
    assert d.events == 3 and d.rejected == 1 and d.body_error is None


def test_a_deep_array_is_one_invalid_body_with_its_reason() -> None:
    body = b"[" + LINE + b", " + b"[" * 1500 + b"]" * 1500 + b"]"
    d = decode_events(body, source="http")
    assert d.events == 1 and d.rejected == 1 and not d.valid
    assert d.body_error is not None and "nesting too deep" in d.body_error
    assert d.invalid[0].index == 0 and "counted as one invalid event" in d.invalid[0].detail


def test_a_huge_integer_rejects_only_its_own_event() -> None:
    body = json.dumps([GOOD, {**GOOD, "model": "n"}]).encode().replace(
        b'"score": 1}]', b'"score": 1' + b"0" * 5000 + b"}]")
    d = decode_events(body, source="http")
    assert [i for i, _ in d.valid] == [0]
    assert [(x.index, x.reason) for x in d.invalid] == [(1, "schema")]
    assert "'score'" in d.invalid[0].detail and d.events == 2


def test_random_bodies_add_up_line_by_line() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        good = rng.random(n) < 0.5
        lines = [LINE if g else BAD_LINES[int(rng.integers(0, len(BAD_LINES)))] for g in good]
        d = decode_events(b"\n".join(lines) + b"\n", source="http")
        assert d.events == n, (d.events, n, lines[:2])
        assert [i for i, _ in d.valid] == np.flatnonzero(good).tolist(), lines
        assert sorted(x.index or 0 for x in d.invalid) == np.flatnonzero(~good).tolist(), lines
        assert len(d.valid) + d.rejected == n


def test_keep_bounds_the_dead_letters_built_and_counts_the_rest() -> None:
    body = b"1\n" * 50_000 + LINE + b"\n" + b"{oops\n" * 10
    d = decode_events(body, source="http", keep=5)
    assert [i for i, _ in d.valid] == [50_000]
    assert [x.index for x in d.invalid] == [0, 1, 2, 3, 4]
    assert d.rejected == 50_010 and d.reasons == {"schema": 50_000, "invalid-json": 10}
    assert d.events == 50_011


def test_schema_version_is_the_integer_one() -> None:
    for value, ok in (("1", True), ("true", False), ("1.0", False), ("2", False)):
        body = LINE[:-1] + b', "schema_version": ' + value.encode() + b"}"
        for form in (body, b"[" + body + b"]", body + b"\n" + body):
            d = decode_events(form, source="http")
            assert bool(d.valid) is ok and bool(d.invalid) is not ok, (form, d.invalid)
            if not ok:
                assert "'schema_version'" in d.invalid[0].detail, d.invalid[0].detail


def test_names_with_control_characters_are_rejected_alone() -> None:
    names = ["a\nb", "tab\there", "del\x7f", "c1\u0085", "nul\x00"]
    lines = [json.dumps({**GOOD, field: name}).encode()
             for field in ("benchmark", "model", "item_id", "cluster") for name in names]
    d = decode_events(b"\n".join([LINE, *lines, LINE]), source="http")
    assert [i for i, _ in d.valid] == [0, len(lines) + 1]
    assert d.rejected == len(lines) and d.reasons == {"schema": len(lines)}
    ok = decode_events(json.dumps({**GOOD, "model": "é ☃ 模型 (v2)"}).encode(), source="http")
    assert ok.valid and not ok.invalid


def test_a_large_array_read_element_by_element_decodes_like_a_small_one() -> None:
    events: list[object] = [{**GOOD, "item_id": f"item-{i:06d}", "model": f"model-{i % 7}"}
                            for i in range(15_000)]
    bad = {5: 7, 1999: {**GOOD, "score": 2}, 2000: "x", 14_999: {**GOOD, "model": "a\nb"}}
    for i, v in bad.items():
        events[i] = v
    body = json.dumps(events).encode()
    assert len(body) > 1 << 20  # past the one-call fast path
    d = decode_events(body, source="http")
    assert d.events == len(events) and len(d.valid) == len(events) - len(bad)
    assert [x.index for x in d.invalid] == sorted(bad)
    small = decode_events(json.dumps(events[:3000]).encode(), source="http")
    assert [(i, e) for i, e in d.valid if i < 3000] == small.valid
    deep = body[:-1] + b", " + b"[" * 1500 + b"]" * 1500 + b"]"
    d = decode_events(deep, source="http")
    assert d.events == 1 and d.body_error is not None and "nesting too deep" in d.body_error
    d = decode_events(body + b" x", source="http")  # not an array: read as lines (one here)
    assert d.events == 1 and d.rejected == 1


def test_ndjson_slices_keep_each_line_index() -> None:
    lines = [json.dumps({**GOOD, "item_id": str(i)}).encode() for i in range(4500)]
    for i in (0, 1999, 2000, 4499):
        lines[i] = b"{oops"
    d = decode_events(b"\n".join(lines), source="http")
    assert [x.index for x in d.invalid] == [0, 1999, 2000, 4499]
    assert len(d.valid) == 4496 and d.valid[0][0] == 1 and d.valid[-1][0] == 4498


def test_control_characters_are_found_in_every_spelling() -> None:
    spellings = [b"a\\nb", b"a\\u0000b", b"a\\u001Fb", b"a\\u007fb", b"a\\u0085b", b"a\x7fb",
                 b"a\xc2\x85b", b"a\\tb"]
    for s in spellings:
        line = LINE.replace(b'"model": "m"', b'"model": "' + s + b'"')
        d = decode_events(LINE + b"\n" + line, source="http")
        assert len(d.valid) == 1 and d.invalid[0].index == 1, s
        assert "control character" in d.invalid[0].detail, d.invalid[0].detail
    fine = LINE.replace(b'"model": "m"', b'"model": "a\\\\nb \\u00e9"')  # a backslash, then n
    assert decode_events(fine, source="http").valid[0][1].model == "a\\nb é"
