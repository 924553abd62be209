"""The embedded runner: one process with HTTP ingest, SQLite persistence and /metrics.

A thin shell around :class:`monitor.core.Monitor`: it decodes request bodies, steps the
monitor with each batch, commits the accepted results, change events and dead letters in one
SQLite transaction, and only then answers. On start the state is rebuilt from the database,
so every acknowledged result is counted exactly once across crashes.

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
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from monitor.commands._output import jsonable
from monitor.contracts import DeadLetter, ItemResult, dead_letter, decode_events
from monitor.errors import MonitorError
from monitor.runners.store import SqliteStore, change_kind
from monitor.settings import Settings

OUTCOMES = ("accepted", "duplicate", "conflict", "invalid")
_REBUILD_BATCH = 100_000


@dataclass
class IngestReport:
    """What one batch did: counts per outcome, rejections with index and reason, new change ids."""

    accepted: int = 0
    duplicate: int = 0
    conflict: int = 0
    invalid: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    change_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted, "duplicate": self.duplicate,
            "conflict": self.conflict, "invalid": self.invalid,
            "rejected": self.rejected,
            "changes": len(self.change_ids),
            "last_change_id": self.change_ids[-1] if self.change_ids else None,
        }


def _core_config(settings: Settings) -> Any:
    from monitor.core import CoreConfig

    return CoreConfig(alpha=settings.alpha, power=settings.power, family=settings.family)


class EmbeddedService:
    """Monitor state + SQLite store + Prometheus registry of one embedded process."""

    def __init__(self, settings: Settings, *, registry: CollectorRegistry | None = None) -> None:
        from monitor.core import Monitor
        from monitor.sinks.prometheus import Metrics, MonitorCollector

        self.settings = settings
        self.store = SqliteStore(settings.db, synchronous=settings.sqlite_synchronous)
        self.monitor = Monitor(_core_config(settings))
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.registry.register(MonitorCollector(self.monitor))
        self.started = time.time()
        self.rebuilt = self._rebuild()

    # -- start-up --------------------------------------------------------------------------
    def _rebuild(self) -> int:
        """Fold every stored result into a fresh monitor, in commit order; return how many.

        The change events this produces were already stored when the results were first
        acknowledged, so they are dropped here.
        """
        n = 0
        for batch in self.store.iter_results(batch_size=_REBUILD_BATCH):
            self.monitor.apply(batch)
            n += len(batch)
        for outcome, total in self.store.counters().items():
            if outcome in OUTCOMES and total:
                self.metrics.events_total.labels(outcome=outcome).inc(total)
        for (bench, kind), total in self.store.change_counts().items():
            self.metrics.state_changes_total.labels(benchmark=bench, kind=kind).inc(total)
        return n

    def close(self) -> None:
        self.store.close()

    # -- ingest ----------------------------------------------------------------------------
    def ingest_body(self, body: bytes, *, source: str = "http") -> IngestReport:
        """Decode a request body (object, array or NDJSON) and ingest it."""
        t0 = time.perf_counter()
        decoded = decode_events(body, source=source)
        return self.ingest(decoded.valid, decoded.invalid, source=source, t0=t0)

    def ingest(
        self,
        valid: Sequence[tuple[int, ItemResult]],
        invalid: Sequence[DeadLetter] = (),
        *,
        source: str,
        t0: float | None = None,
    ) -> IngestReport:
        """Step the monitor with ``valid``, persist, and only then report (durable on return)."""
        t0 = time.perf_counter() if t0 is None else t0
        report = IngestReport(invalid=len(invalid))
        events = [ev for _, ev in valid]
        index = [i for i, _ in valid]
        result = (self.monitor.apply(events, sources=[f"{source}[{i}]" for i in index])
                  if events else None)
        accepted: list[ItemResult] = []
        letters: list[DeadLetter] = list(invalid)
        if result is not None:
            for ev, outcome in zip(events, result.outcomes, strict=True):
                if outcome == "accepted":
                    accepted.append(ev)
            report.accepted = len(accepted)
            report.duplicate = result.count("duplicate")
            report.conflict = len(result.dead_letters)
            for letter in result.dead_letters:
                # The core numbers events inside the batch; the client knows request indices.
                i = letter.index if letter.index is not None else 0
                req = index[i]
                letters.append(letter.model_copy(update={
                    "index": req, "detail": letter.detail.replace(f"event {i}:", f"event {req}:", 1),
                }))
        changes = list(result.changes) if result is not None else []
        counts = {"accepted": report.accepted, "duplicate": report.duplicate,
                  "conflict": report.conflict, "invalid": report.invalid}
        try:
            report.change_ids = self.store.commit(
                results=accepted, changes=changes, dead_letters=letters, counts=counts
            )
        except Exception:
            # The state already holds this batch but the database does not: start over from
            # what is durable so memory never runs ahead of the log.
            self.monitor = self._fresh_monitor()
            raise
        for kind, n in counts.items():
            if n:
                self.metrics.events_total.labels(outcome=kind).inc(n)
        for change in changes:
            self.metrics.state_changes_total.labels(
                benchmark=change.benchmark, kind=change_kind(change)
            ).inc()
        self.metrics.processing_lag_seconds.observe(time.perf_counter() - t0)
        report.rejected = sorted(
            ({"index": d.index, "reason": d.reason, "detail": d.detail} for d in letters),
            key=lambda r: r["index"] if r["index"] is not None else -1,
        )
        return report

    def _fresh_monitor(self) -> Any:
        from monitor.core import Monitor
        from monitor.sinks.prometheus import MonitorCollector

        old = self.monitor
        self.monitor = Monitor(_core_config(self.settings))
        for batch in self.store.iter_results(batch_size=_REBUILD_BATCH):
            self.monitor.apply(batch)
        for collector in list(getattr(self.registry, "_collector_to_names", {})):
            if isinstance(collector, MonitorCollector) and collector.monitor is old:
                self.registry.unregister(collector)
        self.registry.register(MonitorCollector(self.monitor))
        return self.monitor

    # -- queries ---------------------------------------------------------------------------
    def benchmarks(self) -> list[str]:
        return list(self.monitor.benchmarks())

    def ranking(self, benchmark: str) -> dict[str, Any]:
        return dict(self.monitor.ranking(benchmark))

    def metrics_text(self) -> bytes:
        return generate_latest(self.registry)


# -- HTTP ---------------------------------------------------------------------------------
_PUBLIC_PATHS = frozenset({"/healthz"})


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
    async def auth(request: web.Request, handler: Callable[..., Awaitable[web.StreamResponse]]
                   ) -> web.StreamResponse:
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
            letter = dead_letter("too-large", f"request body over {limit} bytes", "",
                                 source="http", index=None)
            service.store.commit(results=(), dead_letters=[letter], counts={"invalid": 1})
            service.metrics.events_total.labels(outcome="invalid").inc()
            resp = _error(413, "too-large", f"request body over the limit of {limit} bytes")
            resp.force_close()  # the rest of the body is never read
            return resp
        try:
            report = service.ingest_body(body, source="http")
        except Exception as exc:  # storage failure: the batch was not acknowledged
            print(f"llm-monitor: ingest failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return _error(503, "unavailable", "the batch was not stored; retry")
        valid = report.accepted + report.duplicate + report.conflict
        return _json(report.as_dict(), status=202 if valid or not report.invalid else 400)

    async def get_benchmarks(request: web.Request) -> web.StreamResponse:
        return _json({"benchmarks": service.benchmarks()})

    async def get_ranking(request: web.Request) -> web.StreamResponse:
        bench = request.match_info["benchmark"]
        if bench not in service.benchmarks():
            return _error(404, "unknown-benchmark", f"no results for benchmark {bench!r}")
        return _json(service.ranking(bench))

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

    app.router.add_post("/v1/results", post_results)
    app.router.add_get("/v1/benchmarks", get_benchmarks)
    app.router.add_get("/v1/benchmarks/{benchmark}/ranking", get_ranking)
    app.router.add_get("/v1/changes", get_changes)
    app.router.add_get("/v1/dead-letters", get_dead_letters)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    return app


# -- process ------------------------------------------------------------------------------
BackgroundTask = Callable[[EmbeddedService, asyncio.Event], Coroutine[Any, Any, None]]


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
    running = [asyncio.create_task(t(service, stop)) for t in tasks]
    try:
        await stop.wait()
    finally:
        for t in running:
            t.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await runner.cleanup()
        service.close()
