"""Prometheus sink: exactly the contract names, scrape-time pair series, no stale series."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.sinks.prometheus import METRIC_NAMES, Metrics, MonitorCollector

# docs/contract.md#metrics: these names are a contract for dashboards, alert rules and outside checks.
CONTRACT = {
    "llm_monitor_events_total", "llm_monitor_pair_items", "llm_monitor_pair_delta",
    "llm_monitor_pair_e_value", "llm_monitor_pair_resolution_ratio",
    "llm_monitor_pair_resolved", "llm_monitor_ranking_resolved",
    "llm_monitor_ranking_unresolved_pairs", "llm_monitor_state_changes_total",
    "llm_monitor_processing_lag_seconds",
}
# Added beside the contract: stability and contamination (issue 5, live part).
EXTRA = {"llm_monitor_model_flip_rate", "llm_monitor_model_flip_pairs",
         "llm_monitor_excluded_items",
         # the resolved ranking: pair thresholds, anytime rank sets and tiers
         "llm_monitor_pair_e_threshold", "llm_monitor_ranking_tiers",
         "llm_monitor_ranking_top_resolved", "llm_monitor_model_rank_low",
         "llm_monitor_model_rank_high",
         # the face: the ranking table and the threshold drawn on dashboards
         "llm_monitor_model_mean", "llm_monitor_model_rank", "llm_monitor_ranking_e_threshold",
         # evaluate until resolved: each model's stop signal (issue 25)
         "llm_monitor_model_settled", "llm_monitor_model_items",
         "llm_monitor_model_items_remaining", "llm_monitor_model_settled_items"}


def ev(item: int, model: str, score: float) -> ItemResult:
    return ItemResult(benchmark="b", item_id=str(item), model=model, score=score)


def scrape(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        name = fam.name + "_total" if fam.type == "counter" else fam.name
        out[name] = [(s.labels, s.value) for s in fam.samples
                     if not s.name.endswith("_created")]
    return out


def setup(config: CoreConfig | None = None) -> tuple[Monitor, Metrics, CollectorRegistry]:
    registry = CollectorRegistry()
    mon = Monitor(config)
    metrics = Metrics(registry)
    registry.register(MonitorCollector(mon))
    return mon, metrics, registry


def test_exposes_exactly_the_contract_names() -> None:
    mon, metrics, registry = setup()
    res = mon.apply([ev(i, m, float(s)) for i in range(40)
                     for m, s in (("a", 1), ("b", i % 2), ("c", 0))])
    counts = {o: res.count(o) for o in ("accepted", "duplicate", "conflict")}
    metrics.observe({**counts, "invalid": 3, "skipped": 7}, res.changes, lag_seconds=0.002)
    got = scrape(registry)
    assert set(got) == CONTRACT | EXTRA == set(METRIC_NAMES)
    events = {s[0]["outcome"]: s[1] for s in got["llm_monitor_events_total"]}
    assert events == {"accepted": 120.0, "duplicate": 0.0, "conflict": 0.0, "invalid": 3.0}
    kinds = {(s[0]["benchmark"], s[0]["kind"]) for s in got["llm_monitor_state_changes_total"]}
    assert ("b", "ranking") in kinds
    items = {(s[0]["model_a"], s[0]["model_b"]): s[1] for s in got["llm_monitor_pair_items"]}
    assert items == {("a", "b"): 40.0, ("b", "c"): 40.0}  # adjacent pairs only, best first
    ratio_kinds = {s[0]["kind"] for s in got["llm_monitor_pair_resolution_ratio"]}
    assert ratio_kinds == {"fixed", "cluster", "anytime"}
    delta = {(s[0]["model_a"], s[0]["model_b"]): s[1] for s in got["llm_monitor_pair_delta"]}
    assert delta[("a", "b")] == 0.5
    resolved = {(s[0]["model_a"], s[0]["model_b"]): s[1] for s in got["llm_monitor_pair_resolved"]}
    table = mon.table("b")
    assert table is not None
    for (a, b), value in resolved.items():
        assert value == (0.0 if table.verdict(table.models.index(a), table.models.index(b))
                         == "unresolved" else 1.0)
    assert got["llm_monitor_ranking_unresolved_pairs"][0][1] == float(table.unresolved_pairs())
    rk = mon.ranking("b").to_json()
    low = {s[0]["model"]: s[1] for s in got["llm_monitor_model_rank_low"]}
    high = {s[0]["model"]: s[1] for s in got["llm_monitor_model_rank_high"]}
    assert low == {m["model"]: float(m["rank_low"]) for m in rk["models"]}
    assert high == {m["model"]: float(m["rank_high"]) for m in rk["models"]}
    assert all(low[m] <= r + 1 <= high[m] for r, m in enumerate(("a", "b", "c")))
    assert got["llm_monitor_ranking_tiers"][0][1] == float(rk["tiers"])
    means = {s[0]["model"]: s[1] for s in got["llm_monitor_model_mean"]}
    ranks = {s[0]["model"]: s[1] for s in got["llm_monitor_model_rank"]}
    assert means == {m["model"]: m["mean"] for m in rk["models"]}
    assert ranks == {m["model"]: float(m["rank"]) for m in rk["models"]} == {
        "a": 1.0, "b": 2.0, "c": 3.0}
    # The ranking's threshold bounds are those of its adjacent pairs' own thresholds.
    pair_thr = [p["e_threshold"] for p in rk["pairs"]]
    bounds = {s[0]["bound"]: s[1] for s in got["llm_monitor_ranking_e_threshold"]}
    assert bounds == {"min": min(pair_thr), "max": max(pair_thr)}
    assert {s[1] for s in got["llm_monitor_pair_e_threshold"]} == set(pair_thr)
    assert got["llm_monitor_ranking_top_resolved"][0][1] == float(rk["top_resolved"])
    lag = dict((tuple(s[0].items()), s[1]) for s in got["llm_monitor_processing_lag_seconds"])
    assert lag[(("le", "0.0025"),)] == 1.0


def test_no_stale_series_when_a_pair_stops_being_adjacent() -> None:
    mon, _, registry = setup()
    mon.apply([ev(i, m, s) for i in range(10) for m, s in (("a", 1.0), ("b", 0.5), ("c", 0.0))])
    before = {(s[0]["model_a"], s[0]["model_b"]) for s in scrape(registry)["llm_monitor_pair_items"]}
    assert before == {("a", "b"), ("b", "c")}
    # c overtakes everyone on new items: the ranking becomes c > a > b
    mon.apply([ev(i, m, s) for i in range(10, 60) for m, s in (("a", 0.5), ("b", 0.0),
                                                                ("c", 1.0))])
    after = {(s[0]["model_a"], s[0]["model_b"]) for s in scrape(registry)["llm_monitor_pair_items"]}
    assert after == {("c", "a"), ("a", "b")}


def test_all_pairs_series_on_request() -> None:
    mon, _, registry = setup(CoreConfig(per_pair_series="all"))
    mon.apply([ev(i, m, 1.0) for i in range(3) for m in "abcd"])
    assert len(scrape(registry)["llm_monitor_pair_items"]) == 6


def test_series_limit_caps_pairs_and_models_from_the_top() -> None:
    # Six models ranked f > e > … > a; a limit of 2 pairs exports (f, e) and (e, d), and the
    # per-model gauges of those three models only.
    mon, _, registry = setup(CoreConfig(pair_series_limit=2))
    mon.apply([ev(i, m, float(i % 6 <= j)) for i in range(60) for j, m in enumerate("abcdef")])
    out = scrape(registry)
    pairs = {(s[0]["model_a"], s[0]["model_b"]) for s in out["llm_monitor_pair_items"]}
    assert pairs == {("f", "e"), ("e", "d")}
    for name in ("llm_monitor_model_mean", "llm_monitor_model_rank",
                 "llm_monitor_model_rank_low", "llm_monitor_model_rank_high"):
        assert {s[0]["model"] for s in out[name]} == {"f", "e", "d"}, name
    assert sorted(v for _, v in out["llm_monitor_model_rank"]) == [1.0, 2.0, 3.0]


def test_fresh_registry_has_counters_at_zero_before_any_event() -> None:
    _, _, registry = setup()
    got = scrape(registry)
    assert {s[0]["outcome"] for s in got["llm_monitor_events_total"]} == {
        "accepted", "duplicate", "conflict", "invalid"}
    assert "llm_monitor_pair_items" not in got or got["llm_monitor_pair_items"] == []


def test_state_change_series_born_at_zero_for_both_kinds() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    metrics.ensure_benchmarks(["b", "b"])
    got = {(s[0]["benchmark"], s[0]["kind"]): s[1]
           for s in scrape(registry)["llm_monitor_state_changes_total"]}
    assert got == {("b", "resolution"): 0.0, ("b", "ranking"): 0.0}
    assert metrics.benchmarks_seen == 1


def test_flip_and_exclusion_gauges() -> None:
    mon, _, registry = setup()
    p = "perturbed:paraphrase"
    events = [ItemResult(benchmark="b", item_id=str(i), model="a", score=float(i < 8))
              for i in range(10)]
    # right on items 0-7; the perturbed variant is wrong on items 0-1 (2 flips out of 8)
    events += [ItemResult(benchmark="b", item_id=str(i), model="a", score=float(i >= 2),
                          variant=p) for i in range(10)]
    events += [ItemResult(benchmark="b", item_id="3", model="a", score=1.0,
                          variant="perturbed:noise", flags=["leak-suspect"])]
    mon.apply(events)
    got = scrape(registry)
    rate = {s[0]["kind"]: s[1] for s in got["llm_monitor_model_flip_rate"]}
    assert rate == {"paraphrase": 2 / 8, "noise": 0.0, "all": 2 / 9}
    pairs = {s[0]["kind"]: s[1] for s in got["llm_monitor_model_flip_pairs"]}
    assert pairs == {"paraphrase": 10.0, "noise": 1.0, "all": 11.0}
    assert got["llm_monitor_excluded_items"] == [({"benchmark": "b"}, 1.0)]


def test_pair_resolved_is_the_ranking_routes_verdict_under_the_declared_design() -> None:
    # Sampled clusters with 3 clusters: no decision is possible, the route says
    # "undecidable" and the gauge 0, though the pair's items are far apart. Fixed strata: the
    # item-level decision, and the design effect's q exported under kind "strata".
    from monitor.core.config import BenchmarkSpec
    from monitor.stats.figures import Design

    designs: tuple[tuple[Design, float], ...] = (("clusters", 0.0), ("strata", 1.0))
    for design, want in designs:
        mon, _, registry = setup(CoreConfig(benchmarks={"b": BenchmarkSpec(design=design)}))
        mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, cluster=f"c{i % 3}",
                              score=s)
                   for i in range(400) for m, s in (("a", 1.0), ("z", float(i % 5 == 0)))])
        (pair,) = mon.ranking("b").to_json()["pairs"]
        assert pair["verdict"] == ("undecidable" if design == "clusters" else "resolved:a")
        m = scrape(registry)
        assert [v for _, v in m["llm_monitor_pair_resolved"]] == [want]
        kinds = {labels["kind"] for labels, _ in m["llm_monitor_pair_resolution_ratio"]}
        assert kinds == {"fixed", "anytime", "cluster" if design == "clusters" else "strata"}


def test_stop_signal_gauges_read_the_standings_as_they_are() -> None:
    # A new model's plan says stop once its pairs are decided; the gauges carry exactly the
    # standings they are given (the runner host's), and the item it settled at only once
    # settled.
    from datetime import UTC, datetime

    from monitor.core.standing import SettledAt, standing

    registry = CollectorRegistry()
    mon = Monitor()
    mon.apply([ev(i, m, float(s)) for i in range(300) for m, s in (("a", 1), ("z", 0))])
    mon.apply([ev(i, "new", float(i % 2)) for i in range(250)])
    plans = {m: mon.plan("b", m, count=0) for m in ("a", "new", "z")}
    assert plans["new"].action == "stop" and plans["new"].items_done == 250, plans["new"]
    at = SettledAt(200, datetime(2026, 1, 1, tzinfo=UTC))
    given = {"a": standing(plans["a"], None), "new": standing(plans["new"], at)}
    registry.register(MonitorCollector(mon, standings=lambda bench: given if bench == "b" else {}))
    got = scrape(registry)

    def by_model(name: str) -> dict[str, float]:
        assert all(labels["benchmark"] == "b" for labels, _ in got[name]), name
        return {labels["model"]: v for labels, v in got[name]}

    assert by_model("llm_monitor_model_settled") == {
        "a": float(plans["a"].action == "stop"), "new": 1.0}
    assert by_model("llm_monitor_model_items") == {"a": 300.0, "new": 250.0}
    assert by_model("llm_monitor_model_items_remaining") == {"a": 0.0, "new": 50.0}
    assert by_model("llm_monitor_model_settled_items") == {"new": 200.0}
    # Without standings (the core alone) the families exist with no series.
    bare = CollectorRegistry()
    bare.register(MonitorCollector(mon))
    assert scrape(bare)["llm_monitor_model_settled"] == []
