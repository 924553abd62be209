"""``llm-monitor report``: which gaps of a finished leaderboard table are resolved."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit
from monitor.defaults import PLANNED_MODELS, RANK_SEED
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
    "Resolution report of a per-item score table: the ranking and, for each pair in the family, "
    "N, δ̂, σ̂_D², ρ̂, N*, q = N/N*, MDE, the design effect and the p-value.",
    "FILE is a long table (CSV or JSONL, optionally .gz, with item_id or question_id, model, "
    "score or correct, optional benchmark and group columns) or a wide table (an id column, "
    "optional group columns, one column per model). Empty cell = item absent; NA = no answer, "
    "scored 0 unless --na-as-absent.",
    "FAMILY: adjacent pairs of the ranking (default) or all pairs; A is ranked above B.",
    "RESOLVED: q = N / N* ≥ 1, N* = z² σ̂_D² / δ̂², z = z(1 − α'/2) + z(power), with "
    "α' = α/m under bonferroni and holm (α under none and bh), m = pairs in the family.",
    "RESOLVED_CLUSTER (--cluster-col, groups are sampled clusters): q_cluster = q / DE ≥ 1 with "
    "the cluster-robust design effect DE. RESOLVED_STRATA (--strata-col, groups are fixed "
    "strata): the same with the stratified variance (DE ≤ 1).",
    "SIGNIFICANT: family-adjusted p < α (exact McNemar on 0/1 scores, paired t otherwise).",
    "RANKS [low, high]: each model's rank confidence set, simultaneous at 1 − α over all models "
    "(--rank-sets marginal: each set at 1 − α on its own), from the max-|t| stepdown over all "
    "pairs on the paired covariance of the means (cluster-robust with --cluster-col). TIER: "
    "consecutive groups of the ranking; every model of a tier is resolved above every model "
    "of the tiers below. See docs/ranks.md.",
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


def _header_lines(rep: dict[str, Any]) -> list[str]:
    name = rep["benchmark"] or Path(rep["source"]).name
    kind = "0/1 scores, exact McNemar" if rep["binary"] else "scores in [0, 1], paired t"
    m = rep["verdicts"]["pairs"]
    fam = "adjacent pairs of the ranking" if rep["family"] == "adjacent" else "all pairs"
    corr = rep["correction"]
    sized = (f"N* sized at α/m = {rep['alpha_per_pair']:.3g}" if corr in ("bonferroni", "holm")
             else f"N* sized at α = {rep['alpha_per_pair']:.3g}")
    groups = rep["groups"]
    if groups is None:
        grp = "groups: none (items treated as independent)"
    elif groups["kind"] == "cluster":
        grp = (f"groups: {groups['column']!r} as CLUSTERS ({groups['n_groups']}, sampled; "
               "cluster-robust design effect DE inflates N*)")
    else:
        grp = (f"groups: {groups['column']!r} as STRATA ({groups['n_groups']}, fixed; "
               "stratified variance, DE ≤ 1)")
    return [
        f"{name}: {rep['n_items']:,} items, {rep['n_models']} models, {kind}",
        f"family: {fam} ({m:,} pairs) · correction: {corr} ({sized}) · α = {rep['alpha']:g}, "
        f"power = {rep['power']:g}",
        grp,
    ]


def _verdict(pair: dict[str, Any], kind: str | None, *, narrow: bool) -> Text:
    """RESOLVED: q ≥ 1 and (with groups) the grouped q ≥ 1; fixed-N only: q ≥ 1 alone."""
    from rich.text import Text

    grouped = pair.get(f"resolved_{kind}") if kind else None
    if pair["resolved"] and grouped is not False:
        return Text("RESOLVED", style="bold green")
    if pair["resolved"]:
        return Text("fixed-N" if narrow else "fixed-N only", style="yellow")
    return Text("no" if narrow else "unresolved", style="dim")


def _pair_cells(pair: dict[str, Any], kind: str | None, *, narrow: bool) -> list[Any]:
    # Wide: δ, N*, q, DE, the grouped q, p_adj, verdict; narrow (< 110 columns): q, the grouped
    # q and the verdict. n and ρ are in --json.
    cells: list[Any] = [] if narrow else [_fmt(pair["delta"], "+.3f"), _fmt_n(pair["n_star"])]
    cells.append(_fmt(pair["q"], ".2f"))
    if kind is not None:
        de = pair["design_effect"]
        if not narrow:
            cells.append(_fmt(de, ".1f" if de is not None and de >= 10 else ".2f"))
        cells.append(_fmt(pair[f"q_{kind}"], ".2f"))
    if not narrow:
        cells.append(_fmt(pair["p_adjusted"], ".1e") + ("*" if pair["significant"] else " "))
    cells.append(_verdict(pair, kind, narrow=narrow))
    return cells


def _pair_columns(table: Table, kind: str | None, *, narrow: bool) -> None:
    for name in ("q",) if narrow else ("δ", "N*", "q"):
        table.add_column(name, justify="right", no_wrap=True)
    if kind is not None:
        if not narrow:
            table.add_column("DE", justify="right", no_wrap=True)
        table.add_column("q_cl" if kind == "cluster" else "q_st", justify="right", no_wrap=True)
    if not narrow:
        table.add_column("p_adj", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)


def _rank_cells(entry: dict[str, Any]) -> list[str]:
    if entry.get("rank_low") is None:
        return ["–", "–"]
    return [f"[{entry['rank_low']}, {entry['rank_high']}]", str(entry["tier"])]


def _rank_columns(table: Table) -> None:
    table.add_column("ranks", justify="center", no_wrap=True)
    table.add_column("tier", justify="right", no_wrap=True)


def _rank_sets_line(rep: dict[str, Any]) -> str | None:
    info = rep.get("rank_sets")
    if info is None:
        return None
    if "unavailable" in info:
        return f"rank sets: not computed ({info['unavailable']})"
    how = "simultaneous" if info["method"] == "simultaneous" else "marginal (each on its own)"
    top = "the leader is resolved above all" if info["top_resolved"] else "no sole leader"
    return (f"rank sets: {how} {info['coverage']:.0%}, {info['procedure']}, "
            f"{info['covariance']} covariance, {info['draws']:,} draws (seed {info['seed']}): "
            f"{info['tiers']} tiers, {top}")


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
        # Below ~110 columns the model names would be squeezed out: drop δ, N*, DE and p_adj.
        narrow = console.width < 110
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        if rep["family"] == "adjacent":
            # One row per model; the pair figures compare it with the next model down.
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
            table.caption = "pair figures compare each model with the next one down"
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
        if kind is not None:
            table.caption = ((table.caption + "; ") if table.caption else "") + (
                f"RESOLVED: q ≥ 1 and q_{'cl' if kind == 'cluster' else 'st'} ≥ 1; "
                "fixed-N only: q ≥ 1 alone")
        console.print(table)
        if note is not None:
            console.print(note, highlight=False)
        if rep["family"] != "adjacent" and rep.get("rank_sets") is not None:
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
        v = rep["verdicts"]
        parts = [f"{v['resolved']} resolved (q ≥ 1)"]
        if kind is not None:
            short = "q_cl" if kind == "cluster" else "q_st"
            label = "clusters" if kind == "cluster" else "strata"
            parts.append(f"{v[f'resolved_{kind}']} resolved with {label} ({short} ≥ 1)")
        adj = "unadjusted" if rep["correction"] == "none" else rep["correction"]
        parts.append(f"{v['significant']} significant (*: {adj} p < {rep['alpha']:g})")
        console.print(f"verdicts ({v['pairs']:,} pairs): " + " · ".join(parts), highlight=False)
        note = _rank_sets_line(rep)
        if note is not None:
            console.print(note, highlight=False)

    return render


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
            "--anytime", help="replay items through the e-processes: anytime-valid verdicts")]
            = False,
        order: Annotated[str, typer.Option(
            help="--anytime replay order: file (first appearance) or shuffle")] = "file",
        seed: Annotated[int | None, typer.Option(help="--anytime shuffle seed")] = None,
        rank_sets: Annotated[str, typer.Option(
            "--rank-sets", help="rank confidence sets: simultaneous (all models jointly at "
            "1 − α) or marginal (each model's set on its own)")] = "simultaneous",
        rank_seed: Annotated[int, typer.Option(
            "--rank-seed", help="seed of the rank sets' parametric draws (fixed by default: "
            "the same table gives the same sets)")] = RANK_SEED,
        planned_models: Annotated[int, typer.Option(
            "--planned-models", help="--anytime: the board size each pair's fixed share of α "
            "is planned for (as the live monitor's --planned-models)")] = PLANNED_MODELS,
        anytime_rule: Annotated[str, typer.Option(
            "--anytime-rule", help="--anytime: board (each pair a fixed share of α, the live "
            "monitor's rule) or family (e-Bonferroni over these pairs, for comparison)")]
            = "board",
        html: Annotated[Path | None, typer.Option(
            "--html", help="also write the report as one self-contained HTML page (ranking, "
            "verdicts, plots of q, MDE, e-value paths and the shortcut; implies the --anytime "
            "replay for the page)", dir_okay=False)] = None,
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
        table = read_scores(file, benchmark=benchmark, metric=metric, filter=filter,
                            scorer=scorer, id_col=id_col, cluster_col=cluster_col, strata_col=strata_col,
                            exclude=_split(exclude), na_as_wrong=not na_as_absent)
        if complete_only or top is not None:
            table = select_models(table, complete_only=complete_only, top=top)
        report = build_report(table, family=family, correction=correction, alpha=alpha,
                              power=power, selection={"complete_only": complete_only, "top": top},
                              rank_method=rank_sets, rank_seed=rank_seed)
        if anytime or html is not None:
            from monitor.offline.replay import with_anytime

            if anytime_rule not in ("board", "family"):
                raise ConfigError(f"--anytime-rule must be board or family, got {anytime_rule!r}")
            if planned_models < 2:
                raise ConfigError(f"--planned-models must be at least 2, got {planned_models}")
            replayed = with_anytime(report, table, order=order, seed=seed,
                                    planned_models=planned_models, rule=anytime_rule)
            if html is not None:
                from monitor.offline.html import write_html

                size = write_html(html, replayed, table,
                                  command="llm-monitor report " + " ".join(sys.argv[2:]))
                print(f"HTML report: {html} ({size / 1e6:.1f} MB, no network needed to view)",
                      file=sys.stderr)
        if anytime:
            report = replayed
            if as_json:
                write_report(sys.stdout, report)
                return
            rep = report.as_dict(pairs=shown_pairs(report, limit))
            fixed = _human(rep, limit=limit)

            def human(console: Console) -> None:
                from rich.console import Console

                fixed(console)
                if not console.is_terminal:
                    console = Console(width=max(console.width, 120), highlight=False)
                _render_anytime(console, rep)

            emit(rep, as_json=False, human=human)
            return
        if as_json:
            # Streamed: the 499,500 pairs of 1,000 models are ≈ 400 MB of JSON text.
            write_report(sys.stdout, report)
            return
        rep = report.as_dict(pairs=shown_pairs(report, limit))
        emit(rep, as_json=False, human=_human(rep, limit=limit))


def _render_anytime(console: Console, rep: dict[str, Any]) -> None:
    """The anytime columns as a second table under the fixed-N report."""
    from rich.table import Table

    info = rep["anytime"]
    rule = (f"each pair at its fixed share of α = {info['alpha']:g} (planned for "
            f"{info['planned_models']} models)" if info["rule"] == "board"
            else f"e-Bonferroni over these {rep['verdicts']['pairs']:,} pairs")
    table = Table(
        title=(f"anytime-valid verdicts · order: {info['order']} · {rule} · decided at the "
               f"first crossing · {info['resolved_anytime']}/{rep['verdicts']['pairs']:,} "
               "resolved")
    )
    table.add_column("pair", overflow="fold", ratio=1, min_width=20)
    for col in ("n", "E", "1/γ", "CS for δ", "N*_AV", "q_AV", "decided at"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in rep["pairs"]:
        table.add_row(
            f"{p['model_a']} > {p['model_b']}",
            str(p["n"]),
            f"{p['e_value']:.3g}",
            f"{p['e_threshold']:.3g}",
            f"[{p['cs_low']:+.3f}, {p['cs_high']:+.3f}]",
            str(p["n_star_anytime"]),
            f"{p['q_anytime']:.2f}",
            "—" if p["first_resolved_at"] is None else str(p["first_resolved_at"]),
        )
    console.print(table)
    groups: dict[int, list[str]] = {}
    for entry in rep["ranking"]:
        if "anytime_tier" in entry:
            groups.setdefault(entry["anytime_tier"], []).append(
                f"{entry['model']} [{entry['anytime_rank_low']}, {entry['anytime_rank_high']}]")
    if groups:
        console.print(f"anytime tiers (from the decisions of all {len(rep['ranking'])} models' "
                      "pairs; ranks in brackets):", highlight=False)
        for tier, names in groups.items():
            console.print(f"  {tier}: " + " · ".join(names), highlight=False)
