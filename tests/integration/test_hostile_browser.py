"""Browser isolation of a real ``llm-monitor run`` without a token: a page on another origin
(another port of the same host included) or behind a rebound DNS name cannot write or read,
only JSON content types are written, no CORS headers are sent — checked with raw headers and
in headless Chromium; and with a token, the scheme is case-insensitive and the token
trimmed."""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.integration.browser_harness import Chromium
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
        # Another port of the same host is another origin; so is the same port by another name.
        for origin in (f"http://127.0.0.1:{srv.port + 1}", f"http://localhost:{srv.port}",
                       f"https://{here}", "http://127.0.0.1"):
            status, _, data = _raw(srv, "POST", "/v1/results", body,
                                   {"Host": here, "Origin": origin})
            assert status == 403 and b"own origin" in data, (origin, status, data)
        # A browser's write without an Origin, or not from the same origin, or without a type.
        for headers, want in (({"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}, 403),
                              ({"Sec-Fetch-Site": "same-origin"}, 403),
                              ({"Origin": f"http://{here}", "Sec-Fetch-Site": "cross-site"}, 403),
                              ({"Origin": f"http://{here}", "Sec-Fetch-Site": "same-origin"}, 415)):
            status, _, data = _raw(srv, "POST", "/v1/results", body, {"Host": here, **headers})
            assert status == want, (headers, status, data)
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


#: What a page can send to the monitor without asking first (no preflight): the attack's
#: Blob body (no Content-Type) and a text/plain one, each as a no-cors fetch; then a JSON
#: fetch, which needs a preflight that the monitor never answers with CORS headers.
_ATTEMPTS = """
async (url, body) => {
  const out = {};
  const tries = {
    blob: {method: "POST", mode: "no-cors", body: new Blob([body])},
    text: {method: "POST", mode: "no-cors", body: body},
    json: {method: "POST", headers: {"Content-Type": "application/json"}, body: body},
  };
  for (const [name, init] of Object.entries(tries)) {
    try {
      const r = await fetch(url, init);
      out[name] = r.type === "opaque" ? "opaque" : r.status;
    } catch (e) {
      out[name] = "blocked";
    }
  }
  return out;
}
"""


async def _attempts(tab: Any, page: str, url: str, item: str) -> tuple[dict[str, Any], list[int]]:
    """From a page at ``page``, every attempt to POST one result to ``url``: what the page
    saw, and the statuses the monitor answered (the network log sees through opaque
    responses)."""
    await tab.navigate(page)
    start = len(tab.events)
    body = json.dumps({**EV, "item_id": item})
    seen = await tab.evaluate(f"({_ATTEMPTS})({json.dumps(url)}, {json.dumps(body)})")
    await asyncio.sleep(0.3)
    statuses = [e["params"]["response"]["status"] for e in tab.events[start:]
                if e.get("method") == "Network.responseReceived"
                and e["params"]["response"]["url"] == url]
    return seen, statuses


def test_pages_of_other_origins_cannot_write_in_chromium(tmp_path: Path) -> None:
    """The report's attack in a real browser: a page on another loopback port (by
    ``127.0.0.1`` and by ``localhost``), and the monitor's own page reached by another name,
    POST results with ``mode: 'no-cors'`` and a Blob (Chromium sends no Content-Type) or
    text/plain: none is stored. The monitor's own page (same origin) still writes and its
    board still draws."""
    srv = Server(tmp_path / "x.db").start()
    browser = Chromium(tmp_path)
    try:
        browser.start()
        asyncio.run(_drive_attacks(browser, srv.port))
        text = srv.metrics()
        # Only the own page's JSON result got in; the refused writes were never applied.
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == 2
        assert srv.get_json("/v1/benchmarks")[1]["benchmarks"] == ["b"]
    finally:
        browser.stop()
        srv.kill()


async def _drive_attacks(browser: Chromium, port: int) -> None:
    evil = web.Application()

    async def page(_: web.Request) -> web.Response:
        return web.Response(text="<!doctype html><title>another page</title>",
                            content_type="text/html")

    evil.router.add_get("/", page)
    runner = web.AppRunner(evil)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    other = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as http:
            tab = await browser.tab(http)
            try:
                for k, (page_url, target) in enumerate([
                        (f"http://127.0.0.1:{other}/", f"http://127.0.0.1:{port}/v1/results"),
                        (f"http://localhost:{other}/", f"http://127.0.0.1:{port}/v1/results"),
                        (f"http://127.0.0.1:{other}/", f"http://localhost:{port}/v1/results"),
                        (f"http://localhost:{other}/", f"http://localhost:{port}/v1/results"),
                        # the monitor's own JSON page, reached by its other name
                        (f"http://localhost:{port}/healthz",
                         f"http://127.0.0.1:{port}/v1/results")]):
                    seen, statuses = await _attempts(tab, page_url, target, f"evil{k}")
                    # The no-cors POSTs reach the monitor, which refuses them; the JSON one
                    # is stopped by the browser at its preflight (no CORS headers).
                    assert seen == {"blob": "opaque", "text": "opaque", "json": "blocked"}, \
                        (page_url, target, seen)
                    assert len(statuses) >= 2 and all(400 <= s < 500 for s in statuses), \
                        (page_url, target, statuses)
                # The monitor's own page, same origin: a JSON write is taken, a Blob without a
                # Content-Type is refused (415), and the board draws what was written.
                own = f"http://127.0.0.1:{port}/"
                await tab.navigate(own)
                posted = await tab.evaluate(f"""(async () => {{
                    const ev = (m, s) => JSON.stringify({{...{json.dumps(EV)}, model: m, score: s}});
                    const a = await fetch("/v1/results", {{method: "POST", body: ev("m", 1),
                        headers: {{"Content-Type": "application/json"}}}});
                    const b = await fetch("/v1/results", {{method: "POST", body: ev("n", 0),
                        headers: {{"Content-Type": "application/json"}}}});
                    const c = await fetch("/v1/results", {{method: "POST",
                        body: new Blob([ev("o", 1)])}});
                    return [a.status, b.status, c.status];
                }})()""")
                assert posted == [202, 202, 415], posted
                tab.errors.clear()
                await tab.navigate(own)
                await tab.wait_for("document.querySelectorAll('#ranking tbody tr').length == 2")
                assert not tab.errors, tab.errors
            finally:
                await tab.close()
    finally:
        await runner.cleanup()
