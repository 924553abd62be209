"""Evaluate until resolved, on every face of a real monitor.

``llm-monitor run`` holds three reference models on 1,000 items; a fourth is evaluated the
way the harness integrations do it — the plan's next items, 100 at a time, until the plan
says stop — and then runs on by 100 items, as an evaluator that ignores the signal would.
``llm_monitor_model_settled`` must go from 0 to 1, and the web board (in headless Chromium),
the live HTML report (in Chromium too), the ranking route and ``/metrics`` must all say
"settled at item n of 1,000", n being the items the model had when the plan first said stop;
after a restart, the same n, not the items its replay reaches.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from tests.integration.browser_harness import Chromium
from tests.integration.embedded_harness import Server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

BENCH = "arith (until resolved)"
N = 1000
REFERENCES = {"strong": 0.9, "mid": 0.6, "weak": 0.3}
NEW = "new-model (v2)"


def _scores(seed: int, p: float) -> list[int]:
    return (np.random.default_rng(seed).random(N) < p).astype(int).tolist()


NEW_SCORES = _scores(7, 0.75)


def _results(model: str, items: list[str]) -> list[dict[str, Any]]:
    return [{"benchmark": BENCH, "item_id": i, "model": model,
             "score": NEW_SCORES[int(i[1:])]} for i in items]


def _gauge(server: Server, name: str, model: str) -> float | None:
    labels = f'{{benchmark="{BENCH}",model="{model}"}}'
    for line in server.metrics().splitlines():
        if line.startswith(name + labels + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def _wait(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def _standing(server: Server) -> dict[str, Any] | None:
    from urllib.parse import quote

    status, ranking = server.get_json(f"/v1/benchmarks/{quote(BENCH, safe='')}/ranking")
    assert status == 200, ranking
    row = next((m for m in ranking["models"] if m["model"] == NEW), None)
    return None if row is None else row["standing"]


def test_a_model_settles_on_every_face(tmp_path: Path) -> None:
    from urllib.parse import quote

    token = "t-" + secrets.token_hex(16)
    (tmp_path / "token").write_text(token)
    (tmp_path / "token").chmod(0o600)
    server = Server(tmp_path / "monitor.db", "--token-file", str(tmp_path / "token"),
                    token=token).start()
    quoted = quote(BENCH, safe="")
    try:
        status, body = server.post([{"benchmark": BENCH, "item_id": f"q{i}", "model": m,
                                     "score": s}
                                    for j, (m, p) in enumerate(REFERENCES.items())
                                    for i, s in enumerate(_scores(j, p))])
        assert status == 202 and body["accepted"] == 3 * N, body
        # The evaluation, as MonitorEarlyStopping runs it: post, then ask.
        plan_path = f"/v1/benchmarks/{quoted}/models/{quote(NEW, safe='')}/plan?count=100"
        first, posted = True, set()
        while True:
            status, plan = server.get_json(plan_path)
            assert status == 200, plan
            if plan["action"] == "stop":
                break
            status, body = server.post(_results(NEW, plan["next_items"]))
            assert status == 202 and body["accepted"] == len(plan["next_items"]), body
            posted.update(plan["next_items"])
            if first:  # open, and exported so: the gauge is there at 0 before it turns 1
                _wait("the new model's standing at 0", lambda: _gauge(
                    server, "llm_monitor_model_settled", NEW) == 0.0)
                first = False
        n = plan["items_done"]
        assert not first and 0 < n < N, plan  # settled early, after at least one open step
        _wait("llm_monitor_model_settled to turn 1",
              lambda: _gauge(server, "llm_monitor_model_settled", NEW) == 1.0)
        assert _gauge(server, "llm_monitor_model_settled_items", NEW) == n
        # It runs on by 100 items (an evaluator that does not stop on the signal).
        assert len(posted) == n
        more = [f"q{k}" for k in range(N) if f"q{k}" not in posted][:100]
        status, body = server.post(_results(NEW, more))
        assert status == 202 and body["accepted"] == 100, body
        standing = _wait("the standing after the run-on",
                         lambda: (s := _standing(server)) and s["items_done"] == n + 100 and s)
        saved = (N - n - 100) / N
        text = f"settled at item {n:,} of 1,000 ({saved:.0%} saved; {n + 100:,} done)"
        # and, when the stop left pairs open (the futility rule), how many
        assert re.fullmatch(re.escape(text) + r"(; \d+ pairs? left open)?",
                            standing["text"]), standing
        assert standing["settled"] and standing["settled_at"]["items"] == n
        assert standing["saved"] == pytest.approx(saved)
        assert _gauge(server, "llm_monitor_model_items", NEW) == n + 100
        assert _gauge(server, "llm_monitor_model_items_remaining", NEW) == N - n - 100
        assert _gauge(server, "llm_monitor_model_settled_items", NEW) == n

        board, report = asyncio.run(_faces(tmp_path, server.port, token, quoted))
        assert board["text"] == report["text"] == standing["text"]
        assert board["settled"] == report["settled"] == "1"
        # Every model's cell on both pages is its standing's sentence, and the counts agree.
        status, ranking = server.get_json(f"/v1/benchmarks/{quoted}/ranking")
        sentences = {m["model"]: m["standing"]["text"] for m in ranking["models"]}
        assert board["all"] == report["all"] == sentences
        settled = sum(m["standing"]["settled"] for m in ranking["models"])
        assert board["card"] == f"{settled} / {len(sentences)}"
        assert report["summary"] == f"{settled}"

        # A restart replays the run-on with the rest: the model still settled at item n.
        assert server.stop() == 0
        server.start()
        again = _wait("the standing after the restart", lambda: _standing(server))
        assert again["settled_at"] == standing["settled_at"], (again, standing)
        assert again["text"] == standing["text"]
        assert _gauge(server, "llm_monitor_model_settled_items", NEW) == n
    finally:
        server.stop()


_CELLS = ("Object.fromEntries(Array.from(document.querySelectorAll('#ranking tr[data-model]'))"
          ".map(tr => [tr.dataset.model, tr.querySelector('td.standing').textContent]))")


def _row(model: str, what: str) -> str:
    """``what`` of the model's cell (undefined while the row is not drawn)."""
    return (f"document.querySelector('#ranking tr[data-model=\"' + CSS.escape({json.dumps(model)})"
            f" + '\"] td.standing')?.{what}")


async def _faces(tmp: Path, port: int, token: str, quoted: str) -> tuple[dict[str, Any],
                                                                         dict[str, Any]]:
    """What the web board and the live report show, read in headless Chromium."""
    base = f"http://127.0.0.1:{port}"
    browser = Chromium(tmp).start()
    try:
        async with aiohttp.ClientSession() as http:
            tab = await browser.tab(http)
            try:
                await tab.navigate(f"{base}/#token={token}&b={quoted}")
                await tab.wait_for(f"({_row(NEW, 'textContent')} || '').startsWith('settled at')")
                card = await tab.evaluate(
                    "Array.from(document.querySelectorAll('.card')).find(c => c.textContent"
                    ".startsWith('models settled')).querySelector('b').textContent")
                board = {"text": await tab.evaluate(_row(NEW, "textContent")),
                         "settled": await tab.evaluate(_row(NEW, "dataset.settled")),
                         "all": await tab.evaluate(_CELLS), "card": card}
                await tab.screenshot(tmp / "board.png")
                assert not tab.errors, tab.errors
                await tab.send("Network.setExtraHTTPHeaders",
                               headers={"Authorization": f"Bearer {token}"})
                await tab.navigate(f"{base}/v1/benchmarks/{quoted}/report.html", timeout=120)
                report = {"text": await tab.evaluate(_row(NEW, "textContent")),
                          "settled": await tab.evaluate(_row(NEW, "dataset.settled")),
                          "all": await tab.evaluate(_CELLS),
                          "summary": await tab.evaluate(
                              "document.querySelector('#summary li[data-settled]')"
                              ".dataset.settled")}
                await tab.screenshot(tmp / "report.png")
                assert not tab.errors, tab.errors
            finally:
                await tab.close()
    finally:
        browser.stop()
    return board, report
