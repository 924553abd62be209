"""Prometheus metrics of the live monitor (names are a contract: docs/contract.md#metrics).

Three parts, all created against an injected ``CollectorRegistry``:

- :class:`Metrics` holds what only the runner knows — event outcomes (including ``invalid``,
  which never reaches the core), state changes delivered, and the processing lag;
  :meth:`Metrics.observe` is the one way they are counted (the runner host calls it).
- :class:`MonitorCollector` produces the per-pair and per-ranking gauges at scrape time from
  the monitor's current state, so a pair that stops being adjacent (or a benchmark that is
  gone) leaves no stale series behind; and the per-model stop signal from the standings the
  runner host keeps (:mod:`monitor.runners.standings`), read as they are.
- :class:`MonitorsCollector` merges those gauges over the per-benchmark monitors of a runner.

All values are in base units (items, score differences, seconds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor.contracts import RankingChange, ResolutionChange
from monitor.core import CoreConfig, Monitor
from monitor.core.records import StabilityCounts
from monitor.core.standing import Standing

#: The standings of a benchmark by model (:meth:`monitor.runners.standings.Standings.of`).
StandingsOf = Callable[[str], Mapping[str, Standing]]

#: Every metric name the monitor exports (the exposition names).
METRIC_NAMES = (
    "llm_monitor_events_total",
    "llm_monitor_pair_items",
    "llm_monitor_pair_delta",
    "llm_monitor_pair_e_value",
    "llm_monitor_pair_resolution_ratio",
    "llm_monitor_pair_resolved",
    "llm_monitor_ranking_resolved",
    "llm_monitor_ranking_unresolved_pairs",
    "llm_monitor_state_changes_total",
    "llm_monitor_processing_lag_seconds",
    "llm_monitor_model_flip_rate",
    "llm_monitor_model_flip_pairs",
    "llm_monitor_excluded_items",
    "llm_monitor_pair_e_threshold",
    "llm_monitor_ranking_tiers",
    "llm_monitor_ranking_top_resolved",
    "llm_monitor_model_rank_low",
    "llm_monitor_model_rank_high",
    "llm_monitor_model_mean",
    "llm_monitor_model_rank",
    "llm_monitor_ranking_e_threshold",
    "llm_monitor_model_settled",
    "llm_monitor_model_items",
    "llm_monitor_model_items_remaining",
    "llm_monitor_model_settled_items",
)

CHANGE_KINDS = ("resolution", "ranking")

OUTCOMES = ("accepted", "duplicate", "conflict", "invalid")

# From well under a millisecond (one small batch) to the 1 s result→metric target and beyond.
LAG_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
               10.0)

_PAIR_LABELS = ("benchmark", "model_a", "model_b")
_MODEL_LABELS = ("benchmark", "model", "kind")


def change_kind(change: ResolutionChange | RankingChange) -> str:
    """``resolution`` or ``ranking``: the ``kind`` label (and stored kind) of a change event."""
    return "ranking" if isinstance(change, RankingChange) else "resolution"


class Metrics:
    """Counters and the lag histogram of one monitor process, on an injected registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        # The exported names are a contract; the client's extra ``*_created`` series are not
        # part of it. (This switch is process-wide, and a monitor process owns its metrics.)
        disable_created_metrics()
        self.events_total = Counter(
            "llm_monitor_events_total", "Results received, by outcome.", ["outcome"],
            registry=registry,
        )
        for outcome in OUTCOMES:  # every outcome exists from the start, at 0
            self.events_total.labels(outcome=outcome)
        self.state_changes_total = Counter(
            "llm_monitor_state_changes_total",
            "Change events emitted (kind: resolution or ranking), by benchmark.",
            ["benchmark", "kind"], registry=registry,
        )
        self._benchmarks: set[str] = set()
        self.processing_lag_seconds = Histogram(
            "llm_monitor_processing_lag_seconds",
            "Seconds from receiving a batch of results to its state being applied.",
            buckets=LAG_BUCKETS, registry=registry,
        )

    @property
    def benchmarks_seen(self) -> int:
        """How many benchmarks have their state-change series."""
        return len(self._benchmarks)

    def ensure_benchmarks(self, benchmarks: Iterable[str]) -> None:
        """Create the state-change series of new benchmarks at 0, for both kinds.

        ``increase()`` needs a sample before the first change to count it; a series born at
        its first increment would hide that change.
        """
        for bench in benchmarks:
            if bench not in self._benchmarks:
                self._benchmarks.add(bench)
                for kind in CHANGE_KINDS:
                    self.state_changes_total.labels(benchmark=bench, kind=kind)

    def observe(self, counts: Mapping[str, int] | None = None,
                changes: Sequence[ResolutionChange | RankingChange] = (), *,
                lag_seconds: float | None = None) -> None:
        """Count delivered work: results per outcome, change events, one batch's lag.

        ``counts`` maps outcomes (:data:`OUTCOMES`) to numbers of results; other keys (a
        runner's own tallies, such as skipped redeliveries) are not metrics and are ignored.
        """
        if counts:
            for outcome in OUTCOMES:
                n = counts.get(outcome, 0)
                if n:
                    self.events_total.labels(outcome=outcome).inc(n)
        if changes:
            self.ensure_benchmarks({change.benchmark for change in changes})
            for change in changes:
                self.state_changes_total.labels(benchmark=change.benchmark,
                                                kind=change_kind(change)).inc()
        if lag_seconds is not None:
            self.processing_lag_seconds.observe(lag_seconds)

    def restore(self, counts: Mapping[str, int],
                change_counts: Mapping[tuple[str, str], int] | None = None) -> None:
        """Start the counters from durable totals (outcomes; changes per (benchmark, kind)).

        Counters of a restarted process continue from the state it restored instead of
        falling back to 0, so ``increase()`` over a restart sees no reset.
        """
        self.observe(counts)
        for (bench, kind), n in (change_counts or {}).items():
            self.ensure_benchmarks([bench])
            if n:
                self.state_changes_total.labels(benchmark=bench, kind=kind).inc(n)


class MonitorCollector(Collector):
    """Per-pair and per-ranking gauges built at scrape time from ``monitor``'s state.

    Per-pair series cover the adjacent pairs of each ranking (``model_a`` ranked above
    ``model_b``) unless the monitor's ``per_pair_series`` is ``"all"`` or ``which`` says so,
    at most ``pair_series_limit`` of them from the top of the ranking; per-model series the
    top ``pair_series_limit + 1`` models (a 4,500-model board exports 1,001: 4 gauges each).
    The stop-signal gauges (``llm_monitor_model_settled`` …) come from ``standings``, which
    hold the same top models; without it they have no series.
    """

    def __init__(self, monitor: Monitor, *, which: str | None = None,
                 standings: StandingsOf | None = None) -> None:
        self.monitor = monitor
        self.standings = standings
        self.which = which or monitor.config.per_pair_series
        if self.which not in ("adjacent", "all"):
            raise ValueError(f"`which` must be 'adjacent' or 'all', got {self.which!r}")

    def describe(self) -> Iterable[Metric]:
        # Names only: registering must not compute anything from the state.
        return list(self._families())

    def _families(self) -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily("llm_monitor_pair_items", "Paired items of the pair.",
                              labels=_PAIR_LABELS),
            GaugeMetricFamily("llm_monitor_pair_delta",
                              "Mean score of model_a minus model_b on the paired items.",
                              labels=_PAIR_LABELS),
            GaugeMetricFamily("llm_monitor_pair_e_value", "E_n of the pair's e-process.",
                              labels=_PAIR_LABELS),
            GaugeMetricFamily(
                "llm_monitor_pair_resolution_ratio",
                "N / N* of the pair: fixed-N (kind fixed; cluster or strata with the design "
                "effect; planning figures for one look) or anytime-valid (kind anytime).",
                labels=(*_PAIR_LABELS, "kind"),
            ),
            GaugeMetricFamily("llm_monitor_pair_resolved",
                              "1 when the pair's verdict is resolved (its anytime decision "
                              "under the benchmark's design: decided at its first crossing, "
                              "final), else 0.",
                              labels=_PAIR_LABELS),
            GaugeMetricFamily("llm_monitor_pair_e_threshold",
                              "1/γ: the threshold of the pair's e-process, from its fixed share "
                              "γ of α.", labels=_PAIR_LABELS),
            GaugeMetricFamily("llm_monitor_ranking_resolved",
                              "1 when every adjacent pair of the ranking is resolved, else 0.",
                              labels=("benchmark",)),
            GaugeMetricFamily("llm_monitor_ranking_unresolved_pairs",
                              "Adjacent pairs of the ranking not yet resolved.",
                              labels=("benchmark",)),
            GaugeMetricFamily("llm_monitor_ranking_tiers",
                              "Tiers of the ranking: groups not separated from each other.",
                              labels=("benchmark",)),
            GaugeMetricFamily("llm_monitor_ranking_top_resolved",
                              "1 when the leader is resolved above every other model, else 0.",
                              labels=("benchmark",)),
            GaugeMetricFamily("llm_monitor_model_rank_low",
                              "Best rank the model can have (anytime rank set).",
                              labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_model_rank_high",
                              "Worst rank the model can have (anytime rank set).",
                              labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_model_mean",
                              "Mean score of the model over its own items (the ranking's key).",
                              labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_model_rank",
                              "1-based position of the model in the ranking (best first).",
                              labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_ranking_e_threshold",
                              "Smallest (bound=min) and largest (bound=max) threshold 1/γ of "
                              "the e-processes of the ranking's adjacent pairs.",
                              labels=("benchmark", "bound")),
            GaugeMetricFamily(
                "llm_monitor_model_flip_rate",
                "Share of the model's items right on the original and wrong on the perturbed "
                "variant (kind: perturbation, or all pooled); absent until one is right.",
                labels=_MODEL_LABELS),
            GaugeMetricFamily("llm_monitor_model_flip_pairs",
                              "Items of the model with both an original and a perturbed result.",
                              labels=_MODEL_LABELS),
            GaugeMetricFamily("llm_monitor_excluded_items",
                              "Items excluded from resolution by their flags (e.g. leak-suspect).",
                              labels=("benchmark",)),
            GaugeMetricFamily("llm_monitor_model_settled",
                              "1 when the model's plan says stop (its pairs with every other "
                              "model are settled, or the items left are not expected to decide "
                              "the open ones, or none is left), else 0.",
                              labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_model_items",
                              "Items the model has done (that enter the verdicts).",
                              labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_model_items_remaining",
                              "Items the board's other models have that the model has not "
                              "done.", labels=("benchmark", "model")),
            GaugeMetricFamily("llm_monitor_model_settled_items",
                              "The model's items at the first reading of its plan that said "
                              "stop; absent while it says continue.",
                              labels=("benchmark", "model")),
        ]

    def collect(self) -> Iterator[Metric]:
        (items, delta, e_value, ratio, resolved, threshold, rk_resolved, rk_unresolved,
         rk_tiers, rk_top, rank_low, rank_high, model_mean, model_rank, rk_threshold, flip_rate,
         flip_pairs, excluded, settled, model_items, remaining, settled_items) = self._families()
        for bench in self.monitor.benchmarks():
            excluded.add_metric([bench], float(len(self.monitor.excluded(bench))))
            for model, s in (self.standings(bench) if self.standings else {}).items():
                labels = [bench, model]
                settled.add_metric(labels, 1.0 if s.settled else 0.0)
                model_items.add_metric(labels, float(s.items_done))
                remaining.add_metric(labels, float(s.items_remaining))
                if s.settled_at is not None:
                    settled_items.add_metric(labels, float(s.settled_at.items))
            for model, kinds in self.monitor.stability(bench).items():
                pooled = StabilityCounts.pooled(list(kinds.values()))
                for kind, c in (*kinds.items(), ("all", pooled)):
                    flip_pairs.add_metric([bench, model, kind], float(c.pairs))
                    if c.right_on_original:
                        flip_rate.add_metric([bench, model, kind], c.stat(kind).rate)
            table = self.monitor.table(bench)
            if table is None:
                continue
            rk_resolved.add_metric([bench], 1.0 if table.resolved() else 0.0)
            rk_unresolved.add_metric([bench], float(table.unresolved_pairs()))
            low, high, tiers = table.rank_sets()
            rk_tiers.add_metric([bench], float(max(tiers, default=0)))
            rk_top.add_metric([bench], 1.0 if table.top_resolved() else 0.0)
            # The models of the exported pairs: the top pair_series_limit + 1 of the ranking.
            for r, i in enumerate(table.order[:self.monitor.config.pair_series_limit + 1]):
                rank_low.add_metric([bench, table.models[i]], float(low[r]))
                rank_high.add_metric([bench, table.models[i]], float(high[r]))
                model_mean.add_metric([bench, table.models[i]], float(table.means[i]))
                model_rank.add_metric([bench, table.models[i]], float(r + 1))
            adjacent = table.adjacent()
            if adjacent:
                a, b = (np.asarray(side, dtype=np.int64) for side in zip(*adjacent, strict=True))
                thresholds = 1.0 / np.asarray(table.levels_of(a, b), dtype=np.float64)
                rk_threshold.add_metric([bench, "min"], float(thresholds.min()))
                rk_threshold.add_metric([bench, "max"], float(thresholds.max()))
            for view in self.monitor.pairs(bench, self.which,
                                           limit=self.monitor.config.pair_series_limit):
                fig = view.figures
                labels = [bench, view.model_a, view.model_b]
                items.add_metric(labels, float(fig.n))
                delta.add_metric(labels, fig.delta)
                e_value.add_metric(labels, fig.e_value)
                # The design effect's q under the benchmark's design: stratified under strata.
                grouped = "strata" if fig.group_kind == "strata" else "cluster"
                for kind, value in (("fixed", fig.q), (grouped, fig.q_grouped),
                                    ("anytime", fig.q_anytime)):
                    if value is not None:
                        ratio.add_metric([*labels, kind], value)
                # 1 for a resolved verdict only: the one the ranking route and the board show
                # (an undecidable or, later, an equivalent pair is not resolved).
                resolved.add_metric(labels, 1.0 if view.verdict.startswith("resolved:") else 0.0)
                threshold.add_metric(labels, 1.0 / fig.e_alpha)
        yield from (items, delta, e_value, ratio, resolved, threshold, rk_resolved,
                    rk_unresolved, rk_tiers, rk_top, rank_low, rank_high, model_mean,
                    model_rank, rk_threshold, flip_rate, flip_pairs, excluded, settled,
                    model_items, remaining, settled_items)


class MonitorsCollector(Collector):
    """The gauges of :class:`MonitorCollector` over several monitors (one per benchmark).

    ``monitors`` returns the current monitors; it is called under ``lock``, the lock the
    runner holds while it changes them.
    """

    def __init__(self, monitors: Callable[[], Iterable[Monitor]], config: CoreConfig,
                 lock: threading.RLock, *, standings: StandingsOf | None = None) -> None:
        self.monitors = monitors
        self.config = config
        self.lock = lock
        self.standings = standings

    def describe(self) -> Iterable[Metric]:
        return list(MonitorCollector(Monitor(self.config)).describe())

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, Metric] = {}
        with self.lock:
            for mon in list(self.monitors()):
                for fam in MonitorCollector(mon, standings=self.standings).collect():
                    have = merged.get(fam.name)
                    if have is None:
                        merged[fam.name] = fam
                    else:
                        have.samples.extend(fam.samples)
        if not merged:
            yield from self.describe()
            return
        yield from merged.values()
