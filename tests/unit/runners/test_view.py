"""The terminal view: names abbreviated but distinct, everything inside width × height."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from monitor.runners.embedded.view import LazyRankings, Progress, abbreviate, rankings_view


def _names(shared_data: Path) -> dict[str, list[str]]:
    mmlu = next(csv.reader((shared_data / "mmlu_pro_item_correctness_wide.csv").open()))[3:]
    gsm = next(csv.reader((shared_data / "zeroeval_gsm8k_item_correctness_wide.csv").open()))[2:]
    return {"mmlu": mmlu, "gsm8k": gsm}


@pytest.mark.parametrize("width", [8, 12, 18, 29, 40])
def test_real_names_stay_distinct_and_fit(shared_data: Path, width: int) -> None:
    for names in _names(shared_data).values():
        short = abbreviate(names, width)
        assert set(short) == set(names)
        assert len(set(short.values())) == len(names)
        assert all(len(s) <= width for s in short.values())
        assert all(short[n] == n for n in names if len(n) <= width)


def test_look_alike_names_get_a_distinct_mark() -> None:
    names = [f"model-with-a-very-long-common-name-{c}" for c in "ab"] + ["x" * 40, "x" * 41]
    short = abbreviate(names, 10)
    assert len(set(short.values())) == 4 and all(len(s) <= 10 for s in short.values())


def _ranking(k: int) -> dict[str, Any]:
    """A ranking route's answer: every third adjacent pair resolved (decided at 600 + i),
    one undecidable and one equivalent (a verdict the view knows only by its word)."""
    models = [{"model": f"Org-Model-{i}B-Instruct-v{i % 3}.{i % 7} (run {i})",
               "mean": 0.9 - 0.02 * i, "n": 1000, "rank_low": max(1, i), "rank_high": i + 2,
               "tier": 1 + i // 4} for i in range(k)]
    pairs = []
    for i in range(k - 1):
        verdict = (f"resolved:{models[i]['model']}" if i % 3 == 0 else
                   "undecidable" if i == 4 else "equivalent" if i == 7 else "unresolved")
        decided = ({"n": 600 + i, "final": True, "ts": None, "e_value": 2e4}
                   if verdict.startswith("resolved:") or verdict == "equivalent" else None)
        pairs.append({"model_a": models[i]["model"], "model_b": models[i + 1]["model"],
                      "verdict": verdict, "decided": decided,
                      "n": 1000, "delta": 0.02 if i % 5 else -0.004, "q_anytime": 0.5 + i / 10,
                      "e_value": 10.0 ** i, "e_threshold": 19840.0})
    return {"models": models, "pairs": pairs, "tiers": 1 + (k - 1) // 4, "resolved": False,
            "design": "strata"}


@pytest.mark.parametrize(("width", "height"), [(80, 24), (100, 40), (63, 20)])
def test_view_fits_the_terminal_and_starts_with_the_urls(width: int, height: int) -> None:
    view = rankings_view({"bench (v1)": _ranking(32)}, width=width, height=height,
                         urls=["board http://127.0.0.1:8000/", "/metrics"],
                         progress=Progress(383141, 383141, 0.0, True),
                         next_steps=["next: board http://127.0.0.1:8000/",
                                     "offline: llm-monitor report " + "x/" * 30 + "t.csv "
                                     "--html report.html"])
    console = Console(width=width, height=height, record=True, color_system=None,
                      legacy_windows=False)
    console.print(view)
    lines = console.export_text().rstrip("\n").split("\n")
    assert len(lines) <= height and all(len(line) <= width for line in lines), lines
    assert lines[0].startswith("board http://127.0.0.1:8000/")
    assert any("1/γ=2.0e4" in line for line in lines[:5]), lines[:5]
    assert lines[-1].strip() and "next: board" in "\n".join(lines[-4:])
    rows = [line for line in lines if line[:2].strip().isdigit()]
    assert len(rows) >= min(10, height - 12)
    shown = [line[3:3 + width - 50].rstrip() for line in rows]
    assert len(set(shown)) == len(shown)
    assert "†" in "\n".join(rows)  # a negative δ̂ is marked…
    assert any("† δ̂<0" in line for line in lines)  # …and explained


def _printed(view: Any, width: int, height: int) -> list[str]:
    console = Console(width=width, height=height, record=True, color_system=None,
                      legacy_windows=False)
    console.print(view)
    return console.export_text().rstrip("\n").split("\n")


def test_many_benchmarks_keep_the_view_inside_the_terminal_and_the_next_steps_on_it() -> None:
    # Seven benchmarks of 4 models: 3 heads + 1 row each would need 28 lines of 24.
    rankings = {f"bench {i}": _ranking(4) for i in range(7)}
    lines = _printed(rankings_view(rankings, width=80, height=24, urls=["board http://h/"],
                                   progress=Progress(10, 10, 0.0, True),
                                   next_steps=["next: board http://h/"]), 80, 24)
    assert len(lines) <= 24, lines
    assert "next: board" in lines[-1], lines
    shown = [b for b in rankings if any(line.startswith(f"{b}:") for line in lines)]
    assert shown == list(rankings)[:len(shown)] and 0 < len(shown) < len(rankings)
    assert any(f"+{len(rankings) - len(shown)} benchmarks not shown" in line
               for line in lines), lines


@pytest.mark.parametrize("threshold", [[19840.0], [19840.0, 79000.0]])
def test_the_legend_is_whole_at_80_columns_and_names_every_column_code(
        threshold: list[float]) -> None:
    ranking = _ranking(6)
    for i, p in enumerate(ranking["pairs"]):
        p["e_threshold"] = threshold[i % len(threshold)]
    lines = _printed(rankings_view({"b": ranking}, width=80, height=24), 80, 24)
    legend = next(line for line in lines if line.startswith("resolved @n"))
    assert "…" not in legend, legend
    for code in ("decided at item n, final", "T tier", "ev", "1/γ=2.0e4"):
        assert code in legend, legend


def test_each_row_says_its_verdict_a_decision_with_its_item_and_as_final() -> None:
    ranking = _ranking(12)
    lines = _printed(rankings_view({"b": ranking}, width=80, height=30), 80, 30)
    status = next(line for line in lines if line.startswith("b: "))
    # The count of the ranking route's resolved verdicts, and the other verdicts by name.
    resolved = sum(p["verdict"].startswith("resolved:") for p in ranking["pairs"])
    assert f"{resolved}/11 adjacent resolved · 1 undecidable · 1 equivalent" in status, status
    rows = {int(line[:2]): line for line in lines if line[:2].strip().isdigit()}
    for i, pair in enumerate(ranking["pairs"]):
        row = rows[i + 1]
        if pair["verdict"].startswith("resolved:"):
            # decided: the item and "final", never an evidence percentage beside it
            assert "resolved" in row and f"@{600 + i}" in row and row.endswith("final"), row
            assert "%" not in row, row
        elif pair["verdict"] == "unresolved":
            assert " open " in row and row.rstrip().endswith("%"), row
        elif pair["verdict"] == "equivalent":
            assert "equiv." in row and f"@{600 + i}" in row and row.endswith("final"), row
        else:
            assert "undecid." in row and "final" not in row, row


def test_the_view_computes_only_the_rankings_it_shows() -> None:
    # A ranking costs milliseconds; with hundreds of benchmarks, computing all of them on
    # every refresh (every 0.5 s, on the server's event loop) stalled the server.
    read: list[str] = []

    def ranking(name: str) -> dict[str, Any]:
        read.append(name)
        return _ranking(4)

    names = [f"bench {i}" for i in range(300)]
    lines = _printed(rankings_view(LazyRankings(names, ranking), width=80, height=24,
                                   urls=["board http://h/"]), 80, 24)
    shown = [b for b in names if any(line.startswith(f"{b}:") for line in lines)]
    assert read == shown and 0 < len(shown) <= 6, (read, shown)
    assert any(f"+{len(names) - len(shown)} benchmarks not shown" in line for line in lines)
