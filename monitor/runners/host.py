"""The runner host: what every live runner does, written once.

:class:`MonitorHost` holds one :class:`~monitor.core.Monitor` per benchmark, the Prometheus
metrics of the process (:class:`~monitor.sinks.prometheus.Metrics` plus the scrape-time
gauges), restores counters at start, decides when verdicts are evaluated (the cadence), and
is the one path of invalid input (:meth:`MonitorHost.on_invalid`). A runner adds only its
transport — how bytes arrive and how outputs leave: aiohttp + SQLite
(:mod:`monitor.runners.embedded.server`), kafka-python (:mod:`monitor.runners.kafka.worker`) or
Faust (:mod:`monitor.runners.kafka.faust_app`).
"""

from __future__ import annotations

import gc
import math
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, overload

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server

from monitor.contracts import (
    DeadLetter,
    RankingChange,
    ResolutionChange,
    dead_letter,
    read_wire_float,
)
from monitor.core import ApplyResult, CoreConfig, Monitor
from monitor.core.monitor import RankingKey, ranking_key
from monitor.decoder import Result, Results
from monitor.runners.standings import RecordChange, Standings
from monitor.sinks.prometheus import Metrics, MonitorsCollector

#: The garbage left by batches is collected at most this often (seconds).
GC_SECONDS = 60.0


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block.

    A replay allocates a hundred thousand event objects per batch and frees them by reference
    counting; the collector, triggered by the allocations, would traverse them again and again
    and took about two thirds of the decoding time (BENCHMARKS.md "Restart").
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def batch_collection() -> Iterator[None]:
    """The collector paused for a batch, and what the batch left alive frozen after it.

    A batch that creates much state (a thousand new benchmarks) would leave the collector a
    young generation of that size to traverse at its next run, in whichever thread
    allocates next — the event loop's, for 50–150 ms. Frozen objects are not traversed;
    :func:`collect_frozen` collects them (a runner calls it about once a minute).
    """
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()


def collect_frozen() -> None:
    """Collect the cyclic garbage, the objects frozen by :func:`batch_collection` included."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


Change = ResolutionChange | RankingChange

#: Outcomes the core decides; ``invalid`` is decided (and counted) by :meth:`MonitorHost.on_invalid`.
CORE_OUTCOMES = ("accepted", "duplicate", "conflict")

#: At most this many dead letters a second are logged; the rest are counted in one line.
LOG_PER_SECOND = 20


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Sources(Sequence[str]):
    """The source of each event of a batch (``"http[3]"``, ``"topic/0/1234"``), made only
    when asked for: the core names sources only in the dead letters of conflicts."""

    def __init__(self, n: int, name: Callable[[int], str]) -> None:
        self._n, self._name = n, name

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return [self._name(k) for k in range(self._n)[i]]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self._name(i % self._n)


class MonitorHost:
    """Monitors, metrics, evaluation cadence and error routing of one runner process.

    Parameters
    ----------
    config
        Options of every monitor (``Settings.core_config()``).
    eval_interval
        Verdicts are evaluated at most this often (seconds) while results stream in; the
        runner calls :meth:`evaluate_if_due` after each batch and on a timer, so results
        that arrive within an interval are evaluated once the stream pauses. 0: every batch.
    registry
        Where the metrics are created (a fresh one when omitted).
    log, clock
        Where dead letters are logged (stderr) and the monotonic clock of the cadence (and of
        the standings' share of the time).

    ``lock`` guards the monitors: the host takes it itself; a runner whose transport calls
    in from several threads (a rebalance listener, a metrics server) holds it around
    multi-step operations.
    """

    def __init__(self, config: CoreConfig, *, eval_interval: float,
                 registry: CollectorRegistry | None = None,
                 log: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if eval_interval < 0:
            raise ValueError(f"`eval_interval` must not be negative, got {eval_interval}")
        self.config = config
        self.eval_interval = eval_interval
        self.monitors: dict[str, Monitor] = {}
        self.lock = threading.RLock()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = Metrics(self.registry)
        # Each model's stop signal at the top of each board (as many models as get per-model
        # series), refreshed after evaluations: the board, the live report and /metrics read it.
        self.standings = Standings(config.pair_series_limit + 1, clock=clock)
        self.registry.register(MonitorsCollector(lambda: self.monitors.values(), config,
                                                 self.lock, standings=self.standings.of))
        self._log = log if log is not None else _stderr
        self._clock = clock
        self._last_eval = clock()
        self._log_window = (0, 0)  # (second, dead letters logged in it)
        self._unlogged = 0

    # -- monitors --------------------------------------------------------------------------
    def monitor(self, benchmark: str) -> Monitor:
        """The monitor of ``benchmark`` (created empty on first use)."""
        mon = self.monitors.get(benchmark)
        if mon is None:
            with self.lock:
                mon = self.monitors.setdefault(benchmark, Monitor(self.config))
        return mon

    def benchmarks(self) -> list[str]:
        """Benchmark names in order of first appearance."""
        return list(self.monitors)

    def put(self, benchmark: str, monitor: Monitor) -> None:
        """Install a restored monitor (e.g. from a snapshot) for ``benchmark``."""
        with self.lock:
            self.monitors[benchmark] = monitor
            self.standings.replaced(benchmark)

    def drop(self, benchmarks: Iterable[str] | None = None) -> None:
        """Forget ``benchmarks`` (all when omitted); their metrics series go with them."""
        with self.lock:
            if benchmarks is None:
                self.monitors = {}
            else:
                benchmarks = list(benchmarks)
                for name in benchmarks:
                    self.monitors.pop(name, None)
            self.standings.drop(benchmarks)

    def counters(self, benchmarks: Iterable[str] | None = None) -> dict[str, int]:
        """Totals of accepted, duplicate and conflict results over the monitors."""
        names = self.monitors if benchmarks is None else benchmarks
        out = dict.fromkeys(CORE_OUTCOMES, 0)
        with self.lock:
            for name in names:
                mon = self.monitors.get(name)
                if mon is not None:
                    for k, v in mon.counters.items():
                        out[k] += v
        return out

    # -- stepping --------------------------------------------------------------------------
    def apply(self, events: Sequence[Result], *, sources: Sequence[str] | None = None,
              index: Sequence[int] | None = None) -> ApplyResult:
        """Fold a batch into the benchmarks' monitors, without evaluating verdicts.

        Outcomes come back in the order of ``events``. Dead letters (conflicts) are numbered
        by ``index`` — the numbers the sender knows its events by (default: position in the
        batch) — and carry ``sources[i]``.
        """
        events = Results.of(events)
        num = range(len(events)) if index is None else index
        groups: dict[str, Sequence[int]] = {}
        if len(events.benchmarks) > 1:
            by: dict[str, list[int]] = {}
            for i, ev in enumerate(events):
                by.setdefault(ev.benchmark, []).append(i)
            groups.update(by)
        elif events:
            groups[events[0].benchmark] = range(len(events))
        codes = np.zeros(len(events), dtype=np.int8)
        letters: list[DeadLetter] = []
        with self.lock:
            for name, rows in groups.items():
                whole = len(groups) == 1
                batch = events if whole else Results([events[i] for i in rows])
                srcs = sources if whole or sources is None else [sources[i] for i in rows]
                result = self.monitor(name).apply(batch, sources=srcs, evaluate=False)
                if whole:
                    codes = result.codes
                else:
                    codes[np.asarray(rows, dtype=np.int64)] = result.codes
                for letter in result.dead_letters:
                    # The core numbers events inside the batch it was given.
                    k = letter.index if letter.index is not None else 0
                    n = num[rows[k]]
                    letters.append(letter if n == k else letter.model_copy(update={
                        "index": n,
                        "detail": letter.detail.replace(f"event {k}:", f"event {n}:", 1),
                    }))
        letters.sort(key=lambda d: d.index if d.index is not None else -1)
        return ApplyResult(codes=codes, dead_letters=letters, changes=[])

    @property
    def dirty(self) -> bool:
        """True when results were applied that are not yet evaluated."""
        return any(mon.dirty for mon in list(self.monitors.values()))

    @property
    def tick_seconds(self) -> float:
        """How often a runner calls :meth:`evaluate_if_due` while no batch arrives, so that
        results are evaluated within about one interval after the stream pauses."""
        return max(self.eval_interval, 0.05)

    def evaluate_if_due(self, *, force: bool = False) -> list[Change]:
        """Verdict changes of the monitors with unevaluated results, at most every interval.

        ``force`` evaluates now (start-up, shutdown). Every evaluation happens between two
        batches, so it is a stopping time of the stream and the e-process guarantees hold.
        """
        with self.lock:
            if not self.dirty:
                return []
            now = self._clock()
            if not force and now - self._last_eval < self.eval_interval:
                return []
            self._last_eval = now
            changes: list[Change] = []
            for mon in list(self.monitors.values()):
                if mon.dirty:
                    changes.extend(mon.evaluate())
            return changes

    def refresh_standings(self) -> list[RecordChange]:
        """Bring the models' standings up to the state, within a share of the time
        (:class:`~monitor.runners.standings.Standings`); returns the settle records that
        changed, for a runner that keeps them across restarts. Call it on the runner's timer,
        after :meth:`evaluate_if_due`."""
        with self.lock:
            changes = self.standings.refresh(self.monitors, budget=self.standings.share
                                             * self.tick_seconds)
            for failure in self.standings.take_failures():
                self._log(f"llm-monitor: a standing was not read: {failure}")
            return changes

    # -- metrics ---------------------------------------------------------------------------
    def observe(self, counts: Mapping[str, int] | None = None, changes: Sequence[Change] = (),
                *, lag_seconds: float | None = None) -> None:
        """Count what the runner delivered: core outcomes, change events, the batch's lag.

        Call it once the outputs are stored or sent. Only the core outcomes of ``counts``
        are counted here; invalid input was counted by :meth:`on_invalid` when rejected.
        """
        core = None if counts is None else {k: counts.get(k, 0) for k in CORE_OUTCOMES}
        if len(self.monitors) != self.metrics.benchmarks_seen:
            # A benchmark's change series exist (at 0) before its first change is counted.
            self.metrics.ensure_benchmarks(self.benchmarks())
        self.metrics.observe(core, changes, lag_seconds=lag_seconds)

    def restore_counters(self, counts: Mapping[str, int],
                         change_counts: Mapping[tuple[str, str], int] | None = None) -> None:
        """Continue the counters from durable totals (outcomes incl. ``invalid``; changes)."""
        self.metrics.restore(counts, change_counts)
        self.metrics.ensure_benchmarks(self.benchmarks())

    def serve_metrics(self, addr: str, port: int) -> Any:
        """Serve the registry on ``http://addr:port/metrics`` from a thread (0: a free port).

        Returns the server (``shutdown()`` stops it); the address is announced on stderr.
        """
        server, _ = start_http_server(port, addr=addr, registry=self.registry)
        self._log(f"llm-monitor: metrics on http://{addr}:{server.server_address[1]}/metrics")
        return server

    # -- invalid input ---------------------------------------------------------------------
    def on_invalid(self, reason: str, detail: str, payload: str, *, source: str,
                   index: int | None = None) -> DeadLetter:
        """The one path of rejected input: counted, logged with its source, a dead letter.

        ``reason`` is machine-readable (see :class:`monitor.contracts.DeadLetter`); ``source``
        says where the input came from (``topic/partition/offset``, ``http[3]``, a file
        line). The runner delivers the returned letter with the batch's other outputs.
        """
        self.metrics.observe({"invalid": 1})
        self._log_dead_letter(f"llm-monitor: dead letter {source}: {reason}: {detail[:200]}")
        return dead_letter(reason, detail, payload, source=source, index=index)

    def _log_dead_letter(self, line: str) -> None:
        second = int(self._clock())
        window, logged = self._log_window
        if second != window:
            if self._unlogged:
                self._log(f"llm-monitor: {self._unlogged} more dead letters not logged")
            window, logged, self._unlogged = second, 0, 0
        if logged < LOG_PER_SECOND:
            self._log(line)
            logged += 1
        else:
            self._unlogged += 1
        self._log_window = (window, logged)

    # -- change log reconciliation -----------------------------------------------------------
    def reconcile(self, rebuilt: Sequence[Change],
                  pairs: Mapping[tuple[str, frozenset[str]], str],
                  rankings: Mapping[str, RankingKey],
                  *, check_rankings: Iterable[str] = ()) -> list[Change]:
        """The changes a durable change log misses, given the state rebuilt from its results.

        ``rebuilt`` are the changes of the first evaluation of the rebuilt monitors: relative
        to "nothing resolved" for fresh monitors, relative to the snapshot for restored ones.
        ``pairs`` and ``rankings`` the last logged verdict of each pair (keyed by benchmark
        and model set) and the last logged ranking (models best first, resolved).

        A restored monitor emits no ranking change when its ranking still has the snapshot's
        tiers, yet the log may have moved on after the snapshot (a change logged, then undone
        by results that were committed but not yet evaluated at a crash). The benchmarks in
        ``check_rankings`` (those whose log has a ranking change after their snapshot) have
        their current ranking compared with the logged one even when none was emitted.
        """
        missing: list[Change] = []
        emitted = set()
        for ch in rebuilt:
            if isinstance(ch, ResolutionChange):
                prev = pairs.get((ch.benchmark, frozenset((ch.model_a, ch.model_b))),
                                 "unresolved")
                if prev != ch.verdict:
                    missing.append(ch.model_copy(update={"previous": prev}))
            else:
                emitted.add(ch.benchmark)
                if rankings.get(ch.benchmark) != ranking_key(ch.models, ch.resolved, ch.tiers):
                    missing.append(ch)
        for name in check_rankings:
            if name in emitted or name not in self.monitors:
                continue
            current = self.ranking_change(name)
            if (current is not None and rankings.get(name)
                    != ranking_key(current.models, current.resolved, current.tiers)):
                missing.append(current)
        # The log now ends with each benchmark's current tiers (logged before, or in
        # ``missing``): the next ranking change is emitted against them, not against a
        # snapshot's older ones.
        with self.lock:
            for name, mon in self.monitors.items():
                mon.settle_ranking(name)
        return missing

    def ranking_change(self, benchmark: str) -> RankingChange | None:
        """The current ranking of ``benchmark`` as the change event the core emits for it
        (None before it has a model)."""
        with self.lock:
            return self.monitors[benchmark].ranking_change(benchmark)

    def adopt_decisions(self, logged: Sequence[Mapping[str, Any]]) -> int:
        """Give the rebuilt monitors the decisions of a durable change log (a decision is final:
        a restart never takes one back). Returns how many changed the rebuilt state."""
        adopted = 0
        for ev in logged:
            mon = self.monitors.get(str(ev["benchmark"]))
            if mon is None:
                continue
            e_value = read_wire_float(ev.get("decided_e_value", ev.get("e_value")))
            log_e = math.log(float(e_value)) if e_value else 0.0
            ts = ev.get("decided_ts") or ev.get("ts")
            adopted += mon.adopt_decision(
                str(ev["benchmark"]), str(ev["model_a"]), str(ev["model_b"]),
                str(ev["verdict"]), n=int(ev.get("decided_n") or ev.get("n") or 0),
                log_e=log_e, ts=None if ts is None else datetime.fromisoformat(str(ts)))
        return adopted
