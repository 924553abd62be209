"""Browser isolation of a real ``llm-monitor run`` without a token: a page on another origin
or behind a rebound DNS name cannot write or read, only JSON content types are written,
no CORS headers are sent; and with a token, the scheme is case-insensitive and the token
trimmed."""

from __future__ import annotations

import gzip
import http.client
import json
from pathlib import Path

import pytest

from tests.integration.embedded_harness import Server, metric_value

pytestmark = pytest.mark.integration

EV = {"benchmark": "b", "item_id": "1", "model": "m", "score": 1}


def _raw(srv: Server, method: str, path: str, body: bytes | None,
         headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection, with exactly these headers (Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_cross_origin_and_rebound_requests_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "b.toml"
    config.write_text('allowed_hosts = ["monitor.internal"]\n')
    srv = Server(tmp_path / "b.db", "--config", str(config)).start()
    try:
        here = f"127.0.0.1:{srv.port}"
        body = json.dumps({**EV, "item_id": "evil"}).encode()
        # The CSRF / DNS-rebinding pattern of the report: text/plain from another Host.
        status, _, data = _raw(srv, "POST", "/v1/results", body,
                               {"Host": "evil.example", "Content-Type": "text/plain"})
        assert status == 421 and b"evil.example" in data, (status, data)
        status, _, _ = _raw(srv, "GET", "/v1/benchmarks", None, {"Host": f"evil.example:{srv.port}"})
        assert status == 421, status
        # The right Host, but a page of another origin (the browser says so in Origin).
        status, _, data = _raw(srv, "POST", "/v1/results", body,
                               {"Host": here, "Origin": "http://evil.example",
                                "Content-Type": "application/json"})
        assert status == 403 and b"cross-origin" in data, (status, data)
        status, _, _ = _raw(srv, "POST", "/v1/results", body,
                            {"Host": here, "Origin": "null", "Content-Type": "application/json"})
        assert status == 403, status
        # A type a page may send without asking first is refused and counted invalid.
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            status, _, data = _raw(srv, "POST", "/v1/results", body,
                                   {"Host": here, "Content-Type": ctype})
            assert status == 415 and b"application/json" in data, (ctype, status, data)
        assert srv.get_json("/v1/benchmarks")[1]["benchmarks"] == [], "a refused write got in"
        # What scripts and clients send is accepted.
        for k, (host, headers) in enumerate([
                (here, {"Content-Type": "application/json"}),
                (f"localhost:{srv.port}", {"Content-Type": "application/x-ndjson; charset=utf-8"}),
                ("monitor.internal", {}),
                (here, {"Origin": f"http://{here}", "Content-Type": "application/json"})]):
            ev = json.dumps({**EV, "item_id": f"ok{k}"}).encode()
            status, _, data = _raw(srv, "POST", "/v1/results", ev, {"Host": host, **headers})
            assert status == 202 and json.loads(data)["accepted"] == 1, (host, status, data)
        # No CORS: a preflight gets no Access-Control-* header, nor does an answer.
        status, hdrs, _ = _raw(srv, "OPTIONS", "/v1/results", None,
                               {"Host": here, "Origin": f"http://{here}",
                                "Access-Control-Request-Method": "POST"})
        _, hdrs2, _ = _raw(srv, "GET", "/v1/benchmarks", None, {"Host": here})
        assert not [h for h in (*hdrs, *hdrs2) if h.startswith("access-control-")], (hdrs, hdrs2)
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="invalid") == 3
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == 4
    finally:
        srv.kill()


def test_content_encoding(tmp_path: Path) -> None:
    srv = Server(tmp_path / "e.db").start()
    try:
        good = json.dumps([EV]).encode()
        status, reply = srv.post(gzip.compress(good), {"Content-Encoding": "gzip",
                                                       "Content-Type": "application/json"})
        assert status == 202 and reply["accepted"] == 1, reply
        status, reply = srv.post(good, {"Content-Encoding": "gzip"})  # says gzip, is not
        assert status == 400 and reply["error"] == "bad-encoding", reply
        status, reply = srv.post(good, {"Content-Encoding": "bogus"})
        assert status == 415 and reply["error"] == "unsupported-encoding", reply
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="invalid") == 2
        assert srv.request("GET", "/healthz")[0] == 200
    finally:
        srv.kill()


def test_bearer_scheme_is_case_insensitive_and_the_token_trimmed(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text('token = "  padded-token \\t"\n')
    srv = Server(tmp_path / "t.db", "--config", str(config)).start()
    try:
        for header, want in (("Bearer padded-token", 200), ("bearer padded-token", 200),
                             ("BEARER  padded-token ", 200), ("Bearer   padded-token \t", 200),
                             ("Bearer  padded-token \t", 200), ("Basic padded-token", 401),
                             ("Bearer padded", 401), ("padded-token", 401)):
            status, _ = srv.request("GET", "/v1/benchmarks", headers={"Authorization": header})
            assert status == want, (header, status)
        # With a token, no Host check: the token is the guard (a non-loopback bind needs one).
        status, _, _ = _raw(srv, "GET", "/v1/benchmarks", None,
                            {"Host": "monitor.example", "Authorization": "bearer padded-token"})
        assert status == 200, status
    finally:
        srv.kill()
