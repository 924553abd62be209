"""The HTML report: every section, model and adjacent pair of the report, and nothing to fetch."""

from __future__ import annotations

import html
import itertools
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.defaults import PLANNED_MODELS
from monitor.io.tables import ScoreTable
from monitor.offline.html import SECTIONS, e_value_path, render_html
from monitor.offline.replay import with_anytime
from monitor.offline.report import build_report


class Page(HTMLParser):
    """What a reader of the page meets: section ids, rows by model and pair, every URL."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []
        self.models: list[str] = []
        self.pairs: list[tuple[str, str]] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.svgs = 0
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "section" and a.get("id"):
            self.sections.append(str(a["id"]))
        if tag == "svg":
            self.svgs += 1
        if tag == "tr" and a.get("data-model") is not None:
            self.models.append(str(a["data-model"]))
        if tag == "tr" and a.get("data-pair") is not None:
            left, right = str(a["data-pair"]).split("|")
            self.pairs.append((left, right))
        for key in ("href", "src", "xlink:href", "action", "data"):
            if a.get(key):
                self.urls.append(str(a[key]))


def external_references(text: str, page: Page) -> list[str]:
    """Anything the browser would fetch from elsewhere: URLs in attributes other than
    in-page anchors, and any http(s) or protocol-relative URL anywhere in the text."""
    out = [u for u in page.urls if not u.startswith("#")]
    out += re.findall(r"(?:https?:)?//[\w.-]+\.\w+", text)
    out += re.findall(r"url\((?!#)[^)]*\)", text)
    out += re.findall(r"@import", text)
    return out


def check_page(text: str, rep: dict[str, object]) -> Page:
    page = Page(text)
    assert page.sections == [sid for sid, _ in SECTIONS]
    assert not external_references(text, page), external_references(text, page)[:5]
    assert not page.tags & {"script", "link", "img", "iframe", "object", "embed"}
    assert page.svgs == 5  # ranking, q, MDE, e-value paths, shortcut
    ranking = rep["ranking"]
    assert isinstance(ranking, list)
    assert page.models == [e["model"] for e in ranking]
    pairs = rep["pairs"]
    assert isinstance(pairs, list)
    adjacent = [(p["model_a"], p["model_b"]) for p in pairs if p["rank_b"] - p["rank_a"] == 1]
    assert page.pairs == adjacent
    return page


def small_table() -> ScoreTable:
    # Four models on 600 items in 6 clusters; the top two far apart, the rest close.
    rng = np.random.default_rng(7)
    p = np.array([0.85, 0.6, 0.58, 0.3])
    x = (rng.random((600, 4)) < p).astype(float)
    return ScoreTable(source="toy.csv", benchmark="toy (v1.0), 5-shot",
                      item_ids=np.array([f"q{i}" for i in range(600)]),
                      models=("A (big), v1.0", "B <small>", 'C "chat"', "D & co"), scores=x,
                      groups=np.array([f"g{i % 6}" for i in range(600)]), group_kind="cluster",
                      group_col="topic")


def test_small_board_page_has_every_model_pair_and_section_escaped() -> None:
    table = small_table()
    report = with_anytime(build_report(table, rank_method="simultaneous"), table)
    text = render_html(report, table)
    check_page(text, report.as_dict())
    assert "B &lt;small&gt;" in text
    assert "<small>" not in text  # names are escaped, never markup
    # One number, one implementation: each path ends at the replay's final e-value.
    for k in range(len(report.figures)):
        path = e_value_path(report, table, k)
        assert report.anytime is not None
        assert path[-1] == pytest.approx(report.anytime.figures.log_e[k], rel=1e-9, abs=1e-9)
        assert path.size == int(report.figures.n[k])


def test_names_with_dollar_signs_are_drawn_as_written_never_as_mathtext() -> None:
    # Two $ make matplotlib typeset the text between them as math: a name with an unknown
    # command then stops the page (ParseFatalException), a valid one shows a formula.
    table = small_table()
    names = ("x$\\undefinedcmd{$y", "a$\\frac{1}{2}$b", "cost $5", "plain")
    table = ScoreTable(source=table.source, benchmark=table.benchmark, item_ids=table.item_ids,
                       models=names, scores=table.scores)
    report = with_anytime(build_report(table, rank_method="simultaneous"), table)
    text = render_html(report, table)
    check_page(text, report.as_dict())
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", text)
    for name in names[:2]:
        assert any(label.endswith(". " + name) for label in labels), (name, labels)


@pytest.mark.parametrize(("order", "seed"), [("file", None), ("shuffle", 3), ("shuffle", 11)])
def test_each_path_crosses_its_threshold_first_where_the_replay_decided(
        order: str, seed: int | None) -> None:
    # The page's path and the replay's decision meet the items in the same order: the path
    # first reaches log(1/γ) at the n the replay decided at, and never where it did not.
    table = small_table()
    x = table.scores.copy()
    x[np.random.default_rng(5).random(x.shape) < 0.1] = np.nan  # pairs share unequal items
    table = ScoreTable(source=table.source, benchmark=table.benchmark,
                       item_ids=table.item_ids, models=table.models, scores=x)
    report = with_anytime(build_report(table, family="all"), table, order=order, seed=seed)
    assert report.anytime is not None
    log_thr = np.log([p["e_threshold"] for p in report.as_dict()["pairs"]])
    decided = 0
    for k in range(len(report.figures)):
        path = e_value_path(report, table, k)
        at = report.anytime.first_resolved_at[k]
        crossed = np.flatnonzero(path >= log_thr[k])
        assert (None if crossed.size == 0 else int(crossed[0]) + 1) == at, (k, at)
        decided += at is not None
    assert 0 < decided < len(report.figures)


def test_each_e_value_lane_holds_its_own_path_and_threshold_in_a_band_of_its_own() -> None:
    # A threshold drawn nearer the lane above than its own path read as the other pair's.
    from monitor.offline.html import _evalue_figure, _Pair

    table = small_table()
    report = with_anytime(build_report(table, family="all"), table)
    pairs = [_Pair(k, p) for k, p in enumerate(report.as_dict()["pairs"])]
    ax = _evalue_figure(report, table, pairs, lambda p: str(p.k)).axes[0]

    def artist(gid: str) -> Any:
        found = [a for a in (*ax.lines, *ax.patches) if a.get_gid() == gid]
        assert len(found) == 1, gid
        return found[0]

    bands = []
    for lane in range(len(pairs)):
        low, high = sorted(artist(f"evalue-lane-{lane}").get_bbox().intervaly)  # data y
        bands.append((low, high))
        for gid in (f"evalue-path-{lane}", f"evalue-threshold-{lane}"):
            y = np.asarray(artist(gid).get_ydata(), dtype=float)
            assert low < y.min() and y.max() < high, (gid, low, high, y.min(), y.max())
    bands.sort()
    assert all(a[1] <= b[0] + 1e-9 for a, b in itertools.pairwise(bands)), bands
    shaded = [p for p in ax.patches if str(p.get_gid()).startswith("evalue-lane-")
              and p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert len(shaded) == (len(pairs) + 1) // 2  # every other lane shaded


@pytest.mark.parametrize(("sorted_by_group", "order", "warned"),
                         [(True, "file", True), (False, "file", False),
                          (True, "shuffle", False)])
def test_a_file_sorted_by_group_warns_that_its_file_order_voids_the_anytime_guarantee(
        sorted_by_group: bool, order: str, warned: bool) -> None:
    table = small_table()  # groups interleaved: item i in g{i % 6}
    if sorted_by_group:
        assert table.groups is not None
        rows = np.argsort(table.groups, kind="stable")
        table = ScoreTable(source=table.source, benchmark=table.benchmark,
                           item_ids=table.item_ids[rows], models=table.models,
                           scores=table.scores[rows], groups=table.groups[rows],
                           group_kind="cluster", group_col="topic")
    report = with_anytime(build_report(table), table, order=order, seed=1)
    text = render_html(report, table)
    assert ("grouped by topic (6 runs, one per group)" in text) == warned
    assert ("--order shuffle" in text) == warned


def test_the_page_needs_the_anytime_replay() -> None:
    table = small_table()
    with pytest.raises(ValueError, match="with_anytime"):
        render_html(build_report(table), table)


README = Path(__file__).resolve().parents[3] / "README.md"


def readme_report_command() -> list[str]:
    """The README's report command of the MMLU-Pro table with --html, as arguments."""
    import shlex

    lines = [line.split("#")[0].strip() for line in README.read_text().splitlines()
             if line.startswith("llm-monitor report ") and "mmlu_pro" in line
             and "--html" in line]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])[2:]


@pytest.mark.slow
def test_the_readme_report_page_shows_the_decisions_of_its_seeded_replay(
        shared_data: Path, tmp_path: Path) -> None:
    """The README's report command (MMLU-Pro, its subjects as fixed strata, a seed named):
    its page states the order and seed, shows the decisions of the shuffled replay with that
    seed — pair by pair, the same verdict at the same item — counts them once, and takes no
    decision against the final means."""
    args = readme_report_command()
    assert "--strata-col" in args and "--seed" in args and "--cluster-col" not in args
    seed = int(args[args.index("--seed") + 1])
    planned = (int(args[args.index("--planned-models") + 1]) if "--planned-models" in args
               else PLANNED_MODELS)
    html_at = args.index("--html")
    args[html_at + 1] = str(tmp_path / "report.html")
    args = [str(shared_data / Path(a).name) if a.endswith(".csv") else a for a in args]
    made = subprocess.run([sys.executable, "-m", "monitor.cli", "report", *args],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    js = subprocess.run([sys.executable, "-m", "monitor.cli", "report",
                         *args[:html_at], *args[html_at + 2:], "--json"],
                        capture_output=True, text=True, timeout=300)
    assert js.returncode == 0, js.stderr
    rep = json.loads(js.stdout)
    text = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert len(rep["ranking"]) == 32 and len(rep["pairs"]) == 31
    check_page(text, rep)
    assert rep["design"] == "strata" and rep["anytime"]["order"] == "shuffle"
    assert rep["anytime"]["seed"] == seed
    assert f'data-order="shuffle" data-seed="{seed}"' in text
    assert f"seeded shuffled order (seed {seed})" in text

    # The seeded replay, in-process: the decisions the page must show.
    from monitor.io.tables import read_table
    from monitor.offline.replay import anytime_replay

    table = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=["src"],
                       strata_col="category")
    col = {m: j for j, m in enumerate(table.models)}
    a = np.array([col[p["model_a"]] for p in rep["pairs"]])
    b = np.array([col[p["model_b"]] for p in rep["pairs"]])
    replay = anytime_replay(table, (a, b), order="shuffle", seed=seed, planned_models=planned)
    want = replay.verdicts(np.arange(a.size), [p["model_a"] for p in rep["pairs"]],
                           [p["model_b"] for p in rep["pairs"]])
    rows = re.findall(r'<tr data-pair="([^"]*)" data-verdict="([^"]*)">(.*?)</tr>', text, re.S)
    assert len(rows) == 31
    mean = {e["model"]: e["mean"] for e in rep["ranking"]}
    for (names, verdict, row), pair, v, at in zip(rows, rep["pairs"], want,
                                                 replay.first_resolved_at, strict=True):
        assert names == f"{pair['model_a']}|{pair['model_b']}"
        assert html.unescape(verdict) == pair["verdict"] == v
        assert (pair["decided"] or {}).get("n") == at
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        assert cells[4] == f"{pair['delta']:+.4f}"
        if at is None:
            assert cells[5] == "unresolved"
        else:
            assert cells[5] == f"resolved, decided at n={at:,}, final"
            # No decision against the final means: the winner has the higher mean, and the
            # higher mean on the pair's own paired items too.
            assert pair["verdict"] == f"resolved:{pair['model_a']}"
            assert mean[pair["model_a"]] > mean[pair["model_b"]] and pair["delta"] > 0
    # The one count, said once.
    from monitor.offline.report import headline

    visible = html.unescape(re.sub(r"<[^>]*>", " ", text))
    assert visible.count("resolved (decided, final)") == 1, "a second count beside the first"
    assert "at fixed N (q ≥ 1)" not in visible and "resolved anytime" not in visible
    assert f'data-headline="{html.escape(headline(rep))}"' in text
    assert rep["verdicts"]["resolved"] == sum(x is not None for x in replay.first_resolved_at)
    assert rep["verdicts"]["resolved"] >= 5
