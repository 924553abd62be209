"""The live web board and the live HTML report in headless Chromium, while results arrive.

``llm-monitor run`` (with a bearer token) receives real MMLU-Pro results in batches from a
background thread; Chromium opens ``/#token=…`` and the report route. The page must draw the
ranking the API serves, update itself without reloading, keep the token out of the address
bar and the server's output, and report no console error, exception or failed load.
"""

from __future__ import annotations

import asyncio
import csv
import json
import secrets
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from monitor.offline.html import SECTIONS
from tests.integration.browser_harness import Chromium
from tests.integration.embedded_harness import Server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BENCH = "MMLU-Pro (5-shot)"
MODELS = 16
ITEMS = 2400
BATCH_ITEMS = 100


def _events(shared_data: Path) -> list[list[dict[str, Any]]]:
    """Batches of real results: the first MODELS models of the wide table, ITEMS items, each
    batch BATCH_ITEMS items with every model's score."""
    with (shared_data / "mmlu_pro_item_correctness_wide.csv").open(newline="") as f:
        rows = csv.reader(f)
        head = next(rows)
        models = head[3:3 + MODELS]
        batches: list[list[dict[str, Any]]] = []
        for i, row in enumerate(rows):
            if i == ITEMS:
                break
            if i % BATCH_ITEMS == 0:
                batches.append([])
            batches[-1] += [{"benchmark": BENCH, "item_id": row[0], "model": m,
                             "cluster": row[1], "score": int(v)}
                            for m, v in zip(models, row[3:3 + MODELS], strict=True)
                            if v in ("0", "1")]
    return batches


def _http(base: str, path: str, token: str | None, body: Any = None) -> tuple[int, bytes]:
    req = urllib.request.Request(base + path, method="GET" if body is None else "POST",
                                 data=None if body is None else json.dumps(body).encode())
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


class Poster(threading.Thread):
    """Posts the batches one after another, a short pause between them."""

    def __init__(self, base: str, token: str, batches: list[list[dict[str, Any]]]) -> None:
        super().__init__(daemon=True)
        self.base, self.token, self.batches = base, token, batches
        self.accepted = 0
        self.posted = 0
        self.error: str | None = None

    def run(self) -> None:
        for batch in self.batches:
            status, body = _http(self.base, "/v1/results", self.token, batch)
            if status != 202:
                self.error = f"HTTP {status}: {body[:300]!r}"
                return
            self.accepted += json.loads(body)["accepted"]
            self.posted += 1
            time.sleep(0.25)


DOM_RANKING = ("Array.from(document.querySelectorAll('#ranking tbody tr'))"
               ".map(tr => tr.dataset.model)")


def test_board_and_report_in_chromium_while_results_arrive(shared_data: Path,
                                                           tmp_path: Path) -> None:
    token = "t-" + secrets.token_hex(16)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    server = Server(tmp_path / "monitor.db", "--token-file", str(token_file), token=token)
    server.start()
    browser = Chromium(tmp_path)
    shots = tmp_path / "shots"
    shots.mkdir()
    try:
        browser.start()
        base = f"http://127.0.0.1:{server.port}"
        # The page is public (it holds no data); the data and the report are not.
        assert _http(base, "/", None)[0] == 200
        assert _http(base, "/v1/benchmarks", None)[0] == 401
        batches = _events(shared_data)
        status, _ = _http(base, "/v1/results", token, batches[0])
        assert status == 202
        # Two streams: one while the board is watched, one while the report is read.
        split = 2 * len(batches) // 3
        posters = (Poster(base, token, batches[1:split]), Poster(base, token, batches[split:]))
        quoted = urllib.parse.quote(BENCH, safe="")
        assert _http(base, f"/v1/benchmarks/{quoted}/report.html", None)[0] == 401
        asyncio.run(_drive(browser, base, token, quoted, posters, shots))
        for poster in posters:
            assert poster.error is None, poster.error
        assert sum(p.posted for p in posters) == len(batches) - 1
    finally:
        browser.stop()
        server.stop()
    # The token never reaches the server's output (no access log, no echo of the header).
    assert token not in server.log.read_text(errors="replace")


async def _drive(browser: Chromium, base: str, token: str, quoted: str,
                 posters: tuple[Poster, Poster], shots: Path) -> None:
    poster, later = posters
    async with aiohttp.ClientSession() as http:
        tab = await browser.tab(http)
        try:
            # Without the token the page asks for it (the one failed request is the 401).
            await tab.navigate(f"{base}/")
            await tab.wait_for("!document.getElementById('login').hidden")
            assert tab.errors and all("401" in e for e in tab.errors), tab.errors
            tab.errors.clear()
            await tab.evaluate(f"document.getElementById('token').value = {json.dumps(token)};"
                               "document.getElementById('login').requestSubmit(); true")
            await tab.wait_for("document.querySelectorAll('#ranking tbody tr').length >= 2")
            assert await tab.evaluate("document.getElementById('token').value") == ""
            # Or it reads the token from the URL fragment (a new document: the query differs).
            await tab.evaluate("sessionStorage.clear(); true")
            await tab.navigate(f"{base}/?board#token={token}&b={quoted}")
            # The page drew the ranking from the first batch, then results keep arriving.
            await tab.wait_for("document.querySelectorAll('#ranking tbody tr').length >= 2")
            assert token not in await tab.evaluate("location.href")
            assert await tab.evaluate("document.getElementById('login').hidden") is True
            navigations = len([e for e in tab.events if e.get("method") == "Page.loadEventFired"])
            poster.start()
            items = ("Array.from(document.querySelectorAll('#ranking tbody td:nth-child(4)'))"
                     ".reduce((s, td) => s + Number(td.textContent.replace(/,/g, '')), 0)")
            first = await tab.evaluate(items)
            await tab.screenshot(shots / "board-1-arriving.png")
            # Updated in place while the stream runs: the items shown grow, with no reload.
            await tab.wait_for(f"({items}) > {first}", 60)
            await tab.screenshot(shots / "board-2-arriving.png")
            while poster.is_alive():
                await asyncio.sleep(0.2)
            # The page catches up with the API: the same models in the same order.
            async with http.get(f"{base}/v1/benchmarks/{quoted}/ranking",
                                headers={"Authorization": f"Bearer {token}"}) as resp:
                assert resp.status == 200
                api = await resp.json()
            want = [m["model"] for m in api["models"]]
            assert len(want) == MODELS
            deadline = time.monotonic() + 30
            while (shown := await tab.evaluate(DOM_RANKING)) != want:
                assert time.monotonic() < deadline, (shown, want)
                await asyncio.sleep(0.2)
            pairs = await tab.evaluate("Array.from(document.querySelectorAll('#pairs tbody tr'))"
                                       ".map(tr => tr.dataset.pair)")
            assert pairs == [f"{p['model_a']}|{p['model_b']}" for p in api["pairs"]]
            verdicts = await tab.evaluate(
                "Array.from(document.querySelectorAll('#pairs tbody tr td:nth-child(5)'))"
                ".map(td => td.textContent)")
            decided = await tab.evaluate(
                "Array.from(document.querySelectorAll('#pairs tbody tr td:nth-child(6)'))"
                ".map(td => td.textContent)")
            for text, at, p in zip(verdicts, decided, api["pairs"], strict=True):
                assert text == ("open" if p["verdict"] == "unresolved"
                                else "resolved: " + p["verdict"].split(":", 1)[1]), text
                # A decision says its item and that it is final.
                assert at == ("–" if p["decided"] is None
                              else f"n={p['decided']['n']:,}, final"), at
            legend = await tab.evaluate("document.getElementById('legend').textContent")
            # The thresholds' range, as the page writes numbers: x.xe+y from 1e4, else three
            # figures (JavaScript's toPrecision(3)). Thresholds are 1/γ ≥ 20.
            def sci(x: float) -> str:
                if x >= 1e4:
                    return f"{x:.1e}".replace("e+0", "e+")
                if x >= 1e3:
                    return f"{x:.2e}".replace("e+0", "e+")
                return f"{x:.0f}" if x >= 100 else f"{x:.1f}"

            thresholds = sorted(p["e_threshold"] for p in api["pairs"])
            want_thr = (sci(thresholds[0]) if thresholds[0] == thresholds[-1]
                        else f"{sci(thresholds[0])}–{sci(thresholds[-1])}")
            assert f"threshold 1/γ = {want_thr} " in legend, legend
            loads = len([e for e in tab.events if e.get("method") == "Page.loadEventFired"])
            assert loads == navigations, "the page reloaded itself"
            await tab.screenshot(shots / "board-3-caught-up.png")
            assert not tab.errors, tab.errors

            # The button opens the report of the live state (here in the same tab, as when
            # pop-ups are blocked); it inherits the page's policy and must still render.
            await tab.evaluate("window.open = () => null; true")
            start = len(tab.events)
            await tab.evaluate("document.getElementById('report').click(); true")
            await tab.wait_for("location.protocol === 'blob:' && "
                               "document.querySelectorAll('section svg').length === 5", 120)
            await tab.wait_event("Page.loadEventFired", since=start)
            assert await tab.evaluate(
                "getComputedStyle(document.querySelector('th')).backgroundColor") != \
                "rgba(0, 0, 0, 0)"  # the report's own style sheet applies
            await tab.screenshot(shots / "report-from-button.png")
            assert not tab.errors, tab.errors[:3]

            # The HTML report of the live state, as the CLI renders it, while results arrive.
            await tab.send("Network.setExtraHTTPHeaders",
                           headers={"Authorization": f"Bearer {token}"})
            later.start()
            await tab.navigate(f"{base}/v1/benchmarks/{quoted}/report.html", timeout=120)
            sections = await tab.evaluate(
                "Array.from(document.querySelectorAll('section')).map(s => s.id)")
            assert sections == [sid for sid, _ in SECTIONS]
            models = await tab.evaluate(
                "Array.from(document.querySelectorAll('#ranking tr[data-model]'))"
                ".map(tr => tr.dataset.model)")
            assert sorted(models) == sorted(want)
            assert await tab.evaluate("document.querySelectorAll('svg').length") == 5
            await tab.screenshot(shots / "report.png")
            assert not tab.errors, tab.errors
            while later.is_alive():
                await asyncio.sleep(0.2)
            for shot in shots.iterdir():
                assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
        finally:
            await tab.close()
