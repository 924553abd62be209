"""The runner host: evaluation cadence, counter restore, invalid routing and metrics."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.contracts import ItemResult, RankingChange, ResolutionChange
from monitor.core import CoreConfig
from monitor.core.monitor import ranking_key
from monitor.runners.host import LOG_PER_SECOND, MonitorHost
from monitor.sinks.prometheus import change_kind


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ev(item: int, model: str, score: float, bench: str = "b") -> ItemResult:
    return ItemResult(benchmark=bench, item_id=str(item), model=model, score=score)


def resolving(start: int, n: int, bench: str = "b") -> list[ItemResult]:
    """``a`` right and ``z`` wrong on n items: resolves a > z after a few dozen."""
    return [e for i in range(start, start + n) for e in (ev(i, "a", 1.0, bench),
                                                         ev(i, "z", 0.0, bench))]


def host(interval: float = 1.0) -> tuple[MonitorHost, Clock, list[str]]:
    clock, lines = Clock(), list[str]()
    # Two planned models: the one pair spends α/2, so a few dozen items decide it.
    h = MonitorHost(CoreConfig(planned_models=2), eval_interval=interval,
                    registry=CollectorRegistry(),
                    log=lines.append, clock=clock)
    return h, clock, lines


def samples(h: MonitorHost, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(h.registry).decode()):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def events_total(h: MonitorHost) -> dict[str, float]:
    return {dict(k)["outcome"]: v for k, v in samples(h, "llm_monitor_events_total").items()}


def test_cadence_evaluates_at_most_once_per_interval_and_after_a_pause() -> None:
    h, clock, _ = host(interval=1.0)
    h.apply(resolving(0, 60))
    assert h.dirty
    assert h.evaluate_if_due() == []  # within the interval since start
    clock.now += 1.0
    changes = h.evaluate_if_due()
    assert [change_kind(c) for c in changes] == ["resolution", "ranking"]
    assert not h.dirty
    # A new batch right after the evaluation waits for the interval ...
    h.apply(resolving(60, 1))
    clock.now += 0.5
    assert h.evaluate_if_due() == [] and h.dirty
    # ... and is evaluated once the interval has passed (the stream paused).
    clock.now += 0.5
    h.evaluate_if_due()
    assert not h.dirty
    # Nothing new: nothing to evaluate; the first batch after a pause is evaluated at once.
    clock.now += 5.0
    assert h.evaluate_if_due() == []
    h.apply(resolving(61, 1))
    h.evaluate_if_due()
    assert not h.dirty


def test_forced_evaluation_ignores_the_interval() -> None:
    h, _, _ = host(interval=60.0)
    h.apply(resolving(0, 60))
    assert h.evaluate_if_due() == []
    assert len(h.evaluate_if_due(force=True)) == 2


def test_zero_interval_evaluates_every_batch() -> None:
    h, _, _ = host(interval=0.0)
    h.apply(resolving(0, 60))
    assert len(h.evaluate_if_due()) == 2


def test_apply_keeps_batch_order_and_numbers_conflicts_by_the_callers_index() -> None:
    h, _, _ = host()
    h.apply([ev(0, "a", 1.0, "x"), ev(0, "a", 1.0, "y")])
    batch = [ev(1, "a", 0.0, "x"), ev(0, "a", 0.0, "y"), ev(0, "a", 1.0, "x"),
             ev(2, "a", 1.0, "y")]
    res = h.apply(batch, sources=[f"http[{i}]" for i in (10, 11, 12, 13)], index=[10, 11, 12, 13])
    assert res.outcomes == ["accepted", "conflict", "duplicate", "accepted"]
    (letter,) = res.dead_letters
    assert (letter.reason, letter.index, letter.source) == ("conflict", 11, "http[11]")
    assert letter.detail.startswith("event 11:")
    assert h.benchmarks() == ["x", "y"]
    assert h.counters() == {"accepted": 4, "duplicate": 1, "conflict": 1}
    assert h.counters(["y"]) == {"accepted": 2, "duplicate": 0, "conflict": 1}


def test_on_invalid_counts_logs_and_returns_a_dead_letter() -> None:
    h, _, lines = host()
    letter = h.on_invalid("schema", "field 'score': too large", '{"score": 7}',
                          source="llm-monitor.results/2/41", index=3)
    assert (letter.reason, letter.source, letter.index) == ("schema",
                                                           "llm-monitor.results/2/41", 3)
    assert letter.payload == '{"score": 7}'
    assert events_total(h)["invalid"] == 1.0
    assert lines == ["llm-monitor: dead letter llm-monitor.results/2/41: schema: "
                     "field 'score': too large"]
    # observe() never counts invalid input a second time.
    h.observe({"accepted": 2, "invalid": 1})
    assert events_total(h) == {"accepted": 2.0, "duplicate": 0.0, "conflict": 0.0,
                               "invalid": 1.0}


def test_dead_letter_log_is_rate_limited_but_every_letter_is_counted() -> None:
    h, clock, lines = host()
    for i in range(LOG_PER_SECOND + 5):
        h.on_invalid("invalid-json", "not JSON", "x", source=f"http[{i}]")
    assert len(lines) == LOG_PER_SECOND
    clock.now += 1.0
    h.on_invalid("invalid-json", "not JSON", "x", source="http[99]")
    assert lines[LOG_PER_SECOND] == "llm-monitor: 5 more dead letters not logged"
    assert lines[-1].startswith("llm-monitor: dead letter http[99]")
    assert events_total(h)["invalid"] == LOG_PER_SECOND + 6


def test_observe_counts_outcomes_changes_and_lag() -> None:
    h, _, _ = host(interval=0.0)
    res = h.apply(resolving(0, 60))
    changes = h.evaluate_if_due()
    h.observe({o: res.count(o) for o in ("accepted", "duplicate", "conflict")}, changes,
              lag_seconds=0.003)
    assert events_total(h)["accepted"] == 120.0
    kinds = {(dict(k)["benchmark"], dict(k)["kind"]): v
             for k, v in samples(h, "llm_monitor_state_changes_total").items()}
    assert kinds == {("b", "resolution"): 1.0, ("b", "ranking"): 1.0}
    assert samples(h, "llm_monitor_processing_lag_seconds_count") == {(): 1.0}
    # Per-pair gauges come from the host's monitors at scrape time.
    items = samples(h, "llm_monitor_pair_items")
    assert items == {(("benchmark", "b"), ("model_a", "a"), ("model_b", "z")): 60.0}


def test_state_change_series_exist_before_the_first_change() -> None:
    h, _, _ = host(interval=60.0)
    res = h.apply(resolving(0, 2, bench="new"))
    h.observe({"accepted": res.count("accepted")})  # no evaluation yet
    kinds = {dict(k)["kind"]: v for k, v in samples(h, "llm_monitor_state_changes_total").items()}
    assert kinds == {"resolution": 0.0, "ranking": 0.0}


def test_restore_counters_continues_from_durable_totals() -> None:
    h, _, _ = host()
    h.apply(resolving(0, 3))
    h.restore_counters({"accepted": 6, "duplicate": 2, "conflict": 1, "invalid": 4},
                       {("b", "ranking"): 3})
    assert events_total(h) == {"accepted": 6.0, "duplicate": 2.0, "conflict": 1.0,
                               "invalid": 4.0}
    kinds = {dict(k)["kind"]: v for k, v in samples(h, "llm_monitor_state_changes_total").items()}
    assert kinds == {"resolution": 0.0, "ranking": 3.0}


def test_drop_removes_monitors_and_their_series() -> None:
    h, _, _ = host(interval=0.0)
    h.apply(resolving(0, 5, "x") + resolving(0, 5, "y"))
    h.drop(["x"])
    assert h.benchmarks() == ["y"]
    benches = {dict(k)["benchmark"] for k in samples(h, "llm_monitor_pair_items")}
    assert benches == {"y"}
    h.drop()
    assert h.benchmarks() == [] and samples(h, "llm_monitor_pair_items") == {}


def test_reconcile_finds_what_the_change_log_misses() -> None:
    h, _, _ = host(interval=0.0)
    h.apply(resolving(0, 60))
    rebuilt = h.evaluate_if_due()
    # Nothing logged yet: both changes are missing.
    missing = h.reconcile(rebuilt, {}, {})
    assert [type(c) for c in missing] == [ResolutionChange, RankingChange]
    # The log already ends in this state: nothing is missing.
    pairs = {("b", frozenset(("a", "z"))): "resolved:a"}
    ranking = next(c for c in rebuilt if isinstance(c, RankingChange))
    rankings = {"b": ranking_key(ranking.models, ranking.resolved, ranking.tiers)}
    assert h.reconcile(rebuilt, pairs, rankings) == []


def test_decisions_in_the_log_are_adopted_by_a_rebuilt_state() -> None:
    # The rebuilt state has not decided the pair (0.5 against alternating 0/1: no gap), but
    # the log has a decision: it is final, so the rebuilt monitor takes it and emits nothing
    # the log lacks.
    h, _, _ = host(interval=0.0)
    h.apply([e for i in range(40) for e in (ev(i, "a", float(i % 2)), ev(i, "z", 0.5))])
    logged = [{"benchmark": "b", "model_a": "a", "model_b": "z", "verdict": "resolved:z",
               "decided_n": 12, "decided_e_value": 50.0,
               "decided_ts": "2026-01-02T03:04:05+00:00", "n": 20, "e_value": 1.0},
              {"benchmark": "b", "model_a": "a", "model_b": "q", "verdict": "resolved:a",
               "n": 3, "e_value": 60.0},  # a model the rebuilt state has never seen
              {"benchmark": "other", "model_a": "a", "model_b": "z", "verdict": "resolved:a",
               "n": 3, "e_value": 60.0}]
    assert h.adopt_decisions(logged) == 1
    assert h.adopt_decisions(logged) == 0  # already adopted
    missing = h.reconcile(h.evaluate_if_due(), {("b", frozenset(("a", "z"))): "resolved:z"}, {})
    assert [c for c in missing if isinstance(c, ResolutionChange)] == []
    (p,) = [p.as_dict() for p in h.monitor("b").pairs("b", "all")]
    assert p["verdict"] == "resolved:z" and p["n"] == 40
    assert p["decided"]["n"] == 12 and p["decided"]["e_value"] == pytest.approx(50.0)
    assert p["decided"]["ts"] == "2026-01-02T03:04:05+00:00"
