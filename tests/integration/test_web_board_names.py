"""The live board with hostile and long names, in headless Chromium.

A benchmark named with spaces, a slash and non-ASCII letters; models named with markup,
quotes and a long name that wins its pair. The page must show every name as text (no
element, no script run), select the benchmark from the fragment, and keep the pair column
readable when a verdict names a long winner.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
import urllib.request
from pathlib import Path

import aiohttp
import numpy as np
import pytest

from tests.integration.browser_harness import Chromium
from tests.integration.embedded_harness import Server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

BENCH = "team a/évals ✓ (5-shot)"
MODELS = ("merged(2026-02, probably gemini-3.1-pro) with a long suffix",
          "<script>window.__pwned = 1</script>",
          'mod"el \'q\' & <b>bold</b>',
          "</td><img src=x onerror=\"window.__pwned = 2\">")
ACCURACY = (0.9, 0.55, 0.5, 0.2)


def _results() -> list[dict[str, object]]:
    rng = np.random.default_rng(12)
    x = rng.random((800, len(MODELS))) < np.array(ACCURACY)
    return [{"benchmark": BENCH, "item_id": f"q{i}", "model": m, "score": int(x[i, j])}
            for i in range(x.shape[0]) for j, m in enumerate(MODELS)]


def test_board_shows_hostile_names_as_text_and_keeps_the_pair_column_readable(
        tmp_path: Path) -> None:
    server = Server(tmp_path / "monitor.db")
    server.start()
    browser = Chromium(tmp_path)
    try:
        browser.start()
        base = f"http://127.0.0.1:{server.port}"
        req = urllib.request.Request(base + "/v1/results", data=json.dumps(_results()).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert resp.status == 202
        with urllib.request.urlopen(
                f"{base}/v1/benchmarks/{urllib.parse.quote(BENCH, safe='')}/ranking",
                timeout=60) as resp:
            api = json.loads(resp.read())
        asyncio.run(_drive(browser, base, api, tmp_path))
    finally:
        browser.stop()
        server.stop()


async def _drive(browser: Chromium, base: str, api: dict[str, object], tmp: Path) -> None:
    models = api["models"]
    pairs = api["pairs"]
    assert isinstance(models, list) and isinstance(pairs, list)
    # The long name wins its pair: its verdict names it.
    assert pairs[0]["model_a"] == MODELS[0] and pairs[0]["verdict"] == f"resolved:{MODELS[0]}"
    async with aiohttp.ClientSession() as http:
        tab = await browser.tab(http)
        try:
            await tab.navigate(f"{base}/#b={urllib.parse.quote(BENCH, safe='')}")
            await tab.wait_for("document.querySelectorAll('#ranking tbody tr').length === 4")
            assert await tab.evaluate("document.getElementById('bench').value") == BENCH
            shown = await tab.evaluate(
                "Array.from(document.querySelectorAll('#ranking tbody td.name:not(.standing)'))"
                ".map(td => td.textContent)")
            assert shown == [m["model"] for m in models]
            # Names are text: no element of theirs, no script of theirs ran.
            assert await tab.evaluate("document.querySelectorAll('main img, table b, #changes b').length") == 0
            assert await tab.evaluate("window.__pwned === undefined") is True
            # A verdict naming the long winner leaves the pair's names room to read.
            widths = await tab.evaluate(
                "Array.from(document.querySelectorAll('#pairs tbody td.name'))"
                ".map(td => td.getBoundingClientRect().width)")
            assert len(widths) == len(pairs) and min(widths) >= 200, widths
            # One count of the verdicts, the ranking route's: no second "resolved" card.
            cards = await tab.evaluate("Array.from(document.querySelectorAll('#summary .card'))"
                                       ".map(c => c.textContent)")
            resolved = sum(str(p["verdict"]).startswith("resolved:") for p in pairs)
            assert f"adjacent pairs resolved (decided, final){resolved} / {len(pairs)}" in cards
            assert sum("resolved" in c for c in cards if not c.startswith("ranking")) == 1, cards
            # The ingest rate comes from the ranking it polls, never from /metrics (megabytes
            # and a second of the server's CPU on a board of many benchmarks, every 2 s).
            rate = ("Array.from(document.querySelectorAll('#summary .card'))"
                    ".map(c => c.textContent).find(t => t.startsWith('scores in / s'))")
            await tab.wait_for(f"/[0-9]$/.test({rate} || '')", 15)
            fetched = await tab.evaluate("performance.getEntriesByType('resource')"
                                         ".map(e => new URL(e.name).pathname)")
            assert "/v1/benchmarks" in fetched and "/metrics" not in fetched, fetched
            await tab.screenshot(tmp / "board-names.png")
            # A board that cannot be reported yet: the button says why.
            body = json.dumps([{"benchmark": "early", "item_id": f"q{i}", "score": i % 2,
                                "model": "a" if i < 10 else "z"} for i in range(20)])
            async with http.post(f"{base}/v1/results", data=body,
                                 headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 202
            await tab.wait_for("Array.from(document.getElementById('bench').options)"
                               ".some(o => o.value === 'early')")
            # Every status shown is recorded: the next poll overwrites it within 2 s.
            await tab.evaluate("window.__statuses = []; new MutationObserver(() => "
                               "__statuses.push(document.getElementById('status').textContent))"
                               ".observe(document.getElementById('status'), {childList: true, "
                               "characterData: true, subtree: true});"
                               "const s = document.getElementById('bench'); s.value = 'early';"
                               "s.dispatchEvent(new Event('change'));"
                               "document.getElementById('report').click(); true")
            status = await tab.wait_for(
                "__statuses.find(t => t.startsWith('report failed'))", 30)
            assert "409" in status and "share no item" in status, status
            tab.errors.clear()  # the 409 itself is logged as a failed load
            assert not tab.errors, tab.errors
        finally:
            await tab.close()
