"""deploy/k8s: the manifests parse, fit together, and the CLI accepts their container args."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from monitor.cli import app
from monitor.errors import ConfigError
from monitor.runners.settings import Settings

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/component")


def load(name: str) -> dict[str, dict[str, Any]]:
    """Kind → object of one manifest file (each kind appears once per file)."""
    docs = [d for d in yaml.safe_load_all((K8S / name).read_text(encoding="utf-8")) if d]
    kinds = [d["kind"] for d in docs]
    assert len(set(kinds)) == len(kinds), kinds
    for doc in docs:
        assert {"apiVersion", "kind", "metadata"} <= set(doc), doc
    return {d["kind"]: d for d in docs}


def expand(args: list[str], env: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) substitution in container args; an unknown name fails the test."""
    def one(m: re.Match[str]) -> str:
        assert m.group(1) in env, f"$({m.group(1)}) is not defined in the container's env"
        return env[m.group(1)]
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, a) for a in args]


def parse_cli(args: list[str]) -> dict[str, Any]:
    """The subcommand's parsed parameters, exactly as `llm-monitor` would parse them."""
    command = typer.main.get_command(app)
    sub = command.commands[args[0]]  # type: ignore[attr-defined]
    return dict(sub.make_context(args[0], list(args[1:])).params)


def container(workload: dict[str, Any]) -> dict[str, Any]:
    (c,) = workload["spec"]["template"]["spec"]["containers"]
    return dict(c)


def test_parse_cli_rejects_an_unknown_option() -> None:
    with pytest.raises(Exception, match="No such option"):
        parse_cli(["worker", "--brokers", "kafka://x:9092"])


def test_worker_deployment_settings_come_from_its_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    objs = load("worker.yaml")
    deployment, config, service = objs["Deployment"], objs["ConfigMap"], objs["Service"]
    c = container(deployment)
    assert c["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
    params = parse_cli(expand(c["args"], config["data"]))
    # No flags: the worker builds its Settings from the pod's LLM_MONITOR_* environment, the
    # way `llm-monitor worker` does.
    assert c["args"] == ["worker"] and not any(params.values())
    env: dict[str, str] = dict(config["data"])
    assert all(k.startswith("LLM_MONITOR_") for k in env)
    for key in list(os.environ):
        if key.startswith("LLM_MONITOR_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = Settings.build(serve_http=False)
    assert settings.broker == env["LLM_MONITOR_BROKER"] and settings.broker.startswith("kafka://")
    assert settings.alpha == pytest.approx(float(env["LLM_MONITOR_ALPHA"]))
    assert settings.core_config().correction == env["LLM_MONITOR_CORRECTION"]
    assert settings.family in {"adjacent", "all"}
    # More workers than partitions would idle (one benchmark never spans two workers).
    assert deployment["spec"]["replicas"] <= settings.partitions
    # Metrics reachable from the cluster, on the port the Service and its annotations name.
    assert settings.metrics_host == "0.0.0.0"
    port = settings.metrics_port
    assert {"name": "metrics", "containerPort": port} in c["ports"]
    notes = service["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert int(notes["prometheus.io/port"]) == port and notes["prometheus.io/path"] == "/metrics"
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
    labels = deployment["spec"]["selector"]["matchLabels"]
    assert deployment["spec"]["template"]["metadata"]["labels"] == labels
    assert service["spec"]["selector"] == labels and set(labels) == set(LABELS)
    # A misspelt value in the ConfigMap is refused at start, naming the variable.
    monkeypatch.setenv("LLM_MONITOR_CORRECTION", "bonferoni")
    with pytest.raises(ConfigError, match="LLM_MONITOR_CORRECTION"):
        Settings.build(serve_http=False)


def test_monitor_statefulset_args_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    objs = load("monitor.yaml")
    sts, config, service = objs["StatefulSet"], objs["ConfigMap"], objs["Service"]
    c = container(sts)
    params = parse_cli(c["args"])
    assert c["args"][0] == "run" and params["host"] == "0.0.0.0"
    # The database lives on the claimed volume.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == claim["metadata"]["name"])
    assert Path(params["db"]).is_relative_to(mount["mountPath"])
    assert sts["spec"]["replicas"] == 1  # one SQLite writer
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["selector"] == sts["spec"]["selector"]["matchLabels"]
    # The token comes from a Secret, and the settings the pod would build are valid: a
    # non-loopback bind with the token passes, without it the monitor refuses to start.
    (token_env,) = c["env"]
    assert token_env["name"] == "LLM_MONITOR_TOKEN"
    assert "secretKeyRef" in token_env["valueFrom"]
    # The pod's environment (ConfigMap + Secret), read the way `llm-monitor run` reads it.
    env: dict[str, str] = dict(config["data"])
    assert all(k.startswith("LLM_MONITOR_") for k in env)
    for key in list(os.environ):
        if key.startswith("LLM_MONITOR_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LLM_MONITOR_TOKEN", "a-token")
    options = {k: params[k] for k in ("db", "host", "port")}
    settings = Settings.build(**options)
    assert settings.alpha == pytest.approx(float(env["LLM_MONITOR_ALPHA"]))
    assert settings.max_body_bytes == 10_000_000
    assert settings.core_config().correction == env["LLM_MONITOR_CORRECTION"]
    monkeypatch.delenv("LLM_MONITOR_TOKEN")
    with pytest.raises(ConfigError, match="without a token"):
        Settings.build(**options)
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
