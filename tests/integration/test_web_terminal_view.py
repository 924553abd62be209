"""``llm-monitor demo`` in an 80 × 24 pseudo-terminal (tmux): what a new user sees.

The demo replays the real MMLU-Pro table; the screen is read with ``tmux capture-pane``
during the replay and after it. Every screen must keep the URLs on top, show the legend with
the threshold, show distinct model names (each the abbreviation of the model at that rank on
the ranking route), say of each decided pair the item it was decided at and that it is final,
and, once the replay is done, end with where to look next.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from monitor.runners.embedded.view import abbreviate

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 80, 24
NAME_W = WIDTH - 50  # monitor.runners.embedded.view: the columns after the name take 50 cells
ROW = re.compile(rf"^\s*(\d+) (.{{{NAME_W}}}) ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def _route(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/benchmarks/mmlu_pro/ranking",
                                timeout=30) as resp:
        return dict(json.loads(resp.read()))


def _ranking(port: int) -> list[str]:
    return [m["model"] for m in _route(port)["models"]]


def _check_screen(screen: str, port: int) -> list[str]:
    lines = screen.rstrip("\n").split("\n")
    assert len(lines) <= HEIGHT and all(len(line) <= WIDTH for line in lines), screen
    top = "\n".join(lines[:3])
    assert f"board http://127.0.0.1:{port}/" in top, screen
    legend = next((line for line in lines if line.startswith("resolved @n: ")), None)
    assert legend is not None and re.search(r"decided at item n, final · ev: logE/log\(1/γ=\d",
                                            legend), screen
    names = [m.group(2).rstrip() for line in lines if (m := ROW.match(line))]
    assert len(names) >= 10, screen
    assert len(set(names)) == len(names), f"names repeat on screen:\n{screen}"
    return names


def test_demo_in_80x24_keeps_names_distinct_and_says_where_to_look(shared_data: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux not found; scripts/install-deps.sh installs it (apt: tmux)")
    port = _free_port()
    session = "llm-monitor-view-" + secrets.token_hex(4)
    # The pane's size is the terminal under test: COLUMNS and LINES (the suite pins them, a
    # shell may export them) would override it, and tmux hands its server's environment on.
    cmd = (f"cd {REPO} && env -u COLUMNS -u LINES {sys.executable} -m monitor.cli demo "
           f"--data {shared_data} --port {port} --rate 60000; sleep 600")
    _tmux("new-session", "-d", "-s", session, "-x", str(WIDTH), "-y", str(HEIGHT), cmd)
    try:
        seen_during = False
        final = None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            screen = _tmux("capture-pane", "-p", "-t", session)
            if "replay done" in screen and "next: board" in screen:
                final = screen
                break
            if "replay [" in screen and sum(bool(ROW.match(x)) for x in screen.split("\n")) >= 10:
                names = _check_screen(screen, port)
                short = abbreviate(_ranking(port), NAME_W)
                # Each name shown stands for a model of the board (the ranking may move
                # between the screen and the request, so only membership is checked).
                assert set(names) <= set(short.values()), (names, short)
                seen_during = True
            time.sleep(1.0)
        assert final is not None, _tmux("capture-pane", "-p", "-t", session)
        assert seen_during, "no screen was read during the replay"
        names = _check_screen(final, port)
        # After the replay the ranking stands still: row k is the model at rank k.
        route = _route(port)
        ranking = [m["model"] for m in route["models"]]
        short = abbreviate(ranking, NAME_W)
        assert names == [short[m] for m in ranking[:len(names)]]
        # The status line counts the ranking route's verdicts; each row of a decided pair
        # says the item it was decided at, and "final", never a current evidence percentage.
        resolved = sum(p["verdict"].startswith("resolved:") for p in route["pairs"])
        assert f"mmlu_pro: 32 models · {resolved}/31 adjacent resolved · {route['tiers']} " \
            "tiers · strata · ranking" in final, final
        rows = [line for line in final.split("\n") if ROW.match(line)]
        for row, pair in zip(rows, route["pairs"], strict=False):
            if pair["decided"] is not None:
                assert f"@{pair['decided']['n']}" in row and row.rstrip().endswith("final"), row
                assert "%" not in row, row
            else:
                assert " open " in row and row.rstrip().endswith("%"), row
        assert len(ranking) == 32 and f"+{32 - len(names)} models below" in final
        tail = final.rstrip("\n").split("\n")[-4:]
        text = "\n".join(tail)
        assert f"next: board http://127.0.0.1:{port}/" in text
        assert "/v1/benchmarks/mmlu_pro/report.html" in text
        words = " ".join(text.split())  # the command wraps onto up to three lines
        assert "llm-monitor report" in words and "--html report.html" in words
        # The demo's design and seed: the report takes the same decisions.
        assert "--strata-col category" in " ".join(text.split()) and "--seed 0" in text
        assert "still serving" not in text  # the old dead end is gone
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)
