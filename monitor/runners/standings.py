"""The standings of the models at the top of each board (:mod:`monitor.core.standing`), kept
by the runner host: refreshed after evaluations within a share of the process's time, with
the item at which each model settled.

A plan reads every pair of its model, so a round over M models reads M(M − 1) pairs. The cost
is bounded three ways: a round starts only when the board's state changed since the last one
(a new table version); it covers the top ``limit`` models of the ranking (the models with
per-model series, ``pair_series_limit + 1``); and the rounds of all boards share a time
budget per call, after which the next call waits long enough for the rounds to take at most
``share`` of the process's time — a 1,000-model board's round spreads over many calls instead
of holding the state for seconds. Each model's standing is the one of its last reading,
which, like every query of the monitor, reads the state as it is (evaluated or not yet).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from monitor.core import Monitor
from monitor.core.standing import SettledAt, Standing, settle, standing

#: The rounds take at most this share of the process's time.
SHARE = 0.2

#: A record that changed: (benchmark, model, the record now; None when dropped).
RecordChange = tuple[str, str, SettledAt | None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Board:
    """One benchmark's standings, records and the round in progress."""

    version: int | None = None  # the state version the last completed round started at
    queue: deque[str] | None = None  # models still to read in the round in progress
    round_version: int = -1
    seen: set[str] = field(default_factory=set)
    standings: dict[str, Standing] = field(default_factory=dict)
    records: dict[str, SettledAt] = field(default_factory=dict)


class Standings:
    """Standings and settle records of every board of one runner process.

    Not thread-safe: the host calls it with its state lock held, as it reads the monitors.
    """

    def __init__(self, limit: int, *, share: float = SHARE,
                 clock: Callable[[], float] = time.perf_counter,
                 now: Callable[[], datetime] = _utcnow) -> None:
        if limit < 0:
            raise ValueError(f"`limit` must not be negative, got {limit}")
        if not 0.0 < share <= 1.0:
            raise ValueError(f"`share` must lie in (0, 1], got {share}")
        self.limit = limit
        self.share = share
        self._clock = clock
        self._now = now
        self._boards: dict[str, _Board] = {}
        self._not_before = -float("inf")
        self._start = 0  # the board the next call begins with (none is starved)
        self.plans = 0  # plans computed so far (a measure of the cost)
        self._failures: list[str] = []

    def of(self, benchmark: str) -> Mapping[str, Standing]:
        """The standings of ``benchmark`` by model (empty before its first round)."""
        board = self._boards.get(benchmark)
        return {} if board is None else board.standings

    def current(self, monitors: Mapping[str, Monitor]) -> bool:
        """True when every board's standings are those of its state now: no round in
        progress and none due."""
        return all(self.current_on(name, mon) for name, mon in monitors.items())

    def current_on(self, benchmark: str, monitor: Monitor) -> bool:
        """True when the standings of ``benchmark`` are those of its state now."""
        board = self._boards.get(benchmark)
        if board is not None and board.queue is not None:
            return False
        if benchmark not in monitor.benchmarks():
            return True
        table = monitor.table(benchmark)
        return table is None or (board is not None and board.version == table.version)

    def take_failures(self) -> list[str]:
        """The plans that could not be read since the last call (each model is left without a
        standing until its next reading), for the runner's log."""
        out, self._failures = self._failures, []
        return out

    def records(self) -> list[tuple[str, str, SettledAt]]:
        """Every settle record, as :meth:`restore` takes them."""
        return [(b, m, r) for b, board in self._boards.items() for m, r in board.records.items()]

    def restore(self, records: Iterable[tuple[str, str, SettledAt]]) -> None:
        """Take the records kept before a restart; the next round keeps those whose model is
        still settled and drops the others."""
        for bench, model, rec in records:
            self._boards.setdefault(bench, _Board()).records[model] = rec

    def replaced(self, benchmark: str) -> None:
        """The monitor of ``benchmark`` was replaced (restored from a snapshot): its next
        round starts afresh, whatever its version (the records stay)."""
        board = self._boards.get(benchmark)
        if board is not None:
            board.version, board.queue = None, None

    def drop(self, benchmarks: Iterable[str] | None = None) -> None:
        """Forget ``benchmarks`` (all when omitted)."""
        if benchmarks is None:
            self._boards = {}
        else:
            for name in benchmarks:
                self._boards.pop(name, None)

    def refresh(self, monitors: Mapping[str, Monitor], *, budget: float) -> list[RecordChange]:
        """Read the plans of the models whose board changed, for about ``budget`` seconds (at
        least one plan when one is due); returns the records that changed."""
        start = self._clock()
        if start < self._not_before or not monitors:
            return []
        changes: list[RecordChange] = []
        names = list(monitors)
        first = self._start % len(names)
        read = 0
        for name in names[first:] + names[:first]:
            if read and self._clock() - start >= budget:
                self._start = names.index(name)
                break
            mon = monitors[name]
            board = self._boards.setdefault(name, _Board())
            if board.queue is None and not self._begin(name, mon, board):
                continue
            assert board.queue is not None
            while board.queue and not (read and self._clock() - start >= budget):
                model = board.queue.popleft()
                try:
                    changes.extend(self._read(name, mon, board, model))
                except Exception as exc:  # a face's figure must not stop the runner's loop
                    board.standings.pop(model, None)
                    self._failures.append(f"{name!r}, model {model!r}: "
                                          f"{type(exc).__name__}: {str(exc)[:200]}")
                read += 1
            if not board.queue:
                changes.extend(self._finish(name, board))
        end = self._clock()
        if read:
            # Spaced so that the rounds take at most `share` of the time, however slow a plan.
            self._not_before = end + (end - start) * (1.0 - self.share) / self.share
        return changes

    def _begin(self, name: str, mon: Monitor, board: _Board) -> bool:
        if name not in mon.benchmarks():  # a monitor created ahead of its first result
            return False
        table = mon.table(name)
        if table is None or table.version == board.version:
            return False
        board.queue = deque(table.models[i] for i in table.order[:self.limit])
        board.round_version = table.version
        board.seen = set()
        return True

    def _read(self, name: str, mon: Monitor, board: _Board, model: str) -> list[RecordChange]:
        plan = mon.plan(name, model, count=0)
        self.plans += 1
        old = board.records.get(model)
        rec = settle(old, plan, self._now())
        if rec is None:
            board.records.pop(model, None)
        else:
            board.records[model] = rec
        board.standings[model] = standing(plan, rec)
        board.seen.add(model)
        return [] if rec == old else [(name, model, rec)]

    def _finish(self, name: str, board: _Board) -> list[RecordChange]:
        """End the round: models it did not read (no longer at the top) leave the standings,
        and their records with them (a record holds only while the model is watched)."""
        board.queue = None
        board.version = board.round_version
        gone = [m for m in board.standings if m not in board.seen]
        for m in gone:
            del board.standings[m]
        dropped = [m for m in board.records if m not in board.seen]
        for m in dropped:
            del board.records[m]
        return [(name, m, None) for m in dropped]
