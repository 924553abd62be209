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
import math
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from monitor.contracts import (
    DeadLetter,
    ItemResult,
    ResolutionChange,
    dead_letter,
    decode_events,
    jsonable,
)
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

    return CoreConfig(alpha=settings.alpha, power=settings.power, family=settings.family,
                      exclude_flags=settings.exclude_flags)


#: At most this many excluded item ids are listed by the contamination route (default).
EXCLUDED_IDS_CAP = 1000


def _flip_figures(kind: str, counts: dict[str, int]) -> dict[str, Any]:
    # The same Wilson interval and 10 % rule as `llm-monitor stability`, so the live figures
    # equal the offline ones for the same outcomes.
    from monitor.audit.stability import ALARM_FLIP_RATE, flip_alarm, flip_stat

    fs = flip_stat(kind, counts["flips"], counts["right_on_original"], math.nan)
    return {"kind": kind, "pairs": counts["pairs"],
            "right_on_original": counts["right_on_original"], "flips": counts["flips"],
            "flip_rate": fs.rate, "ci": [fs.ci_low, fs.ci_high],
            "alarm": flip_alarm(fs.rate), "alarm_confirmed": flip_alarm(fs.ci_low),
            "alarm_level": ALARM_FLIP_RATE}


def stability_figures(monitor: Any, benchmark: str) -> dict[str, Any]:
    """Per model: flip figures per perturbation kind and pooled over kinds (``overall``).

    A flip is right on the original (score ≥ 0.5) and wrong on the perturbed variant; the
    rate is flips / paired items right on the original, with a Wilson 95 % CI.
    """
    from monitor.audit.stability import ALARM_FLIP_RATE

    models = []
    for model, kinds in monitor.stability(benchmark).items():
        total = {key: sum(c[key] for c in kinds.values())
                 for key in ("pairs", "flips", "right_on_original")}
        overall = _flip_figures("all", total)
        models.append({"model": model, "alarm": overall["alarm"], "overall": overall,
                       "kinds": [_flip_figures(k, c) for k, c in kinds.items()]})
    return {"benchmark": benchmark, "alarm_level": ALARM_FLIP_RATE, "confidence": 0.95,
            "models": models}


def _finite(value: Any) -> float | None:
    f = float(value)
    return f if math.isfinite(f) else None


def _resolution_change(benchmark: str, fig: dict[str, Any], *, previous: str) -> Any:
    return ResolutionChange(
        change_id=0, benchmark=benchmark, model_a=fig["model_a"], model_b=fig["model_b"],
        previous=previous, verdict=fig["verdict"], n=int(fig["n"]),
        delta=_finite(fig["delta"]), cs_low=_finite(fig["cs_low"]),
        cs_high=_finite(fig["cs_high"]), e_value=_finite(fig["e_value"]), q=_finite(fig["q"]),
        q_cluster=_finite(fig["q_cluster"]), q_anytime=_finite(fig["q_anytime"]),
        mde=_finite(fig["mde"]), ts=datetime.now(UTC),
    )


class EmbeddedService:
    """Monitor state + SQLite store + Prometheus registry of one embedded process."""

    def __init__(self, settings: Settings, *, registry: CollectorRegistry | None = None) -> None:
        from monitor.sinks.prometheus import Metrics

        self.settings = settings
        self.store = SqliteStore(settings.db, synchronous=settings.sqlite_synchronous)
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self.started = time.time()
        self._collector: Any = None
        self._last_eval = time.monotonic()
        self.rebuilt = self._load_state()
        for outcome, total in self.store.counters().items():
            if outcome in OUTCOMES and total:
                self.metrics.events_total.labels(outcome=outcome).inc(total)
        self.metrics.ensure_benchmarks(self.monitor.benchmarks())
        for (bench, kind), total in self.store.change_counts().items():
            self.metrics.state_changes_total.labels(benchmark=bench, kind=kind).inc(total)

    # -- start-up --------------------------------------------------------------------------
    def _load_state(self) -> int:
        """A fresh monitor holding every stored result, folded in commit order; returns how many.

        Verdicts are evaluated once at the end. Change events were stored as they happened,
        but the last ones may not have been when the process died between an evaluation
        cadence and the next: :meth:`_reconcile` stores whatever the log still misses.
        """
        from monitor.core import Monitor
        from monitor.sinks.prometheus import MonitorCollector

        monitor = Monitor(_core_config(self.settings))
        n = 0
        for batch in self.store.iter_results(batch_size=_REBUILD_BATCH):
            monitor.apply(batch, evaluate=False)
            n += len(batch)
        if self._collector is not None:
            self.registry.unregister(self._collector)
        self.monitor = monitor
        self._collector = MonitorCollector(monitor)
        self.registry.register(self._collector)
        self._reconcile(monitor.evaluate())
        return n

    def _reconcile(self, rebuilt: list[Any]) -> None:
        """Store the verdict changes between the last logged state and the rebuilt one.

        ``rebuilt`` are the changes of a fresh monitor, i.e. relative to "nothing resolved".
        """
        pairs, rankings = self.store.last_states()
        missing: list[Any] = []
        for ch in rebuilt:
            if isinstance(ch, ResolutionChange):
                prev = pairs.pop((ch.benchmark, frozenset((ch.model_a, ch.model_b))),
                                 "unresolved")
                if prev != ch.verdict:
                    missing.append(ch.model_copy(update={"previous": prev}))
            elif rankings.get(ch.benchmark) != (tuple(ch.models), ch.resolved):
                missing.append(ch)
        # Pairs the log has as resolved that the rebuilt state has not resolved.
        for (bench, pair), prev in pairs.items():
            if prev == "unresolved" or bench not in self.monitor.benchmarks():
                continue
            for fig in self.monitor.pairs(bench, "all"):
                if frozenset((fig["model_a"], fig["model_b"])) == pair:
                    missing.append(_resolution_change(bench, fig, previous=prev))
        if missing:
            self.store.commit(results=(), changes=missing)

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
        letters: list[DeadLetter] = list(invalid)
        try:
            accepted, changes = self._step(events, index, source, report, letters)
            counts = {"accepted": report.accepted, "duplicate": report.duplicate,
                      "conflict": report.conflict, "invalid": report.invalid}
            report.change_ids = self.store.commit(
                results=accepted, changes=changes, dead_letters=letters, counts=counts
            )
        except Exception:
            # The state may already hold this batch but the database does not: start over
            # from what is durable so memory never runs ahead of the log.
            self._load_state()
            raise
        for kind, n in counts.items():
            if n:
                self.metrics.events_total.labels(outcome=kind).inc(n)
        if len(self.monitor.benchmarks()) != self.metrics.benchmarks_seen:
            self.metrics.ensure_benchmarks(self.monitor.benchmarks())
        self._count_changes(changes)
        self.metrics.processing_lag_seconds.observe(time.perf_counter() - t0)
        report.rejected = sorted(
            ({"index": d.index, "reason": d.reason, "detail": d.detail} for d in letters),
            key=lambda r: r["index"] if r["index"] is not None else -1,
        )
        return report

    def _step(self, events: list[ItemResult], index: list[int], source: str,
              report: IngestReport, letters: list[DeadLetter]) -> tuple[list[ItemResult], list[Any]]:
        """Fold ``events`` into the monitor; the accepted ones and the changes (if evaluated)."""
        accepted: list[ItemResult] = []
        if events:
            result = self.monitor.apply(events, sources=[f"{source}[{i}]" for i in index],
                                        evaluate=False)
            accepted = [ev for ev, o in zip(events, result.outcomes, strict=True)
                        if o == "accepted"]
            report.accepted = len(accepted)
            report.duplicate = result.count("duplicate")
            report.conflict = len(result.dead_letters)
            for letter in result.dead_letters:
                # The core numbers events inside the batch; the client knows request indices.
                i = letter.index if letter.index is not None else 0
                req = index[i]
                letters.append(letter.model_copy(update={
                    "index": req,
                    "detail": letter.detail.replace(f"event {i}:", f"event {req}:", 1),
                }))
        return accepted, self._evaluate_if_due()

    def _evaluate_if_due(self, *, force: bool = False) -> list[Any]:
        """Evaluate verdicts when the cadence has elapsed (or ``force``); return the changes.

        Every evaluation happens between two committed batches, so it is a stopping time of
        the stream and the e-process guarantees hold (see monitor.core.evaluate).
        """
        now = time.monotonic()
        if not self.monitor.dirty or (
            not force and now - self._last_eval < self.settings.eval_interval
        ):
            return []
        self._last_eval = now
        return list(self.monitor.evaluate())

    def _count_changes(self, changes: Sequence[Any]) -> None:
        for change in changes:
            self.metrics.state_changes_total.labels(
                benchmark=change.benchmark, kind=change_kind(change)
            ).inc()

    def evaluate_pending(self, *, force: bool = False) -> int:
        """Evaluate results left unevaluated by the cadence and store the changes; how many."""
        changes = self._evaluate_if_due(force=force)
        if changes:
            try:
                self.store.commit(results=(), changes=changes)
            except Exception:
                self._load_state()
                raise
            self._count_changes(changes)
        return len(changes)

    # -- queries ---------------------------------------------------------------------------
    def benchmarks(self) -> list[str]:
        return list(self.monitor.benchmarks())

    def ranking(self, benchmark: str) -> dict[str, Any]:
        return dict(self.monitor.ranking(benchmark))

    def stability(self, benchmark: str) -> dict[str, Any]:
        return stability_figures(self.monitor, benchmark)

    def contamination(self, benchmark: str, *, limit: int = EXCLUDED_IDS_CAP) -> dict[str, Any]:
        """Items excluded from resolution (ids sorted, at most ``limit``) and the flag counts."""
        excluded = sorted(self.monitor.excluded(benchmark))
        flags = self.monitor.config.exclude_flags
        return {
            "benchmark": benchmark,
            "exclusion": bool(flags),
            "exclude_flags": list(flags),
            "leak_suspect_items": len(self.monitor.flagged(benchmark, "leak-suspect")),
            "excluded_items": len(excluded),
            "excluded_ids": excluded[:limit],
            "truncated": len(excluded) > limit,
        }

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

    async def get_stability(request: web.Request) -> web.StreamResponse:
        bench = request.match_info["benchmark"]
        if bench not in service.benchmarks():
            return _error(404, "unknown-benchmark", f"no results for benchmark {bench!r}")
        return _json(service.stability(bench))

    async def get_contamination(request: web.Request) -> web.StreamResponse:
        bench = request.match_info["benchmark"]
        if bench not in service.benchmarks():
            return _error(404, "unknown-benchmark", f"no results for benchmark {bench!r}")
        cap = _int_param(request, "limit", EXCLUDED_IDS_CAP, lo=0, hi=100_000)
        return _json(service.contamination(bench, limit=cap))

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
    app.router.add_get("/v1/benchmarks/{benchmark:.+}/ranking", get_ranking)
    app.router.add_get("/v1/benchmarks/{benchmark:.+}/stability", get_stability)
    app.router.add_get("/v1/benchmarks/{benchmark:.+}/contamination", get_contamination)
    app.router.add_get("/v1/changes", get_changes)
    app.router.add_get("/v1/dead-letters", get_dead_letters)
    app.router.add_get("/metrics", get_metrics)
    app.router.add_get("/healthz", healthz)
    return app


# -- process ------------------------------------------------------------------------------
BackgroundTask = Callable[[EmbeddedService, asyncio.Event], Coroutine[Any, Any, None]]


async def _evaluator(service: EmbeddedService, stop: asyncio.Event) -> None:
    """Evaluate results that arrived within the cadence once no further request comes."""
    interval = max(service.settings.eval_interval, 0.05)
    while not stop.is_set():
        await asyncio.sleep(interval)
        try:
            service.evaluate_pending()
        except Exception as exc:  # storage trouble: reported, retried at the next tick
            print(f"llm-monitor: evaluation not stored: {type(exc).__name__}: {exc}",
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
        finally:
            service.close()
