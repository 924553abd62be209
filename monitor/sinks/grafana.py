"""Grafana dashboard and alert rules for the live monitor, as code.

``python -m monitor.sinks.grafana`` writes ``grafana/dashboards/llm-monitor.json`` and
``grafana/provisioning/alerting/llm-monitor-alerts.yml`` (Grafana-managed copies of the
Prometheus rules in ``deploy/prometheus/rules/llm-monitor.rules.yml``); ``--check`` only
reports whether the committed files are current. Every query uses the metric names of
DESIGN §2, the monitor's contract.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATASOURCE_UID = "llm-monitor-prometheus"
DASHBOARD_UID = "llm-monitor"
ALERT_FOLDER = "llm-monitor"
_DS = {"type": "prometheus", "uid": DATASOURCE_UID}

# The pair variable holds "model_a|model_b"; matching both labels against that regex selects
# exactly that pair (a model is never paired with itself). Model names are used as regex
# text, so a name with regex metacharacters may match a few look-alikes, never miss itself.
_PAIR = 'benchmark=~"$benchmark", model_a=~"${pair:raw}", model_b=~"${pair:raw}"'
_BENCH = 'benchmark=~"$benchmark"'
_PAIR_LEGEND = "{{benchmark}}: {{model_a}} vs {{model_b}}"


@dataclass(frozen=True)
class Query:
    """One PromQL query of a panel; ``legend`` names the labels each result series carries."""

    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class Panel:
    """A dashboard panel: title, kind, queries, unit and layout."""

    title: str
    kind: str
    queries: tuple[Query, ...]
    description: str
    width: int
    height: int = 8
    unit: str = "short"
    log_scale: bool = False
    thresholds: tuple[float, ...] = ()
    mappings: tuple[tuple[int, str, str], ...] = ()


_RESOLVED_MAP = ((0, "unresolved", "orange"), (1, "resolved", "green"))

PANELS: tuple[Panel, ...] = (
    Panel("Ranking resolved", "stat",
          (Query(f"llm_monitor_ranking_resolved{{{_BENCH}}}", "{{benchmark}}", instant=True),),
          "1 when every adjacent pair of the benchmark's ranking is resolved after the family "
          "correction.", width=8, height=5, mappings=_RESOLVED_MAP),
    Panel("Unresolved adjacent pairs", "stat",
          (Query(f"llm_monitor_ranking_unresolved_pairs{{{_BENCH}}}", "{{benchmark}}",
                 instant=True),),
          "Adjacent pairs of the ranking that are not resolved yet.", width=8, height=5),
    Panel("Accepted results per second", "stat",
          (Query('sum(rate(llm_monitor_events_total{outcome="accepted"}[$__rate_interval]))',
                 "accepted", instant=True),),
          "Results accepted (new, valid, not duplicate) per second.", width=8, height=5,
          unit="reqps"),
    Panel("E-value per pair (log scale) and the 1/α threshold", "timeseries",
          (Query(f"llm_monitor_pair_e_value{{{_PAIR}}}", _PAIR_LEGEND),
           Query("1 / $alpha", "1/α")),
          "E_n of each adjacent pair's e-process. The pair is resolved (anytime) once E_n "
          "reaches 1/α, or m/α under e-Bonferroni for a family of m pairs.", width=12,
          height=9, log_scale=True),
    Panel("Resolution ratio by kind", "timeseries",
          (Query(f"llm_monitor_pair_resolution_ratio{{{_PAIR}}}",
                 _PAIR_LEGEND + " ({{kind}})"),),
          "q = N / N*: fixed (iid), cluster (design effect) and anytime (N*_AV). A gap is "
          "resolved at fixed N when q ≥ 1.", width=12, height=9, thresholds=(1.0,)),
    Panel("Pair delta (mean a − mean b)", "timeseries",
          (Query(f"llm_monitor_pair_delta{{{_PAIR}}}", _PAIR_LEGEND),),
          "δ̂ of each adjacent pair on its shared items.", width=12, unit="percentunit"),
    Panel("Paired items", "timeseries",
          (Query(f"llm_monitor_pair_items{{{_PAIR}}}", _PAIR_LEGEND),),
          "Items both models of the pair have scored.", width=12),
    Panel("Pair verdicts", "state-timeline",
          (Query(f"llm_monitor_pair_resolved{{{_PAIR}}}", _PAIR_LEGEND),),
          "Resolved (1) or not (0), per adjacent pair.", width=12, mappings=_RESOLVED_MAP),
    Panel("State changes", "timeseries",
          (Query(f"sum by (benchmark, kind) (increase(llm_monitor_state_changes_total"
                 f"{{{_BENCH}}}[$__rate_interval]))", "{{benchmark}} {{kind}}"),),
          "Verdict changes (kind=resolution) and ranking changes (kind=ranking).", width=12),
    Panel("Events by outcome", "timeseries",
          (Query("sum by (outcome) (rate(llm_monitor_events_total[$__rate_interval]))",
                 "{{outcome}}"),),
          "Events per second: accepted, duplicate, conflict, invalid.", width=8, unit="reqps"),
    Panel("Dead-letter fraction", "timeseries",
          (Query('sum(rate(llm_monitor_events_total{outcome=~"invalid|conflict"}'
                 '[$__rate_interval])) / sum(rate(llm_monitor_events_total[$__rate_interval]))',
                 "dead-lettered"),),
          "Share of events rejected as invalid or conflicting; the alert fires above 5 %.",
          width=8, unit="percentunit", thresholds=(0.05,)),
    Panel("Processing lag p99", "timeseries",
          (Query("histogram_quantile(0.99, sum by (le) (rate("
                 "llm_monitor_processing_lag_seconds_bucket[$__rate_interval])))", "p99"),),
          "99th percentile of request arrival → durable and in the metrics; target < 1 s.",
          width=8, unit="s", thresholds=(1.0,)),
    Panel("Flip rate per model (10 % alarm)", "timeseries",
          (Query(f"llm_monitor_model_flip_rate{{{_BENCH}}}",
                 "{{benchmark}}: {{model}} ({{kind}})"),),
          "Share of a model's items answered right in the original form and wrong once "
          "perturbed, per perturbation kind and pooled (kind=all). Above 10 % the model "
          "likely answers remembered wording; GET /v1/benchmarks/<benchmark>/stability has "
          "the Wilson CI.", width=12, unit="percentunit", thresholds=(0.1,)),
    Panel("Items excluded from resolution", "timeseries",
          (Query(f"llm_monitor_excluded_items{{{_BENCH}}}", "{{benchmark}}"),),
          "Items flagged leak-suspect and left out of every verdict (llm-monitor run "
          "--include-leak-suspect counts them). GET /v1/benchmarks/<benchmark>/contamination "
          "lists them.", width=12),
)


def _variables() -> list[dict[str, Any]]:
    bench_query = "label_values(llm_monitor_ranking_resolved, benchmark)"
    pair_query = ('query_result(label_join(max by (model_a, model_b) '
                  '(llm_monitor_pair_items{benchmark=~"$benchmark"}), "pair", "|", '
                  '"model_a", "model_b"))')
    return [
        {"name": "benchmark", "label": "benchmark", "type": "query", "datasource": _DS,
         "definition": bench_query, "query": bench_query, "refresh": 2, "sort": 1,
         "multi": True, "includeAll": True, "allValue": ".+",
         "current": {"text": "All", "value": "$__all"}},
        {"name": "pair", "label": "pair", "type": "query", "datasource": _DS,
         "definition": pair_query, "query": pair_query, "regex": '/pair="([^"]+)"/',
         "refresh": 2, "sort": 1, "multi": False, "includeAll": True, "allValue": ".+",
         "current": {"text": "All", "value": "$__all"}},
        {"name": "alpha", "label": "α (llm-monitor run --alpha)", "type": "custom",
         "query": "0.05,0.01,0.1", "current": {"text": "0.05", "value": "0.05"},
         "options": [{"text": v, "value": v, "selected": v == "0.05"}
                     for v in ("0.05", "0.01", "0.1")]},
    ]


def _panel_json(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    steps += [{"color": "red", "value": t} for t in panel.thresholds]
    defaults: dict[str, Any] = {"unit": panel.unit,
                                "thresholds": {"mode": "absolute", "steps": steps}}
    if panel.kind == "timeseries":
        custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 1, "showPoints": "never"}
        if panel.log_scale:
            custom["scaleDistribution"] = {"type": "log", "log": 10}
        if panel.thresholds:
            custom["thresholdsStyle"] = {"mode": "line"}
        defaults["custom"] = custom
    if panel.mappings:
        defaults["mappings"] = [{"type": "value", "options": {
            str(v): {"text": text, "color": color, "index": i}
            for i, (v, text, color) in enumerate(panel.mappings)}}]
    targets = [{"refId": chr(ord("A") + i), "datasource": _DS, "expr": q.expr,
                "legendFormat": q.legend, "instant": q.instant, "range": not q.instant}
               for i, q in enumerate(panel.queries)]
    return {"id": pid, "type": panel.kind, "title": panel.title,
            "description": panel.description, "datasource": _DS,
            "gridPos": {"x": x, "y": y, "w": panel.width, "h": panel.height},
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "right"}}
            if panel.kind == "timeseries" else {},
            "targets": targets}


def dashboard() -> dict[str, Any]:
    """The dashboard JSON (Grafana schema 39), panels laid out left to right, top to bottom."""
    panels, x, y, row_h = [], 0, 0, 0
    for pid, panel in enumerate(PANELS, start=1):
        if x + panel.width > 24:
            x, y, row_h = 0, y + row_h, 0
        panels.append(_panel_json(panel, pid, x, y))
        x, row_h = x + panel.width, max(row_h, panel.height)
    return {
        "uid": DASHBOARD_UID, "title": "llm-monitor", "tags": ["llm-monitor"],
        "description": "Live resolution of leaderboard gaps (docs/operations.md).",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"}, "timezone": "utc",
        "templating": {"list": _variables()}, "annotations": {"list": []},
        "panels": panels,
    }


def dashboard_queries() -> list[tuple[str, Query]]:
    """(panel title, query) of every panel query, for tests and checks."""
    return [(p.title, q) for p in PANELS for q in p.queries]


def variable_queries() -> list[str]:
    """The PromQL inside the templating variables' Grafana functions."""
    out = []
    for var in _variables():
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"(label_values|query_result)\((.*)\)", var["query"], re.S)
        if m is None:
            raise ValueError(f"unexpected variable query {var['query']!r}")
        expr = m.group(2)
        out.append(expr.rsplit(",", 1)[0] if m.group(1) == "label_values" else expr)
    return out


# -- alert rules ----------------------------------------------------------------------------
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(text: str) -> int:
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"`for` must be a duration like 5m, got {text!r}")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


def _lookback(expr: str) -> int:
    """Seconds of history an expression reads: its longest range plus offset, at least 10 m."""
    ranges = [_seconds(r) for r in re.findall(r"\[(\d+[smhd])\]", expr)]
    offsets = [_seconds(o) for o in re.findall(r"offset\s+(\d+[smhd])", expr)]
    return max(600, max(ranges, default=0) + max(offsets, default=0))


def _grafana_template(text: str) -> str:
    # Grafana's templates know $labels like Prometheus's, but the value lives in $values.
    return text.replace("$value ", "$values.A.Value ").replace("$value}", "$values.A.Value}")


def _slug(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name.removeprefix("LLMMonitor")).lower()


def grafana_alert_rules(prometheus_rules: dict[str, Any]) -> dict[str, Any]:
    """Grafana alert provisioning mirroring parsed Prometheus rule groups.

    Each rule's PromQL is query A, evaluated instantly; condition C fires for every series A
    returns (all values are ≥ 0, so "> −1" means "present"), exactly as Prometheus fires for
    every series of an alerting expression. No data is the normal, quiet state.
    """
    groups = []
    for group in prometheus_rules["groups"]:
        rules = []
        for rule in group["rules"]:
            expr = rule["expr"].strip()
            rules.append({
                "uid": f"llm-monitor-{_slug(rule['alert'])}",
                "title": rule["alert"],
                "condition": "C",
                "data": [
                    {"refId": "A", "datasourceUid": DATASOURCE_UID,
                     "relativeTimeRange": {"from": _lookback(expr), "to": 0},
                     "model": {"refId": "A", "datasource": _DS, "expr": expr,
                               "instant": True, "range": False, "intervalMs": 1000,
                               "maxDataPoints": 43200}},
                    {"refId": "C", "datasourceUid": "__expr__",
                     "relativeTimeRange": {"from": 0, "to": 0},
                     "model": {"refId": "C", "type": "threshold", "expression": "A",
                               "datasource": {"type": "__expr__", "uid": "__expr__"},
                               "conditions": [{"evaluator": {"type": "gt", "params": [-1]}}]}},
                ],
                "noDataState": "OK",
                "execErrState": "Error",
                "for": rule.get("for", "0s"),
                "labels": dict(rule.get("labels", {})),
                "annotations": {k: _grafana_template(v)
                                for k, v in rule.get("annotations", {}).items()},
                "isPaused": False,
            })
        groups.append({"orgId": 1, "name": group["name"], "folder": ALERT_FOLDER,
                       "interval": "1m", "rules": rules})
    return {"apiVersion": 1, "groups": groups}


# -- files ----------------------------------------------------------------------------------
RULES_FILE = Path("deploy/prometheus/rules/llm-monitor.rules.yml")
DASHBOARD_FILE = Path("grafana/dashboards/llm-monitor.json")
ALERTS_FILE = Path("grafana/provisioning/alerting/llm-monitor-alerts.yml")


def _dump_yaml(data: Any) -> str:
    import yaml  # a build-time dependency only (dev extra)

    class _Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True  # repeated dicts written out in full: no &id001 anchors

    def _str(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    return str(yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000))


def render(root: Path) -> dict[Path, str]:
    """File path (relative to ``root``) → content of every generated file."""
    import yaml

    rules = yaml.safe_load((root / RULES_FILE).read_text(encoding="utf-8"))
    header = (f"# Generated by `python -m monitor.sinks.grafana` from {RULES_FILE}; "
              "do not edit by hand.\n")
    return {
        DASHBOARD_FILE: json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n",
        ALERTS_FILE: header + _dump_yaml(grafana_alert_rules(rules)),
    }


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the generated Grafana files; 1 when stale."""
    parser = argparse.ArgumentParser(prog="python -m monitor.sinks.grafana",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="repository root")
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for rel, text in render(args.root).items():
        path = args.root / rel
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        stale.append(str(rel))
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; run python -m monitor.sinks.grafana",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
