"""One replay of MMLU-Pro, every face: the same count, tiers, rank sets and verdicts.

``llm-monitor demo`` (what ``make run`` starts) replays the real MMLU-Pro table at a high rate,
shuffled with its default seed and declared fixed strata, in a tmux pane large enough to show
every model. Once the replay is done the test reads each face — the terminal view, the web
board at ``/`` in headless Chromium, the live ``report.html``, the ranking route, ``/metrics``
— and runs the ``report`` command the terminal names (``--strata-col category --seed 0``,
with ``--json`` and with ``--html``). All must say the same: how many adjacent pairs are
resolved, each pair's verdict and the item it was decided at, each model's rank set and tier,
and the number of tiers.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.browser_harness import Chromium
from tests.unit.offline.test_html import readme_report_command

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]
BENCH = "mmlu_pro"
# Wide and tall enough for every model's row and the whole names (the 80 × 24 layout is
# checked by test_web_terminal_view.py).
WIDTH, HEIGHT = 150, 60
NAME_W = WIDTH - 50  # monitor.runners.embedded.view: the columns after the name take 50 cells


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def _get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=120) as resp:
        return bytes(resp.read())


def _face(rows: dict[str, tuple[int, int, int]], verdicts: dict[tuple[str, str], str],
          decided: dict[tuple[str, str], int | None], resolved: int, tiers: int
          ) -> dict[str, Any]:
    """What a face says, in one form: every model's (rank_low, rank_high, tier) by name, each
    adjacent pair's verdict and decided item, the resolved count and the tiers."""
    return {"ranks": rows, "verdicts": verdicts, "decided": decided, "resolved": resolved,
            "tiers": tiers}


def _from_route(rk: dict[str, Any]) -> dict[str, Any]:
    pairs = {(p["model_a"], p["model_b"]): p for p in rk["pairs"]}
    return _face({m["model"]: (m["rank_low"], m["rank_high"], m["tier"]) for m in rk["models"]},
                 {k: p["verdict"] for k, p in pairs.items()},
                 {k: (p["decided"] or {}).get("n") for k, p in pairs.items()},
                 sum(p["verdict"].startswith("resolved:") for p in rk["pairs"]), rk["tiers"])


def _from_report(rep: dict[str, Any]) -> dict[str, Any]:
    pairs = {(p["model_a"], p["model_b"]): p for p in rep["pairs"]}
    return _face({e["model"]: (e["rank_low"], e["rank_high"], e["tier"]) for e in rep["ranking"]},
                 {k: p["verdict"] for k, p in pairs.items()},
                 {k: (p["decided"] or {}).get("n") for k, p in pairs.items()},
                 rep["verdicts"]["resolved"], rep["tiers"])


def _from_terminal(screen: str, ranking: list[str]) -> dict[str, Any]:
    lines = screen.rstrip("\n").split("\n")
    status = next(line for line in lines if line.startswith(f"{BENCH}: "))
    m = re.search(r"· (\d+)/(\d+) adjacent resolved · (\d+) tiers · strata ·", status)
    assert m is not None, status
    rows: dict[str, tuple[int, int, int]] = {}
    verdicts: dict[tuple[str, str], str] = {}
    decided: dict[tuple[str, str], int | None] = {}
    body = [line for line in lines if re.match(r"^\s*\d+ \S", line)
            and not line.startswith(f"{BENCH}:")]
    assert len(body) == len(ranking), screen  # every model on one row
    for r, line in enumerate(body):
        assert int(line[:2]) == r + 1, line
        name = line[3:3 + NAME_W].rstrip()
        assert name == ranking[r], (name, ranking[r])  # wide enough: whole names
        rest = line[3 + NAME_W:].split()
        low, _, high = rest[1].partition("-")
        rows[name] = (int(low), int(high or low), int(rest[2]))
        if r + 1 == len(body):
            assert len(rest) == 3, line  # the last model has no next one
            continue
        key = (name, ranking[r + 1])
        word = rest[3]
        at = next((int(t[1:]) for t in rest if t.startswith("@")), None)
        # The row's words: a decided pair shows "final", an open one its evidence.
        if word == "resolved":
            verdicts[key] = f"resolved:{name}"
            assert rest[-1] == "final" and "%" not in line, line
        elif word == "open":
            verdicts[key] = "unresolved"
            assert at is None and rest[-1].endswith("%"), line
        else:
            verdicts[key] = word
        decided[key] = at
    return _face(rows, verdicts, decided, int(m.group(1)), int(m.group(3)))


def _from_metrics(text: str, ranking: list[str]) -> dict[str, Any]:
    values: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("benchmark") == BENCH:
                values.setdefault(sample.name, []).append((sample.labels, sample.value))

    def by_model(name: str) -> dict[str, int]:
        return {labels["model"]: int(v) for labels, v in values[name]}

    low, high = by_model("llm_monitor_model_rank_low"), by_model("llm_monitor_model_rank_high")
    rank = by_model("llm_monitor_model_rank")
    assert sorted(rank, key=rank.__getitem__) == ranking
    resolved = {(labels["model_a"], labels["model_b"]): v
                for labels, v in values["llm_monitor_pair_resolved"]}
    (tiers,) = [int(v) for _, v in values["llm_monitor_ranking_tiers"]]
    (unresolved,) = [int(v) for _, v in values["llm_monitor_ranking_unresolved_pairs"]]
    assert sum(resolved.values()) + unresolved == len(ranking) - 1
    # The metrics hold each model's rank set and the number of tiers (not each one's tier).
    return {"rank_sets": {m: (low[m], high[m]) for m in ranking},
            "resolved": int(sum(resolved.values())), "tiers": tiers,
            "pairs_resolved": {k for k, v in resolved.items() if v == 1}}


def _from_report_html(text: str) -> dict[str, Any]:
    rows: dict[str, tuple[int, int, int]] = {}
    for model, row in re.findall(r'<tr(?: class="tier-odd")? data-model="([^"]*)">(.*?)</tr>',
                                 text, re.S):
        rank_set = re.search(r'<td class="rankset">\[(\d+), (\d+)\]</td>', row)
        tier = re.search(r'<td class="tier">(\d+)</td>', row)
        assert rank_set is not None and tier is not None, row
        rows[html.unescape(model)] = (int(rank_set[1]), int(rank_set[2]), int(tier[1]))
    verdicts, decided = {}, {}
    for names, verdict, row in re.findall(
            r'<tr data-pair="([^"]*)" data-verdict="([^"]*)">(.*?)</tr>', text, re.S):
        key = tuple(html.unescape(names).split("|"))
        assert len(key) == 2
        verdicts[key] = html.unescape(verdict)
        at = re.search(r"decided at n=([\d,]+), final", row)
        decided[key] = None if at is None else int(at[1].replace(",", ""))
    head = re.search(r'data-headline="([^"]*)"', text)
    assert head is not None
    m = re.match(r"(\d+) of (\d+) adjacent pairs resolved .* · (\d+) tiers? ·",
                 html.unescape(head[1]))
    assert m is not None, head[1]
    return _face(rows, verdicts, decided, int(m[1]), int(m[3]))


async def _from_board(port: int, tmp: Path) -> dict[str, Any]:
    browser = Chromium(tmp).start()
    try:
        async with aiohttp.ClientSession() as http:
            tab = await browser.tab(http)
            try:
                await tab.navigate(f"http://127.0.0.1:{port}/#b={BENCH}")
                await tab.wait_for("document.querySelectorAll('#ranking tbody tr').length === 32"
                                   " && document.querySelectorAll('#summary .card').length > 0",
                                   60)
                cards = dict(await tab.evaluate(
                    "Array.from(document.querySelectorAll('#summary .card'))"
                    ".map(c => [c.firstChild.textContent, c.querySelector('b').textContent])"))
                ranking = await tab.evaluate(
                    "Array.from(document.querySelectorAll('#ranking tbody tr')).map(tr =>"
                    " [tr.dataset.model, tr.cells[4].textContent, tr.cells[5].textContent])")
                pairs = await tab.evaluate(
                    "Array.from(document.querySelectorAll('#pairs tbody tr')).map(tr =>"
                    " [tr.dataset.pair, tr.dataset.verdict, tr.cells[5].textContent])")
                await tab.screenshot(tmp / "board.png")
                assert not tab.errors, tab.errors
            finally:
                await tab.close()
    finally:
        browser.stop()
    rows = {}
    for model, rank_set, tier in ranking:
        low, high = re.fullmatch(r"\[(\d+), (\d+)\]", rank_set).groups()  # type: ignore[union-attr]
        rows[model] = (int(low), int(high), int(tier))
    verdicts, decided = {}, {}
    for names, verdict, at in pairs:
        key = tuple(names.split("|"))
        verdicts[key] = verdict
        m = re.fullmatch(r"n=([\d,]+), final", at)
        assert (m is None) == (at == "–"), at
        decided[key] = None if m is None else int(m[1].replace(",", ""))
    count, of = cards["adjacent pairs resolved (decided, final)"].split(" / ")
    assert int(of) == len(pairs)
    assert cards["design"] == "strata"
    return _face(rows, verdicts, decided, int(count), int(cards["tiers"]))


def _offline_command(screen: str) -> list[str]:
    """The ``llm-monitor report`` command the terminal names after the replay."""
    lines = screen.rstrip("\n").split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("offline: "))
    text = lines[start].removeprefix("offline: ")
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        text += " " + line.strip()
    args = shlex.split(text)
    assert args[:2] == ["llm-monitor", "report"], args
    return args[2:]


def test_every_face_of_one_mmlu_pro_replay_says_the_same(shared_data: Path,
                                                         tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux not found; scripts/install-deps.sh installs it (apt: tmux)")
    port = _free_port()
    session = "llm-monitor-faces-" + secrets.token_hex(4)
    # From the repository, as `make run` does; the table's path as the demo was given it.
    # COLUMNS and LINES unset: the pane's size must rule, not a size the tmux server's
    # environment may carry from whoever started it.
    cmd = (f"cd {REPO} && env -u COLUMNS -u LINES {sys.executable} -m monitor.cli demo "
           f"--data {shared_data} --port {port} --rate 400000; sleep 600")
    _tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), cmd)
    try:
        screen = ""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            screen = _tmux("capture-pane", "-p", "-t", session)
            if "replay done" in screen and "offline: " in screen:
                break
            time.sleep(1.0)
        else:
            pytest.fail(f"the demo's replay did not finish:\n{screen}")
        # The replay is done: once the models' standings have caught up with it (each is
        # read within a share of the time), the board stands still, and the screen shows its
        # last state.
        while not (route := json.loads(_get(port, f"/v1/benchmarks/{BENCH}/ranking"))
                   )["standings"]["current"]:
            assert time.monotonic() < deadline, "the standings did not catch up"
            time.sleep(0.5)
        time.sleep(1.5)
        screen = _tmux("capture-pane", "-p", "-t", session)
        assert json.loads(_get(port, f"/v1/benchmarks/{BENCH}/ranking")) == route
        ranking = [m["model"] for m in route["models"]]
        assert len(ranking) == 32 and route["design"] == "strata"
        faces = {
            "ranking route": _from_route(route),
            "terminal": _from_terminal(screen, ranking),
            "report.html (live)": _from_report_html(
                _get(port, f"/v1/benchmarks/{BENCH}/report.html").decode()),
            "web board": asyncio.run(_from_board(port, tmp_path)),
        }
        metrics = _from_metrics(_get(port, "/metrics").decode(), ranking)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)

    # The report command the terminal names: the demo's design, order and seed.
    args = _offline_command(screen)
    assert args[args.index("--strata-col") + 1] == "category", args
    assert args[args.index("--seed") + 1] == "0", args
    html_at = args.index("--html")
    base = [str(shared_data / Path(args[0]).name), *args[1:html_at], *args[html_at + 2:]]
    # The README's report command is this one: what `make run` shows, offline.
    readme = readme_report_command()
    at = readme.index("--html")
    assert [Path(readme[0]).name, *readme[1:at], *readme[at + 2:]] == [
        Path(args[0]).name, *args[1:html_at], *args[html_at + 2:]], (readme, args)
    js = subprocess.run([sys.executable, "-m", "monitor.cli", "report", *base, "--json"],
                        capture_output=True, text=True, timeout=300, cwd=REPO)
    assert js.returncode == 0, js.stderr
    rep = json.loads(js.stdout)
    assert (rep["design"], rep["anytime"]["order"], rep["anytime"]["seed"]) == (
        "strata", "shuffle", 0)
    faces["report --json"] = _from_report(rep)
    page = tmp_path / "report.html"
    made = subprocess.run([sys.executable, "-m", "monitor.cli", "report", *base, "--html",
                           str(page)], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert made.returncode == 0, made.stderr
    faces["report --html"] = _from_report_html(page.read_text(encoding="utf-8"))

    want = faces["ranking route"]
    assert want["resolved"] >= 5 and want["tiers"] >= 5  # decisions happened: not vacuous
    assert list(want["ranks"]) == ranking
    for name, face in faces.items():
        for key in ("resolved", "tiers", "ranks", "verdicts", "decided"):
            assert face[key] == want[key], (name, key, face[key], want[key])
    assert metrics["resolved"] == want["resolved"] and metrics["tiers"] == want["tiers"]
    assert metrics["rank_sets"] == {m: r[:2] for m, r in want["ranks"].items()}
    assert metrics["pairs_resolved"] == {k for k, v in want["verdicts"].items()
                                         if v.startswith("resolved:")}
    print(f"every face: {want['resolved']} of {len(ranking) - 1} adjacent pairs resolved, "
          f"{want['tiers']} tiers (demo seed 0, design strata)")
