"""A real monitor, Prometheus and Alertmanager on loopback: dashboards get data, alerts arrive.

``llm-monitor run`` is scraped every second by ``/usr/bin/prometheus`` with the repository's
rule file; alerts go to ``/usr/bin/prometheus-alertmanager`` configured from the repository's
routing tree, whose webhooks point at a small aiohttp server in this test. Results are
posted so that one pair (and with it the ranking) goes from unresolved to resolved, and so
that a model evaluated until its plan says stop meets the "settled, still evaluated" alert's
expression (the rule loaded and pending) until it has done every item.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from grafana import build as grafana

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
RULES = DEPLOY / "prometheus" / "rules" / "llm-monitor.rules.yml"
BENCH = "toy"
# Two models far apart: about 60 % of items are discordant in strong's favour.
MODELS = {"strong": 0.9, "weak": 0.3}

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _binary(name: str) -> str:
    path = shutil.which(name) or f"/usr/bin/{name}"
    if not Path(path).is_file():
        pytest.fail(f"{name} not found; scripts/install-deps.sh installs it")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(method: str, url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def _wait(what: str, check: Callable[[], Any], timeout: float, logs: list[Path]) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            value = check()
            if value:
                return value
        time.sleep(0.2)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                      for p in logs if p.is_file())
    pytest.fail(f"timed out after {timeout}s waiting for {what}\n{tails}")


class Processes:
    """Every process this test starts, each stopped at the end (SIGTERM, then SIGKILL)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.logs: list[Path] = []

    def start(self, name: str, cmd: list[str]) -> subprocess.Popen[bytes]:
        log = self.tmp / f"{name}.log"
        self.logs.append(log)
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.procs.append((name, proc))
        return proc

    def ready(self, name: str, url: str, timeout: float = 30.0) -> None:
        proc = dict(self.procs)[name]

        def check() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}:\n"
                            f"{(self.tmp / f'{name}.log').read_text(errors='replace')[-3000:]}")
            return _http("GET", url, timeout=2.0)[0] == 200

        _wait(f"{name} at {url}", check, timeout, self.logs)

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for _, proc in reversed(self.procs):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


class Webhook:
    """An aiohttp server on loopback recording every Alertmanager notification by path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        self.received.append((request.match_info["receiver"], await request.json()))
        return web.Response(status=200)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/{receiver}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        try:
            self._loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            self._loop.run_until_complete(site.start())
            self.port = runner.addresses[0][1]
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def start(self) -> Webhook:
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None or not self.port:
            pytest.fail(f"webhook server did not start: {self._error!r}")
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def alerts(self, receiver: str) -> list[dict[str, Any]]:
        return [a for path, body in list(self.received) if path == receiver
                for a in body.get("alerts", [])]


def _alertmanager_config(hook_port: int) -> dict[str, Any]:
    """The repository's routing tree, with webhooks on the test server and no waiting."""
    conf = yaml.safe_load((DEPLOY / "alertmanager" / "alertmanager.yml").read_text())
    for receiver in conf["receivers"]:
        for hook in receiver["webhook_configs"]:
            path = urllib.parse.urlparse(hook["url"]).path
            hook["url"] = f"http://127.0.0.1:{hook_port}{path}"
    routes = [conf["route"], *conf["route"].get("routes", [])]
    for route in routes:
        route["group_wait"] = "0s"
        route["group_interval"] = "1s"
    return conf


def _prometheus_config(monitor_port: int, am_port: int) -> dict[str, Any]:
    """The repository's Prometheus config, sped up to 1 s and pointed at the test ports."""
    conf = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    conf["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    conf["rule_files"] = [str(RULES)]
    conf["alerting"]["alertmanagers"][0]["static_configs"] = [
        {"targets": [f"127.0.0.1:{am_port}"]}]
    jobs = [j for j in conf["scrape_configs"] if j["job_name"] == "llm-monitor"]
    assert len(jobs) == 1
    jobs[0]["static_configs"] = [{"targets": [f"127.0.0.1:{monitor_port}"]}]
    conf["scrape_configs"] = jobs
    return conf


def _events(lo: int, hi: int, models: dict[str, float] = MODELS, bench: str = BENCH
            ) -> list[dict[str, Any]]:
    # Deterministic 0/1 scores: model j is right on item i when (i·7919 + 13j) mod 1000 < 1000·p.
    return [{"benchmark": bench, "item_id": f"q{i}", "model": m, "cluster": f"c{i % 5}",
             "score": int((i * 7919 + 13 * j) % 1000 < 1000 * p)}
            for i in range(lo, hi) for j, (m, p) in enumerate(models.items())]


@pytest.fixture()
def stack(tmp_path: Path) -> Iterator[dict[str, Any]]:
    prometheus, alertmanager = _binary("prometheus"), _binary("prometheus-alertmanager")
    procs = Processes(tmp_path)
    hook = Webhook()
    try:
        hook.start()
        mon_port, prom_port, am_port = _free_port(), _free_port(), _free_port()
        procs.start("monitor", [sys.executable, "-m", "monitor.cli", "run", "--host", "127.0.0.1",
                                "--port", str(mon_port), "--db", str(tmp_path / "monitor.db"),
                                "--no-view"])
        am_conf = tmp_path / "alertmanager.yml"
        am_conf.write_text(yaml.safe_dump(_alertmanager_config(hook.port)))
        procs.start("alertmanager", [alertmanager, f"--config.file={am_conf}",
                                     f"--storage.path={tmp_path / 'am'}",
                                     f"--web.listen-address=127.0.0.1:{am_port}",
                                     "--cluster.listen-address="])
        prom_conf = tmp_path / "prometheus.yml"
        prom_conf.write_text(yaml.safe_dump(_prometheus_config(mon_port, am_port)))
        procs.start("prometheus", [prometheus, f"--config.file={prom_conf}",
                                   f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                   f"--web.listen-address=127.0.0.1:{prom_port}"])
        procs.ready("monitor", f"http://127.0.0.1:{mon_port}/healthz")
        procs.ready("alertmanager", f"http://127.0.0.1:{am_port}/-/ready")
        procs.ready("prometheus", f"http://127.0.0.1:{prom_port}/-/ready")
        yield {"monitor": f"http://127.0.0.1:{mon_port}", "prom": f"http://127.0.0.1:{prom_port}",
               "am": f"http://127.0.0.1:{am_port}", "hook": hook, "logs": procs.logs}
    finally:
        procs.stop_all()
        hook.stop()
    for name, proc in procs.procs:
        assert proc.returncode is not None, f"{name} still running"


def _query(prom: str, expr: str) -> dict[str, Any]:
    status, body = _http("GET", f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert status == 200 and body["status"] == "success", (expr, body)
    return dict(body["data"])


def _firing(prom: str) -> set[str]:
    _, body = _http("GET", f"{prom}/api/v1/alerts")
    return {a["labels"]["alertname"] for a in body["data"]["alerts"] if a["state"] == "firing"}


def test_dashboards_get_data_and_a_resolution_reaches_alertmanager(stack: dict[str, Any]) -> None:
    mon, prom, hook, logs = stack["monitor"], stack["prom"], stack["hook"], stack["logs"]
    pair_sel = f'llm_monitor_pair_resolved{{benchmark="{BENCH}"}}'

    # A few items: the pair exists and is unresolved.
    first = _events(0, 6)
    status, body = _http("POST", f"{mon}/v1/results", first)
    assert status == 202 and body["accepted"] == len(first), body
    # Prometheus must have seen it unresolved, or "became resolved" has no before.
    _wait("the unresolved pair in Prometheus",
          lambda: [r for r in _query(prom, pair_sel)["result"] if r["value"][1] == "0"], 20, logs)

    # Enough items to resolve it, with one duplicate, one conflict and one invalid event.
    bad = [first[0], dict(first[1], score=1 - first[1]["score"]),
           {"benchmark": BENCH, "item_id": "x", "model": "weak", "score": 2}]
    status, body = _http("POST", f"{mon}/v1/results", [*_events(6, 400), *bad])
    assert status == 202 and (body["accepted"], body["duplicate"], body["conflict"],
                              body["invalid"]) == (2 * 394, 1, 1, 1), body
    _, ranking = _http("GET", f"{mon}/v1/benchmarks/{BENCH}/ranking")
    assert ranking["resolved"] is True, ranking  # the scenario really resolves the ranking

    # Both "became resolved" alerts fire in Prometheus and reach the info receiver.
    _wait("the resolution alerts to fire",
          lambda: {"LLMMonitorPairResolved", "LLMMonitorRankingResolved"} <= _firing(prom),
          20, logs)
    assert not _firing(prom) & {"LLMMonitorResolutionLost", "LLMMonitorDown",
                                "LLMMonitorDeadLetterRateHigh"}
    _wait("the alerts at the webhook", lambda: {
        a["labels"]["alertname"] for a in hook.alerts("leaderboard")
    } >= {"LLMMonitorPairResolved", "LLMMonitorRankingResolved"}, 20, logs)
    pair_alert = next(a for a in hook.alerts("leaderboard")
                      if a["labels"]["alertname"] == "LLMMonitorPairResolved")
    assert pair_alert["status"] == "firing"
    assert {k: pair_alert["labels"][k] for k in ("benchmark", "model_a", "model_b", "severity")
            } == {"benchmark": BENCH, "model_a": "strong", "model_b": "weak", "severity": "info"}
    assert pair_alert["annotations"]["summary"] == f"{BENCH}: strong vs weak became resolved"
    assert not hook.alerts("pager") and not hook.alerts("ops"), hook.received

    # Perturbed variants of some items (a quarter of them flipped), so the stability panels
    # have series: flip-rate gauges exist only for models with perturbed results.
    perturbed = [dict(e, variant="perturbed:paraphrase",
                      score=1 - e["score"] if k % 4 == 0 else e["score"])
                 for k, e in enumerate(_events(0, 40))]
    status, body = _http("POST", f"{mon}/v1/results", perturbed)
    assert status == 202 and body["accepted"] == len(perturbed), body
    _wait("the flip-rate series in Prometheus", lambda: _query(
        prom, f'llm_monitor_model_flip_rate{{benchmark="{BENCH}"}}')["result"], 20, logs)

    # The dashboard's variables resolve to this benchmark and pair, the way Grafana does it.
    values = _variables(prom, BENCH, logs)
    assert (values["model_a"], values["model_b"]) == ("strong", "weak")
    results = _every_panel(prom, values, logs)

    def by(title: str, label: str) -> dict[str, float]:
        return {r["metric"].get(label, ""): float(r["value"][1]) for r in results[title]}

    assert by("Ranking resolved", "benchmark") == {BENCH: 1.0}
    assert by("Unresolved adjacent pairs", "benchmark") == {BENCH: 0.0}
    chosen = {r["metric"].get("__name__", ""): float(r["value"][1])
              for r in results[next(t for t in results if t.startswith("E-value"))]}
    assert chosen["llm_monitor_pair_e_value"] >= chosen["llm_monitor_pair_e_threshold"] > 20.0
    assert set(by("Resolution ratio by kind", "kind")) == {"fixed", "cluster", "anytime"}
    assert by("Paired items", "model_a") == {"strong": 400.0}
    assert 0.4 < by("Pair delta (mean a − mean b)", "model_b")["weak"] < 0.8
    assert by("Pair verdicts", "model_a") == {"strong": 1.0}
    assert {"accepted", "duplicate", "conflict", "invalid"} <= set(by("Events by outcome", "outcome"))
    changes = {(r["metric"]["benchmark"], r["metric"]["kind"]) for r in results["State changes"]}
    assert {(BENCH, "resolution"), (BENCH, "ranking")} <= changes, changes
    assert 0.0 < by("Dead-letter fraction", "")[""] < 0.05
    assert 0.0 < by("Processing lag p99", "")[""] < 1.0
    assert by("Accepted results per second", "")[""] > 0.0


#: The dashboard's default time range, "now-1h" to "now": the range label_values reads.
WINDOW_SECONDS = 3600


def _variable_options(prom: str, name: str, values: dict[str, str]) -> list[str]:
    """The options Grafana lists for the dashboard variable ``name`` over the default time
    range, given the values of the variables its query names: the query run as Grafana's
    Prometheus data source runs it (label_values: the label values API over the range;
    query_result: an instant query at the range's end, each series written out as
    ``name{label="value",…} value time_ms``), then the variable's regex and sort applied."""
    var = next(v for v in grafana.dashboard()["templating"]["list"] if v["name"] == name)
    end = time.time()
    query = grafana.interpolate(var["query"], values)
    texts: list[str]
    if m := re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query, re.S):
        params = {"match[]": m.group(1), "start": end - WINDOW_SECONDS, "end": end}
        status, body = _http("GET", f"{prom}/api/v1/label/{m.group(2)}/values?"
                             + urllib.parse.urlencode(params))
        assert status == 200 and body["status"] == "success", (query, body)
        texts = list(body["data"])
    elif m := re.fullmatch(r"query_result\((.+)\)", query, re.S):
        status, body = _http("GET", f"{prom}/api/v1/query?"
                             + urllib.parse.urlencode({"query": m.group(1), "time": end}))
        assert status == 200 and body["data"]["resultType"] == "vector", (query, body)
        texts = []
        for series in body["data"]["result"]:
            labels = dict(series["metric"])
            head = labels.pop("__name__", "")
            at, value = series["value"]
            texts.append(head + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items())
                         + f"}} {value} {at * 1000}")
    else:
        raise AssertionError(f"variable {name}: no Grafana function in {var['query']!r}")
    options = texts
    if var.get("regex"):
        # Grafana keeps the texts the regex matches, as the first capture group if it has one.
        m = re.fullmatch(r"/(.*)/([gimsuy]*)", var["regex"], re.S)
        assert m is not None and "g" not in m.group(2), var["regex"]
        pattern = re.compile(m.group(1), re.I if "i" in m.group(2) else 0)
        hits = [pattern.search(t) for t in texts]
        options = [h.group(1) if h.groups() else h.group(0) for h in hits if h is not None]
    options = list(dict.fromkeys(options))
    assert var["sort"] == 1, var  # alphabetical, ascending
    return sorted(options)


def _variables(prom: str, bench: str, logs: list[Path]) -> dict[str, str]:
    """The dashboard's variables as Grafana resolves them: the benchmark, then the first
    model_a of that benchmark, then the first model_b paired with it."""
    values = {"benchmark": bench, "__rate_interval": "1m"}
    benches = _variable_options(prom, "benchmark", values)
    assert bench in benches, benches
    a_options = _variable_options(prom, "model_a", values)
    assert a_options, values
    values["model_a"] = a_options[0]
    b_options = _variable_options(prom, "model_b", values)
    assert b_options, values
    values["model_b"] = b_options[0]
    return values


def _every_panel(prom: str, values: dict[str, str], logs: list[Path]
                 ) -> dict[str, list[dict[str, Any]]]:
    """Every panel query, written as Grafana writes it, returns series carrying the labels its
    legend names, with numbers (no NaN)."""
    # increase() needs two samples of a series; the resolution counter was born at the change.
    _wait("two scrapes of the resolution change counter", lambda: _query(
        prom, grafana.interpolate(
            "count_over_time(llm_monitor_state_changes_total{benchmark=${benchmark:doublequote},"
            'kind="resolution"}[1m]) >= 2', values))["result"], 10, logs)
    results: dict[str, list[dict[str, Any]]] = {}
    for title, q in grafana.dashboard_queries():
        expr = grafana.interpolate(q.expr, values)
        data = _query(prom, expr)
        assert data["resultType"] == "vector" and data["result"], (title, expr, data)
        for series in data["result"]:
            legend_labels = set(re.findall(r"\{\{(\w+)\}\}", q.legend))
            assert legend_labels <= set(series["metric"]), (title, series)
            sample = float(series["value"][1])
            assert not math.isnan(sample), (title, series)
            if "model_a" in series["metric"] and "model_a=" in q.expr:
                assert (series["metric"]["model_a"], series["metric"]["model_b"]) == (
                    values["model_a"], values["model_b"]), (title, series)
        results.setdefault(title, []).extend(data["result"])
    return results


# Names as real boards have them: parentheses, commas, dots, spaces, a quote.
AWKWARD = {"merged(2026-02, probably gemini-3.1-pro)": 0.92,
           "Meta-Llama-3.1-70B-Instruct (v1.0)": 0.55,
           'DeepSeek Coder V2 "lite", q4.0': 0.15}
AWKWARD_BENCH = "MMLU-Pro (v1.1), 5-shot"


def test_every_panel_returns_series_for_awkward_model_names(stack: dict[str, Any]) -> None:
    mon, prom, logs = stack["monitor"], stack["prom"], stack["logs"]
    status, body = _http("POST", f"{mon}/v1/results", _events(0, 6, AWKWARD, AWKWARD_BENCH))
    assert status == 202 and body["accepted"] == 18, body
    _wait("the pairs in Prometheus", lambda: len(_query(
        prom, "llm_monitor_pair_items")["result"]) == 2, 20, logs)
    bad = {"benchmark": AWKWARD_BENCH, "item_id": "x", "model": "m", "score": 2}
    status, body = _http("POST", f"{mon}/v1/results",
                         [*_events(6, 300, AWKWARD, AWKWARD_BENCH), bad])
    assert status == 202 and body["invalid"] == 1, body
    perturbed = [dict(e, variant="perturbed:paraphrase",
                      score=1 - e["score"] if k % 4 == 0 else e["score"])
                 for k, e in enumerate(_events(0, 40, AWKWARD, AWKWARD_BENCH))]
    status, body = _http("POST", f"{mon}/v1/results", perturbed)
    assert status == 202 and body["accepted"] == len(perturbed), body
    _, ranking = _http("GET", f"{mon}/v1/benchmarks/{urllib.parse.quote(AWKWARD_BENCH)}/ranking")
    assert [m["model"] for m in ranking["models"]] == list(AWKWARD), ranking["models"]
    _wait("the flip-rate series in Prometheus", lambda: _query(
        prom, "llm_monitor_model_flip_rate")["result"], 20, logs)

    values = _variables(prom, AWKWARD_BENCH, logs)
    top, second, third = AWKWARD
    # model_b lists only the partners of the chosen model_a (sorted: "DeepSeek…" first).
    assert (values["model_a"], values["model_b"]) == (second, third), values
    results = _every_panel(prom, values, logs)
    table = {(r["metric"]["__name__"], r["metric"]["model"]): float(r["value"][1])
             for r in results["Ranking"]}
    for rank, m in enumerate(ranking["models"], start=1):
        assert table["llm_monitor_model_rank", m["model"]] == rank
        assert table["llm_monitor_model_mean", m["model"]] == pytest.approx(m["mean"])
        assert table["llm_monitor_model_rank_low", m["model"]] == m["rank_low"]
    evidence = {(r["metric"]["model_a"], r["metric"]["model_b"]): float(r["value"][1])
                for r in results[next(t for t in results if t.startswith("Evidence"))]}
    expected = {(p["model_a"], p["model_b"]): p["e_value"] / p["e_threshold"]
                for p in ranking["pairs"]}
    assert evidence.keys() == expected.keys() == {(top, second), (second, third)}
    for pair, ratio in expected.items():
        assert evidence[pair] == pytest.approx(ratio, rel=1e-6), pair
    bounds = {r["metric"]["bound"]: float(r["value"][1])
              for r in results[next(t for t in results if t.startswith("E-value"))]
              if r["metric"]["__name__"] == "llm_monitor_ranking_e_threshold"}
    assert bounds == {"min": pytest.approx(min(p["e_threshold"] for p in ranking["pairs"])),
                      "max": pytest.approx(max(p["e_threshold"] for p in ranking["pairs"]))}


# The ranking reorders: "low" overtakes "mid", so the adjacent pairs (top, mid) and (mid, low)
# retire and (top, low) and (low, mid) take their place.
REORDER_BENCH = "reorder"
BEFORE = {"top": 0.9, "mid": 0.5, "low": 0.1}
AFTER = {"top": 0.9, "mid": 0.5, "low": 0.75}


def _pair_panels() -> list[tuple[str, grafana.Query]]:
    """(title, query) of the panel queries that show the chosen pair model_a vs model_b."""
    return [(t, q) for t, q in grafana.dashboard_queries() if "${model_a:doublequote}" in q.expr]


def _pairs_now(prom: str) -> set[tuple[str, str]]:
    rows = _query(prom, f'llm_monitor_pair_items{{benchmark="{REORDER_BENCH}"}}')["result"]
    return {(r["metric"]["model_a"], r["metric"]["model_b"]) for r in rows}


def test_pair_variables_list_only_the_pairs_exported_now(stack: dict[str, Any]) -> None:
    mon, prom, logs = stack["monitor"], stack["prom"], stack["logs"]
    status, body = _http("POST", f"{mon}/v1/results", _events(0, 30, BEFORE, REORDER_BENCH))
    assert status == 202 and body["accepted"] == 90, body
    _wait("the first pairs in Prometheus",
          lambda: _pairs_now(prom) == {("top", "mid"), ("mid", "low")}, 20, logs)
    status, body = _http("POST", f"{mon}/v1/results", _events(30, 300, AFTER, REORDER_BENCH))
    assert status == 202 and body["accepted"] == 810, body
    _, ranking = _http("GET", f"{mon}/v1/benchmarks/{REORDER_BENCH}/ranking")
    assert [m["model"] for m in ranking["models"]] == ["top", "low", "mid"], ranking["models"]
    current = {("top", "low"), ("low", "mid")}
    _wait("the retired pairs to go stale", lambda: _pairs_now(prom) == current, 20, logs)
    # The retired pairs are still in the last hour's series: what label_values would list.
    status, body = _http("GET", f"{prom}/api/v1/series?" + urllib.parse.urlencode({
        "match[]": f'llm_monitor_pair_items{{benchmark="{REORDER_BENCH}"}}',
        "start": time.time() - WINDOW_SECONDS, "end": time.time()}))
    assert status == 200
    in_window = {(r["model_a"], r["model_b"]) for r in body["data"]}
    assert in_window == current | {("top", "mid"), ("mid", "low")}, in_window

    values = {"benchmark": REORDER_BENCH, "__rate_interval": "1m"}
    assert _variable_options(prom, "model_a", values) == ["low", "top"]
    partners = {a: _variable_options(prom, "model_b", {**values, "model_a": a})
                for a in ("top", "mid", "low")}
    assert partners == {"top": ["low"], "mid": [], "low": ["mid"]}, partners
    # The default choice is a current pair, and every panel of the pair has its series.
    chosen = _variables(prom, REORDER_BENCH, logs)
    assert (chosen["model_a"], chosen["model_b"]) == ("low", "mid"), chosen
    panels = _pair_panels()
    assert len(panels) >= 6, [t for t, _ in panels]
    for title, q in panels:
        rows = _query(prom, grafana.interpolate(q.expr, chosen))["result"]
        assert rows, (title, q.expr)


def test_idle_panels_show_numbers_or_no_data_never_nan(stack: dict[str, Any]) -> None:
    mon, prom, logs = stack["monitor"], stack["prom"], stack["logs"]
    events = _events(0, 50)
    bad = [dict(events[1], score=1 - events[1]["score"]),
           {"benchmark": BENCH, "item_id": "x", "model": "weak", "score": 2}]
    status, body = _http("POST", f"{mon}/v1/results", [*events, *bad])
    assert status == 202 and (body["conflict"], body["invalid"]) == (1, 1), body
    _wait("the events in Prometheus", lambda: _query(
        prom, 'llm_monitor_events_total{outcome="invalid"} > 0')["result"], 20, logs)
    # Grafana's $__rate_interval at a 1 s scrape is 4 s: idle means no event in that window.
    values = {**_variables(prom, BENCH, logs), "__rate_interval": "4s"}
    _wait("an idle window", lambda: [r for r in _query(
        prom, "sum(rate(llm_monitor_events_total[4s])) == 0")["result"]], 20, logs)
    results = {}
    for title, q in grafana.dashboard_queries():
        expr = grafana.interpolate(q.expr, values)
        rows = _query(prom, expr)["result"]
        for series in rows:
            assert not math.isnan(float(series["value"][1])), (title, expr, series)
        results[title] = rows
    # Nothing rejected while nothing arrives; no lag is measured while no request is.
    assert [float(r["value"][1]) for r in results["Dead-letter fraction"]] == [0.0]
    assert results["Processing lag p99"] == []
    assert [float(r["value"][1]) for r in results["Accepted results per second"]] == [0.0]


# Evaluate until resolved: three reference models on every item, a new one evaluated on the
# plan's items until the plan says stop, then on beyond it.
SETTLE_BENCH = "until resolved"
SETTLE_N = 600
REFERENCE_MODELS = {"strong": 0.9, "mid": 0.6, "weak": 0.3}


def _settle_scores(seed: int, p: float) -> list[int]:
    import numpy as np

    return (np.random.default_rng(seed).random(SETTLE_N) < p).astype(int).tolist()


def _rule_expr(alert: str) -> str:
    rules = yaml.safe_load(RULES.read_text())
    (expr,) = [r["expr"] for g in rules["groups"] for r in g["rules"] if r["alert"] == alert]
    return str(expr)


def test_a_settled_model_still_evaluated_meets_the_alert_expression(stack: dict[str, Any]
                                                                    ) -> None:
    mon, prom, logs = stack["monitor"], stack["prom"], stack["logs"]
    bench = urllib.parse.quote(SETTLE_BENCH, safe="")
    status, body = _http("POST", f"{mon}/v1/results", [
        {"benchmark": SETTLE_BENCH, "item_id": f"q{i}", "model": m, "score": s}
        for j, (m, p) in enumerate(REFERENCE_MODELS.items())
        for i, s in enumerate(_settle_scores(j, p))])
    assert status == 202, body
    new = _settle_scores(7, 0.75)

    def post(items: list[str]) -> None:
        status, body = _http("POST", f"{mon}/v1/results", [
            {"benchmark": SETTLE_BENCH, "item_id": i, "model": "new", "score": new[int(i[1:])]}
            for i in items])
        assert status == 202 and body["accepted"] == len(items), body

    def plan() -> dict[str, Any]:
        status, body = _http("GET", f"{mon}/v1/benchmarks/{bench}/models/new/plan?count=100")
        assert status == 200, body
        return dict(body)

    settled = f'llm_monitor_model_settled{{benchmark="{SETTLE_BENCH}"}}'
    expr = _rule_expr("LLMMonitorModelSettled")

    def alerting() -> dict[str, float]:
        return {r["metric"]["model"]: float(r["value"][1])
                for r in _query(prom, expr)["result"]
                if r["metric"].get("benchmark") == SETTLE_BENCH}

    posted = list(plan()["next_items"])
    post(posted)
    _wait("the new model open in Prometheus", lambda: {
        r["metric"]["model"]: r["value"][1] for r in _query(prom, settled)["result"]
    }.get("new") == "0", 20, logs)
    assert alerting() == {}  # open: nothing to stop
    while (p := plan())["action"] == "continue":
        post(p["next_items"])
        posted += p["next_items"]
    n = p["items_done"]
    assert 0 < n < SETTLE_N, p
    # Settled, items left, and its results arrived within 5 minutes: the expression holds
    # for the new model only (the references have done every item), with the items left.
    _wait("the alert expression to hold for the new model",
          lambda: alerting() == {"new": float(SETTLE_N - n)}, 20, logs)
    items = _query(prom, f'llm_monitor_model_settled_items{{benchmark="{SETTLE_BENCH}"}}')
    assert {r["metric"]["model"]: float(r["value"][1]) for r in items["result"]}["new"] == n
    # The rule itself is loaded and pending (it fires after 10 minutes of this).
    _wait("the rule pending", lambda: [
        a for a in _http("GET", f"{prom}/api/v1/alerts")[1]["data"]["alerts"]
        if a["labels"]["alertname"] == "LLMMonitorModelSettled"
        and a["labels"]["model"] == "new" and a["state"] == "pending"], 20, logs)
    # It runs on: the value follows the items left, and once every item is done there is
    # nothing left to save.
    rest = [f"q{i}" for i in range(SETTLE_N) if f"q{i}" not in set(posted)]
    post(rest[:len(rest) // 2])
    _wait("the items left to shrink",
          lambda: alerting() == {"new": float(len(rest) - len(rest) // 2)}, 20, logs)
    post(rest[len(rest) // 2:])
    _wait("the expression to clear", lambda: _query(
        prom, f'llm_monitor_model_items_remaining{{benchmark="{SETTLE_BENCH}",model="new"}}'
        " == 0")["result"], 20, logs)
    assert alerting() == {}
