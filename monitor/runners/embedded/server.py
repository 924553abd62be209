"""The embedded runner (``llm-monitor run``): one process with HTTP ingest, SQLite and /metrics.

The aiohttp transport of :class:`~monitor.runners.embedded.service.EmbeddedService`: routes
translate requests to service calls and results to JSON (a bearer token, when set, guards
every route but ``/healthz``); :func:`serve` runs the server with the background tasks
(evaluation on the cadence, replay, the live view) until SIGINT/SIGTERM.

Batches are decoded, applied and committed one at a time in a worker thread, off the event
loop (so that /healthz and the queries of other clients stay answered while a large batch is
processed); each is applied and committed under the state lock, so the order in which batches
are applied is the order in which they are committed, which is what makes a restart reproduce
the state. A 202 still means committed. Connections are bounded (``max_connections``, idle
ones closed first), idle ones closed after ``idle_timeout``, bodies that stall cut off, and a
body arriving slower than ``min_body_rate`` gives its slot up to a request that needs one
(:mod:`monitor.runners.embedded.guards`).
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from prometheus_client import CONTENT_TYPE_LATEST

from monitor.contracts import jsonable
from monitor.errors import MonitorError
from monitor.runners.embedded.guards import (
    BACKLOG,
    Body,
    BodySlots,
    ConnectionCap,
    SlowBody,
    browser_guard,
    connection_cap,
)
from monitor.runners.embedded.service import EXCLUDED_IDS_CAP, EmbeddedService, OverCap
from monitor.runners.embedded.web import add_board
from monitor.runners.settings import Settings

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
    expected = token.encode()

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in _PUBLIC_PATHS:
            # The scheme is case-insensitive (RFC 7235): "Bearer", "bearer", "BEARER".
            scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
            ok = scheme.lower() == "bearer" and hmac.compare_digest(
                given.strip().encode("utf-8", "replace"), expected)
            if not ok:
                resp = _error(401, "unauthorized", "missing or wrong bearer token")
                resp.headers["WWW-Authenticate"] = 'Bearer realm="llm-monitor"'
                return resp
        return await handler(request)

    return auth


#: Content types a write accepts; a request without one is taken as JSON too (scripts, curl
#: -H) unless a browser sent it (the browser guard refuses it: a no-cors fetch of a Blob has
#: none). A browser may send any other cross-site without asking first (text/plain, a form).
WRITE_TYPES = frozenset({"application/json", "application/x-ndjson", "application/jsonl",
                         "application/ndjson", "application/jsonlines"})

#: Content-Encodings the server decodes itself (any other is refused, not taken as JSON).
_ENCODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate", "br", "zstd"})


#: At most this many pairs per page of /v1/benchmarks/{b}/pairs.
PAIRS_PAGE_CAP = 1000


def _ingest_or_refusal(service: EmbeddedService, body: bytes) -> Any:
    """The report of ``body``, or the refusal returned (not raised) with no traceback: one
    raised across the worker thread would hold the batch in a reference cycle."""
    try:
        return service.ingest_body(body, source="http")
    except OverCap as over:
        return over.with_traceback(None)


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
    else:
        middlewares.append(browser_guard(settings, _error))
    # The body is read by read_limited; client_max_size is only a second fence.
    app = web.Application(middlewares=middlewares, client_max_size=settings.max_body_bytes + 1)
    limit = settings.max_body_bytes
    # One worker: batches are processed in the order their bodies were read, one at a time.
    ingest = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-monitor-ingest")
    # Bodies held in memory at once (being received, or waiting for the worker); a slow one
    # gives its slot up to a request that needs it.
    slots = BodySlots(settings.max_concurrent_bodies, settings.min_body_rate)

    async def off_loop(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            ingest, functools.partial(fn, *args, **kwargs))

    async def stop_worker(_: web.Application) -> None:
        await asyncio.get_running_loop().run_in_executor(None, ingest.shutdown)

    app.on_cleanup.append(stop_worker)

    async def read(request: web.Request, fn: Callable[..., Any], *args: Any,
                   **kwargs: Any) -> Any:
        # A query, in a thread with the state lock held: never beside a half-applied batch.
        return await asyncio.to_thread(service.locked, fn, *args, **kwargs)

    async def post_results(request: web.Request) -> web.StreamResponse:
        ctype = request.content_type if "Content-Type" in request.headers else ""
        if ctype and ctype not in WRITE_TYPES:
            await off_loop(service.reject_body, "invalid-json", f"Content-Type {ctype!r}")
            resp = _error(415, "unsupported-media-type", f"Content-Type {ctype!r}: send "
                          f"{' or '.join(sorted(WRITE_TYPES)[:2])} (curl: -H 'Content-Type: "
                          "application/json')")
            resp.force_close()
            return resp
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in _ENCODINGS:
            await off_loop(service.reject_body, "invalid-json", f"Content-Encoding {encoding!r}")
            resp = _error(415, "unsupported-encoding", f"Content-Encoding {encoding[:50]!r}: "
                          "send gzip, deflate or none")
            resp.force_close()
            return resp
        body = await slots.acquire(settings.body_timeout)
        if body is None:
            service.count_refused("max_concurrent_bodies")
            resp = _error(503, "busy", f"{settings.max_concurrent_bodies} request bodies are "
                          "being received or processed (max_concurrent_bodies); retry")
            resp.force_close()
            return resp
        try:
            return await receive(request, body)
        finally:
            slots.release(body)

    async def receive(request: web.Request, slot: Body) -> web.StreamResponse:
        try:
            body = await slots.read(slot, request.content, request.content_length, limit,
                                    idle=settings.idle_timeout, total=settings.body_timeout)
        except (HttpProcessingError, RequestPayloadError) as exc:  # e.g. not gzip as it says
            why = " ".join(str(exc).split())[:200]
            await off_loop(service.reject_body, "invalid-json", f"the body cannot be decoded: {why}")
            resp = _error(400, "bad-encoding", f"the body cannot be decoded ({why}; "
                          f"Content-Encoding {request.headers.get('Content-Encoding', '')!r})")
            resp.force_close()
            return resp
        except SlowBody as slow:
            service.count_refused("min_body_rate")
            resp = _error(408, "too-slow", f"the request body arrived at {slow.rate:.0f} bytes/s, "
                          f"below min_body_rate ({settings.min_body_rate} bytes/s), while "
                          f"another request waited for one of the max_concurrent_bodies "
                          f"({settings.max_concurrent_bodies}) slots; send it faster, or retry")
            resp.force_close()
            return resp
        except TimeoutError:
            service.count_refused("body_timeout")
            resp = _error(408, "timeout", f"the request body stalled for {settings.idle_timeout:g} s "
                          f"or took over {settings.body_timeout:g} s (idle_timeout, body_timeout)")
            resp.force_close()
            return resp
        if body is None:
            await off_loop(service.reject_body, "too-large", f"request body over {limit} bytes")
            resp = _error(413, "too-large", f"request body over the limit of {limit} bytes")
            resp.force_close()  # the rest of the body is never read
            return resp
        try:
            report = await off_loop(_ingest_or_refusal, service, body)
            if isinstance(report, OverCap):
                raise report
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
        def answer(request: web.Request, bench: str) -> Any:
            return query(request, bench) if bench in service.host.monitors else None

        async def handler(request: web.Request) -> web.StreamResponse:
            bench = request.match_info["benchmark"]
            data = await read(request, answer, request, bench)
            if data is None:
                return _error(404, "unknown-benchmark", f"no results for benchmark {bench!r}")
            return _json(data)
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

    def plan(request: web.Request, bench: str) -> Any:
        # The stop signal of one model: continue (with the next items) or stop, and why.
        q = request.query
        against = [a for a in q.get("against", "").split(",") if a] or None
        top = _int_param(request, "top", 0, lo=0, hi=1_000_000) or None
        budget = _int_param(request, "budget", 0, lo=0, hi=2**62) or None
        count = _int_param(request, "count", 100, lo=0, hi=10_000)
        try:
            return service.plan(bench, request.match_info["model"], against=against, top=top,
                                budget=budget, count=count)
        except KeyError as exc:
            raise web.HTTPNotFound(
                text=json.dumps({"error": "unknown-model", "detail": exc.args[0]}),
                content_type="application/json") from None

    async def get_benchmarks(request: web.Request) -> web.StreamResponse:
        return _json({"benchmarks": await read(request, service.benchmarks)})

    async def get_changes(request: web.Request) -> web.StreamResponse:
        since = _int_param(request, "since", 0, lo=0, hi=2**62)
        limit = _int_param(request, "limit", 1000, lo=1, hi=10_000)
        changes = await read(request, service.store.changes_since, since, limit=limit,
                             benchmark=request.query.get("benchmark"))
        last = changes[-1]["change_id"] if changes else since
        return _json({"changes": changes, "next_since": last})

    async def get_dead_letters(request: web.Request) -> web.StreamResponse:
        since = _int_param(request, "since", 0, lo=0, hi=2**62)
        limit = _int_param(request, "limit", 1000, lo=1, hi=10_000)
        return _json({"dead_letters": await read(request, service.store.dead_letters,
                                                 since=since, limit=limit)})

    async def get_metrics(request: web.Request) -> web.StreamResponse:
        return web.Response(body=await read(request, service.metrics_text),
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
    app.router.add_get(f"{bench}/models/{{model:.+}}/plan", per_benchmark(plan))
    app.router.add_get("/v1/changes", get_changes)
    app.router.add_get("/v1/dead-letters", get_dead_letters)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    add_board(app, service)  # the web board at / (public page) and the live HTML report
    return app


# -- process ------------------------------------------------------------------------------
#: How often a thread holding the interpreter lock lets another (the event loop) run.
_SWITCH_INTERVAL = 0.001


BackgroundTask = Callable[[EmbeddedService, asyncio.Event], Coroutine[Any, Any, None]]


async def _evaluator(service: EmbeddedService, stop: asyncio.Event) -> None:
    """Evaluate results that arrived within the cadence once no further request comes, bring
    the models' standings up to date, and store a snapshot when one is due (between requests,
    so it covers only committed results)."""
    interval = service.host.tick_seconds
    while not stop.is_set():
        await asyncio.sleep(interval)
        try:
            await asyncio.to_thread(service.evaluate_pending)
        except Exception as exc:  # storage trouble: reported, retried at the next tick
            print(f"llm-monitor: evaluation not stored: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            continue
        try:
            await asyncio.to_thread(service.refresh_standings)
        except Exception as exc:  # a settle record not kept: a restart takes it again
            print(f"llm-monitor: standings not stored: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
        await asyncio.to_thread(_snapshot, service)
        await asyncio.to_thread(service.collect_garbage)


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
    # Batches are processed in a thread: the loop thread, waiting for the interpreter lock at
    # each of its socket calls, gets it after this many seconds instead of the default 5 ms.
    sys.setswitchinterval(_SWITCH_INTERVAL)
    # keepalive_timeout closes a connection idle that long, before its first request too (a
    # socket that sends nothing or half a header); a handler is not cancelled when its client
    # goes away, so a batch being applied is finished and committed.
    runner = web.AppRunner(app, access_log=None, handle_signals=False,
                           keepalive_timeout=settings.idle_timeout, handler_cancellation=False)
    await runner.setup()
    loop = asyncio.get_running_loop()
    server = runner.server
    assert server is not None  # set by setup()
    cap = ConnectionCap(server, connection_cap(settings.max_connections))
    service.count_connections(lambda: cap.count)
    try:
        listener = await loop.create_server(
            cap, settings.host, settings.port, reuse_address=True, backlog=BACKLOG)
    except OSError as exc:
        await runner.cleanup()
        service.close()
        raise MonitorError(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}; "
                           "choose another --port or --host") from None
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    port = settings.port
    if port == 0 and listener.sockets:
        port = listener.sockets[0].getsockname()[1]
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
        listener.close()
        await runner.cleanup()
        try:
            service.evaluate_pending(force=True)  # log the last verdict changes before leaving
            _snapshot(service, force=True)  # so that the next start replays nothing
        finally:
            service.close()
