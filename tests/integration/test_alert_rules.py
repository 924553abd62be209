"""promtool and amtool on the deploy/ configuration: syntax, rule unit tests, routing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
PROM_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
RULES = DEPLOY / "prometheus" / "rules" / "llm-monitor.rules.yml"
RULE_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.test.yml"))
AM_CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"


def _tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").is_file() else None)
    if path is None:
        pytest.fail(f"{name} not found; scripts/install-deps.sh installs it (apt: prometheus, "
                    "prometheus-alertmanager)")
    return path


def _run(*cmd: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def test_prometheus_config_and_rules_are_valid() -> None:
    promtool = _tool("promtool")
    out = _ok(_run(promtool, "check", "config", PROM_CONFIG))
    assert "1 rule files found" in out, out  # the rule glob really picks up our file
    out = _ok(_run(promtool, "check", "rules", RULES))
    assert "SUCCESS: 11 rules found" in out, out


def test_every_alert_has_severity_summary_description_and_a_unit_test() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    tested: dict[str, set[bool]] = {}
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                tested.setdefault(check["alertname"], set()).add(bool(check["exp_alerts"]))
    for rule in rules:
        name = rule["alert"]
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert {"summary", "description", "runbook"} <= set(rule["annotations"]), name
        # Firing and not firing are both exercised.
        assert tested.get(name) == {True, False}, (name, tested.get(name))
    docs = (REPO / "docs" / "operations.md").read_text()
    for rule in rules:
        anchor = rule["annotations"]["runbook"].split("#", 1)[1]
        assert f"### {rule['alert']}" in docs and anchor == rule["alert"].lower(), rule["alert"]


def test_rule_unit_tests_pass() -> None:
    promtool = _tool("promtool")
    assert RULE_TESTS
    out = _ok(_run(promtool, "test", "rules", *RULE_TESTS))
    assert "SUCCESS" in out and "FAILED" not in out, out


@pytest.mark.parametrize(("old", "new", "alert"), [
    # "became resolved" without the look-back: a pair first seen already resolved would page
    ("min_over_time(llm_monitor_pair_resolved[15m]) == 0",
     "min_over_time(llm_monitor_pair_resolved[15m]) >= 0", "LLMMonitorPairResolved"),
    ("> 0.05", "> 0.5", "LLMMonitorDeadLetterRateHigh"),
    ('outcome="accepted"}[1h] offset 10m)) > 0', 'outcome="accepted"}[1h] offset 10m)) > -1',
     "LLMMonitorStalled"),
    ("up{job=\"llm-monitor\"} == 0\n        for: 2m", "up{job=\"llm-monitor\"} == 0\n        for: 0m",
     "LLMMonitorDown"),
    # "settled, still evaluated": without any one of its conditions it pages an evaluator that
    # stopped on the signal, one that has done every item, or a model still open
    ("changes(llm_monitor_model_items[5m]) > 0\n        for: 10m",
     "changes(llm_monitor_model_items[5m]) >= 0\n        for: 10m", "LLMMonitorModelSettled"),
    ("llm_monitor_model_items_remaining > 0", "llm_monitor_model_items_remaining >= 0",
     "LLMMonitorModelSettled"),
    ("llm_monitor_model_settled == 1", "llm_monitor_model_settled >= 0",
     "LLMMonitorModelSettled"),
    ("changes(llm_monitor_model_items[5m]) > 0\n        for: 10m",
     "changes(llm_monitor_model_items[5m]) > 0\n        for: 0m", "LLMMonitorModelSettled"),
])
def test_rule_unit_tests_catch_a_broken_rule(tmp_path: Path, old: str, new: str, alert: str) -> None:
    """The unit tests are not vacuous: each mutation of a rule makes them fail on that alert."""
    promtool = _tool("promtool")
    text = RULES.read_text()
    assert old in text, old
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "rules" / RULES.name).write_text(text.replace(old, new))
    for path in RULE_TESTS:
        shutil.copy(path, tmp_path / "tests" / path.name)
    proc = _run(promtool, "test", "rules", *sorted((tmp_path / "tests").glob("*.yml")))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert f"alertname: {alert}," in out, out


def test_alertmanager_config_is_valid_and_routes_by_severity() -> None:
    amtool = _tool("amtool")
    out = _ok(_run(amtool, "check-config", AM_CONFIG))
    assert "SUCCESS" in out, out
    expected = {"critical": "pager", "warning": "ops", "info": "leaderboard"}
    for severity, receiver in expected.items():
        proc = _ok(_run(amtool, "config", "routes", "test", f"--config.file={AM_CONFIG}",
                        f"severity={severity}", "alertname=LLMMonitorPairResolved"))
        assert proc.splitlines()[0].strip() == receiver, (severity, proc)
    # Every receiver is a loopback webhook until an operator points it elsewhere.
    conf = yaml.safe_load(AM_CONFIG.read_text())
    urls = [w["url"] for r in conf["receivers"] for w in r["webhook_configs"]]
    assert urls and all(u.startswith("http://127.0.0.1:") for u in urls), urls
