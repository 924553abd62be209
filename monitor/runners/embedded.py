"""The embedded runner (``llm-monitor run``): one process with HTTP ingest, SQLite and /metrics.

The aiohttp transport of :class:`~monitor.runners.embedded_service.EmbeddedService`: routes
translate requests to service calls and results to JSON (a bearer token, when set, guards
every route but ``/healthz``); :func:`serve` runs the server with the background tasks
(evaluation on the cadence, replay, the live view) until SIGINT/SIGTERM.

Requests are processed one at a time on the event loop: the order in which batches are applied
is the order in which they are committed, which is what makes a restart reproduce the state.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from monitor.contracts import jsonable
from monitor.errors import MonitorError
from monitor.runners.embedded_service import EXCLUDED_IDS_CAP, EmbeddedService, OverCap
from monitor.runners.settings import Settings
from monitor.runners.web import add_board

_PUBLIC_PATHS = frozenset({"/healthz"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, *, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(jsonable(data), allow_nan=False), status=status,
        content_type="application/json",
    )


def _error(status: int, reason: str, detail: str) -> web.Response:
    return _json({"error": reason, "detail": detail}, status=status)


def _auth_middleware(token: str) -> Callable[..., Awaitable[web.StreamResponse]]:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in _PUBLIC_PATHS:
            given = request.headers.get("Authorization", "").encode("utf-8", "replace")
            if not hmac.compare_digest(given, expected):
                resp = _error(401, "unauthorized", "missing or wrong bearer token")
                resp.headers["WWW-Authenticate"] = 'Bearer realm="llm-monitor"'
                return resp
        return await handler(request)

    return auth


async def _read_limited(request: web.Request, limit: int) -> bytes | None:
    """The body, or None as soon as it exceeds ``limit`` bytes (nothing more is read)."""
    if request.content_length is not None and request.content_length > limit:
        return None
    buf = bytearray()
    async for chunk in request.content.iter_chunked(1 << 16):
        buf += chunk
        if len(buf) > limit:
            return None
    return bytes(buf)


#: At most this many pairs per page of /v1/benchmarks/{b}/pairs.
PAIRS_PAGE_CAP = 1000


def _int_param(request: web.Request, name: str, default: int, *, lo: int, hi: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": "bad-parameter", "detail": f"{name} must be an integer"}),
            content_type="application/json") from None
    return min(max(value, lo), hi)


def build_app(service: EmbeddedService) -> web.Application:
    """The aiohttp application: ingest, queries, /metrics and /healthz."""
    settings = service.settings
    middlewares = []
    if settings.token is not None:
        middlewares.append(_auth_middleware(settings.token.get_secret_value()))
    # The body is read by _read_limited; client_max_size is only a second fence.
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_body_bytes + 1)
    limit = settings.max_body_bytes

    async def post_results(request: web.Request) -> web.StreamResponse:
        body = await _read_limited(request, limit)
        if body is None:
            service.reject_body("too-large", f"request body over {limit} bytes")
            resp = _error(413, "too-large", f"request body over the limit of {limit} bytes")
            resp.force_close()  # the rest of the body is never read
            return resp
        try:
            report = service.ingest_body(body, source="http")
        except OverCap as over:
            resp = _json({"error": "over-cap", "cap": over.cap, "limit": over.limit,
                          "detail": f"{over.detail}; nothing of this request was applied"},
                         status=over.status)
            return resp
        except Exception as exc:  # storage failure: the batch was not acknowledged
            print(f"llm-monitor: ingest failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return _error(503, "unavailable", "the batch was not stored; retry")
        valid = report.accepted + report.duplicate + report.conflict
        return _json(report.as_dict(), status=202 if valid or not report.invalid else 400)

    def per_benchmark(query: Callable[[web.Request, str], Any]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            bench = request.match_info["benchmark"]
            if bench not in service.benchmarks():
                return _error(404, "unknown-benchmark", f"no results for benchmark {bench!r}")
            return _json(query(request, bench))
        return handler

    def contamination(request: web.Request, bench: str) -> Any:
        cap = _int_param(request, "limit", EXCLUDED_IDS_CAP, lo=0, hi=100_000)
        return service.contamination(bench, limit=cap)

    def pairs(request: web.Request, bench: str) -> Any:
        # Every pair of the board in ranking order, a page at a time; ?model= one model's
        # pairs, ?model=&other= one pair.
        try:
            return service.pairs(
                bench, offset=_int_param(request, "offset", 0, lo=0, hi=2**62),
                limit=_int_param(request, "limit", 100, lo=0, hi=PAIRS_PAGE_CAP),
                model=request.query.get("model"), other=request.query.get("other"))
        except KeyError as exc:
            raise web.HTTPNotFound(
                text=json.dumps({"error": "unknown-model", "detail": exc.args[0]}),
                content_type="application/json") from None

    async def get_benchmarks(request: web.Request) -> web.StreamResponse:
        return _json({"benchmarks": service.benchmarks()})

    async def get_changes(request: web.Request) -> web.StreamResponse:
        since = _int_param(request, "since", 0, lo=0, hi=2**62)
        limit = _int_param(request, "limit", 1000, lo=1, hi=10_000)
        changes = service.store.changes_since(since, limit=limit,
                                              benchmark=request.query.get("benchmark"))
        last = changes[-1]["change_id"] if changes else since
        return _json({"changes": changes, "next_since": last})

    async def get_dead_letters(request: web.Request) -> web.StreamResponse:
        since = _int_param(request, "since", 0, lo=0, hi=2**62)
        limit = _int_param(request, "limit", 1000, lo=1, hi=10_000)
        return _json({"dead_letters": service.store.dead_letters(since=since, limit=limit)})

    async def get_metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(body=service.metrics_text(),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.StreamResponse:
        return _json({"status": "ok", "uptime_seconds": time.time() - service.started})

    bench = "/v1/benchmarks/{benchmark:.+}"
    app.router.add_post("/v1/results", post_results)
    app.router.add_get("/v1/benchmarks", get_benchmarks)
    app.router.add_get(f"{bench}/ranking", per_benchmark(lambda _, b: service.ranking(b)))
    app.router.add_get(f"{bench}/stability", per_benchmark(lambda _, b: service.stability(b)))
    app.router.add_get(f"{bench}/contamination", per_benchmark(contamination))
    app.router.add_get(f"{bench}/pairs", per_benchmark(pairs))
    app.router.add_get("/v1/changes", get_changes)
    app.router.add_get("/v1/dead-letters", get_dead_letters)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    add_board(app, service)  # the web board at / (public page) and the live HTML report
    return app


# -- process ------------------------------------------------------------------------------
BackgroundTask = Callable[[EmbeddedService, asyncio.Event], Coroutine[Any, Any, None]]


async def _evaluator(service: EmbeddedService, stop: asyncio.Event) -> None:
    """Evaluate results that arrived within the cadence once no further request comes, and
    store a snapshot when one is due (between requests, so it covers only committed results)."""
    interval = service.host.tick_seconds
    while not stop.is_set():
        await asyncio.sleep(interval)
        try:
            service.evaluate_pending()
        except Exception as exc:  # storage trouble: reported, retried at the next tick
            print(f"llm-monitor: evaluation not stored: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            continue
        _snapshot(service)


def _snapshot(service: EmbeddedService, *, force: bool = False) -> None:
    try:
        service.snapshot_if_due(force=force)
    except Exception as exc:  # the results are stored; a restart just replays more of them
        print(f"llm-monitor: snapshot not stored: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)


async def _guarded(task: BackgroundTask, service: EmbeddedService, stop: asyncio.Event) -> None:
    """Run a background task; a failure is reported on stderr and stops only that task."""
    try:
        await task(service, stop)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        name = getattr(task, "__qualname__", "task").split(".")[0].strip("_")
        print(f"llm-monitor: {name} stopped: {type(exc).__name__}: {exc}", file=sys.stderr,
              flush=True)


async def serve(
    settings: Settings,
    *,
    tasks: Sequence[BackgroundTask] = (),
    on_ready: Callable[[EmbeddedService, str], None] | None = None,
) -> None:
    """Rebuild the state, listen, run ``tasks`` (replay, live view) and serve until SIGINT/SIGTERM."""
    service = EmbeddedService(settings)
    app = build_app(service)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        service.close()
        raise MonitorError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}; "
                           "choose another --port or --host") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    port = settings.port
    server = getattr(site, "_server", None)
    if port == 0 and server is not None and server.sockets:
        port = server.sockets[0].getsockname()[1]
    base = f"http://{host}:{port}"
    if on_ready is not None:
        on_ready(service, base)
    running = [asyncio.create_task(_guarded(t, service, stop)) for t in (_evaluator, *tasks)]
    try:
        await stop.wait()
    finally:
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await runner.cleanup()
        try:
            service.evaluate_pending(force=True)  # log the last verdict changes before leaving
            _snapshot(service, force=True)  # so that the next start replays nothing
        finally:
            service.close()
