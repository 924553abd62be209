"""The engine-agnostic live monitor: idempotent ingest, pairing, verdicts and rankings.

``Monitor.apply(events)`` folds a batch of ``ItemResult`` events into per-benchmark state and
returns per-event outcomes plus the change events the batch produced. It does no I/O and
holds no clock of its own beyond the injected ``now``; the runners (embedded HTTP + SQLite,
Faust) store events and deliver outputs.

Semantics
---------
- Identity of a result is (benchmark, variant, item_id, model, sample); ``run_id`` is not
  part of it. The same score again is a ``duplicate`` (no change); a different score is a
  ``conflict`` (a DeadLetter with reason ``conflict``; state untouched), and so is a sample
  index outside 0 … K − 1, a result whose ``k`` differs from its benchmark's K, or a perturbed
  variant's sample ≠ 0.
- A benchmark's K is fixed when its first result arrives: declared by the settings
  (``CoreConfig.benchmarks``), else by that result's ``k``, else ``CoreConfig.samples``
  (:meth:`CoreConfig.spec`); one monitor holds benchmarks of different K.
- With K > 1 samples per (item, model), an ``original`` cell enters the state once, with
  the mean of its K samples, when its K-th sample arrives (docs/live-core.md, "Repeated
  samples"); until then its samples wait in ``BenchmarkState.Y``.
- Only variant ``original`` pairs for resolution; ``perturbed:<kind>`` results are kept for
  stability figures: for a model with an original and a perturbed result on the same item,
  a *flip* is right on the original (score ≥ 0.5) and wrong on the perturbed one.
- An item's cluster is the ``cluster`` of the first ``original`` result that names the item
  (later values are ignored).
- Items flagged with one of ``CoreConfig.exclude_flags`` by an accepted result (any variant
  or model) are excluded from resolution from the end of that batch on; flags of
  duplicates and conflicts are ignored, since those change nothing.
- Verdicts are evaluated once per batch (see :mod:`monitor.core.evaluate`); a
  ``ResolutionChange`` is emitted for every pair of the family readers follow (the adjacent
  pairs of the ranking; every pair with ``family="all"``) whose verdict differs from the
  last one emitted for it, and a ``RankingChange`` when the ranking's tiers or resolved flag
  change. Other pairs' decisions stay queryable and are emitted when they enter the family. The same events in the same order give the same final statistics in any
  batching (exactly for scores on a dyadic grid such as 0/1; up to float rounding else).

Over 400 lines on purpose: ``Monitor`` is the core's whole public surface (ingest, evaluation,
decisions adopted from a log, snapshots, queries) and reads best as one class; the statistics
(``monitor.stats``), the sequential pass (``core.paths``), the tables (``core.table``) and the
snapshots (``core.snapshot``) live in their own modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.contracts import DeadLetter, RankingChange, ResolutionChange, dead_letter
from monitor.core.board import BenchmarkState, Footprint, Growth
from monitor.core.changes import ranking_change, resolution_change
from monitor.core.config import BenchmarkSpec, CoreConfig
from monitor.core.evaluate import evaluate
from monitor.core.paths import exclude_rows, ingest
from monitor.core.plan import NEXT_ITEMS, Plan, build_plan
from monitor.core.records import (
    AnytimeRule,
    FixedNFamily,
    PairPage,
    RankedModel,
    Ranking,
    StabilityCounts,
)
from monitor.core.snapshot import bench_from_snapshot, bench_to_snapshot, pack, unpack
from monitor.core.table import ASSUMPTIONS, GUARANTEE, PairTable, PairView, verdict_text
from monitor.decoder import Result, Results
from monitor.stats.cluster_sequential import ClusterPaths
from monitor.stats.samples import cell_means
from monitor.stats.sequential import PairPaths

Outcome = Literal["accepted", "duplicate", "conflict"]
#: The outcomes of an event, in the order of their codes (:attr:`ApplyResult.codes`).
OUTCOMES: tuple[Outcome, ...] = ("accepted", "duplicate", "conflict")
_OUTCOMES = np.array(OUTCOMES, dtype=object)
_CODE: dict[str, int] = {o: k for k, o in enumerate(OUTCOMES)}
ACCEPTED, DUPLICATE, CONFLICT = range(3)
Change = ResolutionChange | RankingChange


@dataclass(frozen=True)
class ApplyResult:
    """What one batch did: an outcome per event (in order), conflicts and change events.

    ``codes`` holds each event's outcome as its index in :data:`OUTCOMES` (int8);
    :attr:`outcomes` spells them out when asked.
    """

    codes: NDArray[np.int8]
    dead_letters: list[DeadLetter]
    changes: list[Change]

    @property
    def outcomes(self) -> list[Outcome]:
        """Each event's outcome, in order."""
        outcomes: list[Outcome] = _OUTCOMES[self.codes].tolist()
        return outcomes

    def count(self, outcome: Outcome) -> int:
        """Number of events of the batch with this outcome."""
        return int(np.count_nonzero(self.codes == _CODE[outcome]))


@dataclass
class Counters:
    """Totals over the monitor's life."""

    accepted: int = 0
    duplicate: int = 0
    conflict: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"accepted": self.accepted, "duplicate": self.duplicate, "conflict": self.conflict}


@dataclass
class _Pending:
    index: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    # (item_id, model, kind) of perturbed results accepted in this batch
    perturbed: list[tuple[str, str, str]] = field(default_factory=list)
    flagged: list[tuple[int, str, Sequence[str]]] = field(default_factory=list)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Monitor:
    """Pairing state machine over per-benchmark score matrices; no I/O.

    Examples
    --------
    >>> from monitor.contracts import ItemResult
    >>> mon = Monitor(CoreConfig())
    >>> ev = [ItemResult(benchmark="b", item_id=str(i), model=m, score=float(s))
    ...       for i in range(3) for m, s in (("x", 1), ("y", 0))]
    >>> res = mon.apply(ev)
    >>> res.outcomes[:2], mon.ranking("b").models[0].model
    (['accepted', 'accepted'], 'x')
    """

    def __init__(self, config: CoreConfig | None = None, *,
                 now: Callable[[], datetime] = _utcnow) -> None:
        self.config = config or CoreConfig()
        self._now = now
        self._benches: dict[str, BenchmarkState] = {}
        self._counters = Counters()
        self._next_change_id = 1
        self._exclude = frozenset(self.config.exclude_flags)
        self._dirty: dict[str, None] = {}  # insertion-ordered set of benchmarks to evaluate

    # -- ingest --------------------------------------------------------------------------
    def apply(self, events: Sequence[Result], *,
              sources: Sequence[str] | None = None, evaluate: bool = True) -> ApplyResult:
        """Fold a batch of events; see the module docstring for the semantics.

        ``sources`` (one per event, e.g. ``"http[3]"`` or ``"topic/0/1234"``) only label the
        conflict dead letters. With ``evaluate=False`` the verdicts are not re-evaluated
        (the touched benchmarks are marked dirty; call :meth:`evaluate` later). Each
        evaluation is a stopping time of the stream, so a runner may evaluate on a cadence
        (say every 250 ms under load) instead of after every request; the change events then
        describe the state at those evaluation points.
        """
        events = Results.of(events)
        # Each event's outcome code (−1 until decided): the fold decides the new cells,
        # the samples and perturbed variants are decided as they are read.
        codes = np.full(len(events), -1, dtype=np.int8)
        pending = self._plain(events)
        by_bench: dict[str, _Pending] = {}
        benches = self._benches
        for i, ev in enumerate(events if pending is None else ()):
            st = benches.get(ev.benchmark)
            if st is None:
                st = benches[ev.benchmark] = self._new_state(ev.benchmark, ev.k)
            pend = by_bench.get(ev.benchmark)
            if pend is None:
                pend = by_bench[ev.benchmark] = _Pending()
            if ev.k is not None and ev.k != st.samples:
                codes[i] = CONFLICT
            elif ev.variant == "original":
                r = st.item_row.get(ev.item_id)
                if r is None:
                    r = st.row_of(ev.item_id, ev.cluster)
                c = st.model_col.get(ev.model)
                if c is None:
                    c = st.col_of(ev.model)
                if st.Y is None and ev.sample == 0:
                    pend.index.append(i)
                    pend.rows.append(r)
                    pend.cols.append(c)
                    pend.scores.append(ev.score)
                else:
                    o = _take_sample(st, pend, i, ev, r, c)
                    if o is not None:
                        codes[i] = _CODE[o]
                if ev.flags:
                    pend.flagged.append((i, ev.item_id, ev.flags))
            else:
                codes[i] = _CODE[self._perturbed(st, pend, ev)]
                if ev.flags and codes[i] == ACCEPTED:
                    pend.flagged.append((-1, ev.item_id, ev.flags))

        pending = pending if pending is not None else by_bench
        for name, pend in pending.items():
            self._fold(benches[name], pend, codes)

        dead = [self._conflict(events[i], i, sources)
                for i in np.flatnonzero(codes == CONFLICT).tolist()]
        self._counters.accepted += int(np.count_nonzero(codes == ACCEPTED))
        self._counters.duplicate += int(np.count_nonzero(codes == DUPLICATE))
        self._counters.conflict += len(dead)

        for name in pending:
            self._dirty.setdefault(name, None)
            benches[name].changed()
        changes = self.evaluate() if evaluate else []
        return ApplyResult(codes=codes, dead_letters=dead, changes=changes)

    def _plain(self, events: Results) -> dict[str, _Pending] | None:
        """The pending cells of a batch of one benchmark's unflagged original results of one
        sample (the common case), read column by column; None for any other batch. Rows and
        columns are created in event order, as the loop of :meth:`apply` creates them."""
        if not events or not events.plain:
            return None
        name = events[0].benchmark
        st = self._benches.get(name)
        if st is None:
            if self.config.spec(name).samples != 1:
                return None
            st = self._benches[name] = self._new_state(name, None)
        elif st.Y is not None:
            return None
        items, models = events.items, events.models
        rows = list(map(st.item_row.get, items))
        cols = list(map(st.model_col.get, models))
        if None in rows:
            clusters = events.clusters
            for j, r in enumerate(rows):
                if r is None:
                    rows[j] = st.row_of(items[j], clusters[j])
        if None in cols:
            for j, c in enumerate(cols):
                if c is None:
                    cols[j] = st.col_of(models[j])
        return {name: _Pending(index=range(len(events)), rows=rows,  # type: ignore[arg-type]
                               cols=cols,  # type: ignore[arg-type]  # no None left
                               scores=events.scores)}

    def _new_state(self, name: str, k: int | None) -> BenchmarkState:
        """The state of a benchmark first named by a result declaring ``k`` (or none)."""
        spec = self.config.spec(name, k=k)
        return BenchmarkState(name, spec, declared="settings" if self.config.declared(
            name) else "result" if k is not None else "default")

    def evaluate(self) -> list[Change]:
        """Re-evaluate verdicts and rankings of the benchmarks touched since the last call."""
        changes: list[Change] = []
        for name in self._dirty:
            changes.extend(self._reevaluate(self._benches[name]))
        self._dirty.clear()
        return changes

    @property
    def dirty(self) -> bool:
        """True when results were applied that are not yet evaluated."""
        return bool(self._dirty)

    def _perturbed(self, st: BenchmarkState, pend: _Pending, ev: Result) -> Outcome:
        if ev.sample != 0:
            return "conflict"  # perturbed variants take one answer per (item, model)
        key = (ev.variant, ev.item_id, ev.model)
        old = st.perturbed.get(key)
        if old is None:
            st.perturbed[key] = ev.score
            pend.perturbed.append((ev.item_id, ev.model, ev.variant))
            return "accepted"
        return "duplicate" if old == ev.score else "conflict"

    def _fold(self, st: BenchmarkState, pend: _Pending, codes: NDArray[np.int8]) -> None:
        idx = (np.arange(len(pend.index)) if isinstance(pend.index, range)  # the whole batch
               else np.asarray(pend.index, dtype=np.int64))
        rows = np.asarray(pend.rows, dtype=np.int64)
        cols = np.asarray(pend.cols, dtype=np.int64)
        scores = np.asarray(pend.scores, dtype=np.float64)
        accepted = np.zeros(idx.size, dtype=bool)
        if idx.size:
            current = st.X[rows, cols]
            existing = ~np.isnan(current)
            if not existing.any() and _distinct_cells(st.X, rows, cols):
                accepted[:] = True  # new cells, each once (the common case): all accepted
                codes[idx] = ACCEPTED
            else:
                key = rows * st.X.shape[1] + cols
                # Within the batch, the first result for an empty cell is accepted and later
                # ones for the same cell are compared with it.
                order = np.argsort(key, kind="stable")
                ks = key[order]
                starts = np.ones(ks.size, dtype=bool)
                starts[1:] = ks[1:] != ks[:-1]
                first_pos = order[np.maximum.accumulate(np.where(starts, np.arange(ks.size), 0))]
                first_of = np.empty_like(first_pos)
                first_of[order] = first_pos
                is_first = first_of == np.arange(idx.size)
                reference = np.where(existing, current, scores[first_of])
                accepted = ~existing & is_first
                same = scores == reference
                codes[idx] = np.where(accepted, ACCEPTED, np.where(same, DUPLICATE, CONFLICT))

        newly_excluded = self._flags(st, pend, codes)
        acc_rows, acc_cols, acc_scores = rows[accepted], cols[accepted], scores[accepted]
        if newly_excluded.size:
            # Excluded items leave the pair sums from the end of the batch on (decisions
            # already taken stay); the batch's own results on them never enter.
            exclude_rows(st, newly_excluded)
        if acc_rows.size:
            decided = ingest(st, acc_rows, acc_cols, acc_scores, alpha=self.config.alpha,
                             planned_models=self.config.planned_models)
            st.stamp(decided, self._now())
        st.count_batch_stability(pend.perturbed, acc_rows, acc_cols)

    def _flags(self, st: BenchmarkState, pend: _Pending, codes: NDArray[np.int8]) -> np.ndarray:
        newly: list[int] = []
        for i, item_id, flags in pend.flagged:
            if i >= 0 and codes[i] != ACCEPTED:
                continue
            for flag in flags:
                st.flagged.setdefault(flag, set()).add(item_id)
                if flag in self._exclude and item_id not in st.excluded:
                    st.excluded.add(item_id)
                    r = st.item_row.get(item_id)
                    if r is not None and not st.excluded_rows[r]:
                        newly.append(r)
        return np.asarray(newly, dtype=np.int64)

    def _conflict(self, ev: Result, i: int, sources: Sequence[str] | None) -> DeadLetter:
        st = self._benches[ev.benchmark]
        cell = f"event {i}: item {ev.item_id!r} of model {ev.model!r} on {ev.benchmark!r}"
        if ev.variant != "original" and ev.sample != 0:
            detail = (f"{cell} ({ev.variant}): a perturbed variant takes one answer per item "
                      f"and model (sample 0); got sample {ev.sample}")
        elif ev.k is not None and ev.k != st.samples:
            detail = (f"{cell}: the result states k = {ev.k}, but {ev.benchmark!r} takes "
                      f"{st.samples} sample(s) per item and model, {_declared(st)}")
        elif ev.variant == "original" and ev.sample >= st.samples:
            detail = (f"{cell}: sample {ev.sample} is outside 0…{st.samples - 1}: "
                      f"{ev.benchmark!r} takes {st.samples} sample(s) per item and model, "
                      f"{_declared(st)}")
        else:
            if ev.variant != "original":
                had = st.perturbed[(ev.variant, ev.item_id, ev.model)]
            else:
                r, c = st.item_row[ev.item_id], st.model_col[ev.model]
                had = float(st.X[r, c] if st.Y is None else st.Y[r, c, ev.sample])
            sample = f", sample {ev.sample}" if st.Y is not None else ""
            detail = (f"{cell} ({ev.variant}{sample}) already has score {had!r}; "
                      f"got {ev.score!r}")
        source = sources[i] if sources is not None else f"batch[{i}]"
        return dead_letter("conflict", detail, ev.model_dump_json(), source=source, index=i,
                           ts=self._now())

    def _current(self, st: BenchmarkState) -> PairTable | None:
        # Queries see the current state even between evaluations; the verdicts they show are
        # not emitted here — the next evaluate() emits changes against the last emitted ones.
        if st.table is None or st.table_stale:
            st.table = evaluate(st, self.config)
            st.table_stale = False
        return st.table

    def _reevaluate(self, st: BenchmarkState) -> list[Change]:
        table = st.table if (st.table is not None and not st.table_stale) else evaluate(
            st, self.config)
        k = len(table.models)
        # Changes for the pairs readers follow (the family's: the adjacent pairs of the
        # ranking, or all pairs), against the verdict last emitted for each; the other
        # pairs' decisions stay queryable and surface when they enter the family.
        changed: list[tuple[int, int]]
        if self.config.family == "all":
            changed = [(int(a), int(b)) for a, b in np.argwhere(np.triu(st.codes[:k, :k] != table.code, 1))]
        else:
            changed = [(a, b) for a, b in table.adjacent()
                       if st.codes[a, b] != table.code[a, b]]
        rank = {m: p for p, m in enumerate(table.order)}
        far = len(table.models)
        pairs = []
        for a, b in changed:
            ra, rb = rank.get(a, far), rank.get(b, far)
            if (ra, table.models[a]) > (rb, table.models[b]):
                a, b = b, a
                ra, rb = rb, ra
            pairs.append((ra, rb, a, b))
        pairs.sort()
        now = self._now()
        out: list[Change] = []
        # One kernel call for every changed pair (the intervals need root finding).
        views = table.views([(a, b) for _, _, a, b in pairs])
        for (_, _, a, b), view in zip(pairs, views, strict=True):
            old = int(st.codes[a, b])
            out.append(resolution_change(
                view, change_id=self._take_id(), benchmark=st.name, ts=now,
                previous=verdict_text(old, table.models[a], table.models[b]),
            ))
            st.codes[a, b] = table.code[a, b]
            st.codes[b, a] = table.code[b, a]
        st.table = table
        st.table_stale = False
        _, _, tiers = table.rank_sets()
        ranking = (tuple(table.models[i] for i in table.order), table.resolved(), tuple(tiers))
        # A RankingChange when the tiers (which models are separated from which), the
        # resolved flag or the leader's separation change — not when tied models swap places
        # inside a tier, which is noise by definition.
        if _tier_groups(ranking) != _tier_groups(st.last_ranking):
            st.last_ranking = ranking
            out.append(ranking_change(table, change_id=self._take_id(), benchmark=st.name,
                                      ts=now))
        return out

    def ranking_change(self, benchmark: str) -> RankingChange | None:
        """The current ranking of ``benchmark`` as the change event the core emits for it
        (change id 0; None before it has a ranked model)."""
        table = self._current(self._state(benchmark))
        if table is None or not table.order:
            return None
        return ranking_change(table, change_id=0, benchmark=benchmark, ts=self._now())

    def _take_id(self) -> int:
        cid = self._next_change_id
        self._next_change_id += 1
        return cid

    def settle_ranking(self, benchmark: str) -> None:
        """Take the current ranking as the last one emitted (after a restart, once the change
        log holds it): the next RankingChange is emitted against it."""
        st = self._state(benchmark)
        table = self._current(st)
        if table is None:
            return
        _, _, tiers = table.rank_sets()
        st.last_ranking = (tuple(table.models[i] for i in table.order), table.resolved(),
                           tuple(tiers))

    def adopt_decision(self, benchmark: str, model_a: str, model_b: str, verdict: str, *,
                       n: int, log_e: float, ts: datetime | None = None) -> bool:
        """Restore a decision taken before a restart (read from a durable change log).

        A decision is final: the rebuilt state takes the logged one even where its own replay
        of the stored results (in other batch boundaries, which move where a flag takes
        effect) would have decided differently or not yet. Returns whether it changed anything;
        the next evaluation emits no change for it if the log already has it.
        """
        st = self._benches.get(benchmark)
        if st is None or model_a not in st.model_col or model_b not in st.model_col:
            return False
        a, b = st.model_col[model_a], st.model_col[model_b]
        winner = verdict.removeprefix("resolved:")
        if verdict != "equivalent" and (not verdict.startswith("resolved:")
                                        or winner not in (model_a, model_b)):
            raise ValueError(f"`verdict` must be resolved:{model_a}, resolved:{model_b} or "
                             f"equivalent, got {verdict!r}")
        lo, hi = min(a, b), max(a, b)
        code = 0 if verdict == "equivalent" else 1 if st.models[lo] == winner else -1
        equal = int(verdict == "equivalent")
        flat = lo * st.cap + hi
        # Sampled clusters: the verdict is the clustered decision; else the item-level one.
        target: ClusterPaths | PairPaths
        if st.cpaths is not None:
            p = hi * (hi - 1) // 2 + lo
            st.cpaths = st.cpaths.grown(p + 1, len(st.clusters))
            target, at = st.cpaths, p
        else:
            target, at = st.paths, flat
        if target.decided[at] == code and target.equivalent[at] == equal:
            if ts is not None and st.decided_time(lo, hi) != ts:
                st.stamp(np.asarray([flat]), ts)  # the logged time of a decision taken again
            return False
        target.decided[at] = code
        target.equivalent[at] = equal
        target.decided_n[at] = n
        target.decided_log_e[at] = log_e
        if st.cpaths is not None:
            st.cpaths.decided_obs[at] = st.cpaths.n_obs[at]
        st.stamp(np.asarray([flat]), ts or self._now())
        st.changed()
        self._dirty.setdefault(benchmark, None)
        return True

    # -- what the state holds ------------------------------------------------------------
    def footprint(self, growth: Mapping[str, Growth] | None = None) -> Footprint:
        """Models, items, stored scores (accepted results) and bytes of every benchmark, after
        ``growth`` (per benchmark, :meth:`growth`) when given: what a batch would make of the
        state, before it is applied."""
        growth = growth or {}
        total = Footprint(cells=self._counters.accepted + sum(g.cells for g in growth.values()))
        for name, st in self._benches.items():
            total += st.footprint(growth.get(name))
        for name, g in growth.items():
            if name not in self._benches:  # a benchmark the batch would start
                total += self._new_state(name, g.k).footprint(g)
        return total

    def growth(self, events: Sequence[Result], *, exact: bool = True) -> dict[str, Growth]:
        """What applying ``events`` would add to each of their benchmarks (nothing is changed).

        Items and models are counted exactly either way (a set of each batch's names).
        ``exact=False`` bounds the rest from above at no cost per event — every event a new
        stored score, every perturbed one a new perturbed result, the first score other than
        0/1 — and ``exact=True`` counts them as :meth:`apply` would accept them (one pass
        over the events in Python: for a batch near a limit).
        """
        return {name: self._growth(batch, self._benches.get(name), exact=exact)
                for name, batch in Results.of(events).by_benchmark().items()}

    def _growth(self, batch: Results, st: BenchmarkState | None, *, exact: bool) -> Growth:
        # K of the benchmark: its own, or what its first result would declare
        declared = next((ev.k for ev in batch if ev.k is not None), None) if not batch.plain \
            else None
        samples = st.samples if st is not None else self.config.spec(
            batch[0].benchmark, k=declared).samples
        plain = batch.plain
        originals = batch if plain else Results([ev for ev in batch if ev.variant == "original"])
        item_row = st.item_row if st is not None else {}
        model_col = st.model_col if st is not None else {}
        items = set(originals.items)
        models = set(originals.models)
        new_items = len(items) - len(items & item_row.keys())
        new_models = len(models) - len(models & model_col.keys())
        binary = st is None or st.binary
        if not exact:
            return Growth(items=new_items, models=new_models, cells=len(batch),
                          perturbed=len(batch) - len(originals), nonbinary=binary, k=declared)
        # new stored scores: (item, model) → {sample: score}, the first of the batch for each
        cells: dict[tuple[str, str], dict[int, float]] = {}
        perturbed: set[tuple[str, str, str]] = set()
        for ev in batch:
            if ev.variant != "original":
                key = (ev.variant, ev.item_id, ev.model)
                if ev.sample == 0 and (st is None or key not in st.perturbed):
                    perturbed.add(key)
                continue
            if ev.sample >= samples or (samples == 1 and ev.sample != 0):
                continue  # a conflict: never stored
            r, c = item_row.get(ev.item_id), model_col.get(ev.model)
            if r is not None and c is not None and st is not None:
                held = st.X[r, c] if st.Y is None else st.Y[r, c, ev.sample]
                if held == held:  # not NaN: a duplicate or a conflict
                    continue
            cells.setdefault((ev.item_id, ev.model), {}).setdefault(ev.sample, ev.score)
        nonbinary = False
        for (item, model), new in cells.items():
            if samples == 1:
                score = new[0]
            else:  # the cell enters the sums with the mean of its K samples, once complete
                r, c = item_row.get(item), model_col.get(model)
                y = (st.Y[r, c].copy() if st is not None and st.Y is not None
                     and r is not None and c is not None else np.full(samples, np.nan))
                y[list(new)] = list(new.values())
                if np.isnan(y).any():
                    continue
                score = float(cell_means(y[None, :])[0])
            if score not in (0.0, 1.0):
                nonbinary = True
                break
        stored = sum(len(new) for new in cells.values())
        return Growth(items=new_items, models=new_models, cells=stored + len(perturbed),
                      perturbed=len(perturbed), nonbinary=binary and nonbinary, k=declared)

    # -- snapshots -----------------------------------------------------------------------
    def dump_snapshot(self) -> bytes:
        """The whole state as bytes (for a store or a state topic; :mod:`monitor.core.snapshot`).

        ``load_snapshot(dump_snapshot())`` continues exactly as the original would, and the
        same state always gives the same bytes.
        """
        header: dict[str, Any] = {"version": 2, "counters": self._counters.as_dict(),
                                  "next_change_id": self._next_change_id, "benchmarks": []}
        arrays: dict[str, np.ndarray] = {}
        for i, (name, st) in enumerate(self._benches.items()):
            head, arr = bench_to_snapshot(st)
            header["benchmarks"].append({"name": name, "dirty": name in self._dirty, **head})
            arrays.update({f"{i}/{key}": value for key, value in arr.items()})
        return pack(header, arrays)

    @classmethod
    def load_snapshot(cls, data: bytes, config: CoreConfig | None = None, *,
                      now: Callable[[], datetime] = _utcnow) -> Monitor:
        """Rebuild a monitor from :meth:`dump_snapshot` bytes (ValueError if they are not)."""
        header, arrays = unpack(data)
        if header.get("version") != 2:
            raise ValueError(f"snapshot has unknown version {header.get('version')!r}")
        mon = cls(config, now=now)
        mon._counters = Counters(**header["counters"])
        mon._next_change_id = int(header["next_change_id"])
        for i, b in enumerate(header["benchmarks"]):
            prefix = f"{i}/"
            mine = {key[len(prefix):]: value for key, value in arrays.items()
                    if key.startswith(prefix)}
            st = bench_from_snapshot(b["name"], b, mine)
            declared = mon.config.benchmarks.get(b["name"])
            if declared is not None and st.samples != declared.samples:
                raise ValueError(
                    f"benchmark {b['name']!r} holds {st.samples} sample(s) per item and model, "
                    f"but the settings declare samples = {declared.samples}: a benchmark's K "
                    "is fixed by its first result; declare the stored K or use a new benchmark "
                    "name")
            spec = declared or mon.config.spec(b["name"], k=st.samples)
            kept = (st.spec.design, st.spec.cluster_items, st.spec.margin)
            if kept != (spec.design, spec.cluster_items, spec.margin):
                raise ValueError(
                    f"benchmark {b['name']!r} was kept under design {st.spec.design!r} "
                    f"(cluster_items {st.spec.cluster_items}, margin {st.spec.margin}), but "
                    f"the settings now say {spec.design!r} (cluster_items "
                    f"{spec.cluster_items}, margin {spec.margin}): a benchmark's design is "
                    "fixed when its first result arrives; declare the stored one or use a new "
                    "benchmark name")
            mon._benches[b["name"]] = st
            if b["dirty"]:
                mon._dirty[b["name"]] = None
        return mon

    # -- queries -------------------------------------------------------------------------
    @property
    def counters(self) -> dict[str, int]:
        """Totals of accepted, duplicate and conflict results."""
        return self._counters.as_dict()

    def benchmarks(self) -> list[str]:
        """Benchmark names in order of first appearance."""
        return list(self._benches)

    def spec(self, benchmark: str) -> BenchmarkSpec:
        """What ``benchmark`` declared once: its K and its design."""
        return self._state(benchmark).spec

    def table(self, benchmark: str) -> PairTable | None:
        """The pair statistics of ``benchmark`` after the last batch (None before any)."""
        return self._current(self._state(benchmark))

    def ranking(self, benchmark: str) -> Ranking:
        """Models (best first) with mean and n, and the adjacent pairs with their figures."""
        st = self._state(benchmark)
        t = self._current(st)
        if t is None:
            return Ranking(benchmark=benchmark)
        low, high, tiers = t.rank_sets()
        spec = st.spec
        return Ranking(
            benchmark=benchmark, resolved=t.resolved(), unresolved_pairs=t.unresolved_pairs(),
            # The verdicts: one guarantee for the board's life (docs/anytime.md), under the
            # benchmark's declared design, which states what it assumes.
            design=spec.design,
            anytime=AnytimeRule(
                alpha=self.config.alpha, planned_models=self.config.planned_models,
                design=spec.design, assumption=ASSUMPTIONS[spec.design], statement=GUARANTEE,
                cluster_items=spec.cluster_items if spec.design == "clusters" else None),
            # q, q_cluster and MDE: a snapshot at the current n, corrected for this family;
            # not valid under continuous monitoring (the anytime verdicts are).
            fixed_n=FixedNFamily(family=self.config.family, m=t.m, alpha=t.family_alpha,
                                 correction=self.config.correction),
            binary=t.binary_board, excluded_items=len(st.excluded),
            top_resolved=t.top_resolved(), tiers=max(tiers, default=0),
            models=tuple(RankedModel(model=t.models[i], mean=float(t.means[i]),
                                     n=int(t.counts[i]), rank=r + 1, rank_low=low[r],
                                     rank_high=high[r], tier=tiers[r])
                         for r, i in enumerate(t.order)),
            pairs=tuple(t.views(t.adjacent())))

    def pairs(self, benchmark: str, which: str = "adjacent", *,
              limit: int | None = None) -> list[PairView]:
        """The adjacent pairs (``which="adjacent"``) or all pairs (``"all"``), higher ranked
        first (the first ``limit``), with their verdicts and kernel figures."""
        if which not in ("adjacent", "all"):
            raise ValueError(f"`which` must be 'adjacent' or 'all', got {which!r}")
        t = self._current(self._state(benchmark))
        if t is None:
            return []
        pairs = t.adjacent()[:limit] if which == "adjacent" else t.all_pairs(limit)
        return t.views(pairs)

    def pair_page(self, benchmark: str, *, offset: int = 0, limit: int = 100,
                  model: str | None = None, other: str | None = None) -> PairPage:
        """A page of every pair of ``benchmark`` in ranking order (pair i of the ranked
        models against each below it), the pairs of one ``model``, or the one pair ``model``
        against ``other``; each with its verdict and figures. ``total`` counts the pairs the
        page is taken from. Unknown models raise KeyError."""
        t = self._current(self._state(benchmark))
        if t is None:
            return PairPage(benchmark=benchmark, total=0, offset=offset, limit=limit)
        col = {name: i for i, name in enumerate(t.models)}
        for name in (model, other):
            if name is not None and (name not in col or col[name] not in t.order):
                raise KeyError(f"no ranked model {name!r} in benchmark {benchmark!r}")
        if model is not None and other is not None:
            a, b = col[model], col[other]
            rank = {m: r for r, m in enumerate(t.order)}
            chosen = [(a, b) if rank[a] < rank[b] else (b, a)] if a != b else []
            total = len(chosen)
        elif model is not None:
            every = t.pairs_of(col[model])
            total, chosen = len(every), every[offset:offset + limit]
        else:
            k = len(t.order)
            total, chosen = k * (k - 1) // 2, t.pair_page(offset, limit)
        return PairPage(benchmark=benchmark, total=total, offset=offset, limit=limit,
                        pairs=tuple(t.views(chosen)))

    def plan(self, benchmark: str, model: str, *, against: Sequence[str] | None = None,
             top: int | None = None, budget: int | None = None,
             count: int = NEXT_ITEMS) -> Plan:
        """``continue`` or ``stop`` for ``model``'s evaluation on ``benchmark``, with the pairs
        settled and open, the items done, and the next items (:mod:`monitor.core.plan`); a
        model with no result yet starts at the first items. Unknown benchmarks raise KeyError,
        and so does an unknown model named in ``against``."""
        st = self._state(benchmark)
        table = self._current(st)
        if table is None:
            raise KeyError(f"no results in benchmark {benchmark!r}")
        rows, k = len(st.item_ids), st.k
        present = ~np.isnan(st.X[:rows, :k])
        present[st.excluded_rows[:rows]] = False
        return build_plan(benchmark, model, table=table, present=present,
                          item_ids=st.item_ids, keys=st.order_keys(), margin=st.spec.margin,
                          against=against, top=top, budget=budget, count=count)

    def scores(self, benchmark: str) -> dict[tuple[str, str], float]:
        """Every stored ``original`` score of ``benchmark`` by (item_id, model): with K samples
        per (item, model), the mean of each complete cell's samples."""
        st = self._state(benchmark)
        x = st.X[:len(st.item_ids), :st.k]
        rr, cc = np.nonzero(~np.isnan(x))
        return {(st.item_ids[r], st.models[c]): v
                for r, c, v in zip(rr.tolist(), cc.tolist(), x[rr, cc].tolist(), strict=True)}

    def score_matrix(self, benchmark: str
                     ) -> tuple[list[str], list[str], np.ndarray, list[str | None]]:
        """A copy of the scores that enter the verdicts: (item ids in order of first arrival,
        models in order of arrival, the items × models ``original`` scores with NaN where
        absent, each item's cluster or None), items excluded from resolution left out."""
        st = self._state(benchmark)
        n = len(st.item_ids)
        keep = np.flatnonzero(~st.excluded_rows[:n])
        return ([st.item_ids[r] for r in keep.tolist()], list(st.models),
                st.X[keep, :st.k].copy(), [st.clusters[g] for g in st.group[keep].tolist()])

    def flags(self, benchmark: str) -> dict[str, set[str]]:
        """Item ids by flag, over the accepted results of ``benchmark`` (excluded or not)."""
        return {f: set(items) for f, items in self._state(benchmark).flagged.items()}

    def excluded(self, benchmark: str) -> set[str]:
        """Item ids excluded from resolution by their flags."""
        return set(self._state(benchmark).excluded)

    def flagged(self, benchmark: str, flag: str) -> set[str]:
        """Item ids that carried ``flag`` on an accepted result (excluded or not)."""
        return set(self._state(benchmark).flagged.get(flag, ()))

    def stability(self, benchmark: str) -> dict[str, dict[str, StabilityCounts]]:
        """Per model and perturbation kind: paired (original, perturbed) items, flips, and
        the paired items right on the original (the flip rate's denominator).

        Stability counts every item, excluded from resolution or not: a leaked item that
        flips is evidence too.
        """
        st = self._state(benchmark)
        return {m: {k: StabilityCounts(pairs=v[0], flips=v[1], right_on_original=v[2])
                    for k, v in sorted(kinds.items())}
                for m, kinds in sorted(st.stability.items())}

    def _state(self, benchmark: str) -> BenchmarkState:
        st = self._benches.get(benchmark)
        if st is None:
            raise KeyError(f"unknown benchmark {benchmark!r}")
        return st


def _distinct_cells(X: NDArray[np.float64], rows: NDArray[np.int64], cols: NDArray[np.int64]
                    ) -> bool:
    """True when no cell (rows[i], cols[i]) comes twice; the cells are empty (NaN) and stay so.

    Each cell is written its position and read back: a cell named twice keeps the later
    position, so the earlier one reads another (three passes, no sort).
    """
    at = np.arange(rows.size, dtype=np.float64)
    X[rows, cols] = at
    distinct = bool(np.array_equal(X[rows, cols], at))
    X[rows, cols] = np.nan
    return distinct


def _take_sample(st: BenchmarkState, pend: _Pending, i: int, ev: Result, r: int,
                 c: int) -> Outcome | None:
    """One sample of an ``original`` result on a board of K samples per (item, model): kept
    in ``st.Y``; the sample completing its cell joins the batch's new cells with the cell's
    mean (its outcome is the fold's: ``accepted``), and None is returned for it."""
    if st.Y is None or ev.sample >= st.samples:
        return "conflict"
    y = st.Y[r, c]
    old = y[ev.sample]
    if not np.isnan(old):
        return "duplicate" if old == ev.score else "conflict"
    y[ev.sample] = ev.score
    if np.isnan(y).any():
        return "accepted"
    pend.index.append(i)
    pend.rows.append(r)
    pend.cols.append(c)
    pend.scores.append(float(cell_means(y[None, :])[0]))
    return None


def _declared(st: BenchmarkState) -> str:
    """How ``st``'s K was fixed, with how to declare another for a new benchmark."""
    how = {"settings": "as the settings declare (benchmarks.<name>.samples)",
           "result": "as its first result declared (field k)",
           }.get(st.declared, "the monitor's default (--samples)")
    return (f"{how}; a benchmark's K is fixed by its first result: declare K on it (field "
            "k), in the settings (benchmarks.<name>.samples), or with --samples")


RankingKey = tuple[tuple[frozenset[str], ...], bool]


def ranking_key(models: Sequence[str], resolved: bool, tiers: Sequence[int] | None
                ) -> RankingKey:
    """What a RankingChange says: the tiers as sets of models (top first) and the resolved
    flag — not the order of tied models inside a tier, which is noise by definition. Without
    tiers (events logged before tiers existed) the order itself."""
    return _tier_groups((tuple(models), resolved, tuple(tiers or ())))


def _tier_groups(ranking: tuple[tuple[str, ...], bool, tuple[int, ...]]
                 ) -> RankingKey:
    models, resolved, tiers = ranking
    groups: dict[int, set[str]] = {}
    for model, tier in zip(models, tiers, strict=False):
        groups.setdefault(tier, set()).add(model)
    if len(tiers) < len(models):  # an older snapshot without tiers: compare the order
        return tuple(frozenset([m]) for m in models), resolved
    return tuple(frozenset(groups[t]) for t in sorted(groups)), resolved
