"""Fuzz the HTTP ingest with ≥ 10,000 malformed events: no crash, each rejected with a reason,
the invalid counter equals the number sent, and valid events in the same bodies still count —
including after a malformed first line; every reply accounts for every line it was sent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.integration.embedded_harness import Server, metric_value

pytestmark = pytest.mark.integration

BASE = {"benchmark": "fuzz", "item_id": "i", "model": "m", "score": 1}
REQUIRED = ("benchmark", "item_id", "model", "score")
REASONS = {"invalid-json", "invalid-utf8", "schema"}


def _bad_object(rng: np.random.Generator, k: int) -> dict:
    ev = dict(BASE, item_id=f"bad{k}")
    kind = int(rng.integers(0, 16))
    if kind == 0:  # wrong types
        ev["score"] = ["0.5", True, None, [1], {"v": 1}, "1"][int(rng.integers(0, 6))]
    elif kind == 1:
        ev[REQUIRED[int(rng.integers(0, 3))]] = [5, None, 1.5, ["x"], True][int(rng.integers(0, 5))]
    elif kind == 2:  # out of range
        ev["score"] = [-0.1, 1.0000001, 2, -1, 1e308, -1e-9][int(rng.integers(0, 6))]
    elif kind == 3:  # missing fields
        del ev[REQUIRED[int(rng.integers(0, 4))]]
    elif kind == 4:  # huge strings
        field, limit = [("benchmark", 200), ("item_id", 500), ("model", 200),
                        ("cluster", 200), ("run_id", 200)][int(rng.integers(0, 5))]
        ev[field] = "x" * int(rng.integers(limit + 1, 20 * limit))
    elif kind == 5:
        ev["benchmark" if rng.random() < 0.5 else "model"] = ""
    elif kind == 6:
        ev["variant"] = ["perturbed:", "Original", "perturbed:a b", 7, "x" * 300][int(rng.integers(0, 5))]
    elif kind == 7:
        ev["flags"] = ["leak-suspect", [""], [1], ["x"] * 40, ["y" * 101]][int(rng.integers(0, 5))]
    elif kind == 8:
        ev["ts"] = ["yesterday", "2024-13-45T00:00:00", [2024], {"t": 1}][int(rng.integers(0, 4))]
    elif kind == 9:
        ev["schema_version"] = [2, 0, "1", None][int(rng.integers(0, 4))]
    elif kind == 10:
        ev["unexpected_field"] = int(rng.integers(0, 100))
    elif kind == 11:
        ev["cluster"] = [3, ["a"], {"c": 1}][int(rng.integers(0, 3))]
    else:  # NaN / ±inf, written below as bare JSON literals
        ev["score"] = ["NaN", "Infinity", "-Infinity", "NaN"][kind - 12]
    return ev


def _bad_line(rng: np.random.Generator, k: int) -> bytes:
    """One malformed NDJSON line (never blank)."""
    r = rng.random()
    if r < 0.6:
        ev = _bad_object(rng, k)
        text = json.dumps(ev)
        for lit in ("NaN", "Infinity", "-Infinity"):
            text = text.replace(f'"score": "{lit}"', f'"score": {lit}')
        return text.encode()
    if r < 0.75:  # invalid JSON
        return [b'{"benchmark": "fuzz", "item_id": ', b"}{", b"nul", b'{"score": 1,}',
                b"{'single': 'quotes'}", b'{"a": 1} trailing', b'"unterminated',
                b"\\u0000", b"-", b"{" * 50, b"[" * 1200,  # deeper than json's recursion limit
                b'{"benchmark": "fuzz", "item_id": "n", "model": "m", "score": '
                + b"9" * 5000 + b"}",  # past Python's int-from-text limit of 4,300 digits
                ][int(rng.integers(0, 12))]
    if r < 0.9:  # invalid UTF-8
        return [b'{"benchmark": "\xc3\x28", "item_id": "1", "model": "m", "score": 1}',
                b"\xff\xfe\xfd", b'{"model": "\xed\xa0\x80"}', b"\x80abc",
                bytes(rng.integers(128, 256, size=20, dtype=np.uint8))][int(rng.integers(0, 5))]
    # JSON values that are not objects
    return [b"7", b'"a string"', b"null", b"true", b"1.5"][int(rng.integers(0, 5))]


def _account(reply: dict) -> int:
    return int(reply["accepted"] + reply["duplicate"] + reply["conflict"] + reply["invalid"])


def test_fuzz_ten_thousand_malformed_events(tmp_path: Path) -> None:
    rng = np.random.default_rng(1234)
    # Every rejection listed and stored, to check each one's index and reason (by default
    # only the first 20 of a request are: tests/integration/test_hostile_ingest.py).
    config = tmp_path / "fuzz.toml"
    config.write_text("dead_letters_per_request = 1000\ndead_letters_per_window = 100000\n")
    srv = Server(tmp_path / "fuzz.db", "--config", str(config)).start()
    sent_invalid = 0
    sent_valid = 0
    reasons: dict[str, int] = {}
    try:
        k = 0
        for body_no in range(24):
            lines: list[bytes] = []
            expected_bad: list[int] = []
            # Every other body starts with a malformed line: it must not take the others down.
            for j in range(460):
                if j % 23 == 11 * (body_no % 2):
                    lines.append(json.dumps(dict(BASE, item_id=f"ok{body_no}-{j}")).encode())
                    sent_valid += 1
                else:
                    lines.append(_bad_line(rng, k))
                    expected_bad.append(j)
                k += 1
            status, reply = srv.post(b"\n".join(lines) + b"\n")
            assert status == 202, reply
            assert _account(reply) == reply["events"] == len(lines), (body_no, reply)
            assert reply["invalid"] == len(expected_bad), (body_no, reply["invalid"])
            assert [r["index"] for r in reply["rejected"]] == expected_bad
            for r in reply["rejected"]:
                assert r["reason"] in REASONS and r["detail"], r
                reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
            assert reply["accepted"] == 20
            sent_invalid += len(expected_bad)
        # Whole bodies that are broken count as one invalid event each.
        for body in (b'[{"benchmark": "fuzz", "item_id": "x", "model": "m", "score": 1}, ',
                     b"[\xff\xfe]", b"", b"   ", b'{"benchmark": NaN}', b"[1, 2, 3",
                     b'[{"benchmark": "fuzz"}]'):
            status, reply = srv.post(body)
            assert status == 400, (body, reply)
            assert reply["invalid"] == 1 and reply["accepted"] == 0, (body, reply)
            assert _account(reply) == reply["events"] == 1, (body, reply)
            sent_invalid += 1
        # An array too deep for the decoder is one invalid event, and the reply says why.
        deep = b"[" + json.dumps(BASE).encode() + b", " + b"[" * 1200 + b"]" * 1200 + b"]"
        status, reply = srv.post(deep)
        assert status == 400 and _account(reply) == reply["invalid"] == 1, reply
        assert "nesting too deep" in reply["body_error"], reply
        sent_invalid += 1
        # An array of bad objects: one rejection per element, with its index.
        arr = [_bad_object(rng, k + i) for i in range(300)]
        text = json.dumps(arr).replace('"score": 1}', '"score": 1' + "0" * 5000 + "}", 1)
        assert "0" * 5000 in text  # one element's score past Python's int-from-text limit
        status, reply = srv.post(text.encode())
        assert reply["invalid"] == len(arr) and [r["index"] for r in reply["rejected"]] == list(
            range(len(arr))), reply
        assert _account(reply) == reply["events"] == len(arr), reply
        sent_invalid += len(arr)

        print(f"\nfuzz test: {sent_invalid} malformed events rejected ({reasons} in NDJSON "
              f"bodies, the rest whole bodies and array elements), {sent_valid} valid ones "
              "alongside accepted")
        assert sent_invalid >= 10_000, sent_invalid
        assert srv.alive()
        assert srv.request("GET", "/healthz")[0] == 200
        assert "Traceback" not in srv.log.read_text(errors="replace")
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="invalid") == sent_invalid
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == sent_valid
        assert set(reasons) == REASONS, reasons
        status, dl = srv.get_json("/v1/dead-letters?limit=10")
        assert len(dl["dead_letters"]) == 10 and all(d["payload"] is not None
                                                     for d in dl["dead_letters"])
    finally:
        srv.kill()
