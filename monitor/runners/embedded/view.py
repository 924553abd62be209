"""Terminal view of the embedded monitor, laid out for the terminal it runs in (80 × 24 up).

From the top: where to look (the web board and the JSON routes), the replay's progress, each
benchmark's state in one line (the count of resolved adjacent pairs, tiers, design), a
one-line legend, then one line per model in ranking order with its rank set, tier and verdict
against the next model down — the same verdicts, counts and rank sets as ``/ranking``, the
board and ``/metrics``: a decided pair shows the item it was decided at and that the decision
is final; an open one its evidence so far. Model names are shortened to fit, keeping the part
that tells them apart. The last lines say what is not shown and where to look next.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

# Row layout: the columns after the name take 50 cells; the name gets what is left.
_FIXED = 50
_MIN_NAME = 12
_TOKEN = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9]")
# Verdict words longer than their column (8 cells).
_SHORT = {"undecidable": "undecid.", "equivalent": "equiv."}


def _fmt(value: Any, spec: str = ".3f") -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    f = float(value)
    if math.isnan(f):
        return "–"
    if math.isinf(f):
        return "∞"
    return format(f, spec)


def _e(value: Any) -> str:
    """A positive number in at most 7 cells (2.0e+04 → 2.0e4)."""
    if value is None:
        return "–"
    f = float(value)
    if math.isinf(f):
        return "∞"
    if f < 1e4:
        return f"{f:.3g}"
    mant, exp = f"{f:.1e}".split("e")
    return f"{mant}e{int(exp)}"


def _boundaries(name: str) -> set[int]:
    """Positions between two tokens of ``name`` (a run of letters and digits, or one other
    character), its ends included: where a cut reads as a whole word dropped."""
    out, at = {0, len(name)}, 0
    for token in _TOKEN.findall(name):
        at += len(token)
        out.add(at)
    return out


def _cut(name: str, width: int, others: Sequence[str]) -> str:
    """``name`` in ``width`` cells as head + "…" + tail, keeping what tells it from
    ``others``: of the cuts that keep, for every other name, a character where the two
    differ (in the head, past their common prefix, or in the tail, past their common
    suffix), the one on word boundaries with the most balanced head and tail."""
    keep = width - 1
    differ = []  # (common prefix, common suffix) with each other name
    for other in others:
        pre = 0
        while pre < min(len(name), len(other)) and name[pre] == other[pre]:
            pre += 1
        suf = 0
        while (suf < min(len(name), len(other)) - pre
               and name[len(name) - 1 - suf] == other[len(other) - 1 - suf]):
            suf += 1
        differ.append((pre, suf))
    bounds = _boundaries(name)
    best: tuple[tuple[int, int, int], str] | None = None
    for head in range(1, keep):
        tail = keep - head
        told = sum(head > pre or tail > suf for pre, suf in differ)
        # A kept edge reads as a whole word when the cut falls between tokens next to a
        # letter or digit (not on a space or a comma left hanging at the ellipsis).
        start = len(name) - tail
        whole = ((head in bounds and name[head - 1].isalnum())
                 + (start in bounds and name[start].isalnum()))
        # More names told apart first; then whole words and a head about as long as the tail
        # (a name's family comes first, its size and variant last), a whole word worth four
        # cells of imbalance.
        score = (told, 4 * whole - abs(head - tail - 1), 0)
        if best is None or score > best[0]:
            best = (score, name[:head] + "…" + name[len(name) - tail:])
    assert best is not None
    return best[1]


def abbreviate(names: Sequence[str], width: int) -> dict[str, str]:
    """Each name in at most ``width`` cells, distinct names kept distinct.

    Names that fit stay as they are; a longer one keeps its head and its tail around an
    ellipsis, cut where it differs from the other names (:func:`_cut`). Where two shortened
    names would still read the same, the later ones end in ``~k`` instead.

    Examples
    --------
    >>> short = abbreviate(["Meta-Llama-3_1-70B-Instruct", "Meta-Llama-3_1-8B-Instruct",
    ...                     "Meta-Llama-3_1-70B", "merged(2026-02, probably gemini-3.1-pro)"], 18)
    >>> short["Meta-Llama-3_1-70B-Instruct"], short["Meta-Llama-3_1-8B-Instruct"]
    ('Meta-…70B-Instruct', 'Meta…1-8B-Instruct')
    >>> abbreviate(["merged(2026-02, probably gemini-3.1-pro)"], 30)
    {'merged(2026-02, probably gemini-3.1-pro)': 'merged(2026-02…gemini-3.1-pro)'}
    """
    if width < 3:
        raise ValueError(f"`width` must be at least 3, got {width}")
    out: dict[str, str] = {}
    distinct = list(dict.fromkeys(names))
    taken: set[str] = set(n for n in distinct if len(n) <= width)
    for name in distinct:
        if len(name) <= width:
            out[name] = name
            continue
        others = [n for n in distinct if n != name]
        short = _cut(name, width, others)
        k = 1
        while short in taken:
            k += 1
            tag = f"~{k}"
            short = _cut(name, width - len(tag), others) + tag
        taken.add(short)
        out[name] = short
    return out


@dataclass(frozen=True)
class Progress:
    """A replay's progress for the view: results done of total, results/s, finished."""

    done: int
    total: int
    rate: float
    finished: bool


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


def _bar(progress: Progress, width: int) -> Text:
    if progress.finished:
        return Text(_fit(f"replay done: {progress.done:,} results · still serving, Ctrl-C "
                         "stops", width), style="green")
    frac = progress.done / progress.total if progress.total else 1.0
    tail = (f" {progress.done:,}/{progress.total:,} "
            + ("done" if progress.finished else f"{progress.rate:,.0f}/s"))
    cells = max(width - len("replay ") - len(tail) - 2, 4)
    full = round(frac * cells)
    line = Text("replay ")
    line.append("[" + "#" * full + "." * (cells - full) + "]",
                style="green" if progress.finished else "cyan")
    line.append(tail)
    return line


def _pair_between(ranking: Mapping[str, Any], a: str, b: str) -> Mapping[str, Any] | None:
    for p in ranking.get("pairs", []):
        if {p.get("model_a"), p.get("model_b")} == {a, b}:
            return dict(p)
    return None


def _evidence(pair: Mapping[str, Any]) -> str:
    """log E / log(1/γ) as a percentage: 100 % is the threshold."""
    e, thr = pair.get("e_value"), pair.get("e_threshold")
    if e is None or thr is None or float(thr) <= 1.0:
        return "–"
    e = float(e)
    if math.isinf(e):
        return ">999%"
    share = math.log(max(e, 1.0)) / math.log(float(thr))
    return f"{min(share, 9.99):.0%}"


def _verdict_cells(pair: Mapping[str, Any], name: str) -> tuple[str, str, str, str]:
    """(verdict word, the item it was decided at, evidence, style) of a model's pair with the
    next model down, as the ranking route gives the pair: any verdict the core gives is shown
    by its word; a decided one with its item and as final, an open one with its evidence."""
    verdict = str(pair.get("verdict", ""))
    decided = pair.get("decided") or {}
    at = "" if not decided.get("n") else f"@{decided['n']}"
    if verdict == f"resolved:{name}":
        return "resolved", at, "final", "bold green"
    if verdict.startswith("resolved:"):
        return "below ↑", at, "final", "magenta"  # the model below is better
    if verdict == "unresolved":
        return "open", "", _evidence(pair), "yellow"
    word = verdict.split(":", 1)[0]  # undecidable, equivalent, or a verdict added later
    return _SHORT.get(word, word[:8]), at, "final" if at else "–", "cyan"


def board_lines(benchmark: str, ranking: Mapping[str, Any], *, width: int, rows: int
                ) -> tuple[list[Text], int, bool]:
    """The lines of one benchmark: a status line, the legend, the column heads and at most
    ``rows`` model lines. Returns them, how many models were left out, and whether a shown
    pair has δ̂ < 0."""
    models = [dict(m) for m in ranking.get("models", [])]
    pairs = ranking.get("pairs", [])
    name_w = max(width - _FIXED, _MIN_NAME)
    short = abbreviate([str(m["model"]) for m in models], name_w)
    resolved = sum(1 for p in pairs if str(p.get("verdict", "")).startswith("resolved:"))
    others: dict[str, int] = {}
    for p in pairs:
        kind = str(p.get("verdict", "")).split(":", 1)[0]
        if kind not in ("resolved", "unresolved"):
            others[kind] = others.get(kind, 0) + 1
    thresholds = sorted({float(p["e_threshold"]) for p in pairs if p.get("e_threshold")})
    thr = ("–" if not thresholds else _e(thresholds[0]) if len(thresholds) == 1
           else f"{_e(thresholds[0])}–{_e(thresholds[-1])}")
    extra = "".join(f" · {n} {kind}" for kind, n in others.items())
    design = ranking.get("design")
    status = Text(_fit(f"{benchmark}: {len(models)} models · {resolved}/{len(pairs)} adjacent "
                       f"resolved{extra} · {ranking.get('tiers', 0)} tiers"
                       + (f" · {design}" if design else "")
                       + f" · ranking {'RESOLVED' if ranking.get('resolved') else 'open'}",
                       width), style="bold")
    # Read once: what a decided row says, what an open one says, and the column codes.
    legend = Text(_fit(f"resolved @n: decided at item n, final · ev: logE/log(1/γ={thr}) · "
                       "T tier", width), style="dim")
    head = Text(f"{'#':>2} {'model':<{name_w}} {'mean':>5} {'ranks':>5} {'T':>2} "
                f"{'vs next':<8} {'at':>6} {'δ̂':>7} {'ev':>5}", style="bold")
    lines = [status, legend, head]
    negative = False
    for r, m in enumerate(models[:rows]):
        name = str(m["model"])
        nxt = str(models[r + 1]["model"]) if r + 1 < len(models) else None
        pair = _pair_between(ranking, name, nxt) if nxt is not None else None
        low, high = m.get("rank_low"), m.get("rank_high")
        ranks = "" if low is None else (f"{low}" if low == high else f"{low}-{high}")
        mean = _fmt(m.get("mean"), ".3f")
        mean = mean[1:] if mean.startswith("0.") else mean
        line = Text(f"{r + 1:>2} {short[name]:<{name_w}} {mean:>5} "
                    f"{ranks:>5} {_fmt(m.get('tier'), '.0f'):>2} ")
        if pair is None:
            lines.append(line)
            continue
        word, at, ev, style = _verdict_cells(pair, name)
        line.append(f"{word:<8}", style=style)
        line.append(f" {at:>6}", style=style)
        delta = pair.get("delta")
        if pair.get("model_a") != name and delta is not None:
            delta = -float(delta)  # δ̂ of this model minus the next one
        mark = "†" if delta is not None and float(delta) < 0 else " "
        negative |= mark == "†"
        line.append(f" {_fmt(delta, '+.4f'):>6}{mark}")
        line.append(f" {ev:>5}", style=style if ev == "final" else "")
        lines.append(line)
    return lines, max(len(models) - rows, 0), negative


class LazyRankings(Mapping[str, Mapping[str, Any]]):
    """Benchmarks' rankings computed when read: the view reads only those that fit."""

    def __init__(self, names: Sequence[str], ranking: Callable[[str], Mapping[str, Any]]
                 ) -> None:
        self._names = list(names)
        self._ranking = ranking

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        if name not in self._names:
            raise KeyError(name)
        return self._ranking(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def rankings_view(rankings: Mapping[str, Mapping[str, Any]], *, width: int = 80,
                  height: int = 24, urls: Sequence[str] = (), progress: Progress | None = None,
                  next_steps: Sequence[str] = ()) -> RenderableType:
    """The whole view in ``width`` × ``height`` cells: URLs, progress, every ranking, and the
    next steps (shown once the replay is done, or always when given without a replay)."""
    width = max(width, _FIXED + _MIN_NAME)
    top: list[Text] = []
    if urls:
        top.append(Text(_fit(" · ".join(urls), width), style="bold cyan"))
    if progress is not None:
        top.append(_bar(progress, width))
    done = progress is None or progress.finished
    bottom: list[Text] = []
    for i, step in enumerate(next_steps if done else ()):
        # A long step (a command line) wraps onto at most three lines.
        wrapped = textwrap.wrap(step, width, subsequent_indent="  ", break_on_hyphens=False)
        bottom += [Text(_fit(line, width), style="bold" if i == 0 else "")
                   for line in wrapped[:3]]
    if not rankings:
        return Group(*top, Text("waiting for results…", style="dim"), *bottom)
    # One note line under the tables; each benchmark has 3 lines of heads and at least one
    # model line, so only the benchmarks that fit so are shown (the first ones).
    free = height - len(top) - len(bottom) - 1
    # Only the rankings shown are read (``rankings`` may compute them on access).
    shown = [(bench, rankings[bench]) for bench in list(rankings)[:max(free // 4, 1)]]
    room = max(free - 3 * len(shown), len(shown))
    share = max(room // len(shown), 1)
    body: list[Text] = []
    left_out, negative = 0, False
    for bench, ranking in shown:
        lines, hidden, neg = board_lines(bench, ranking, width=width, rows=share)
        body += lines
        left_out += hidden
        negative |= neg
    notes = []
    if len(shown) < len(rankings):
        notes.append(f"+{len(rankings) - len(shown)} benchmarks not shown: board")
    if left_out:
        notes.append(f"+{left_out} models below: board, /ranking")
    if negative:
        notes.append("† δ̂<0 on shared items; ranked by own-item mean/decisions")
    note = Text(_fit(" · ".join(notes), width), style="dim") if notes else Text("")
    return Group(*top, *body, note, *bottom)
