"""Terminal view of the embedded monitor, laid out for the terminal it runs in (80 × 24 up).

From the top: where to look (the web board and the JSON routes), the replay's progress, each
benchmark's state in one line, a one-line legend with the decision threshold, then one line
per model in ranking order with its verdict against the next model down — the anytime
verdict and, beside it, the cluster-robust one. Model names are abbreviated to fit, and
names that differ stay different. The last lines say what is not shown and where to look next.
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

# Row layout: the columns after the name take 51 cells; the name gets what is left.
_FIXED = 51
_MIN_NAME = 12
_ALPHA_RUN = re.compile(r"[A-Za-z]+|[^A-Za-z]+")


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


def _shrink(name: str, width: int) -> str:
    """``name`` in at most ``width`` cells: the longest words are cut first (the last one on
    ties), numbers and punctuation are kept, and a name still too long loses its middle."""
    if len(name) <= width:
        return name
    runs = _ALPHA_RUN.findall(name)
    excess = len(name) - width
    while excess > 0:
        words = [i for i, r in enumerate(runs) if r.isalpha() and len(r) > 1]
        if not words:
            break
        i = max(words, key=lambda j: (len(runs[j]), j))
        runs[i] = runs[i][:-1]
        excess -= 1
    text = "".join(runs)
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def abbreviate(names: Sequence[str], width: int) -> dict[str, str]:
    """Each name in at most ``width`` cells, distinct names kept distinct.

    Names that fit stay as they are; longer ones are shortened by :func:`_shrink`. Where two
    shortened names would read the same, the later ones end in ``~k`` instead.

    Examples
    --------
    >>> short = abbreviate(["Meta-Llama-3_1-70B-Instruct", "Meta-Llama-3_1-8B-Instruct",
    ...                     "Meta-Llama-3_1-70B"], 18)
    >>> short["Meta-Llama-3_1-70B-Instruct"], short["Meta-Llama-3_1-8B-Instruct"]
    ('Met-Lla-3_1-70B-In', 'Met-Lla-3_1-8B-Ins')
    >>> len(set(short.values()))
    3
    """
    if width < 3:
        raise ValueError(f"`width` must be at least 3, got {width}")
    out: dict[str, str] = {}
    taken: set[str] = set(n for n in names if len(n) <= width)
    for name in names:
        if name in out:
            continue
        if len(name) <= width:
            out[name] = name
            continue
        short = _shrink(name, width)
        k = 1
        while short in taken:
            k += 1
            tag = f"~{k}"
            short = _shrink(name, width - len(tag)) + tag
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


def board_lines(benchmark: str, ranking: Mapping[str, Any], *, width: int, rows: int
                ) -> tuple[list[Text], int, bool]:
    """The lines of one benchmark: a status line, the legend, the column heads and at most
    ``rows`` model lines. Returns them, how many models were left out, and whether a shown
    pair has δ̂ < 0."""
    models = [dict(m) for m in ranking.get("models", [])]
    pairs = ranking.get("pairs", [])
    name_w = max(width - _FIXED, _MIN_NAME)
    short = abbreviate([str(m["model"]) for m in models], name_w)
    resolved = sum(1 for p in pairs if p.get("verdict") != "unresolved")
    clustered = sum(1 for p in pairs if (p.get("cluster_anytime") or {}).get("excludes_zero"))
    thresholds = sorted({float(p["e_threshold"]) for p in pairs if p.get("e_threshold")})
    thr = ("–" if not thresholds else _e(thresholds[0]) if len(thresholds) == 1
           else f"{_e(thresholds[0])}–{_e(thresholds[-1])}")
    status = Text(_fit(f"{benchmark}: {len(models)} models · {resolved}/{len(pairs)} pairs "
                       f"resolved ({clustered} cl) · {ranking.get('tiers', 0)} tiers · ranking "
                       f"{'RESOLVED' if ranking.get('resolved') else 'open'}", width),
                  style="bold")
    # Every code of the column heads, whole at 80 columns even with a range of thresholds.
    legend = Text(_fit(f"E≥1/γ={thr} resolves · T tier · cl✓ cluster CS excl. 0 · "
                       "ev logE/log(1/γ)", width), style="dim")
    head = Text(f"{'#':>2} {'model':<{name_w}} {'mean':>5} {'ranks':>5} {'T':>2} "
                f"{'vs next':<9} {'cl':<2} {'δ̂':>7} {'q_AV':>5} {'ev':>4}", style="bold")
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
        verdict = str(pair.get("verdict", ""))
        if verdict == f"resolved:{name}":
            line.append(f"{'resolved':<9}", style="bold green")
        elif verdict.startswith("resolved:"):
            line.append(f"{'below ↑':<9}", style="magenta")  # the model below is better
        else:
            line.append(f"{'open':<9}", style="yellow")
        cl = (pair.get("cluster_anytime") or {}).get("excludes_zero")
        line.append(f" {'✓' if cl else '·' if cl is not None else '–':<2}",
                    style="green" if cl else "dim")
        delta = pair.get("delta")
        if pair.get("model_a") != name and delta is not None:
            delta = -float(delta)  # δ̂ of this model minus the next one
        mark = "†" if delta is not None and float(delta) < 0 else " "
        negative |= mark == "†"
        line.append(f" {_fmt(delta, '+.4f'):>6}{mark} {_fmt(pair.get('q_anytime'), '.2f'):>5} "
                    f"{_evidence(pair):>4}")
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
