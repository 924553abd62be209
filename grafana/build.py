"""Grafana dashboard and alert rules for the live monitor, as code (build time, dev extra).

``make grafana`` (``python -m grafana.build``) writes ``grafana/dashboards/llm-monitor.json``
(built with Grafana's grafana-foundation-sdk) and
``grafana/provisioning/alerting/llm-monitor-alerts.yml`` (Grafana-managed copies of the
Prometheus rules in ``deploy/prometheus/rules/llm-monitor.rules.yml``); ``--check`` only
reports whether the committed files are current. Every query uses the metric names of the
monitor's contract (docs/contract.md, "Metrics").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

# Build-time dependencies (dev extra): this module lives outside the runtime package.
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

DATASOURCE_UID = "llm-monitor-prometheus"
DASHBOARD_UID = "llm-monitor"
ALERT_FOLDER = "llm-monitor"
_DS = {"type": "prometheus", "uid": DATASOURCE_UID}
_DS_REF = dm.DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)

# Label matchers by equality: Grafana's ``doublequote`` format writes a value as a quoted
# string with its double quotes escaped, so any model name (parentheses, commas, dots,
# spaces, regex metacharacters) selects exactly itself. The benchmark and the two models of
# the pair are single-valued variables; model_b lists the partners of the chosen model_a.
_BENCH = "benchmark=${benchmark:doublequote}"
_PAIR = f"{_BENCH}, model_a=${{model_a:doublequote}}, model_b=${{model_b:doublequote}}"
_PAIR_LEGEND = "{{model_a}} vs {{model_b}}"


@dataclass(frozen=True)
class Query:
    """One PromQL query of a panel; ``legend`` names the labels each result series carries."""

    expr: str
    legend: str = ""
    instant: bool = False


# -- dashboard (grafana-foundation-sdk builders) ----------------------------------------------

def _target(expr: str, legend: str = "", *, instant: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).legend_format(legend).datasource(_DS_REF)
    return query.instant() if instant else query.range()


def _thresholds(values: Sequence[float]) -> db.ThresholdsConfig:
    steps: list[dm.Threshold] = [dm.Threshold(value=None, color="green")]
    steps += [dm.Threshold(value=v, color="red") for v in values]
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)


def _resolved_map() -> list[dm.ValueMapping]:
    return [dm.ValueMap(options={
        "0": dm.ValueMappingResult(text="unresolved", color="orange", index=0),
        "1": dm.ValueMappingResult(text="resolved", color="green", index=1)})]


_Panel = TypeVar("_Panel", stat.Panel, timeseries.Panel, statetimeline.Panel, table.Panel)


def _common(panel: _Panel, title: str, description: str,
            targets: Sequence[prometheus.Dataquery], *, width: int, height: int, unit: str,
            thresholds: Sequence[float]) -> _Panel:
    panel = (panel.title(title).description(description).datasource(_DS_REF).span(width)
             .height(height).unit(unit).thresholds(_thresholds(thresholds)))
    for i, target in enumerate(targets):
        panel = panel.with_target(target.ref_id(chr(ord("A") + i)))
    return panel


def _stat(title: str, description: str, target: prometheus.Dataquery, *, unit: str = "short",
          mapped: bool = False) -> stat.Panel:
    panel = _common(stat.Panel(), title, description, [target], width=8, height=5, unit=unit,
                    thresholds=())
    panel = (panel.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
             .text_mode(cm.BigValueTextMode.AUTO))
    return panel.mappings(_resolved_map()) if mapped else panel


def _timeseries(title: str, description: str, targets: Sequence[prometheus.Dataquery], *,
                width: int, height: int = 8, unit: str = "short", log_scale: bool = False,
                thresholds: Sequence[float] = ()) -> timeseries.Panel:
    panel = _common(timeseries.Panel(), title, description, targets, width=width,
                    height=height, unit=unit, thresholds=thresholds)
    panel = (panel.draw_style(cm.GraphDrawStyle.LINE).line_width(1)
             .show_points(cm.VisibilityMode.NEVER)
             .legend(cb.VizLegendOptions().show_legend(True)
                     .display_mode(cm.LegendDisplayMode.TABLE)
                     .placement(cm.LegendPlacement.RIGHT)))
    if log_scale:
        panel = panel.scale_distribution(
            cb.ScaleDistributionConfig().type(cm.ScaleDistribution.LOG).log(10))
    if thresholds:
        panel = panel.thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.LINE))
    return panel


def _state_timeline(title: str, description: str, target: prometheus.Dataquery, *,
                    width: int) -> statetimeline.Panel:
    panel = _common(statetimeline.Panel(), title, description, [target], width=width,
                    height=8, unit="short", thresholds=())
    return (panel.mappings(_resolved_map())
            .legend(cb.VizLegendOptions().show_legend(True)))


def _ranking_table() -> table.Panel:
    """Every model of the benchmark: rank, mean and anytime rank set, one row per model."""
    queries = [_target(f"llm_monitor_model_{name}{{{_BENCH}}}", name, instant=True)
               .format(pm.PromQueryFormat.TABLE)
               for name in ("rank", "mean", "rank_low", "rank_high")]
    panel = _common(table.Panel(), "Ranking",
                    "Models best first: rank, mean score, and the anytime rank set "
                    "[rank_low, rank_high] from the decisions taken so far.",
                    queries, width=12, height=12, unit="short", thresholds=())
    # One frame per query, joined on the model label; the value columns renamed.
    names = {"Value #A": "rank", "Value #B": "mean", "Value #C": "rank low",
             "Value #D": "rank high"}
    return (panel
            .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
            .with_transformation(dm.DataTransformerConfig(id_val="organize", options={
                "excludeByName": {"Time": True, "__name__": True, "benchmark": True,
                                  "instance": True, "job": True},
                "renameByName": names,
                "indexByName": {"Value #A": 0, "model": 1, "Value #B": 2, "Value #C": 3,
                                "Value #D": 4}}))
            .sort_by([cb.TableSortByFieldState().display_name("rank")]))


def _until_resolved_table() -> table.Panel:
    """Every model of the benchmark (at the top the monitor reads): its stop signal, one row
    per model."""
    queries = [_target(f"llm_monitor_model_{name}{{{_BENCH}}}", name, instant=True)
               .format(pm.PromQueryFormat.TABLE)
               for name in ("settled", "items", "items_remaining")]
    panel = _common(table.Panel(), "Evaluate until resolved",
                    "Per model: settled (1: its plan says stop — every pair with the other "
                    "models decided, or not expected to be by the items left), the items it "
                    "has done and the items the other models have that it has not. The web "
                    "board shows where each settled (settled at item n of N).",
                    queries, width=12, height=12, unit="short", thresholds=())
    names = {"Value #A": "settled", "Value #B": "items done", "Value #C": "items left"}
    return (panel
            .with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
            .with_transformation(dm.DataTransformerConfig(id_val="organize", options={
                "excludeByName": {"Time": True, "__name__": True, "benchmark": True,
                                  "instance": True, "job": True},
                "renameByName": names,
                "indexByName": {"model": 0, "Value #A": 1, "Value #B": 2, "Value #C": 3}}))
            .sort_by([cb.TableSortByFieldState().display_name("items left").desc(True)]))


# An idle monitor's counters stand still, and a share or a quantile of no events is 0/0 = NaN,
# which Grafana draws as "NaN". The share divides only by a positive rate and reads 0 while the
# monitor is scraped and idle (no event, none rejected); the quantile is kept only while
# requests arrive (no data otherwise: no lag was measured). Both are no data once the monitor
# is not scraped at all.
_EVENTS_RATE = "sum(rate(llm_monitor_events_total[$__rate_interval]))"
_DEAD_LETTER_FRACTION = (
    '(sum(rate(llm_monitor_events_total{outcome=~"invalid|conflict"}[$__rate_interval])) / '
    f"({_EVENTS_RATE} > 0)) or (0 * {_EVENTS_RATE})")
_LAG_P99 = ("histogram_quantile(0.99, sum by (le) (rate("
            "llm_monitor_processing_lag_seconds_bucket[$__rate_interval]))) and "
            "(sum(rate(llm_monitor_processing_lag_seconds_count[$__rate_interval])) > 0)")


def _panels() -> list[stat.Panel | timeseries.Panel | statetimeline.Panel | table.Panel]:
    """Panel builders in reading order; the dashboard lays them out left to right."""
    return [
        _stat("Ranking resolved",
              "1 when every adjacent pair of the benchmark's ranking is resolved after the "
              "family correction.",
              _target(f"llm_monitor_ranking_resolved{{{_BENCH}}}", "{{benchmark}}",
                      instant=True), mapped=True),
        _stat("Unresolved adjacent pairs",
              "Adjacent pairs of the ranking that are not resolved yet.",
              _target(f"llm_monitor_ranking_unresolved_pairs{{{_BENCH}}}", "{{benchmark}}",
                      instant=True)),
        _stat("Accepted results per second",
              "Results accepted (new, valid, not duplicate) per second.",
              _target('sum(rate(llm_monitor_events_total{outcome="accepted"}'
                      '[$__rate_interval]))', "accepted", instant=True), unit="reqps"),
        _ranking_table(),
        _timeseries("Evidence of every adjacent pair: E_n / threshold (log scale)",
                    "E_n of each adjacent pair's e-process divided by the pair's own "
                    "threshold 1/γ (its fixed share γ of α). A pair is resolved (anytime) the "
                    "first time this reaches 1, and stays resolved.",
                    [_target(f"llm_monitor_pair_e_value{{{_BENCH}}} / "
                             f"llm_monitor_pair_e_threshold{{{_BENCH}}}", _PAIR_LEGEND)],
                    width=12, height=12, log_scale=True, thresholds=(1.0,)),
        _timeseries("E-value of the chosen pair and its threshold (log scale)",
                    "E_n of the pair model_a vs model_b and its threshold 1/γ; the band of "
                    "thresholds over the ranking's adjacent pairs is drawn for reference.",
                    [_target(f"llm_monitor_pair_e_value{{{_PAIR}}}", "E_n"),
                     _target(f"llm_monitor_pair_e_threshold{{{_PAIR}}}", "threshold 1/γ"),
                     _target(f"llm_monitor_ranking_e_threshold{{{_BENCH}}}",
                             "adjacent pairs' threshold ({{bound}})")],
                    width=12, height=9, log_scale=True),
        _timeseries("Resolution ratio by kind",
                    "q = N / N*: fixed (iid), cluster (design effect) and anytime (N*_AV). "
                    "A gap is resolved at fixed N when q ≥ 1.",
                    [_target(f"llm_monitor_pair_resolution_ratio{{{_PAIR}}}",
                             _PAIR_LEGEND + " ({{kind}})")],
                    width=12, height=9, thresholds=(1.0,)),
        _timeseries("Pair delta (mean a − mean b)",
                    "δ̂ of each adjacent pair on its shared items.",
                    [_target(f"llm_monitor_pair_delta{{{_PAIR}}}", _PAIR_LEGEND)],
                    width=12, unit="percentunit"),
        _timeseries("Paired items", "Items both models of the pair have scored.",
                    [_target(f"llm_monitor_pair_items{{{_PAIR}}}", _PAIR_LEGEND)], width=12),
        _state_timeline("Pair verdicts", "Resolved (1) or not (0), per adjacent pair.",
                        _target(f"llm_monitor_pair_resolved{{{_PAIR}}}", _PAIR_LEGEND),
                        width=12),
        _timeseries("State changes",
                    "Verdict changes (kind=resolution) and ranking changes (kind=ranking).",
                    [_target(f"sum by (benchmark, kind) (increase("
                             f"llm_monitor_state_changes_total{{{_BENCH}}}[$__rate_interval]))",
                             "{{benchmark}} {{kind}}")], width=12),
        _timeseries("Events by outcome",
                    "Events per second: accepted, duplicate, conflict, invalid.",
                    [_target("sum by (outcome) (rate(llm_monitor_events_total"
                             "[$__rate_interval]))", "{{outcome}}")],
                    width=8, unit="reqps"),
        _timeseries("Dead-letter fraction",
                    "Share of events rejected as invalid or conflicting; the alert fires "
                    "above 5 %. 0 while no event arrives.",
                    [_target(_DEAD_LETTER_FRACTION, "dead-lettered")],
                    width=8, unit="percentunit", thresholds=(0.05,)),
        _timeseries("Processing lag p99",
                    "99th percentile of request arrival → durable and in the metrics; "
                    "target < 1 s. No data while no request arrives.",
                    [_target(_LAG_P99, "p99")], width=8, unit="s", thresholds=(1.0,)),
        _timeseries("Flip rate per model (10 % alarm)",
                    "Share of a model's items answered right in the original form and wrong "
                    "once perturbed, per perturbation kind and pooled (kind=all). Above 10 % "
                    "the model likely answers remembered wording; "
                    "GET /v1/benchmarks/<benchmark>/stability has the Wilson CI.",
                    [_target(f"llm_monitor_model_flip_rate{{{_BENCH}}}",
                             "{{benchmark}}: {{model}} ({{kind}})")],
                    width=12, unit="percentunit", thresholds=(0.1,)),
        _timeseries("Items excluded from resolution",
                    "Items flagged leak-suspect and left out of every verdict (llm-monitor "
                    "run --include-leak-suspect counts them). "
                    "GET /v1/benchmarks/<benchmark>/contamination lists them.",
                    [_target(f"llm_monitor_excluded_items{{{_BENCH}}}", "{{benchmark}}")],
                    width=12),
        _until_resolved_table(),
    ]


# A benchmark stays listed over the whole time range (its history is worth a look after a
# restart), but the pair variables list only the pairs exported now: the adjacent pairs change
# whenever the ranking reorders, and label_values over the range would also offer every pair
# retired within it (125 for 31 current ones on MMLU-Pro), whose panels are empty. query_result
# is an instant query at the range's end; Grafana writes each series as
# `{model_a="…"} <value> <time>`, with the label value unescaped, and the regex takes it back
# whole, quotes and all (the label is the series' only one).
_BENCH_QUERY = "label_values(llm_monitor_ranking_resolved, benchmark)"
_MODEL_A_QUERY = f"query_result(max by (model_a) (llm_monitor_pair_items{{{_BENCH}}}))"
_MODEL_B_QUERY = ("query_result(max by (model_b) (llm_monitor_pair_items{"
                  f"{_BENCH}, model_a=${{model_a:doublequote}}}}))")


def _only_label(name: str) -> str:
    """The regex taking the value of ``name`` from a query_result series with that label only."""
    return f'/^\\{{{name}="(.*)"\\}} \\S+ \\S+$/'


def _variables() -> list[cogbuilder.Builder[dm.VariableModel]]:
    def query_variable(name: str, label: str, query: str,
                       regex: str | None = None) -> db.QueryVariable:
        # Single-valued: each value is written into an equality matcher, never a regex.
        var = (db.QueryVariable(name).label(label).datasource(_DS_REF).query(query)
               .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
               .sort(dm.VariableSort.ALPHABETICAL_ASC).multi(False).include_all(False))
        return var if regex is None else var.regex(regex)

    return [
        query_variable("benchmark", "benchmark", _BENCH_QUERY),
        query_variable("model_a", "pair: model A (ranked above)", _MODEL_A_QUERY,
                       _only_label("model_a")),
        query_variable("model_b", "model B", _MODEL_B_QUERY, _only_label("model_b")),
    ]


_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)")


def interpolate(expr: str, values: dict[str, str]) -> str:
    """``expr`` with Grafana's variables replaced as Grafana writes them into a query.

    ``${name:doublequote}`` becomes the value in double quotes with each ``"`` escaped as
    ``\\"`` (Grafana's documented ``doublequote`` format); ``$name`` and ``${name}`` the value
    as it is (used for ``$__rate_interval`` only). An unknown variable or format is an error.
    """
    def one(m: re.Match[str]) -> str:
        name, fmt = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), None)
        if name not in values:
            raise KeyError(f"no value for Grafana variable {name!r} in {expr!r}")
        value = values[name]
        if fmt == "doublequote":
            return '"' + value.replace('"', '\\"') + '"'
        if fmt is None:
            return value
        raise ValueError(f"unsupported variable format {fmt!r} in {expr!r}")

    return _VARIABLE.sub(one, expr)


def _dashboard_model() -> dm.Dashboard:
    builder = (db.Dashboard("llm-monitor").uid(DASHBOARD_UID).tags(["llm-monitor"])
               .description("Live resolution of leaderboard gaps (docs/operations.md).")
               .version(1).editable().refresh("10s").time("now-1h", "now").timezone("utc")
               .variables(_variables()))
    # The SDK lays panels out left to right, wrapping at 24 columns; it does not number them.
    for pid, panel in enumerate(_panels(), start=1):
        builder = builder.with_panel(panel.id(pid))
    return builder.build()


def dashboard() -> dict[str, Any]:
    """The dashboard JSON for Grafana provisioning, as a plain dict."""

    data: dict[str, Any] = json.loads(json.dumps(_dashboard_model(), cls=JSONEncoder))
    return data


def dashboard_queries() -> list[tuple[str, Query]]:
    """(panel title, query) of every panel query, for tests and checks."""
    return [(panel["title"], Query(t["expr"], t.get("legendFormat", ""),
                                   bool(t.get("instant", False))))
            for panel in dashboard()["panels"] for t in panel["targets"]]


def variable_queries() -> list[str]:
    """The PromQL inside the templating variables' Grafana functions."""
    out = []
    for var in dashboard()["templating"]["list"]:
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
    header = (f"# Generated by `python -m grafana.build` from {RULES_FILE}; "
              "do not edit by hand.\n")
    return {
        DASHBOARD_FILE: json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n",
        ALERTS_FILE: header + _dump_yaml(grafana_alert_rules(rules)),
    }


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the generated Grafana files; 1 when stale."""
    parser = argparse.ArgumentParser(prog="python -m grafana.build",
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
        print(f"out of date: {', '.join(stale)}; run python -m grafana.build",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
