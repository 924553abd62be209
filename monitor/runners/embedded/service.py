"""The embedded runner's service: a runner host whose every batch is committed to SQLite.

:class:`EmbeddedService` steps a :class:`~monitor.runners.host.MonitorHost` with each decoded
batch, commits the accepted results, change events and dead letters in one SQLite transaction,
and only then reports. On start the state is rebuilt from the database, so every acknowledged
result is counted exactly once across crashes: from the latest snapshot of each benchmark plus
the results stored after it (:meth:`EmbeddedService.snapshot_if_due` writes the snapshots).
The HTTP face and the process around it are in :mod:`monitor.runners.embedded.server`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from monitor.contracts import DeadLetter, dead_letter
from monitor.core import CoreConfig, Monitor
from monitor.core.board import Footprint
from monitor.core.monitor import ACCEPTED
from monitor.core.records import StabilityCounts
from monitor.decoder import Result, Results, decode_events
from monitor.runners.embedded.store import SqliteStore
from monitor.runners.host import GC_SECONDS, Change, MonitorHost, Sources, collect_frozen
from monitor.runners.host import batch_collection as _batch_collection
from monitor.runners.host import collector_paused as _collector_paused
from monitor.runners.settings import Settings

_REBUILD_BATCH = 100_000

T = TypeVar("T")

#: A snapshot round is not started sooner than this many times the last round's duration after
#: it ended, so rounds take at most about a tenth of the process's time however slow they are.
SNAPSHOT_SPACING = 10.0

#: After a failed snapshot round, the next is tried no sooner than this many seconds later.
SNAPSHOT_RETRY_SECONDS = 60.0


#: At most this many excluded item ids are listed by the contamination route (default).
EXCLUDED_IDS_CAP = 1000

#: The budget of the whole process: gauge name → (setting, what it counts, Footprint field).
BUDGET = {
    "models": ("max_total_models", "models", "models"),
    "items": ("max_total_items", "items", "items"),
    "cells": ("max_total_cells", "stored scores", "cells"),
    "bytes": ("max_state_bytes", "bytes of state", "nbytes"),
}


def _amount(value: int, field: str) -> str:
    return f"{value / 1e6:,.1f} MB" if field == "nbytes" else f"{value:,}"


class OverCap(Exception):
    """A request that would take the process past one of its caps; nothing of it was applied.

    ``cap`` is the setting's name, ``limit`` its value, ``status`` the HTTP answer (429 for a
    cap on what the process holds, 413 for one on the request itself).
    """

    def __init__(self, cap: str, limit: int, detail: str, *, status: int = 429) -> None:
        super().__init__(detail)
        self.cap, self.limit, self.detail, self.status = cap, limit, detail, status


@dataclass
class IngestReport:
    """What one batch did: counts per outcome, rejections with index and reason, new change ids.

    ``events`` is how many events the request held (NDJSON lines, array elements; a body
    that cannot be split into events is one): accepted + duplicate + conflict + invalid
    equals it. ``body_error`` says why a body was not decoded at all. ``rejected`` lists the
    first ``dead_letters_per_request`` rejections; ``reasons`` counts all of them by reason.
    """

    accepted: int = 0
    duplicate: int = 0
    conflict: int = 0
    invalid: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)
    change_ids: list[int] = field(default_factory=list)
    events: int = 0
    body_error: str | None = None
    reasons: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        total = self.invalid + self.conflict
        return {
            "events": self.events,
            "accepted": self.accepted, "duplicate": self.duplicate,
            "conflict": self.conflict, "invalid": self.invalid,
            "rejected": self.rejected,
            "rejected_total": total,
            "rejected_truncated": len(self.rejected) < total,
            "reasons": self.reasons,
            "changes": len(self.change_ids),
            "last_change_id": self.change_ids[-1] if self.change_ids else None,
            "body_error": self.body_error,
        }

    def counts(self) -> dict[str, int]:
        return {"accepted": self.accepted, "duplicate": self.duplicate,
                "conflict": self.conflict, "invalid": self.invalid}


def _flip_figures(kind: str, counts: StabilityCounts) -> dict[str, Any]:
    # The same Wilson interval and 10 % rule as `llm-monitor stability`, so the live figures
    # equal the offline ones for the same outcomes.
    from monitor.audit.stability import ALARM_FLIP_RATE, flip_alarm

    fs = counts.stat(kind)
    return {"kind": kind, "pairs": counts.pairs,
            "right_on_original": counts.right_on_original, "flips": counts.flips,
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
        overall = _flip_figures("all", StabilityCounts.pooled(list(kinds.values())))
        models.append({"model": model, "alarm": overall["alarm"], "overall": overall,
                       "kinds": [_flip_figures(k, c) for k, c in kinds.items()]})
    return {"benchmark": benchmark, "alarm_level": ALARM_FLIP_RATE, "confidence": 0.95,
            "models": models}


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def config_key(config: CoreConfig) -> str:
    """The monitor core options as a canonical text: a snapshot is used only under the same.

    ``per_pair_series`` and ``pair_series_limit`` are left out: they only choose the metrics
    series read at scrape time, and a loaded monitor takes the current options.
    """
    options = dataclasses.asdict(config)
    options.pop("per_pair_series")
    options.pop("pair_series_limit")
    if options["samples"] == 1:
        options.pop("samples")  # the key of snapshots taken before samples existed
    if not options["benchmarks"]:
        options.pop("benchmarks")  # likewise, before benchmarks declared their specs
    if options["design"] == "items":
        options.pop("design")  # likewise, before designs were declared
        options.pop("cluster_items")
    return json.dumps(options, sort_keys=True, separators=(",", ":"))


class EmbeddedService:
    """The runner host + SQLite store of one embedded process.

    ``clock`` (monotonic seconds) times the snapshot interval; ``log`` takes the lines about
    restarts and snapshots (stderr).
    """

    def __init__(self, settings: Settings, *, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self._log = log if log is not None else _stderr
        self._clock = clock
        self.store = SqliteStore(settings.db, synchronous=settings.sqlite_synchronous)
        self.host = MonitorHost(settings.core_config(), eval_interval=settings.eval_interval,
                                registry=registry, log=self._log)
        self._config_key = config_key(self.host.config)
        # Accepted results per benchmark since its stored snapshot, and the benchmarks whose
        # stored snapshot is usable (written or loaded under these options).
        self._unsnapshotted: collections.Counter[str] = collections.Counter()
        self._snapshotted: set[str] = set()
        self._last_snapshot = clock()
        self._snapshot_not_before = -math.inf
        self.started = time.time()
        # Dead letters stored in the current window: (window start, rows stored in it).
        self._letters_window = (clock(), 0)
        self._last_gc = clock()
        self._unstored = Counter(
            "llm_monitor_dead_letters_unstored", "Rejected events counted but not stored as "
            "dead letters (over the per-request or per-window bound)", registry=self.registry)
        self._refused = Counter(
            "llm_monitor_requests_refused", "Requests refused whole because they would go "
            "past a cap (label: the setting)", ["cap"], registry=self.registry)
        # Perturbation kinds per benchmark, read from its state on first use after a load.
        self._kinds: dict[str, set[str]] = {}
        # What each benchmark's state holds, and all of them together (the budget's figures).
        self._footprints: dict[str, Footprint] = {}
        self.held = Footprint()
        for name, (cap, what, attr) in BUDGET.items():
            Gauge(f"llm_monitor_state_{name}", f"The {what} held by the state of all "
                  f"benchmarks (budget: {cap})", registry=self.registry
                  ).set_function(self._figure(attr))
        self.rebuilt = self._load_state()
        self.host.restore_counters(self.store.counters(), self.store.change_counts())

    @property
    def registry(self) -> CollectorRegistry:
        return self.host.registry

    # -- start-up --------------------------------------------------------------------------
    def _load_state(self) -> int:
        """Monitors holding every stored result; returns how many results they hold.

        Each benchmark starts from its stored snapshot when there is a readable one taken
        under the same core options (else from nothing, with a warning when it was
        unreadable), and the results stored after it are folded in commit order (one stored
        batch decoded per call, the garbage collector paused). Decisions in the change log
        are final and adopted (the replay's batch boundaries differ from the original
        requests', which moves where a flag takes effect). Verdicts are evaluated once at the
        end. Change events were stored as they happened, but the last ones may not have been
        when the process died between an evaluation cadence and the next: the host's
        :meth:`~MonitorHost.reconcile` finds what the log still misses, and it is stored.
        """
        t0 = time.perf_counter()
        self.host.drop()
        self._kinds = {}
        after: dict[str, int] = {}
        change_ids: dict[str, int] = {}
        for snap in self.store.snapshots():
            after[snap.benchmark] = 0
            if snap.config != self._config_key:
                self._log(f"llm-monitor: the snapshot of {snap.benchmark!r} was taken under "
                          "other monitor options; replaying its results")
                self.host.monitor(snap.benchmark)  # keeps the benchmark's place in the order
                continue
            try:
                mon = Monitor.load_snapshot(snap.state, self.host.config)
                if mon.benchmarks() != [snap.benchmark]:
                    raise ValueError(f"it holds {mon.benchmarks()}")
            except Exception as exc:
                self._log(f"llm-monitor: warning: the snapshot of {snap.benchmark!r} at results "
                          f"row {snap.results_seq} cannot be read ({type(exc).__name__}: "
                          f"{str(exc)[:200]}); replaying its results from the start")
                self.host.monitor(snap.benchmark)
                continue
            self.host.put(snap.benchmark, mon)
            after[snap.benchmark] = snap.results_seq
            change_ids[snap.benchmark] = snap.change_id
        t_snap = time.perf_counter()
        self._snapshotted = set(change_ids)
        self._unsnapshotted = collections.Counter()
        replayed = 0
        with _collector_paused():
            for batch in self.store.iter_results(batch_size=_REBUILD_BATCH, after=after):
                self.host.apply(batch)
                self._count_unsnapshotted(batch)
                replayed += len(batch)
        t_tail = time.perf_counter()
        # Decisions logged before a benchmark's snapshot are in it already.
        full = len(change_ids) < len(after)
        self.host.adopt_decisions(self.store.logged_decisions(
            since=0 if full else min(change_ids.values(), default=0)))
        pairs, rankings = self.store.last_states()
        logged = self.store.last_change_ids("ranking")
        moved_on = [b for b, cid in change_ids.items() if logged.get(b, 0) > cid]
        missing = self.host.reconcile(self.host.evaluate_if_due(force=True), pairs, rankings,
                                      check_rankings=moved_on)
        if missing:
            self.store.commit(results=(), changes=missing)
        self._measure()
        # The item each settled model settled at, as taken when it happened (the replay above
        # folded the results after the snapshots in one go).
        self.host.standings.restore(self.store.settled())
        held = self.host.counters()["accepted"]
        if held:
            self._log(f"llm-monitor: restored {held} results from {self.settings.db}: "
                      f"{len(change_ids)} benchmark "
                      f"snapshot(s) in {t_snap - t0:.2f} s, {replayed} results replayed in "
                      f"{t_tail - t_snap:.2f} s, evaluated and reconciled in "
                      f"{time.perf_counter() - t_tail:.2f} s")
        return held

    def close(self) -> None:
        self.store.close()

    # -- ingest ----------------------------------------------------------------------------
    def ingest_body(self, body: bytes, *, source: str = "http") -> IngestReport:
        """Decode a request body (object, array or NDJSON) and ingest it.

        Safe to call from a thread: the decoding holds no lock, the rest holds the state lock
        (``host.lock``), so batches are applied in the order they are committed.
        """
        t0 = time.perf_counter()
        with _batch_collection():
            return self._ingest_body(body, source, t0)

    def _ingest_body(self, body: bytes, source: str, t0: float) -> IngestReport:
        keep = self.settings.dead_letters_per_request
        decoded = decode_events(body, source=source, keep=keep)
        if decoded.events > self.settings.max_batch_events:
            self._refuse(OverCap("max_batch_events", self.settings.max_batch_events,
                                 f"the request holds {decoded.events} events; send at most "
                                 f"{self.settings.max_batch_events} per request", status=413))
        unkept = dict(decoded.reasons)
        for letter in decoded.invalid:
            unkept[letter.reason] -= 1
        with self.host.lock:
            self.check_caps(decoded.results)
            report = self._ingest(decoded.results, decoded.index, decoded.invalid,
                                  source=source, t0=t0,
                                  unkept={r: n for r, n in unkept.items() if n},
                                  lines=decoded.lines, text=decoded.text)
        report.events, report.body_error = decoded.events, decoded.body_error
        return report

    def ingest(
        self,
        valid: Sequence[tuple[int, Result]],
        invalid: Sequence[DeadLetter] = (),
        *,
        source: str,
        t0: float | None = None,
        unkept: dict[str, int] | None = None,
        lines: Sequence[bytes] | None = None,
    ) -> IngestReport:
        """Step the host with ``valid``, persist, and only then report (durable on return).

        ``unkept`` counts, by reason, invalid events of the request beyond ``invalid`` (whose
        dead letters were not built): they are counted like the others, not stored.
        ``lines`` (:attr:`monitor.decoder.Decoded.lines`, by the indices of ``valid``): the
        JSON text of each event, stored as it came.
        """
        return self._ingest(Results([ev for _, ev in valid]), [i for i, _ in valid], invalid,
                            source=source, t0=t0, unkept=unkept, lines=lines)

    def _ingest(self, events: Results, index: list[int] | None, invalid: Sequence[DeadLetter],
                *, source: str, t0: float | None, unkept: dict[str, int] | None,
                lines: Sequence[bytes] | None, text: bytes | None = None) -> IngestReport:
        """:meth:`ingest` of ``events`` numbered ``index`` in their request (None: 0, 1, …);
        ``text``: the NDJSON text whose lines are ``events`` (stored as it came when every
        one is accepted)."""
        t0 = time.perf_counter() if t0 is None else t0
        letters = [self.host.on_invalid(d.reason, d.detail, d.payload, source=d.source,
                                        index=d.index) for d in invalid]
        reasons: collections.Counter[str] = collections.Counter(d.reason for d in letters)
        if unkept:
            reasons.update(unkept)
            self.host.metrics.observe({"invalid": sum(unkept.values())})
        report = IngestReport(invalid=reasons.total(), events=len(events) + reasons.total())
        num: Sequence[int] = range(len(events)) if index is None else index
        # every event of the request, in order
        whole = bool(num) and num[-1] == len(num) - 1
        changes: list[Change] = []
        accepted: Sequence[Result] = []
        raw: Sequence[bytes] | None = None
        self.host.lock.acquire()
        try:
            if events:
                result = self.host.apply(events, sources=Sources(
                    len(num), lambda k: f"{source}[{num[k]}]"), index=index)
                taken = result.codes == ACCEPTED
                n_taken = int(np.count_nonzero(taken))
                if whole and n_taken == len(events):
                    accepted = events
                    if text is None:
                        raw = lines if lines is None or len(lines) == len(events) else [
                            lines[i] for i in num]
                else:
                    text = None
                    keep = np.flatnonzero(taken).tolist()
                    accepted = [events[k] for k in keep]
                    if lines is not None:
                        raw = [lines[num[k]] for k in keep]
                # A result sent again with the score it conflicted with is a conflict again,
                # as the Kafka worker counts it: the board still holds another score, and a
                # producer posting the file a second time must hear so (not `duplicate`).
                conflicts = result.dead_letters
                report.accepted = len(accepted)
                report.duplicate = result.count("duplicate")
                report.conflict = len(conflicts)
                reasons.update(d.reason for d in conflicts)
                letters.extend(conflicts)
            letters.sort(key=lambda d: d.index if d.index is not None else -1)
            del letters[self.settings.dead_letters_per_request:]
            stored = self._bounded(letters, reasons.total(), source)
            changes = self.host.evaluate_if_due()
            report.change_ids = self.store.commit(
                results=accepted, changes=changes, dead_letters=stored, counts=report.counts(),
                raw=raw, text=text)
            self._count_unsnapshotted(accepted)
            self._measure(events.benchmarks if events else ())
        except Exception:
            # The state may already hold this batch but the database does not: start over
            # from what is durable so memory never runs ahead of the log.
            self._load_state()
            raise
        finally:
            self.host.lock.release()
        self.host.observe(report.counts(), changes, lag_seconds=time.perf_counter() - t0)
        report.rejected = [{"index": d.index, "reason": d.reason, "detail": d.detail}
                           for d in letters]
        report.reasons = dict(reasons)
        return report

    def _count_unsnapshotted(self, accepted: Sequence[Result]) -> None:
        """Count the results each benchmark holds beyond its last snapshot."""
        name = accepted.benchmark if isinstance(accepted, Results) else None
        if name is not None:
            self._unsnapshotted[name] += len(accepted)
        else:
            self._unsnapshotted.update([ev.benchmark for ev in accepted])

    def _refuse(self, over: OverCap) -> None:
        self._refused.labels(over.cap).inc()
        raise over

    def check_caps(self, events: Sequence[Result]) -> None:
        """Raise :class:`OverCap` when applying ``events`` would take the process past
        ``max_benchmarks``, ``max_models_per_benchmark``, ``max_clusters_per_benchmark`` or
        ``max_perturbation_kinds`` (names already held never count twice)."""
        s = self.settings
        names: dict[str, tuple[set[str], set[str], set[str]]] = {}
        batch = Results.of(events)
        first = batch.benchmark
        if first is not None and (batch.defaults or {ev.variant for ev in batch} == {"original"}):
            # one benchmark's original results (the common case): set by set
            clusters = {c for c in set(batch.clusters) if c is not None}
            names[first] = (set(batch.models), clusters, set())
            batch = Results()
        for ev in batch:
            got = names.get(ev.benchmark)
            if got is None:
                got = names[ev.benchmark] = (set(), set(), set())
            got[0].add(ev.model)
            if ev.cluster is not None:
                got[1].add(ev.cluster)
            if ev.variant != "original":
                got[2].add(ev.variant)
        held = self.host.monitors
        new = [b for b in names if b not in held]
        if len(held) + len(new) > s.max_benchmarks:
            self._refuse(OverCap("max_benchmarks", s.max_benchmarks,
                                 f"{len(new)} new benchmark(s) (first {new[0][:80]!r}) over the "
                                 f"cap of {s.max_benchmarks} benchmarks ({len(held)} held)"))
        for bench, (models, clusters, kinds) in names.items():
            board = held[bench]._benches.get(bench) if bench in held else None
            have_models = board.model_col if board is not None else {}
            have_clusters = board.cluster_id if board is not None else {}
            have_kinds = self._kinds_of(bench)
            for cap, limit, have, want in (
                    ("max_models_per_benchmark", s.max_models_per_benchmark, have_models, models),
                    ("max_clusters_per_benchmark", s.max_clusters_per_benchmark, have_clusters,
                     clusters),
                    ("max_perturbation_kinds", s.max_perturbation_kinds, have_kinds, kinds)):
                extra = [x for x in want if x not in have]
                if len(have) + len(extra) > limit:
                    what = cap.removeprefix("max_").replace("_", " ")
                    self._refuse(OverCap(cap, limit, f"benchmark {bench[:80]!r}: {len(extra)} "
                                         f"new (first {extra[0][:80]!r}) over the cap of {limit} "
                                         f"{what} ({len(have)} held)"))
        self._check_budget(Results.of(events))
        for bench, (_, _, kinds) in names.items():
            if kinds:
                self._kinds_of(bench).update(kinds)

    def _figure(self, attr: str) -> Callable[[], float]:
        return lambda: float(getattr(self.held, attr))

    def _measure(self, benchmarks: Iterable[str] | None = None) -> None:
        """Update the footprint of ``benchmarks`` (all when None) and the total held."""
        monitors = self.host.monitors
        if benchmarks is None:
            self._footprints = {}
            benchmarks = list(monitors)
        for name in benchmarks:
            if name in monitors:
                self._footprints[name] = monitors[name].footprint()
        self.held = sum(self._footprints.values(), Footprint())

    def _after(self, events: Results, *, exact: bool) -> Footprint:
        """The footprint of all benchmarks if ``events`` were applied."""
        groups = events.by_benchmark()
        total = self.held
        for name, batch in groups.items():
            mon = self.host.monitors.get(name) or Monitor(self.host.config)
            total += (mon.footprint(mon.growth(batch, exact=exact))
                      - self._footprints.get(name, Footprint()))
        return total

    def _check_budget(self, events: Results) -> None:
        """Raise :class:`OverCap` when applying ``events`` would take the state of all
        benchmarks together past ``max_total_models``, ``max_total_items``,
        ``max_total_cells`` or ``max_state_bytes``. A cheap upper bound clears most requests;
        one whose bound passes a budget is counted exactly. Only growth is refused: what is
        held is kept, even over a budget lowered since."""
        if not events:
            return
        now = self.held
        for exact in (False, True):
            after = self._after(events, exact=exact)
            over = [w for w, (cap, _, attr) in BUDGET.items()
                    if getattr(after, attr) > max(getattr(self.settings, cap), getattr(now, attr))]
            if not over:
                return
        cap, what, attr = BUDGET[over[0]]
        limit = getattr(self.settings, cap)
        self._refuse(OverCap(cap, limit, f"the request would take the {what} held by all "
                             f"benchmarks to {_amount(getattr(after, attr), attr)}, over the "
                             f"budget of {_amount(limit, attr)} ({cap}; "
                             f"{_amount(getattr(now, attr), attr)} held)"))

    def _kinds_of(self, bench: str) -> set[str]:
        kinds = self._kinds.get(bench)
        if kinds is None:
            mon = self.host.monitors.get(bench)
            board = mon._benches.get(bench) if mon is not None else None
            kinds = self._kinds[bench] = ({k for k, _, _ in board.perturbed}
                                          if board is not None else set())
        return kinds

    def _bounded(self, letters: list[DeadLetter], total: int, source: str) -> list[DeadLetter]:
        """The dead letters of a request to store: ``letters`` (its first rejections) as far
        as the window's budget allows, plus one row summarising the ``total`` - stored others.

        The rest are counted in ``llm_monitor_dead_letters_unstored_total`` and not stored.
        """
        now = self._clock()
        start, used = self._letters_window
        if now - start >= self.settings.dead_letter_window:
            start, used = now, 0
        budget = max(self.settings.dead_letters_per_window - used, 0)
        stored = letters[:budget]
        left = total - len(stored)
        if left and len(stored) < budget:
            first = letters[len(stored)] if len(stored) < len(letters) else letters[-1]
            stored.append(dead_letter(
                first.reason, f"{left} more rejected events of this request not stored "
                f"(at most {self.settings.dead_letters_per_request} per request, "
                f"{self.settings.dead_letters_per_window} per {self.settings.dead_letter_window:g} s)",
                "", source=source))
        if left:
            self._unstored.inc(left)
        self._letters_window = (start, used + len(stored))
        return stored

    def reject_body(self, reason: str, detail: str) -> None:
        """Log and store a request rejected before decoding (e.g. over the size limit)."""
        letter = self.host.on_invalid(reason, detail, "", source="http")
        with self.host.lock:
            self.store.commit(results=(), dead_letters=self._bounded([letter], 1, "http"),
                              counts={"invalid": 1})

    def count_refused(self, cap: str) -> None:
        """Count a request refused by the transport (a timeout, no upload slot)."""
        self._refused.labels(cap).inc()

    def count_connections(self, count: Callable[[], int]) -> None:
        """Export ``count()``, the open HTTP connections, as ``llm_monitor_http_connections``."""
        Gauge("llm_monitor_http_connections", "HTTP connections open now (counted against "
              "max_connections)", registry=self.registry).set_function(count)

    def locked(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``read(*args, **kwargs)`` with the state lock held: a read from another thread sees
        no batch half applied and no uncommitted row."""
        with self.host.lock:
            return read(*args, **kwargs)

    def evaluate_pending(self, *, force: bool = False) -> int:
        """Evaluate results left unevaluated by the cadence and store the changes; how many."""
        with self.host.lock:
            changes = self.host.evaluate_if_due(force=force)
            if changes:
                try:
                    self.store.commit(results=(), changes=changes)
                except Exception:
                    self._load_state()
                    raise
                self.host.observe(changes=changes)
        return len(changes)

    def refresh_standings(self) -> int:
        """Bring the models' standings up to the state (within the host's share of
        the time) and keep the settle records that changed; how many changed."""
        with self.host.lock:
            changes = self.host.refresh_standings()
            self.store.write_settled(changes)
        return len(changes)

    # -- snapshots -------------------------------------------------------------------------
    @property
    def snapshots_on(self) -> bool:
        """False when both ``snapshot_every`` and ``snapshot_interval`` are 0."""
        return bool(self.settings.snapshot_every or self.settings.snapshot_interval)

    def snapshot_due(self) -> bool:
        """True when results arrived since the last snapshot round and the settings say a
        round is due (``snapshot_every`` results or ``snapshot_interval`` seconds)."""
        pending = sum(self._unsnapshotted.values())
        if not pending:
            return False
        now = self._clock()
        if now < self._snapshot_not_before:
            return False
        every, interval = self.settings.snapshot_every, self.settings.snapshot_interval
        return bool((every and pending >= every)
                    or (interval and now - self._last_snapshot >= interval))

    def snapshot_if_due(self, *, force: bool = False) -> bool:
        """Store a snapshot round when one is due (``force``: whenever results arrived since
        the last one, e.g. at shutdown); returns whether one was written.

        Call it between batches, when every result and change the monitors hold is committed
        (as the runner does after each evaluation tick): the snapshots say "the state as of
        the last stored results row", and a restart replays only the rows after it.
        """
        if not self.snapshots_on:
            return False
        with self.host.lock:
            return self._snapshot_if_due(force)

    def collect_garbage(self, *, every: float = GC_SECONDS) -> bool:
        """Collect the cyclic garbage of the batches (frozen after each, see
        ``_batch_collection``) when ``every`` seconds passed since the last time."""
        now = self._clock()
        if now - self._last_gc < every:
            return False
        self._last_gc = now
        collect_frozen()
        return True

    def _snapshot_if_due(self, force: bool) -> bool:
        if not (sum(self._unsnapshotted.values()) if force else self.snapshot_due()):
            return False
        t0 = time.perf_counter()
        try:
            self.snapshot()
        except Exception:
            took = time.perf_counter() - t0
            self._snapshot_not_before = self._clock() + max(SNAPSHOT_SPACING * took,
                                                            SNAPSHOT_RETRY_SECONDS)
            raise
        return True

    def snapshot(self) -> int:
        """Store one snapshot round now; returns the bytes written.

        Benchmarks with results since their stored snapshot (or without one) are dumped; the
        others keep theirs, moved to the new watermark. One SQLite transaction: a crash in
        the middle leaves the previous round.
        """
        t0 = time.perf_counter()
        with self.host.lock:
            names = self.host.benchmarks()
            dump = [b for b in names if self._unsnapshotted[b] or b not in self._snapshotted]
            states = {b: self.host.monitors[b].dump_snapshot() for b in dump}
            seq = self.store.last_seq()
            self.store.write_snapshots(
                states, results_seq=seq, change_id=self.store.last_change_id(),
                positions={b: i for i, b in enumerate(names)}, config=self._config_key,
                restamp=[b for b in names if b not in states])
        took = time.perf_counter() - t0
        size = sum(len(v) for v in states.values())
        self._snapshotted.update(dump)
        self._unsnapshotted.clear()
        self._last_snapshot = self._clock()
        self._snapshot_not_before = self._last_snapshot + SNAPSHOT_SPACING * took
        self._log(f"llm-monitor: snapshot at results row {seq}: {len(dump)} of {len(names)} "
                  f"benchmark(s), {size} bytes, in {took:.2f} s")
        return size

    # -- queries ---------------------------------------------------------------------------
    def benchmarks(self) -> list[str]:
        return self.host.benchmarks()

    def _monitor(self, benchmark: str) -> Monitor:
        mon = self.host.monitors.get(benchmark)
        if mon is None:
            raise KeyError(f"unknown benchmark {benchmark!r}")
        return mon

    def ranking(self, benchmark: str) -> dict[str, Any]:
        """The ranking route: :meth:`monitor.core.Monitor.ranking` as JSON, with each model's
        ``standing`` (its stop signal, :class:`monitor.core.standing.Standing`; None for a
        model below the top the standings cover, or before its first reading), and
        ``standings``: whether they follow the state now (``current``) and how many
        models from the top they cover (``models``)."""
        mon = self._monitor(benchmark)
        out = mon.ranking(benchmark).to_json()
        book = self.host.standings
        standings = book.of(benchmark)
        out["models"] = [{**m, "standing": (standings[m["model"]].to_json()
                                            if m["model"] in standings else None)}
                         for m in out["models"]]
        # Whether they follow the state now (a round over a large board takes a while).
        out["standings"] = {"current": book.current_on(benchmark, mon), "models": book.limit}
        return out

    def stability(self, benchmark: str) -> dict[str, Any]:
        return stability_figures(self._monitor(benchmark), benchmark)

    def plan(self, benchmark: str, model: str, *, against: list[str] | None = None,
             top: int | None = None, budget: int | None = None,
             count: int = 100) -> dict[str, Any]:
        """The stop signal of ``model`` on ``benchmark`` (:meth:`monitor.core.Monitor.plan`);
        KeyError names an unknown model of ``against``."""
        return self._monitor(benchmark).plan(benchmark, model, against=against, top=top,
                                             budget=budget, count=count).as_dict()

    def pairs(self, benchmark: str, *, offset: int, limit: int, model: str | None = None,
              other: str | None = None) -> dict[str, Any]:
        """A page of the benchmark's pairs (:meth:`monitor.core.Monitor.pair_page`)."""
        return self._monitor(benchmark).pair_page(benchmark, offset=offset, limit=limit,
                                                  model=model, other=other).to_json()

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
