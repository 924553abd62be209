"""The live web board of the embedded monitor: the page at ``/`` and the HTML report of the
live state at ``GET /v1/benchmarks/{b}/report.html``.

The page and its static files (``monitor/runners/static/``, shipped in the package) hold no
data and are served without the token; the page reads the token from the URL fragment
(``/#token=…``, never sent to the server) or asks for it, and sends it as a bearer header on
every data request it makes (the routes of :mod:`monitor.runners.embedded`). It polls those
routes and redraws without reloading.

The report route builds a score table from the live state (the scores that enter the verdicts,
items in order of first arrival) and renders it with the CLI's code
(:func:`monitor.offline.report.build_report`, :func:`monitor.offline.replay.with_anytime`,
:func:`monitor.offline.html.render_html`), in a worker thread so that ingest goes on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
from aiohttp import web

from monitor.core import CoreConfig, Monitor
from monitor.errors import InputError
from monitor.io.tables import ScoreTable

if TYPE_CHECKING:
    from monitor.runners.embedded_service import EmbeddedService

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Public files of the board: request path → (file in monitor/runners/static, content type).
BOARD_FILES = {
    "/": ("board.html", "text/html"),
    "/static/board.js": ("board.js", "text/javascript"),
    "/static/board.css": ("board.css", "text/css"),
}
_HEADERS = {
    # The page runs only its own script and talks only to this server. Inline styles are
    # allowed because the report it opens from a blob URL inherits this policy, and the
    # report's plots are SVG with style attributes.
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; "
                                "style-src 'self' 'unsafe-inline'; connect-src 'self'; "
                                "img-src 'self' data: blob:; frame-ancestors 'none'; "
                                "base-uri 'none'; form-action 'none'"),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}
# The report page is a document of its own (inline styles, SVG), opened from a blob URL.
_REPORT_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def _error(status: int, reason: str, detail: str) -> web.Response:
    """An error as the JSON routes give it (the body encoded, whatever the names in it)."""
    return web.json_response({"error": reason, "detail": detail}, status=status,
                             dumps=json.dumps)


def _read(name: str) -> bytes:
    return (resources.files("monitor.runners") / "static" / name).read_bytes()


def live_table(monitor: Monitor, benchmark: str) -> ScoreTable:
    """The score table of ``benchmark``'s live state: the scores that enter the verdicts
    (``original`` variant, items excluded by their flags left out), items in order of first
    arrival, each item's cluster as a sampled cluster when any item has one."""
    items, models, scores, clusters = monitor.score_matrix(benchmark)
    groups = None
    if any(c is not None for c in clusters):
        groups = np.array(["" if c is None else c for c in clusters])
    return ScoreTable(source=f"live:{benchmark}", benchmark=benchmark,
                      item_ids=np.array(items, dtype=str), models=tuple(models), scores=scores,
                      groups=groups, group_kind="cluster" if groups is not None else None,
                      group_col="cluster" if groups is not None else None)


def live_report_html(table: ScoreTable, config: CoreConfig) -> str:
    """The HTML report of ``table`` with the monitor's α, power, family, correction and
    planned board size: what ``llm-monitor report FILE --html`` writes for the same table."""
    from monitor.offline.html import render_html
    from monitor.offline.replay import with_anytime
    from monitor.offline.report import build_report

    report = build_report(table, family=config.family, correction=config.correction,
                          alpha=config.alpha, power=config.power, rank_method="simultaneous")
    report = with_anytime(report, table, planned_models=config.planned_models)
    return render_html(report, table, title=f"{table.benchmark}: live state",
                       command=f"GET /v1/benchmarks/{table.benchmark}/report.html",
                       note=live_replay_note(table.benchmark))


def live_replay_note(benchmark: str | None) -> str:
    """What the live report's anytime columns are: a replay of the live table, whose order is
    the items' first arrival (each item's scores together), not the order the monitor met
    the results in; so they can differ from the monitor's own decisions."""
    return ("anytime verdicts here: the live table replayed item by item in order of first "
            "arrival. The monitor decided each pair in the order its results arrived, which "
            "differs when models send their items in different orders; its own decisions are "
            f"those of the board and of GET /v1/benchmarks/{benchmark}/ranking.")


def add_board(app: web.Application, service: EmbeddedService) -> None:
    """Serve the board at ``/`` (public, outside the token) and the live report route."""
    files = {path: (_read(name), ctype) for path, (name, ctype) in BOARD_FILES.items()}
    # One report rendered at a time: each costs seconds of CPU on a large board, and requests
    # arriving together must queue rather than take every core from ingest.
    renders = asyncio.Semaphore(1)

    @web.middleware
    async def board(request: web.Request, handler: Handler) -> web.StreamResponse:
        # Outermost: the page and its scripts go out before the token check, nothing else.
        hit = files.get(request.path) if request.method in ("GET", "HEAD") else None
        if hit is None:
            return await handler(request)
        body, ctype = hit
        return web.Response(body=body, content_type=ctype, charset="utf-8", headers=_HEADERS)

    async def report(request: web.Request) -> web.StreamResponse:
        bench = request.match_info["benchmark"]
        if bench not in service.benchmarks():
            return _error(404, "unknown-benchmark", f"no results for benchmark {bench!r}")
        mon = service.host.monitors[bench]
        async with renders:  # the state copied once its turn comes: the latest
            # A consistent copy, taken in a thread with the state lock held (as every read): a
            # batch being applied holds the lock, and the loop must keep serving meanwhile.
            table = await asyncio.to_thread(service.locked, live_table, mon, bench)
            if len(table.models) < 2:
                return _error(409, "too-few-models", "a report needs at least two models")
            try:
                text = await asyncio.get_running_loop().run_in_executor(
                    None, live_report_html, table, mon.config)
            except InputError as err:  # e.g. two models that share no item yet
                return _error(409, "cannot-report", str(err))
        return web.Response(text=text, content_type="text/html", charset="utf-8",
                            headers=_REPORT_HEADERS)

    app.middlewares.insert(0, board)
    app.router.add_get("/v1/benchmarks/{benchmark:.+}/report.html", report)
