"""The embedded runner's service: a runner host whose every batch is committed to SQLite.

:class:`EmbeddedService` steps a :class:`~monitor.runners.host.MonitorHost` with each decoded
batch, commits the accepted results, change events and dead letters in one SQLite transaction,
and only then reports. On start the state is rebuilt from the database, so every acknowledged
result is counted exactly once across crashes. The HTTP face and the process around it are in
:mod:`monitor.runners.embedded`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from monitor.contracts import DeadLetter, ItemResult, decode_events
from monitor.core import Monitor
from monitor.runners.host import Change, MonitorHost
from monitor.runners.settings import Settings
from monitor.runners.store import SqliteStore

_REBUILD_BATCH = 100_000

#: At most this many excluded item ids are listed by the contamination route (default).
EXCLUDED_IDS_CAP = 1000


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

    def counts(self) -> dict[str, int]:
        return {"accepted": self.accepted, "duplicate": self.duplicate,
                "conflict": self.conflict, "invalid": self.invalid}


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


def stability_figures(monitor: Monitor, benchmark: str) -> dict[str, Any]:
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


class EmbeddedService:
    """The runner host + SQLite store of one embedded process."""

    def __init__(self, settings: Settings, *, registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self.store = SqliteStore(settings.db, synchronous=settings.sqlite_synchronous)
        self.host = MonitorHost(settings.core_config(), eval_interval=settings.eval_interval,
                                registry=registry)
        self.started = time.time()
        self.rebuilt = self._load_state()
        self.host.restore_counters(self.store.counters(), self.store.change_counts())

    @property
    def registry(self) -> CollectorRegistry:
        return self.host.registry

    # -- start-up --------------------------------------------------------------------------
    def _load_state(self) -> int:
        """Fresh monitors holding every stored result, folded in commit order; returns how many.

        Decisions in the change log are final and adopted first (the replay's batch boundaries
        differ from the original requests', which moves where a flag takes effect). Verdicts are
        evaluated once at the end. Change events were stored as they happened, but the last
        ones may not have been when the process died between an evaluation cadence and the
        next: the host's :meth:`~MonitorHost.reconcile` finds what the log still misses, and
        it is stored.
        """
        self.host.drop()
        n = 0
        for batch in self.store.iter_results(batch_size=_REBUILD_BATCH):
            self.host.apply(batch)
            n += len(batch)
        self.host.adopt_decisions(self.store.logged_decisions())
        pairs, rankings = self.store.last_states()
        missing = self.host.reconcile(self.host.evaluate_if_due(force=True), pairs, rankings)
        if missing:
            self.store.commit(results=(), changes=missing)
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
        """Step the host with ``valid``, persist, and only then report (durable on return)."""
        t0 = time.perf_counter() if t0 is None else t0
        letters = [self.host.on_invalid(d.reason, d.detail, d.payload, source=d.source,
                                        index=d.index) for d in invalid]
        report = IngestReport(invalid=len(letters))
        events = [ev for _, ev in valid]
        index = [i for i, _ in valid]
        changes: list[Change] = []
        accepted: list[ItemResult] = []
        try:
            if events:
                result = self.host.apply(events, sources=[f"{source}[{i}]" for i in index],
                                         index=index)
                accepted = [ev for ev, o in zip(events, result.outcomes, strict=True)
                            if o == "accepted"]
                report.accepted = len(accepted)
                report.duplicate = result.count("duplicate")
                report.conflict = len(result.dead_letters)
                letters.extend(result.dead_letters)
            changes = self.host.evaluate_if_due()
            report.change_ids = self.store.commit(
                results=accepted, changes=changes, dead_letters=letters, counts=report.counts()
            )
        except Exception:
            # The state may already hold this batch but the database does not: start over
            # from what is durable so memory never runs ahead of the log.
            self._load_state()
            raise
        self.host.observe(report.counts(), changes, lag_seconds=time.perf_counter() - t0)
        report.rejected = sorted(
            ({"index": d.index, "reason": d.reason, "detail": d.detail} for d in letters),
            key=lambda r: r["index"] if r["index"] is not None else -1,
        )
        return report

    def reject_body(self, reason: str, detail: str) -> None:
        """Log and store a request rejected before decoding (e.g. over the size limit)."""
        letter = self.host.on_invalid(reason, detail, "", source="http")
        self.store.commit(results=(), dead_letters=[letter], counts={"invalid": 1})

    def evaluate_pending(self, *, force: bool = False) -> int:
        """Evaluate results left unevaluated by the cadence and store the changes; how many."""
        changes = self.host.evaluate_if_due(force=force)
        if changes:
            try:
                self.store.commit(results=(), changes=changes)
            except Exception:
                self._load_state()
                raise
            self.host.observe(changes=changes)
        return len(changes)

    # -- queries ---------------------------------------------------------------------------
    def benchmarks(self) -> list[str]:
        return self.host.benchmarks()

    def _monitor(self, benchmark: str) -> Monitor:
        mon = self.host.monitors.get(benchmark)
        if mon is None:
            raise KeyError(f"unknown benchmark {benchmark!r}")
        return mon

    def ranking(self, benchmark: str) -> dict[str, Any]:
        return dict(self._monitor(benchmark).ranking(benchmark))

    def stability(self, benchmark: str) -> dict[str, Any]:
        return stability_figures(self._monitor(benchmark), benchmark)

    def contamination(self, benchmark: str, *, limit: int = EXCLUDED_IDS_CAP) -> dict[str, Any]:
        """Items excluded from resolution (ids sorted, at most ``limit``) and the flag counts."""
        monitor = self._monitor(benchmark)
        excluded = sorted(monitor.excluded(benchmark))
        flags = monitor.config.exclude_flags
        return {
            "benchmark": benchmark,
            "exclusion": bool(flags),
            "exclude_flags": list(flags),
            "leak_suspect_items": len(monitor.flagged(benchmark, "leak-suspect")),
            "excluded_items": len(excluded),
            "excluded_ids": excluded[:limit],
            "truncated": len(excluded) > limit,
        }

    def metrics_text(self) -> bytes:
        return generate_latest(self.host.registry)
