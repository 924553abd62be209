"""Terminal rendering of the embedded monitor: replay progress and one table per ranking."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


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
    if value is None:
        return "–"
    f = float(value)
    if math.isinf(f):
        return "∞"
    return f"{f:.3g}" if f < 1e4 else f"{f:.2e}"


def ranking_table(benchmark: str, ranking: Mapping[str, Any], *, max_rows: int = 40) -> Table:
    """One ranking: models by mean, and for each the verdict against the model below it."""
    models = list(ranking.get("models", []))
    pairs = {(p.get("model_a"), p.get("model_b")): p for p in ranking.get("pairs", [])}
    unresolved = ranking.get("unresolved_pairs")
    resolved = bool(ranking.get("resolved"))
    status = "[bold green]resolved[/]" if resolved else (
        f"[yellow]{unresolved} adjacent pair(s) unresolved[/]" if unresolved is not None else "")
    tiers = ranking.get("tiers")
    status += f" · {tiers} tier(s)" if tiers else ""
    table = Table(title=f"{benchmark} — {status}", title_justify="left", expand=False,
                  caption="verdicts are final once resolved (E_n reached 1/γ, the pair's fixed "
                          "share of α); ranks: the anytime rank set")
    for name, justify in (("#", "right"), ("model", "left"), ("mean", "right"), ("n", "right"),
                          ("ranks", "right"), ("tier", "right"),
                          ("vs next", "left"), ("pair n", "right"), ("δ̂", "right"),
                          ("E_n", "right"), ("1/γ", "right"), ("q_AV", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, row in enumerate(models[:max_rows], start=1):
        name = str(row.get("model"))
        nxt = models[rank]["model"] if rank < len(models) else None
        pair = pairs.get((name, nxt)) or pairs.get((nxt, name)) if nxt is not None else None
        verdict = Text("")
        cells = ["", "", "", "", ""]
        if pair is not None:
            v = str(pair.get("verdict", ""))
            if v == f"resolved:{name}":
                verdict = Text("resolved", style="bold green")
            elif v.startswith("resolved:"):  # the lower-ranked model is better on shared items
                verdict = Text("resolved (reversed)", style="magenta")
            else:
                verdict = Text(v, style="yellow")
            cells = [str(pair.get("n", "–")),
                     _fmt(pair.get("delta"), "+.4f"), _e(pair.get("e_value")),
                     _e(pair.get("e_threshold")), _fmt(pair.get("q_anytime"), ".2f")]
        low, high = row.get("rank_low"), row.get("rank_high")
        ranks = "" if low is None else (f"{low}" if low == high else f"{low}–{high}")
        table.add_row(str(rank), name, _fmt(row.get("mean"), ".4f"),
                      str(row.get("n", "")), ranks, str(row.get("tier", "")), verdict, *cells)
    if len(models) > max_rows:
        table.caption = f"{table.caption}; {len(models) - max_rows} more model(s) not shown"
    return table


def rankings_view(rankings: Mapping[str, Mapping[str, Any]], header: RenderableType | None = None
                  ) -> RenderableType:
    """All rankings, one table each, below an optional header (e.g. a progress bar)."""
    parts: list[RenderableType] = [] if header is None else [header]
    if not rankings:
        parts.append(Text("waiting for results…", style="dim"))
    for bench, ranking in rankings.items():
        parts.append(ranking_table(bench, ranking))
    return Group(*parts)
