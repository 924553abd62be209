"""``llm-monitor report``: which gaps of a finished leaderboard table are resolved."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit
from monitor.defaults import MARGIN, PLANNED_MODELS, RANK_SEED, REPLAY_SEED
from monitor.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from monitor.offline.report import ResolutionReport

# Paragraphs without hard line breaks so that the help formatter can reflow them.
HELP = "\n\n".join([
    "Which gaps of a per-item score table are resolved: the ranking with each model's rank "
    "set and tier and, for each pair in the family, its verdict — the live monitor's anytime "
    "decision, replayed item by item — with N, δ̂, the e-value against its threshold and "
    "q_AV; and, apart, the fixed-N planning figures (N*, q, MDE, design effect, p-values).",
    "FILE is a long table (CSV or JSONL, optionally .gz, with item_id or question_id, model, "
    "score or correct, optional benchmark and group columns) or a wide table (an id column, "
    "optional group columns, one column per model), lm-eval samples or inspect_ai logs. Empty "
    "cell = item absent; NA = no answer, scored 0 unless --na-as-absent.",
    "DESIGN: no group column = exchangeable items; --strata-col C = the groups are fixed "
    "strata (e.g. MMLU-Pro's subjects); --cluster-col C = the groups are sampled clusters, "
    "decided on whole clusters (undecidable with too few). See docs/clusters-vs-strata.md.",
    "VERDICT: resolved:<model> once the pair's e-process reaches 1/γ, γ its fixed share of "
    "α (the live monitor's rule), decided at that paired item and final; unresolved until "
    "then; undecidable where the design allows no decision. The items are replayed in a "
    "seeded shuffled order (--seed, stated in the output): a file sorted by subject or "
    "difficulty would otherwise decide pairs on its order. --order file keeps the file's "
    "order, for a table whose rows are the real arrival order.",
    "RANKS [low, high] and TIER: from the decisions of all pairs (rank_low = 1 + models "
    "decided above, rank_high = M − models decided below); tiers are consecutive groups no "
    "decision separates. FAMILY: adjacent pairs of the ranking (default) or all pairs; A is "
    "ranked above B.",
    "FIXED-N (planning and audit, valid for one look at a fixed N, not the verdict): "
    "q = N / N*, N* = z² σ̂_D² / δ̂², z = z(1 − α'/2) + z(power), α' = α/m under bonferroni "
    "and holm (α under none and bh); q_cl / q_st with the cluster-robust or stratified "
    "design effect; p_adj (exact McNemar on 0/1 scores, paired t otherwise); --json adds "
    "the max-|t| stepdown rank sets (fixed_n_rank_low …, docs/ranks.md).",
    "LARGE FAMILIES: the table shows at most --limit rows (default 100; 0 shows all) — with "
    "--family all the adjacent pairs of the ranking first — and says how many it leaves out; "
    "--json always writes every pair.",
])

#: Rows of the human table unless --limit says otherwise: a rich table of 44,850 pairs (all
#: pairs of 300 models) takes minutes to lay out, and no one reads it on a terminal.
DEFAULT_LIMIT = 100


def _fmt(x: Any, spec: str) -> str:
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return format(x, spec)


def _fmt_n(x: Any, *, short: bool = False) -> str:
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    if x is None:
        return "–"
    return f"{x:,}" if x < (1e5 if short else 1e7) else f"{x:.1e}"


_DESIGNS = {"items": "exchangeable items", "strata": "fixed strata",
            "clusters": "sampled clusters"}


def _header_lines(rep: dict[str, Any]) -> list[str]:
    from monitor.offline.report import order_text

    name = rep["benchmark"] or Path(rep["source"]).name
    kind = "0/1 scores" if rep["binary"] else "scores in [0, 1]"
    m = rep["verdicts"]["pairs"]
    fam = "adjacent pairs of the ranking" if rep["family"] == "adjacent" else "all pairs"
    groups = rep["groups"]
    design = _DESIGNS[rep["design"]]
    if groups is not None:
        design += f" ({groups['column']!r}, {groups['n_groups']} groups)"
    info = rep["anytime"]
    thresholds = sorted({p["e_threshold"] for p in rep["pairs"]})
    thr = ("1/γ" if not thresholds else f"1/γ = {thresholds[0]:.3g}"
           + (f"–{thresholds[-1]:.3g}" if len(thresholds) > 1 else ""))
    rule = (f"γ its fixed share of α = {info['alpha']:g} (planned for {info['planned_models']} "
            "models)" if info["rule"] == "board"
            else f"γ = α/{m:,} (e-Bonferroni over these pairs)")
    return [
        f"{name}: {rep['n_items']:,} items, {rep['n_models']} models, {kind}",
        f"family: {fam} ({m:,} pairs) · design: {design}",
        f"verdicts: anytime decisions, {order_text(info)}",
        f"a pair is decided once its e-value E reaches {thr}, {rule}; the decision is final",
    ]


def _verdict(pair: dict[str, Any]) -> Text:
    """The pair's verdict, as the live board says it."""
    from rich.text import Text

    v = pair["verdict"]
    if v == f"resolved:{pair['model_a']}":
        return Text("resolved", style="bold green")
    if v.startswith("resolved:"):
        return Text("resolved: B", style="bold magenta")  # the model ranked below is better
    if v == "unresolved":
        return Text("open", style="dim")
    return Text(v.split(":", 1)[0], style="yellow")


def _decided(pair: dict[str, Any]) -> str:
    d = pair.get("decided")
    return "" if d is None else f"n={d['n']:,}"


def _pair_cells(pair: dict[str, Any], kind: str | None, *, narrow: bool) -> list[Any]:
    # The verdict first: the decision and the item it was taken at. Wide (≥ 110 columns) adds
    # δ̂, E and its threshold, q_AV, and the fixed-N figures apart (q, the grouped q, p_adj).
    cells: list[Any] = [_verdict(pair), _decided(pair)]
    if narrow:
        cells.append(_fmt(pair["q_anytime"], ".2f"))
        return cells
    fixed = pair["fixed_n"]
    cells += [_fmt(pair["delta"], "+.4f"), _fmt(pair["e_value"], ".3g"),
              _fmt(pair["q_anytime"], ".2f"), _fmt(fixed["q"], ".2f")]
    if kind is not None:
        cells.append(_fmt(fixed[f"q_{kind}"], ".2f"))
    return cells


def _pair_columns(table: Table, kind: str | None, *, narrow: bool) -> None:
    table.add_column("verdict", no_wrap=True)
    table.add_column("decided", justify="right", no_wrap=True)
    if narrow:
        table.add_column("q_AV", justify="right", no_wrap=True)
        return
    for name in ("δ", "E", "q_AV"):
        table.add_column(name, justify="right", no_wrap=True)
    # The fixed-N figures, marked as such in their heads: one look at a fixed N (N*, MDE and
    # p-values are in --json and the HTML page).
    table.add_column("q¹", justify="right", no_wrap=True)
    if kind is not None:
        table.add_column("q_cl¹" if kind == "cluster" else "q_st¹", justify="right",
                         no_wrap=True)


def _rank_cells(entry: dict[str, Any]) -> list[str]:
    if entry.get("rank_low") is None:
        return ["–", "–"]
    return [f"[{entry['rank_low']}, {entry['rank_high']}]", str(entry["tier"])]


def _rank_columns(table: Table) -> None:
    table.add_column("ranks", justify="center", no_wrap=True)
    table.add_column("tier", justify="right", no_wrap=True)


def shown_pairs(report: ResolutionReport, limit: int | None) -> NDArray[np.int64]:
    """The pairs of the human table, at most ``limit`` (None or 0: all, in family order).

    Adjacent family: the pairs of the first ``limit`` models (one row per model). All pairs,
    when they do not fit: the adjacent pairs of the ranking first (they decide whether the
    ranking is resolved), then the others in family order.
    """
    import numpy as np

    res = report.figures
    every = np.arange(len(res), dtype=np.int64)
    if not limit or every.size <= limit:
        return every
    if report.family != "adjacent":
        rank = np.asarray(report.rank, dtype=np.int64)
        adjacent = rank[res.b] - rank[res.a] == 1
        every = np.concatenate([every[adjacent][np.argsort(rank[res.a][adjacent])],
                                every[~adjacent]])
    return every[:limit]


def _models_note(rep: dict[str, Any], limit: int | None) -> str | None:
    """Say how many models a table of the ranking leaves out, and how to see them."""
    models = len(rep["ranking"])
    if not limit or models <= limit:
        return None
    return (f"top {limit} of {models:,} models shown; --limit N for more (0: all), --json for "
            "every pair")


def _pairs_note(rep: dict[str, Any]) -> str | None:
    """Say how many pairs the table of all pairs leaves out, and how to see them."""
    shown, total = len(rep["pairs"]), rep["verdicts"]["pairs"]
    if shown >= total:
        return None
    return (f"{shown:,} of {total:,} pairs shown, the adjacent pairs of the ranking first; "
            "--limit N for more (0: all), --json for all")


def _human(rep: dict[str, Any], *, limit: int | None = None) -> Any:
    """The human report of ``rep``; with ``limit``, at most that many models (adjacent family)
    or pairs (``rep["pairs"]`` as selected by :func:`shown_pairs`) are drawn."""
    def render(console: Console) -> None:
        from rich import box
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from monitor.offline.report import headline

        if not console.is_terminal:
            # Piped output (files, docs, CI logs) has no width to honour: use a readable one.
            console = Console(width=max(console.width, 120), highlight=False)
        for line in _header_lines(rep):
            console.print(line, highlight=False)
        for warning in rep.get("warnings", ()):
            console.print(f"[bold yellow]WARNING[/bold yellow]: {escape(warning['message'])}",
                          highlight=False)
        groups = rep["groups"]
        kind = groups["kind"] if groups else None
        # Below ~110 columns the model names would be squeezed out: the verdict, the item it
        # was decided at and q_AV only; the figures are in --json and the HTML page.
        narrow = console.width < 110
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        if rep["family"] == "adjacent":
            # One row per model; the pair columns compare it with the next model down.
            table.add_column("#", justify="right", no_wrap=True)
            table.add_column("model", overflow="fold", ratio=1, min_width=12)
            table.add_column("mean", justify="right", no_wrap=True)
            _rank_columns(table)
            _pair_columns(table, kind, narrow=narrow)
            pairs = rep["pairs"]
            for k, entry in enumerate(rep["ranking"][:limit or None]):
                head = [str(entry["rank"]), entry["model"],
                        f"{entry['mean']:.3f}" if narrow else f"{entry['mean']:.4f}",
                        *_rank_cells(entry)]
                tail = _pair_cells(pairs[k], kind, narrow=narrow) if k < len(pairs) else []
                table.add_row(*head, *tail)
            table.caption = "verdict: this model against the next one down"
            note = _models_note(rep, limit)
        else:
            table.add_column("A", overflow="fold", ratio=1)
            table.add_column("B", overflow="fold", ratio=1)
            _pair_columns(table, kind, narrow=narrow)
            for pair in rep["pairs"]:
                table.add_row(f"{pair['rank_a']}. {pair['model_a']}",
                              f"{pair['rank_b']}. {pair['model_b']}",
                              *_pair_cells(pair, kind, narrow=narrow))
            note = _pairs_note(rep)
        table.caption = ((table.caption + "; ") if table.caption else "") + (
            "decided n=…: the paired item the decision was taken at, final")
        if not narrow:
            table.caption += ("; ¹ fixed-N planning figures, valid for one look at a fixed N, "
                              "not the verdict")
        console.print(table)
        if note is not None:
            console.print(note, highlight=False)
        if rep["family"] != "adjacent":
            ranks = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
            for name in ("#", "model", "mean"):
                ranks.add_column(name, justify="left" if name == "model" else "right",
                                 overflow="fold", no_wrap=name != "model")
            _rank_columns(ranks)
            for entry in rep["ranking"][:limit or None]:
                ranks.add_row(str(entry["rank"]), entry["model"], f"{entry['mean']:.4f}",
                              *_rank_cells(entry))
            console.print(ranks)
            note = _models_note(rep, limit)
            if note is not None:
                console.print(note, highlight=False)
        console.print(headline(rep), highlight=False, style="bold")

    return render


def _margin(text: str) -> float | None:
    """``--margin``: a number in (0, 0.5), or ``none`` (no equivalence decisions)."""
    if text.strip().lower() == "none":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"--margin must be a number in (0, 0.5) or none, got {text!r}") from None
    if not 0.0 < value < 0.5:
        raise ConfigError(f"--margin must be a number in (0, 0.5) or none, got {text!r}")
    return value


def _split(values: list[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for v in values or []:
        out.extend(part.strip() for part in v.split(",") if part.strip())
    return tuple(out)


def register(app: typer.Typer) -> None:
    @app.command("report", help=HELP)
    def report_cmd(
        file: Annotated[Path, typer.Argument(
            help="long or wide per-item score table, lm-eval samples file, inspect_ai log, "
            "or a directory of harness output")],
        benchmark: Annotated[str | None, typer.Option(
            help="long tables with a benchmark column: which benchmark; lm-eval subtask "
            "files: the group's name")] = None,
        metric: Annotated[str | None, typer.Option(
            help="lm-eval samples: the per-sample metric (default: the file's first)")] = None,
        filter: Annotated[str | None, typer.Option(
            "--filter", help="lm-eval samples: the filter, e.g. flexible-extract (default: "
            "the first in the file)")] = None,
        scorer: Annotated[str | None, typer.Option(
            help="inspect_ai logs: the scorer (default: the log's first)")] = None,
        cluster_col: Annotated[str | None, typer.Option(
            "--cluster-col", help="item groups as sampled clusters (inflates N* by DE): a "
            "table column, or the sample metadata field of inspect_ai logs")] = None,
        strata_col: Annotated[str | None, typer.Option(
            "--strata-col", help="item groups as fixed strata (stratified variance): a table "
            "column, or the sample metadata field of inspect_ai logs")] = None,
        family: Annotated[str, typer.Option(
            help="pairs read together: adjacent (in the ranking) or all")] = "adjacent",
        correction: Annotated[str, typer.Option(
            help="multiplicity correction: none, bonferroni, holm or bh")] = "holm",
        alpha: Annotated[float, typer.Option(help="family level, two-sided")] = 0.05,
        power: Annotated[float, typer.Option(help="target power 1−β for N*")] = 0.8,
        id_col: Annotated[str | None, typer.Option(
            "--id-col", help="item id column (default item_id, question_id, else first)")] = None,
        exclude: Annotated[list[str] | None, typer.Option(
            "--exclude", help="wide tables: a column that is not a model (repeat, or a,b)")] = None,
        na_as_absent: Annotated[bool, typer.Option(
            "--na-as-absent", help="treat NA cells as absent items instead of wrong answers")]
            = False,
        complete_only: Annotated[bool, typer.Option(
            "--complete-only", help="keep only models that have every item of the table")]
            = False,
        top: Annotated[int | None, typer.Option(
            help="keep only the N best models of the ranking (after --complete-only)")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
        limit: Annotated[int, typer.Option(
            help="rows of the table: models (adjacent family) or pairs (all, the adjacent ones "
            "first); 0 shows all; --json always has every pair")] = DEFAULT_LIMIT,
        anytime: Annotated[bool, typer.Option(
            "--anytime", hidden=True, help="accepted for older scripts and ignored: the "
            "decisions are the verdicts and are always taken")] = False,
        order: Annotated[str, typer.Option(
            help="how the decisions meet the items: shuffle (a seeded permutation, each "
            "item's results together) or file (the table's own order, when its rows are the "
            "real arrival order)")] = "shuffle",
        seed: Annotated[int, typer.Option(
            help="seed of the shuffled order; the same table and seed give the same "
            "decisions, as `llm-monitor demo --seed` and `run --shuffle --seed` take them")]
            = REPLAY_SEED,
        rank_sets: Annotated[str, typer.Option(
            "--rank-sets", help="fixed-N rank sets (--json: fixed_n_rank_low …): "
            "simultaneous (all models jointly at 1 − α) or marginal (each on its own)")]
            = "simultaneous",
        rank_seed: Annotated[int, typer.Option(
            "--rank-seed", help="seed of the fixed-N rank sets' parametric draws (fixed by "
            "default: the same table gives the same sets)")] = RANK_SEED,
        planned_models: Annotated[int, typer.Option(
            "--planned-models", help="the board size each pair's fixed share of α is planned "
            "for (as the live monitor's --planned-models)")] = PLANNED_MODELS,
        margin: Annotated[str, typer.Option(
            help="Δ, the equivalence margin (0.01 = one point): a pair whose confidence "
            "sequence lies inside (−Δ, Δ) is declared equivalent; none: never (as the live "
            "monitor's --margin)")] = f"{MARGIN:g}",
        anytime_rule: Annotated[str, typer.Option(
            "--anytime-rule", help="board (each pair a fixed share of α, the live monitor's "
            "rule) or family (e-Bonferroni over these pairs, for comparison)")] = "board",
        html: Annotated[Path | None, typer.Option(
            "--html", help="also write the report as one self-contained HTML page (ranking, "
            "verdicts, e-value paths; the fixed-N figures and plots apart)",
            dir_okay=False)] = None,
    ) -> None:
        from monitor.commands._jsonstream import write_report
        from monitor.io.sources import read_scores
        from monitor.offline.report import (
            FAMILIES,
            RANK_SET_METHODS,
            build_report,
            select_models,
        )
        from monitor.stats.multiplicity import METHODS

        if cluster_col is not None and strata_col is not None:
            raise ConfigError("give either --cluster-col or --strata-col, not both")
        if family not in FAMILIES:
            raise ConfigError(f"--family must be one of {', '.join(FAMILIES)}, got {family!r}")
        if rank_sets not in RANK_SET_METHODS:
            raise ConfigError(f"--rank-sets must be one of {', '.join(RANK_SET_METHODS)}, got "
                              f"{rank_sets!r}")
        if correction not in METHODS:
            raise ConfigError(
                f"--correction must be one of {', '.join(METHODS)}, got {correction!r}")
        if limit < 0:
            raise ConfigError(f"--limit must be 0 (all) or more, got {limit}")
        if order not in ("shuffle", "file"):
            raise ConfigError(f"--order must be shuffle or file, got {order!r}")
        if anytime_rule not in ("board", "family"):
            raise ConfigError(f"--anytime-rule must be board or family, got {anytime_rule!r}")
        if planned_models < 2:
            raise ConfigError(f"--planned-models must be at least 2, got {planned_models}")
        delta = _margin(margin)
        table = read_scores(file, benchmark=benchmark, metric=metric, filter=filter,
                            scorer=scorer, id_col=id_col, cluster_col=cluster_col, strata_col=strata_col,
                            exclude=_split(exclude), na_as_wrong=not na_as_absent)
        if complete_only or top is not None:
            table = select_models(table, complete_only=complete_only, top=top)
        report = build_report(table, family=family, correction=correction, alpha=alpha,
                              power=power, selection={"complete_only": complete_only, "top": top},
                              rank_method=rank_sets, rank_seed=rank_seed)
        from monitor.offline.replay import with_anytime

        # The decisions are the verdicts: always taken (--anytime, once needed, is ignored).
        report = with_anytime(report, table, order=order, seed=seed,
                              planned_models=planned_models, rule=anytime_rule, margin=delta)
        if html is not None:
            from monitor.offline.html import write_html

            size = write_html(html, report, table,
                              command="llm-monitor report " + " ".join(sys.argv[2:]))
            print(f"HTML report: {html} ({size / 1e6:.1f} MB, no network needed to view)",
                  file=sys.stderr)
        if as_json:
            # Streamed: the 499,500 pairs of 1,000 models are ≈ 400 MB of JSON text.
            write_report(sys.stdout, report)
            return
        rep = report.as_dict(pairs=shown_pairs(report, limit))
        emit(rep, as_json=False, human=_human(rep, limit=limit))
