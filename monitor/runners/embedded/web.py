"""The live web board of the embedded monitor: the page at ``/`` and the HTML report of the
live state at ``GET /v1/benchmarks/{b}/report.html``.

The page and its static files (``monitor/runners/embedded/static/``, shipped in the package) hold no
data and are served without the token; the page reads the token from the URL fragment
(``/#token=…``, never sent to the server) or asks for it, and sends it as a bearer header on
every data request it makes (the routes of :mod:`monitor.runners.embedded.server`). It polls those
routes and redraws without reloading.

The report route reads the monitor's own verdicts — its decisions, ranking order, rank sets
and tiers, and each model's stop signal, the ones ``/ranking``, ``/metrics`` and the board
show — with a copy of the scores that enter them (items in order of first arrival), both taken together under the state lock,
and renders them with the CLI's code (:func:`monitor.offline.report.build_report` for the
fixed-N figures, :func:`monitor.offline.html.render_html`) in a worker thread, so that ingest
goes on. No verdict is taken again by replaying the table.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
from aiohttp import web
from numpy.typing import NDArray

from monitor.core import CoreConfig, Monitor
from monitor.core.standing import Standing
from monitor.errors import InputError
from monitor.io.tables import ScoreTable
from monitor.stats.figures import GroupKind, PairFigures, pair_figures

if TYPE_CHECKING:
    from monitor.offline.report import ResolutionReport
    from monitor.runners.embedded.service import EmbeddedService

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Public files of the board: request path → (file in monitor/runners/embedded/static, content type).
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
    return (resources.files("monitor.runners.embedded") / "static" / name).read_bytes()


def live_table(monitor: Monitor, benchmark: str) -> ScoreTable:
    """The score table of ``benchmark``'s live state: the scores that enter the verdicts
    (``original`` variant, items excluded by their flags left out), items in order of first
    arrival, each item's cluster label as the benchmark's design reads it (fixed strata under
    ``strata``, else clusters) when any item has one."""
    items, models, scores, clusters = monitor.score_matrix(benchmark)
    groups = None
    kind: GroupKind | None = None
    if any(c is not None for c in clusters):
        groups = np.array(["" if c is None else c for c in clusters])
        kind = "strata" if monitor.spec(benchmark).design == "strata" else "cluster"
    return ScoreTable(source=f"live:{benchmark}", benchmark=benchmark,
                      item_ids=np.array(items, dtype=str), models=tuple(models), scores=scores,
                      groups=groups, group_kind=kind,
                      group_col="cluster" if groups is not None else None)


@dataclass(frozen=True)
class LiveDecisions:
    """The monitor's verdicts of one benchmark, as ``/ranking`` reads them: the ranking (model
    names, best first), the family's pairs (indices into the live table's models, A above B)
    with the kernel's figures and their decisions, and every ranked model's rank set and
    tier."""

    order: tuple[str, ...]
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    figures: PairFigures
    first_resolved_at: tuple[int | None, ...]
    decided_ts: tuple[str | None, ...]
    rank_sets: tuple[tuple[int, int, int], ...]
    standing: dict[str, Any]
    cluster_items: int


def live_decisions(monitor: Monitor, benchmark: str) -> LiveDecisions:
    """The monitor's verdicts of ``benchmark`` now (call with the state lock held: the figures
    are read from the live state)."""
    t = monitor.table(benchmark)
    if t is None:
        raise KeyError(f"unknown benchmark {benchmark!r}")
    pairs = t.adjacent() if monitor.config.family == "adjacent" else t.all_pairs()
    a = np.asarray([p[0] for p in pairs], dtype=np.int64)
    b = np.asarray([p[1] for p in pairs], dtype=np.int64)
    f = pair_figures(t.source.pair_sums(a, b), alpha=t.family_alpha, power=t.power,
                     e_alpha=t.levels_of(a, b))
    code = f.verdict_code()
    at = f.cluster_decided_n if f.design == "clusters" else f.decided_n
    first = tuple(None if not c or at is None else round(float(at[k]))
                  for k, c in enumerate(code.tolist()))
    stamps = [t.decided_ts(min(x, y), max(x, y)) for x, y in pairs]
    low, high, tier = t.rank_sets()
    return LiveDecisions(
        order=tuple(t.models[i] for i in t.order), a=a, b=b, figures=f,
        first_resolved_at=first,
        decided_ts=tuple(None if s is None or not c else s.isoformat()
                         for s, c in zip(stamps, code.tolist(), strict=True)),
        rank_sets=tuple(zip(low, high, tier, strict=True)),
        standing={"resolved": t.resolved(), "unresolved_pairs": t.unresolved_pairs(),
                  "top_resolved": t.top_resolved(), "tiers": max(tier, default=0)},
        cluster_items=monitor.spec(benchmark).cluster_items)


def live_report(table: ScoreTable, decisions: LiveDecisions, config: CoreConfig
                ) -> ResolutionReport:
    """The resolution report of the live state: the fixed-N figures of ``table`` (the CLI's
    :func:`~monitor.offline.report.build_report`, in the monitor's ranking order) with the
    monitor's own decisions as its verdicts."""
    from monitor.offline.report import AnytimeReplay, build_report

    index = {name: j for j, name in enumerate(table.models)}
    order = [index[name] for name in decisions.order]
    order += [j for j in range(len(table.models)) if j not in set(order)]
    report = build_report(table, family=config.family, correction=config.correction,
                          alpha=config.alpha, power=config.power, rank_method="simultaneous",
                          order=order)
    res = report.figures
    if not (np.array_equal(res.a, decisions.a) and np.array_equal(res.b, decisions.b)):
        raise InputError("the live table's pairs are not the monitor's (a model without "
                         "scores that enter the verdicts)", source=table.source)
    replay = AnytimeReplay(order="live", seed=None, alpha=config.alpha, rule="board",
                           planned_models=config.planned_models, figures=decisions.figures,
                           first_resolved_at=decisions.first_resolved_at,
                           decided_ts=decisions.decided_ts,
                           cluster_items=decisions.cluster_items)
    sets = dict(zip(decisions.order, decisions.rank_sets, strict=True))
    entries = tuple(e if e.model not in sets else replace(
        e, rank_low=sets[e.model][0], rank_high=sets[e.model][1], tier=sets[e.model][2])
        for e in report.ranking)
    return replace(report, anytime=replay, ranking=entries, standing=decisions.standing)


def live_report_html(table: ScoreTable, decisions: LiveDecisions, config: CoreConfig, *,
                     standings: Mapping[str, Standing] | None = None) -> str:
    """The HTML report of the live state: what ``llm-monitor report FILE --html`` writes,
    with the monitor's decisions as the verdicts and, given ``standings``, each model's stop
    signal as the board shows it."""
    from monitor.offline.html import render_html

    return render_html(live_report(table, decisions, config), table,
                       title=f"{table.benchmark}: live state",
                       command=f"GET /v1/benchmarks/{table.benchmark}/report.html",
                       note=live_note(table.benchmark), standings=standings)


def live_note(benchmark: str | None) -> str:
    """Where the live report's verdicts come from."""
    return ("verdicts here: the monitor's own decisions, each taken at the paired item shown, "
            f"the same as GET /v1/benchmarks/{benchmark}/ranking, /metrics and the board; "
            "the e-value paths are drawn along the items in order of their first arrival.")


def _live_state(monitor: Monitor, benchmark: str,
                standings: Callable[[str], Mapping[str, Standing]]
                ) -> tuple[ScoreTable, LiveDecisions | None, dict[str, Standing]]:
    """The live table, the monitor's decisions and the models' standings, read together (with
    the state lock held)."""
    table = live_table(monitor, benchmark)
    if len(table.models) < 2:
        return table, None, {}
    return table, live_decisions(monitor, benchmark), dict(standings(benchmark))


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
            table, decisions, standings = await asyncio.to_thread(
                service.locked, _live_state, mon, bench, service.host.standings.of)
            if decisions is None:
                return _error(409, "too-few-models", "a report needs at least two models")
            try:
                text = await asyncio.get_running_loop().run_in_executor(
                    None, functools.partial(live_report_html, table, decisions, mon.config,
                                            standings=standings))
            except InputError as err:  # e.g. two models that share no item yet
                return _error(409, "cannot-report", str(err))
        return web.Response(text=text, content_type="text/html", charset="utf-8",
                            headers=_REPORT_HEADERS)

    app.middlewares.insert(0, board)
    app.router.add_get("/v1/benchmarks/{benchmark:.+}/report.html", report)
