"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol with aiohttp.

:class:`Chromium` starts the browser with a fresh profile on a DevTools port it picks itself
(read back from ``DevToolsActivePort``) and fails the test loudly when it cannot start;
:class:`Tab` sends protocol commands over the page's websocket and records every console
error, uncaught exception and failed load the page reports.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
         "--window-size=1280,1400")


class Chromium:
    """One headless Chromium process with its own profile under ``tmp``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.profile = tmp / "chromium-profile"
        self.log = tmp / "chromium.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, timeout: float = 30.0) -> Chromium:
        binary = shutil.which("chromium") or "/usr/bin/chromium"
        if not Path(binary).is_file():
            pytest.fail("chromium not found; scripts/install-deps.sh installs it (apt: chromium)")
        self.profile.mkdir(parents=True, exist_ok=True)
        marker = self.profile / "DevToolsActivePort"
        marker.unlink(missing_ok=True)  # a profile used before holds its old port
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                 "about:blank"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"chromium exited with {self.proc.returncode}:\n{self._tail()}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                self.port = int(marker.read_text().splitlines()[0])
                return self
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"chromium did not open its DevTools port within {timeout}s:\n{self._tail()}")

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.is_file() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    async def tab(self, session: aiohttp.ClientSession) -> Tab:
        """The browser's first page, connected."""
        async with session.get(f"http://127.0.0.1:{self.port}/json/list") as resp:
            targets = await resp.json()
        page = next((t for t in targets if t["type"] == "page"), None)
        if page is None:
            pytest.fail(f"chromium has no page target: {targets}")
        ws = await session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        tab = Tab(ws)
        await tab.start()
        return tab


class Tab:
    """A page over its DevTools websocket: commands, events, console errors."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log", "Network"):
            await self.send(f"{domain}.enable")

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self.pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
                continue
            self.events.append(data)
            method, params = data.get("method"), data.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                self.errors.append("console: " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                self.errors.append("exception: " + str(
                    details.get("exception", {}).get("description") or details.get("text")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}")
            elif method == "Network.loadingFailed" and not params.get("canceled"):
                self.errors.append(f"network: {params.get('errorText')}")

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        i = next(self.ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[i] = fut
        await self.ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, 60)
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return dict(reply.get("result", {}))

    async def navigate(self, url: str, timeout: float = 60.0) -> None:
        start = len(self.events)
        await self.send("Page.navigate", url=url)
        await self.wait_event("Page.loadEventFired", since=start, timeout=timeout)

    async def wait_event(self, method: str, *, since: int, timeout: float = 30.0) -> None:
        """Wait until an event ``method`` arrived after the first ``since`` events (the
        DevTools events come on their own socket messages, after what the page shows)."""
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events[since:]):
            if time.monotonic() >= deadline:
                raise AssertionError(f"no {method} within {timeout}s")
            await asyncio.sleep(0.05)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                                 awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression!r} threw {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """The first truthy value of ``expression``, polled."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(0.2)
        raise AssertionError(f"{expression!r} stayed false for {timeout}s")

    async def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            metrics = await self.send("Page.getLayoutMetrics")
            size = metrics["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"],
                              "height": min(size["height"], 8000), "scale": 1}
        data = await self.send("Page.captureScreenshot", **params)
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    async def close(self) -> None:
        await self.ws.close()
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader
