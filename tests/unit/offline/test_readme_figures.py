"""The consistency check's figures the README and docs/showcase.md state for MMLU-Pro (adjacent
pairs resolved, tiers) are those of the README's own report command, read from their text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from monitor.cli import main
from tests.unit.offline.test_html import README, readme_report_command

SHOWCASE = README.parent / "docs" / "showcase.md"

# "10 of 31 adjacent pairs resolved, 9 tiers", "… resolved and 9 tiers", "… resolved (decided,
# final) · 21 unresolved · 9 tiers", and the terminal's "10/31 adjacent resolved · 9 tiers".
_STATED = re.compile(r"(\d+) of (\d+) adjacent pairs resolved(?: \(decided, final\))?"
                     r"(?: · (\d+) unresolved)?(?:,| and| ·) (\d+) tiers")
_TERMINAL = re.compile(r"(\d+)/(\d+) adjacent resolved · (\d+) tiers")


def _stated(path: Path) -> set[tuple[int, int, int | None, int]]:
    """Every (resolved, adjacent pairs, unresolved or None, tiers) the file states."""
    text = " ".join(path.read_text(encoding="utf-8").split())  # figures wrap across lines
    got: set[tuple[int, int, int | None, int]] = {
        (int(r), int(n), int(u) if u else None, int(t)) for r, n, u, t in _STATED.findall(text)}
    got |= {(int(r), int(n), None, int(t)) for r, n, t in _TERMINAL.findall(text)}
    return got


def test_the_docs_state_the_figures_of_the_readme_report_command(
        shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's MMLU-Pro report command (strata, a seeded shuffled replay, planned for 32
    models), run in-process with --json in place of --html: its count of resolved adjacent
    pairs, of unresolved ones and of tiers are every figure the README and the showcase
    state."""
    args = readme_report_command()
    html_at = args.index("--html")
    args = args[:html_at] + args[html_at + 2:]
    args = [str(shared_data / Path(a).name) if a.endswith(".csv") else a for a in args]
    assert main(["report", *args, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["design"] == "strata" and rep["anytime"]["order"] == "shuffle"
    pairs, resolved = rep["verdicts"]["pairs"], rep["verdicts"]["resolved"]
    assert pairs == len(rep["pairs"])
    assert resolved == sum(p["verdict"].startswith("resolved:") for p in rep["pairs"])
    computed = (resolved, pairs, rep["tiers"])
    for doc in (README, SHOWCASE):
        stated = _stated(doc)
        assert stated, f"{doc.name} states no count of resolved adjacent pairs and tiers"
        for r, n, unresolved, tiers in stated:
            assert (r, n, tiers) == computed, (doc.name, (r, n, tiers), computed)
            if unresolved is not None:
                assert unresolved == rep["verdicts"]["unresolved"], (doc.name, unresolved)
