"""Dashboards and alert rules as code: every query parses and names only exported metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from grafana import build as grafana
from monitor.core import Monitor
from monitor.sinks.prometheus import Metrics, MonitorCollector

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "rules" / "llm-monitor.rules.yml"
COMPOSE = REPO / "deploy" / "compose" / "docker-compose.yml"
PROVISIONING = REPO / "grafana" / "provisioning"

# Grafana's variables, written into the queries as Grafana does (names that need quoting).
VARIABLES = {"benchmark": 'MMLU-Pro "v2"', "model_a": "merged(2026-02, probably gemini-3.1-pro)",
             "model_b": "Llama 3.1 (70B), instruct", "__rate_interval": "1m"}
# Series Prometheus itself writes for every scrape target.
PROMETHEUS_SERIES = {"up"}
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
             "group_left", "group_right", "inf", "nan"}
_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
             "gauge": ("",)}


def exported_names() -> set[str]:
    """Exposition names of a fresh registry populated by the monitor's metrics module."""
    registry = CollectorRegistry()
    Metrics(registry)
    registry.register(MonitorCollector(Monitor()))
    names: set[str] = set()
    for family in registry.collect():
        names.update(family.name + s for s in _SUFFIXES.get(family.type, ("",)))
    return names


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (strings, matchers, ranges and groupings removed)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+\d+[smhdwy]", " ", s)
    names: set[str] = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        if m.group() in _KEYWORDS or re.match(r"\s*\(", s[m.end():]):
            continue  # a keyword or a function call
        if m.start() > 0 and (s[m.start() - 1].isdigit() or s[m.start() - 1] == "."):
            continue  # the exponent or unit of a number
        names.add(m.group())
    return names


def substitute(expr: str) -> str:
    return grafana.interpolate(expr, VARIABLES)


def test_interpolation_writes_names_as_exact_matchers() -> None:
    expr = substitute("x{benchmark=${benchmark:doublequote}, model_a=${model_a:doublequote}}"
                      "[$__rate_interval]")
    assert expr == ('x{benchmark="MMLU-Pro \\"v2\\"", '
                    'model_a="merged(2026-02, probably gemini-3.1-pro)"}[1m]')
    with pytest.raises(KeyError, match="pair"):
        grafana.interpolate("x{a=~\"${pair:raw}\"}", VARIABLES)


def all_queries() -> list[tuple[str, str]]:
    """(where, PromQL) for the dashboard, its variables, Grafana alerts and Prometheus rules."""
    out = [(f"panel {title!r}", substitute(q.expr)) for title, q in grafana.dashboard_queries()]
    out += [("variable", substitute(e)) for e in grafana.variable_queries()]
    alerts = yaml.safe_load((REPO / grafana.ALERTS_FILE).read_text())
    out += [(f"grafana alert {r['title']}", r["data"][0]["model"]["expr"])
            for g in alerts["groups"] for r in g["rules"]]
    rules = yaml.safe_load(RULES.read_text())
    out += [(f"prometheus rule {r['alert']}", r["expr"]) for g in rules["groups"] for r in g["rules"]]
    return out


def test_metric_names_extracts_selected_metrics_only() -> None:
    expr = ('histogram_quantile(0.99, sum by (le, job) (rate(foo_bucket{a="b c",le!="x"}[5m] '
            'offset 1h))) / on (job) group_left (x) bar_total > bool 1e3 unless baz')
    assert metric_names(expr) == {"foo_bucket", "bar_total", "baz"}


def test_exported_names_come_from_the_metrics_module() -> None:
    names = exported_names()
    # The metrics contract (docs/contract.md#metrics), in exposition form.
    contract = {"llm_monitor_events_total", "llm_monitor_pair_items", "llm_monitor_pair_delta",
                "llm_monitor_pair_e_value", "llm_monitor_pair_resolution_ratio",
                "llm_monitor_pair_resolved", "llm_monitor_ranking_resolved",
                "llm_monitor_ranking_unresolved_pairs", "llm_monitor_state_changes_total",
                "llm_monitor_processing_lag_seconds_bucket"}
    assert contract <= names, contract - names


@pytest.mark.integration  # runs promtool
def test_every_query_parses(tmp_path: Path) -> None:
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(promtool).is_file():
        pytest.fail("promtool not found; scripts/install-deps.sh installs it (apt: prometheus)")
    queries = all_queries()
    rules = {"groups": [{"name": "parse", "rules": [
        {"record": f"parse:q{i}", "expr": expr} for i, (_, expr) in enumerate(queries)]}]}
    tmp = tmp_path / "queries.rules.yml"
    tmp.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([promtool, "check", "rules", str(tmp)], capture_output=True, text=True,
                          timeout=30)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        bad = {int(i) for i in re.findall(r'"parse:q(\d+)"', out)}
        pytest.fail("unparsable PromQL:\n" + "\n".join(f"{queries[i][0]}: {queries[i][1]}"
                                                       for i in sorted(bad)) + "\n" + out)
    assert f"SUCCESS: {len(queries)} rules found" in out, out


def test_every_query_names_only_exported_metrics() -> None:
    exported = exported_names() | PROMETHEUS_SERIES
    used: set[str] = set()
    for where, expr in all_queries():
        names = metric_names(expr)
        assert names <= exported, f"{where} uses {sorted(names - exported)}: {expr}"
        used |= names
    # And the other way round: the dashboard shows every contract metric.
    dashboard_used = set().union(*(metric_names(substitute(q.expr))
                                   for _, q in grafana.dashboard_queries()))
    families = {n.removesuffix("_bucket") for n in dashboard_used}
    for name in ("llm_monitor_events_total", "llm_monitor_pair_items", "llm_monitor_pair_delta",
                 "llm_monitor_pair_e_value", "llm_monitor_pair_resolution_ratio",
                 "llm_monitor_pair_resolved", "llm_monitor_ranking_resolved",
                 "llm_monitor_ranking_unresolved_pairs", "llm_monitor_state_changes_total",
                 "llm_monitor_processing_lag_seconds"):
        assert name in families, name


def test_a_misspelt_metric_would_be_caught() -> None:
    assert not metric_names("rate(llm_monitor_event_total[5m])") <= exported_names()


def test_generated_files_are_current() -> None:
    for rel, text in grafana.render(REPO).items():
        assert (REPO / rel).read_text(encoding="utf-8") == text, (
            f"{rel} is stale: run make grafana")
    assert grafana.main(["--root", str(REPO), "--check"]) == 0


def test_grafana_alerts_mirror_prometheus_rules() -> None:
    prom = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    alerts = yaml.safe_load((REPO / grafana.ALERTS_FILE).read_text())
    graf = [r for g in alerts["groups"] for r in g["rules"]]
    assert [r["title"] for r in graf] == [r["alert"] for r in prom]
    for p, g in zip(prom, graf, strict=True):
        assert g["data"][0]["model"]["expr"] == p["expr"].strip()
        assert g["labels"] == p["labels"] and g["for"] == p.get("for", "0s")
        assert g["data"][0]["datasourceUid"] == grafana.DATASOURCE_UID
        assert "$value " not in json.dumps(g["annotations"])  # Grafana has no $value number
        # A rule with a range reads at least that much history.
        ranges = re.findall(r"\[(\d+)m\]", p["expr"])
        assert g["data"][0]["relativeTimeRange"]["from"] >= 60 * max(map(int, ranges), default=0)
        assert len({r["uid"] for r in graf}) == len(graf)


def test_dashboard_variables_panels_and_datasource() -> None:
    dash = json.loads((REPO / grafana.DASHBOARD_FILE).read_text())
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert set(variables) == {"benchmark", "model_a", "model_b"}
    assert not any(v["multi"] or v["includeAll"] for v in variables.values())
    ds = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert [d["uid"] for d in ds["datasources"]] == [grafana.DATASOURCE_UID]
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == grafana.DATASOURCE_UID, panel["title"]
        assert all(t["datasource"]["uid"] == grafana.DATASOURCE_UID for t in panel["targets"])
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    ids = [p["id"] for p in dash["panels"]]
    assert len(set(ids)) == len(ids)
    e_panel = next(p for p in dash["panels"] if p["title"].startswith("E-value"))
    assert e_panel["fieldConfig"]["defaults"]["custom"]["scaleDistribution"]["type"] == "log"
    # The threshold drawn is the exported one, never a constant 1/α.
    exprs = [t["expr"] for t in e_panel["targets"]]
    assert any(e.startswith("llm_monitor_pair_e_threshold{") for e in exprs), exprs
    assert not any("$alpha" in t["expr"] for p in dash["panels"] for t in p["targets"])
    # Every label matcher on a variable is an exact match (no regex on model names).
    for panel in dash["panels"]:
        for t in panel["targets"]:
            assert "=~\"$" not in t["expr"] and ":raw}" not in t["expr"], t["expr"]
            if "llm_monitor_pair_" in t["expr"] and "model_a=" in t["expr"]:
                assert "model_b=${model_b:doublequote}" in t["expr"], t["expr"]
    ranking = next(p for p in dash["panels"] if p["title"] == "Ranking")
    assert ranking["type"] == "table"
    assert {metric_names(t["expr"]).pop() for t in ranking["targets"]} == {
        "llm_monitor_model_rank", "llm_monitor_model_mean", "llm_monitor_model_rank_low",
        "llm_monitor_model_rank_high"}


def test_compose_and_provisioning_fit_together() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"monitor", "prometheus", "alertmanager", "grafana"} <= set(services)
    for name, service in services.items():
        assert service.get("network_mode") == "host", name  # the configs' loopback addresses
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (COMPOSE.parent / source).exists(), (name, source)
    mounts = dict(v.split(":")[:2] for v in services["grafana"]["volumes"] if v.startswith("."))
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "llm-monitor.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert (COMPOSE.parent / next(s for s, t in mounts.items() if t == path)).resolve() == (
        REPO / grafana.DASHBOARD_FILE).parent
    assert mounts[next(s for s, t in mounts.items() if t == "/etc/grafana/provisioning")]
    build = services["monitor"]["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).is_file()
