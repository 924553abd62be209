"""The resolution report as one self-contained HTML page (``llm-monitor report --html``, and
the live monitor's ``/v1/benchmarks/{b}/report.html``).

Every figure is read from a :class:`~monitor.offline.report.ResolutionReport` with its decisions
(:func:`monitor.offline.replay.with_anytime`, or the live monitor's own); this module only lays
them out: first the verdicts (one per pair, the ranking, rank sets and tiers from them, the
e-value paths), then, apart and labelled so, the fixed-N planning and audit figures. Plots are
drawn with matplotlib into inline SVG (text kept as text, no fonts, scripts or links to fetch),
in black and grey with distinct markers and labels, so the page reads without colour and
without a network.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from monitor.io.tables import ScoreTable
from monitor.offline.replay import replay_arrival
from monitor.offline.report import ResolutionReport
from monitor.stats import power as pw
from monitor.stats.ranks import means_covariance
from monitor.stats.sequential import BOUNDED, MCNEMAR, log_e_paths
from monitor.stats.shortcut import shortcut_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from monitor.core.standing import Standing

FloatArray = NDArray[np.float64]

#: The page's sections, in order: (id, heading). Tests and the web board link to these ids.
SECTIONS = (
    ("summary", "Summary"),
    ("ranking", "Ranking"),
    ("gaps", "Adjacent gaps"),
    ("evalues", "E-value paths against their thresholds"),
    ("fixed-n", "Fixed-N planning and audit figures"),
    ("q", "Fixed-N: resolution ratio q per pair"),
    ("mde", "Fixed-N: minimum detectable effect against N"),
    ("shortcut", "Fixed-N: the shortcut against N*"),
    ("notes", "Definitions"),
)

_PATH_POINTS = 300  # points drawn per e-value path (the crossing is always one of them)
_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1300px;
padding:0 16px 40px;color:#111;background:#fff}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #999}
nav a{margin-right:12px}table{border-collapse:collapse;font-variant-numeric:tabular-nums}
table{font-size:13px}th,td{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}
th{background:#f0f0f0}td.name,th.name{text-align:left;max-width:260px}td{white-space:nowrap}
td.name{white-space:normal}.ok{font-weight:600}.no{color:#555}
.small{font-size:12px;color:#444}figure{margin:8px 0}svg{max-width:100%;height:auto}
.tier-odd td{background:#f7f7f7}code{background:#f3f3f3;padding:0 3px}
.fixed{border-left:3px solid #999;padding-left:10px}.headline{font-size:15px}
"""


@dataclass(frozen=True)
class _Pair:
    """One adjacent pair as the page shows it (the report's JSON object plus its position)."""

    k: int
    data: dict[str, Any]


def _esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any, spec: str = ".3g") -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, float) and math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return format(x, spec)


def _short(name: str, width: int = 30) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"


# -- figures from the report ---------------------------------------------------------------

def model_intervals(report: ResolutionReport, table: ScoreTable) -> dict[str, tuple[float, float]]:
    """A (1 − α) normal interval of each model's mean: mean ± z_{1−α/2} · se, with se from
    the covariance of the means the rank sets use (:func:`monitor.stats.ranks.means_covariance`:
    cluster-robust with clusters, stratified with strata, else iid; on the items every model
    has). Empty when no item has every model's score."""
    from scipy.special import ndtri

    kind = "iid" if table.groups is None else (table.group_kind or "cluster")
    try:
        cov, _ = means_covariance(table.scores, groups=table.groups, kind=kind)
    except ValueError:
        return {}
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    z = float(ndtri(1.0 - report.alpha / 2.0))  # the normal quantile, as monitor.stats.power
    index = {m: j for j, m in enumerate(table.models)}
    return {e.model: (e.mean - z * float(se[index[e.model]]),
                      e.mean + z * float(se[index[e.model]])) for e in report.ranking}


def grouped_runs(table: ScoreTable) -> int | None:
    """How many runs the items' groups form in the table's row order, when each group is one
    run (the file sorted by group; more than one group); else None."""
    if table.groups is None or table.groups.size < 2:
        return None
    g = np.asarray(table.groups)
    runs = 1 + int(np.count_nonzero(g[1:] != g[:-1]))
    distinct = int(np.unique(g).size)
    return runs if distinct > 1 and runs == distinct else None


def pair_item_order(table: ScoreTable, a: int, b: int, *, order: str, seed: int | None
                    ) -> NDArray[np.int64]:
    """Rows of the items models ``a`` and ``b`` share, in the order the anytime replay meets
    them (:func:`monitor.offline.replay.replay_arrival`: a pair's item arrives with its later
    score)."""
    perm, arrival = replay_arrival(table, order=order, seed=seed)
    x = table.scores if perm is None else table.scores[perm]
    rows = np.flatnonzero(~np.isnan(x[:, a]) & ~np.isnan(x[:, b]))
    key = np.maximum(arrival[rows, a], arrival[rows, b])
    rows = rows[np.argsort(key, kind="stable")]
    return np.asarray(rows if perm is None else perm[rows], dtype=np.int64)


def e_value_path(report: ResolutionReport, table: ScoreTable, k: int,
                 at: NDArray[np.int64] | None = None) -> FloatArray:
    """log E_n of pair ``k`` after each of its paired items (or only after the 0-based items
    ``at``), in the replay's order: the e-process of
    :func:`monitor.stats.sequential.log_e_paths` on the running (n, S, V).

    One segment: exact for pairs of 0/1 scores and for pairs of bounded scores throughout
    (a McNemar pair that later meets another score switches construction, which the
    replay's final ``log_e`` records and a single path does not). The live monitor's own
    decisions (``order == "live"``) are drawn along the items in order of first arrival, the
    monitor's order when each item's results arrive together."""
    if report.anytime is None:
        raise ValueError("the report has no decisions: build it with with_anytime()")
    res = report.figures
    a, b = int(res.a[k]), int(res.b[k])
    order = "file" if report.anytime.order == "live" else report.anytime.order
    rows = pair_item_order(table, a, b, order=order, seed=report.anytime.seed)
    d = table.scores[rows, a] - table.scores[rows, b]
    n = np.arange(1, d.size + 1, dtype=np.float64)
    s, v = np.cumsum(d), np.cumsum(d * d)
    if at is not None:
        n, s, v = n[at], s[at], v[at]
    kind = np.full(n.size, MCNEMAR if bool(res.binary[k]) else BOUNDED)
    zero = np.zeros(n.size)
    return log_e_paths(kind, n, s, v, start_n=zero, start_s=zero, start_v=zero,
                       start_log_plus=zero, start_log_minus=zero)


def _figure_of(p: _Pair, key: str) -> Any:
    """A figure of the pair's object: the anytime ones at its top, the fixed-N ones in its
    ``fixed_n`` object."""
    return p.data[key] if key in p.data else p.data["fixed_n"].get(key)


# -- plots ---------------------------------------------------------------------------------

def _figure(width: float, height: float, *, left: float = 0.9, right: float = 0.55) -> Figure:
    """A figure with fixed margins (inches): the constrained layout costs a second per plot
    of many labels. ``left`` leaves room for the y labels."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=0.55 / height,
                        top=1 - 0.15 / height)
    return fig


def _svg(fig: Figure, name: str) -> str:
    """The figure as an inline ``<svg>`` element: text as text, ids unique to ``name``, and
    nothing that refers outside the page (no DOCTYPE, metadata or namespace URLs)."""
    import matplotlib as mpl

    buf = io.StringIO()
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for ax in fig.axes:  # minor ticks of log axes: dozens of ticks to lay out, no information
        ax.minorticks_off()
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":  # 1e+04 as text, not a mathtext power to typeset
                axis.set_major_formatter(plain)
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", metadata={"Creator": None, "Date": None,
                                                   "Format": None, "Type": None})
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    return text.replace("<svg ", f'<svg role="img" aria-label="{_esc(name)}" ', 1)


def _ranking_plot(report: ResolutionReport, ci: dict[str, tuple[float, float]]) -> str:
    entries = report.ranking
    fig = _figure(10.0, 0.26 * len(entries) + 1.0, left=3.0)
    ax = fig.add_subplot()
    y = np.arange(len(entries))
    means = np.array([e.mean for e in entries])
    if ci:
        lo = np.array([ci[e.model][0] for e in entries])
        hi = np.array([ci[e.model][1] for e in entries])
        ax.errorbar(means, y, xerr=[means - lo, hi - means], fmt="o", color="black",
                    ecolor="black", capsize=2, markersize=4, label="mean with its interval")
    else:
        ax.plot(means, y, "o", color="black", markersize=4, label="mean")
    tiers = [e.tier for e in entries]
    if all(t is not None for t in tiers):
        for t in sorted(set(tiers), key=lambda t: t or 0):
            rows = [i for i, tt in enumerate(tiers) if tt == t]
            if (t or 0) % 2 == 0:
                ax.axhspan(min(rows) - 0.5, max(rows) + 0.5, color="0.9", zorder=0)
            ax.text(1.01, (min(rows) + max(rows)) / 2, f"tier {t}", transform=ax.get_yaxis_transform(),
                    va="center", fontsize=8)
    # Names are text: never mathtext, where two $ typeset a formula or fail to parse.
    ax.set_yticks(y, [f"{e.rank}. {_short(e.model, 40)}" for e in entries], fontsize=8,
                  parse_math=False)
    ax.invert_yaxis()
    ax.set_xlabel("mean score (bars: the mean's fixed-N interval; grey bands: every other tier "
                  "of the decisions)")
    ax.grid(axis="x", color="0.85")
    return _svg(fig, "ranking: mean and interval of every model, by tier")


def _q_plot(pairs: Sequence[_Pair], names: Callable[[_Pair], str]) -> str:
    fig = _figure(10.0, 0.24 * len(pairs) + 1.2, left=3.6)
    ax = fig.add_subplot()
    y = np.arange(len(pairs))
    lo, hi = 1e-3, 1e3
    for key, marker, label, offset in (("q", "o", "fixed-N q", -0.22),
                                       ("q_cluster", "s", "fixed-N q_cluster", 0.0),
                                       ("q_strata", "s", "fixed-N q_strata", 0.0),
                                       ("q_anytime", "^", "anytime q_AV", 0.22)):
        vals = np.array([np.nan if _figure_of(p, key) is None else float(_figure_of(p, key))
                         for p in pairs], dtype=float)
        if np.all(np.isnan(vals)):
            continue
        ax.plot(np.clip(vals, lo, hi), y + offset, marker, linestyle="none", color="black",
                markerfacecolor="white" if marker == "s" else "black", markersize=5,
                label=label)
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.text(1.0, -0.9, " q = 1: the items suffice", fontsize=8, va="bottom")
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.set_yticks(y, [names(p) for p in pairs], fontsize=7, parse_math=False)
    ax.set_ylim(len(pairs) - 0.5, -1.2)
    ax.set_xlabel("q = N / N* (log scale; right of the dashed line: enough items for a "
                  "fixed-N look, or, q_AV, for a decision by now with the planned power)")
    ax.legend(loc="lower right", fontsize=8, framealpha=1)
    ax.grid(axis="x", color="0.85")
    return _svg(fig, "q of every adjacent pair against q = 1: the fixed-N sizes and q_AV")


def _mde_plot(report: ResolutionReport, pairs: Sequence[_Pair]) -> str:
    res = report.figures
    sigma2 = np.asarray(res.sigma_d2, dtype=float)
    sigma2 = sigma2[np.isfinite(sigma2) & (sigma2 > 0)]
    fig = _figure(8.0, 4.2)
    ax = fig.add_subplot()
    n_items = report.n_items
    grid = np.geomspace(50, max(20 * n_items, 1000), 200)
    if sigma2.size:
        kw = {"alpha": report.alpha_per_pair, "power": report.power}
        med = float(np.median(sigma2))
        ax.plot(grid, pw.mde(med, grid, **kw), color="black",
                label=f"median σ_D² = {med:.3f} of the adjacent pairs")
        ax.fill_between(grid, pw.mde(float(sigma2.min()), grid, **kw),
                        pw.mde(float(sigma2.max()), grid, **kw), color="0.85",
                        label="their range of σ_D²")
    n = np.array([float(p.data["n"]) for p in pairs])
    gap = np.abs(np.array([float(p.data["delta"]) for p in pairs]))
    ok = np.array([float(p.data["fixed_n"]["q"]) >= 1.0 for p in pairs], dtype=bool)
    ax.plot(n[ok], gap[ok], "o", color="black", markersize=4, label="|δ̂| of a pair, q ≥ 1")
    ax.plot(n[~ok], gap[~ok], "o", color="black", markerfacecolor="white", markersize=4,
            label="|δ̂| of a pair, q < 1")
    ax.axvline(n_items, color="black", linestyle=":", linewidth=1)
    ax.text(n_items, 0.9, f" N = {n_items:,} items",
            transform=ax.get_xaxis_transform(), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("paired items N (log scale)")
    ax.set_ylabel("minimum detectable effect (log scale)")
    ax.legend(fontsize=8, loc="lower left", framealpha=1)
    ax.grid(color="0.9")
    return _svg(fig, "MDE against N for the board's sigma_D, the benchmark's N marked")


def _evalue_figure(report: ResolutionReport, table: ScoreTable, pairs: Sequence[_Pair],
                   names: Callable[[_Pair], str]) -> Figure:
    """One lane per adjacent pair: log E_n scaled so that the lane's baseline is E = 1 and
    its dashed line the pair's own threshold 1/γ (a log scale per lane); ▼ marks the
    decision. Each lane is a band of its own, every other one shaded, holding its path, its
    threshold and its labels: without the bands a threshold sat right under the path of the
    lane above and read as that pair's. One axes for all lanes: dozens of small axes cost
    seconds to lay out. Artists carry gids ``evalue-lane-k``, ``evalue-path-k`` and
    ``evalue-threshold-k``."""
    fig = _figure(11.0, 0.42 * len(pairs) + 1.0, left=3.6, right=1.5)
    ax = fig.add_subplot()
    height, below, above = 0.65, 0.15, 0.85  # the threshold; the band, around the baseline
    for lane, p in enumerate(pairs):
        size = int(p.data["n"])
        thr = math.log(float(p.data["e_threshold"]))
        # ▼ where the verdict was decided; under sampled clusters the verdict is taken on the
        # clusters' observations, not on this item-level path, and no ▼ is drawn on it.
        decided = p.data.get("decided")
        at = None if decided is None or p.data["design"] == "clusters" else decided["n"]
        idx = np.unique(np.concatenate([
            np.linspace(0, size - 1, min(_PATH_POINTS, size)).astype(np.int64),
            [] if at is None else [int(at) - 1]]).astype(np.int64))
        # The path at the points drawn only (the last item is one of them).
        path = np.full(size, np.nan)
        path[idx] = e_value_path(report, table, p.k, at=idx)
        base = len(pairs) - 1 - lane
        ax.axhspan(base - below, base + above, color="0.92" if lane % 2 == 0 else "white",
                   linewidth=0, zorder=0, gid=f"evalue-lane-{lane}")
        scaled = np.clip(path[idx] / thr, -0.15, 1.15)
        ax.plot(idx + 1, base + height * scaled, color="black", linewidth=0.8,
                gid=f"evalue-path-{lane}")
        ax.plot([1, max(path.size, 1)], [base + height] * 2, color="black", linestyle="--",
                linewidth=0.6, gid=f"evalue-threshold-{lane}")
        ax.axhline(base, color="0.7", linewidth=0.5)
        if at is not None:
            ax.plot([at], [base + height * min(path[int(at) - 1] / thr, 1.15)], marker="v",
                    color="black", markersize=5, linestyle="none")
        end = path[-1] / math.log(10.0) if path.size else 0.0
        ax.text(1.005, base + height / 2, f"1/γ={math.exp(thr):.2g}  E={10 ** min(end, 300.0):.2g}"
                + ("+" if end > 300 else ""), transform=ax.get_yaxis_transform(), fontsize=6.5,
                va="center")
    ax.set_yticks(np.arange(len(pairs))[::-1] + height / 2, [names(p) for p in pairs],
                  fontsize=7, parse_math=False)
    ax.set_ylim(-below, len(pairs) - 1 + above)
    ax.set_xlabel("paired items n, in the replay's order (each band a pair: log E_n from "
                  "E = 1, grey line, up to its threshold 1/γ, dashed; ▼ decision)", fontsize=8)
    return fig


def _evalue_plot(report: ResolutionReport, table: ScoreTable, pairs: Sequence[_Pair],
                 names: Callable[[_Pair], str]) -> str:
    return _svg(_evalue_figure(report, table, pairs, names),
                "e-value paths of the adjacent pairs against their thresholds")


def _shortcut_plot(report: ResolutionReport, pairs: Sequence[_Pair]) -> str:
    pa = np.array([float(p.data["mean_a"]) for p in pairs])
    pb = np.array([float(p.data["mean_b"]) for p in pairs])
    rho = np.nan_to_num(np.array([float(p.data["rho"]) for p in pairs]), nan=0.0)
    nh = np.asarray(shortcut_size(np.clip(pa, 0, 1), np.clip(pb, 0, 1), np.clip(rho, -1, 1),
                                  alpha=report.alpha_per_pair, power=report.power).n_exact,
                    dtype=float).reshape(-1)
    nstar = np.array([float(p.data["fixed_n"]["n_star_exact"]) for p in pairs])
    keep = np.isfinite(nh) & np.isfinite(nstar) & (nh > 0) & (nstar > 0)
    fig = _figure(6.5, 5.0)
    ax = fig.add_subplot()
    if keep.any():
        lo = float(min(nh[keep].min(), nstar[keep].min())) / 2
        hi = float(max(nh[keep].max(), nstar[keep].max())) * 2
        line = np.array([lo, hi])
        ax.plot(line, line, color="black", linewidth=1, label="n_h = N*")
        ax.plot(line, line / 2, color="black", linestyle="--", linewidth=1,
                label="n_h = N*/2 (Lemma 1)")
        ax.plot(nstar[keep], nh[keep], "o", color="black", markerfacecolor="white",
                markersize=5, label="an adjacent pair")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("N* (paired McNemar–Connor size, log scale)")
    ax.set_ylabel("n_h (Cohen's h shortcut × (1 − ρ), log scale)")
    ax.legend(fontsize=8, loc="upper left", framealpha=1)
    ax.grid(color="0.9")
    return _svg(fig, "shortcut n_h against N* for the adjacent pairs")


# -- page ----------------------------------------------------------------------------------

_DESIGN_NAMES = {"items": "exchangeable items", "strata": "fixed strata",
                 "clusters": "sampled clusters"}


def _verdict_cell(p: dict[str, Any]) -> str:
    """The pair's verdict, the item it was decided at, and that it is final."""
    v, d = p["verdict"], p.get("decided")
    at = "" if d is None else f", decided at n={d['n']:,}, final"
    if v == f"resolved:{p['model_a']}":
        return f'<td class="ok verdict" title="{_esc(p["model_a"])} better">resolved{at}</td>'
    if v.startswith("resolved:"):
        return (f'<td class="ok verdict" title="{_esc(p["model_b"])} better, against the '
                f'order of the means">resolved for B ↑{at}</td>')
    if v == "undecidable":
        return f'<td class="no verdict" title="{_esc(p.get("undecidable", ""))}">undecidable</td>'
    if v == "unresolved":
        return '<td class="no verdict">unresolved</td>'
    return f'<td class="ok verdict">{_esc(v.split(":", 1)[0])}{at}</td>'


def render_html(report: ResolutionReport, table: ScoreTable, *, title: str | None = None,
                command: str | None = None, note: str | None = None,
                standings: Mapping[str, Standing] | None = None) -> str:
    """The page of ``report`` (with its decisions) on ``table``: every section of
    :data:`SECTIONS`, every model and every pair of the family, no external reference.
    ``note``: a line of the summary (as text) on where the table came from. ``standings``
    (the live monitor's, by model): each model's stop signal, a column of the ranking."""
    from monitor.offline.report import headline, order_text

    if report.anytime is None:
        raise ValueError("the HTML report shows the verdicts: build the report with "
                         "monitor.offline.replay.with_anytime()")
    rep = report.as_dict()
    name = rep["benchmark"] or rep["source"].rsplit("/", 1)[-1]
    pairs = [_Pair(k, p) for k, p in enumerate(rep["pairs"])]
    adjacent = [p for p in pairs if p.data["rank_b"] - p.data["rank_a"] == 1]
    adjacent.sort(key=lambda p: p.data["rank_a"])
    ci = model_intervals(report, table)
    groups = rep["groups"]
    kind = groups["kind"] if groups else None
    any_info = rep["anytime"]
    fixed = rep["fixed_n"]

    out: list[str] = []
    w = out.append
    w("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
    w(f"<title>{_esc(title or f'llm-monitor report: {name}')}</title>")
    w(f"<style>{_STYLE}</style></head><body>")
    w(f"<h1>{_esc(title or f'Which gaps on {name} are real?')}</h1>")
    w("<nav>" + "".join(f'<a href="#{sid}">{_esc(h)}</a>' for sid, h in SECTIONS) + "</nav>")

    # summary: the one headline, and what it rests on
    w('<section id="summary"><h2>Summary</h2><ul>')
    w(f'<li class="headline"><b data-headline="{_esc(headline(rep))}">{_esc(headline(rep))}'
      "</b></li>")
    w(f"<li>{_esc(name)}: {rep['n_items']:,} items, {rep['n_models']} models, "
      f"{'0/1 scores (McNemar e-process)' if rep['binary'] else 'scores in [0, 1] (bounded e-process)'}.</li>")
    design = _DESIGN_NAMES[rep["design"]]
    if groups is not None:
        design += f" ({_esc(groups['column'])}, {groups['n_groups']} groups)"
    w(f"<li>verdicts: anytime decisions under the design <b>{design}</b>, which assumes "
      f"{_esc(any_info['assumption'])}; {_esc(any_info['procedure'])}, each pair at its fixed "
      f"share γ of α = {any_info['alpha']:g}"
      + (f" (planned for {any_info['planned_models']} models)" if any_info["planned_models"] else "")
      + f"; <b data-order=\"{_esc(any_info['order'])}\" data-seed=\"{_esc(any_info['seed'])}\">"
      f"{_esc(order_text(any_info))}</b>. A pair is decided at the first item where its e-value "
      "reaches 1/γ, and the decision is final.</li>")
    for warning in rep.get("warnings", ()):
        w(f"<li><b>warning:</b> {_esc(warning['message'])}.</li>")
    runs = grouped_runs(table) if any_info["order"] == "file" else None
    if runs is not None:
        against = sum(1 for p in adjacent if p.data["verdict"] == f"resolved:{p.data['model_b']}")
        w(f"<li><b>warning:</b> the file lists its items grouped by "
          f"{_esc(table.group_col or 'group')} ({runs} runs, one per group), so the file-order "
          "replay meets one group after another: an order that depends on the outcomes when "
          "the groups differ in difficulty, and the decisions lose their guarantee "
          f"({against} adjacent gap{'' if against == 1 else 's'} resolved against the order "
          "of the means). Replay in a random order: <code>--order shuffle --seed N</code>.</li>")
    w("<li>rank sets and tiers: from the decisions of all pairs (rank_low = 1 + models decided "
      "above, rank_high = M − models decided below); a tier is a group no decision "
      "separates.</li>")
    if note:
        w(f"<li>{_esc(note)}</li>")
    if standings is not None:
        settled = sum(1 for st in standings.values() if st.settled)
        w(f'<li data-settled="{settled}">evaluate until resolved: {settled} of '
          f"{len(standings)} models settled (their plan says stop: every pair with the other "
          "models decided, or not expected to be by the items left); the others show what is "
          "still open.</li>")
    if command:
        w(f"<li class=\"small\">made by <code>{_esc(command)}</code></li>")
    w("</ul></section>")

    # ranking
    w('<section id="ranking"><h2>Ranking</h2>')
    stop_head = ('<th class="name" title="the model\'s stop signal (docs/until-resolved.md)">'
                 "until resolved</th>") if standings is not None else ""
    w('<table><thead><tr><th>#</th><th class="name">model</th><th>mean</th><th>items</th>'
      f"<th>rank set</th><th>tier</th><th>interval¹</th>{stop_head}</tr></thead><tbody>")
    for e in report.ranking:
        lo_hi = ci.get(e.model)
        odd = ' class="tier-odd"' if (e.tier or 0) % 2 == 1 else ""
        stop = ""
        if standings is not None:
            st = standings.get(e.model)
            stop = ('<td class="name standing">–</td>' if st is None else
                    f'<td class="name standing{" ok" if st.settled else ""}" '
                    f'data-settled="{int(st.settled)}" title="{_esc(st.reason)}">'
                    f"{_esc(st.text())}</td>")
        w(f"<tr{odd} data-model=\"{_esc(e.model)}\"><td>{e.rank}</td><td class=\"name\">{_esc(e.model)}</td>"
          f"<td>{e.mean:.4f}</td><td>{e.n:,}</td>"
          f"<td class=\"rankset\">{'–' if e.rank_low is None else f'[{e.rank_low}, {e.rank_high}]'}</td>"
          f"<td class=\"tier\">{_num(e.tier, 'd')}</td>"
          f"<td>{'–' if lo_hi is None else f'[{lo_hi[0]:.4f}, {lo_hi[1]:.4f}]'}</td>{stop}</tr>")
    w("</tbody></table>")
    cov = "iid" if table.groups is None else (
        "cluster-robust" if (table.group_kind or "cluster") == "cluster" else "stratified")
    w('<p class="small">Rank set: the ranks the model can hold given the decisions taken; tier: '
      "a group of the ranking no decision separates. A model decided above another is ranked "
      "above it, whatever the means. ¹ interval: mean ± z<sub>1−α/2</sub>·se "
      f"({1 - rep['alpha']:.0%}), se from the {cov} covariance of the means on the items every "
      "model has: a fixed-N figure, for one look."
      + (" Until resolved: the model's stop signal for the whole board; settled at item n: "
         "its items at the first reading of its plan that said stop, and the share of the "
         "board's items it has not evaluated; – for a model below the top the monitor reads."
         if standings is not None else "") + "</p>")
    w(f"<figure>{_ranking_plot(report, ci)}</figure></section>")

    # gaps: the verdicts
    clustered = rep["design"] == "clusters"
    w('<section id="gaps"><h2>Adjacent gaps</h2>')
    w('<table><thead><tr><th>#</th><th class="name">A (above)</th><th class="name">B</th>'
      "<th>n</th><th>δ̂ = A − B</th><th>verdict</th><th>E at the decision</th><th>E now</th>"
      "<th>threshold 1/γ</th><th>q_AV</th>"
      + ("<th>cluster observations</th>" if clustered else "")
      + "</tr></thead><tbody>")
    for p in adjacent:
        d = p.data
        dec = d.get("decided")
        w(f"<tr data-pair=\"{_esc(d['model_a'])}|{_esc(d['model_b'])}\" "
          f"data-verdict=\"{_esc(d['verdict'])}\"><td>{d['rank_a']}</td>"
          f"<td class=\"name\">{_esc(d['model_a'])}</td><td class=\"name\">{_esc(d['model_b'])}</td>"
          f"<td>{d['n']:,}</td><td>{d['delta']:+.4f}</td>{_verdict_cell(d)}"
          f"<td>{'–' if dec is None else _num(dec['e_value'], '.3g')}</td>"
          f"<td>{_num(d['e_value'], '.3g')}</td><td>{_num(d['e_threshold'], '.3g')}</td>"
          f"<td>{_num(d['q_anytime'], '.2f')}</td>"
          + (f"<td>{d['clusters']['observations']} of {d['clusters']['needed']} needed</td>"
             if clustered else "")
          + "</tr>")
    w("</tbody></table>")
    w('<p class="small">verdict: the pair\'s decision, taken at the first paired item n where its '
      "e-value reached its threshold 1/γ, and final: E dipping later does not undo it (E now "
      "is read at the end). q_AV = n / N*_AV: how far the pair is along the items a decision "
      "needs with the planned power. \"resolved for B ↑\": the decision favours B, ranked "
      "below by the means. undecidable: the design allows this pair no decision (sampled "
      "clusters: too few of them).</p></section>")

    def label(p: _Pair) -> str:
        d = p.data
        return f"{d['rank_a']}. {_short(d['model_a'], 22)} vs {_short(d['model_b'], 22)}"

    w('<section id="evalues"><h2>E-value paths against their thresholds</h2>'
      + ('<p class="small">Under sampled clusters the verdict is taken on one observation per '
         "cluster; the item-level paths below are drawn for reference.</p>" if clustered else "")
      + f"<figure>{_evalue_plot(report, table, adjacent, label)}</figure></section>")

    # fixed-N: planning and audit figures, apart
    short = {"cluster": "q_cluster", "strata": "q_strata"}.get(kind or "")
    w('<section id="fixed-n" class="fixed"><h2>Fixed-N planning and audit figures</h2>')
    w(f"<p><b>Valid for {_esc(fixed['valid_for'])}.</b> They say whether the items would "
      "suffice for a single test at this N (q = N/N* ≥ 1), which gap a board of this size can "
      f"detect (MDE), and the family-adjusted p-value ({_esc(fixed['correction'])}, N* sized at "
      f"α' = {fixed['alpha_per_pair']:.3g}, power {rep['power']:g}). The verdicts above are "
      "the decisions.</p>")
    w('<table><thead><tr><th>#</th><th class="name">A (above)</th><th class="name">B</th>'
      "<th>N*</th><th>q</th>" + (f"<th>DE</th><th>{short}</th>" if short else "")
      + "<th>MDE</th><th>p_adj</th></tr></thead><tbody>")
    for p in adjacent:
        d, f = p.data, p.data["fixed_n"]
        w(f"<tr><td>{d['rank_a']}</td><td class=\"name\">{_esc(d['model_a'])}</td>"
          f"<td class=\"name\">{_esc(d['model_b'])}</td><td>{_num(f['n_star'], ',')}</td>"
          f"<td>{_num(f['q'], '.2f')}</td>"
          + (f"<td>{_num(f['design_effect'], '.2f')}</td><td>{_num(f[short], '.2f')}</td>"
             if short else "")
          + f"<td>{_num(f['mde'], '.4f')}</td><td>{_num(f['p_adjusted'], '.2g')}</td></tr>")
    w("</tbody></table>")
    rs = fixed.get("rank_sets")
    if rs and "unavailable" not in rs:
        w(f'<p class="small">Fixed-N rank sets: {_esc(rs["method"])} {rs["coverage"]:.0%}, '
          f"{_esc(rs['procedure'])} over all pairs, {_esc(rs['covariance'])} covariance "
          f"({rs['draws']:,} draws, seed {rs['seed']}): what one look at this table would "
          "separate, not the decisions.</p>")
        w('<table><thead><tr><th>#</th><th class="name">model</th><th>fixed-N rank set</th>'
          "<th>fixed-N tier</th></tr></thead><tbody>")
        for e in report.ranking:
            w(f"<tr><td>{e.rank}</td><td class=\"name\">{_esc(e.model)}</td>"
              f"<td>{'–' if e.fixed_n_rank_low is None else f'[{e.fixed_n_rank_low}, {e.fixed_n_rank_high}]'}</td>"
              f"<td>{_num(e.fixed_n_tier, 'd')}</td></tr>")
        w("</tbody></table>")
    elif rs:
        w(f'<p class="small">fixed-N rank sets: not computed ({_esc(rs["unavailable"])}).</p>')
    w("</section>")
    w(f'<section id="q" class="fixed"><h2>Fixed-N: resolution ratio q per pair</h2><figure>'
      f"{_q_plot(adjacent, label)}</figure></section>")
    w('<section id="mde" class="fixed"><h2>Fixed-N: minimum detectable effect against N</h2>'
      f"<figure>{_mde_plot(report, adjacent)}</figure>"
      '<p class="small">MDE = z·σ_D/√N at the family-corrected level: a gap above the curve '
      "at its N is detectable by one test at that N. Points are the adjacent pairs' |δ̂| at "
      "their paired items.</p></section>")
    w('<section id="shortcut" class="fixed"><h2>Fixed-N: the shortcut against N*</h2><figure>'
      f"{_shortcut_plot(report, adjacent)}</figure>"
      '<p class="small">The G*Power / pwr shortcut (Cohen\'s h per arm, times 1 − ρ) asks for '
      "about half the paired size N* a gap needs (docs/lemma1.md): points near the dashed line "
      "are boards sized by the shortcut that would be underpowered.</p></section>")
    w('<section id="notes"><h2>Definitions</h2><ul class="small">')
    w("<li>E_n: the pair's e-process (exact McNemar mixture for 0/1 scores, bounded "
      "gamma-exponential mixture otherwise); the pair is resolved the first time one of its "
      "one-sided halves reaches 2/γ (so E ≥ 1/γ), γ the pair's fixed share of α (online "
      "Bonferroni over the board's life), and declared equivalent the first time its "
      "confidence sequence lies inside the margin (±Δ); either decision is final. Under "
      "sampled clusters the decision is taken on one observation per cluster "
      "(docs/clusters-vs-strata.md).</li>")
    w("<li>Fixed-N: N* = z²σ_D²/δ², z = z<sub>1−α'/2</sub> + z<sub>1−β</sub>; q = N/N*; "
      "MDE = zσ_D/√N; q_cluster = N/(N*·DE) with the cluster-robust design effect, q_strata "
      "with the stratified one. Valid for one look at a fixed N.</li>")
    w("</ul></section></body></html>\n")
    return "".join(out)


def write_html(path: Any, report: ResolutionReport, table: ScoreTable, *,
               command: str | None = None) -> int:
    """Write :func:`render_html` to ``path``; the number of bytes written."""
    from pathlib import Path

    text = render_html(report, table, command=command)
    data = text.encode("utf-8")
    Path(path).write_bytes(data)
    return len(data)
