"""``llm-monitor compare``: classical paired tests, a bootstrap CI and the resolution figures for two models."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from monitor.commands._output import emit, titled_table

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.stats.paired_tests import ZeroMethod


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _human(f: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        t = titled_table(f"{f['a']} vs {f['b']}: {f['n']} shared items", console)
        t.add_column("figure")
        t.add_column("value", justify="right")
        t.add_row("mean A / mean B", f"{f['mean_a']:.4f} / {f['mean_b']:.4f}")
        t.add_row("mean difference A − B", f"{f['mean_diff']:+.4f}")
        t.add_row("median difference", f"{f['median_diff']:+.4g}")
        t.add_row("wins / losses / ties", f"{f['wins']} / {f['losses']} / {f['ties']}")
        tests = f["tests"]
        if tests["mcnemar_exact"] is not None:
            t.add_row("McNemar exact p", _fmt(tests["mcnemar_exact"]["pvalue"]))
        t.add_row("sign test p", _fmt(tests["sign"]["pvalue"]))
        w = tests["wilcoxon"]
        t.add_row(f"Wilcoxon p (zeros {w['zeros']}; {w['method']})", _fmt(w["pvalue"]))
        if tests["paired_t"] is not None:
            pt_ = tests["paired_t"]
            t.add_row("paired t p", _fmt(pt_["pvalue"]))
        bs = f["bootstrap"]
        conf = f"{bs['confidence']:.0%}"
        t.add_row(f"bootstrap {conf} CI (percentile, B={bs['n_resamples']})",
                  f"[{bs['percentile']['low']:+.4f}, {bs['percentile']['high']:+.4f}]")
        t.add_row(f"bootstrap {conf} CI (BCa)",
                  f"[{bs['bca']['low']:+.4f}, {bs['bca']['high']:+.4f}]")
        t.add_row("rank-biserial r", _fmt(f["rank_biserial"]))
        res = f["resolution"]
        t.add_row("N* / q / MDE", f"{_fmt(res['n_star'])} / {res['q']:.3f} / {res['mde']:.4f}")
        console.print(t)
        verdict = "significant" if f["significant"] else "not significant"
        console.print(f"primary test ({f['primary_test']}): p = {_fmt(f['primary_pvalue'])} — "
                      f"{verdict} at α = {res['alpha']}; "
                      f"{'resolved' if res['resolved'] else 'not resolved'} (q = {res['q']:.2f}).")
        for w_ in f["warnings"]:
            console.print(f"[yellow]warning:[/yellow] {w_}")
        console.print(f["meaning"])

    return render


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare_cmd(
        path: Annotated[Path, typer.Argument(
            help="long or wide per-item score table, lm-eval samples or inspect_ai logs "
            "(a file or a directory)")],
        a: Annotated[str, typer.Option("--a", help="model A")],
        b: Annotated[str, typer.Option("--b", help="model B")],
        exclude: Annotated[list[str] | None, typer.Option(
            "--exclude", help="wide tables: columns that are not models")] = None,
        id_col: Annotated[str | None, typer.Option("--id-col", help="item id column")] = None,
        benchmark: Annotated[str | None, typer.Option(
            help="long tables: benchmark; lm-eval subtask files: the group's name")] = None,
        metric: Annotated[str | None, typer.Option(help="lm-eval: per-sample metric")] = None,
        filter: Annotated[str | None, typer.Option(
            "--filter", help="lm-eval: the filter, e.g. flexible-extract")] = None,
        scorer: Annotated[str | None, typer.Option(
            help="inspect_ai logs: the scorer (default: the log's first)")] = None,
        n_resamples: Annotated[int, typer.Option("--B", help="bootstrap resamples")] = 10_000,
        seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
        alpha: Annotated[float, typer.Option(help="two-sided level")] = 0.05,
        power: Annotated[float, typer.Option(help="target power for N*")] = 0.8,
        zero_method: Annotated[str, typer.Option(
            "--zero-method", help="Wilcoxon zeros: wilcox (drop), pratt or zsplit")] = "wilcox",
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Paired tests, bootstrap CI, effect size and N*/q/MDE for model A against model B."""
        from monitor.offline.compare import ZEROS, compare_table

        if zero_method not in ZEROS:
            raise ValueError(f"--zero-method must be wilcox, pratt or zsplit, got {zero_method!r}")
        fig = compare_table(path, a=a, b=b, exclude=tuple(exclude or ()), id_col=id_col,
                            benchmark=benchmark, metric=metric, filter=filter, scorer=scorer,
                            n_resamples=n_resamples, seed=seed,
                            alpha=alpha, power=power,
                            zero_method=cast("ZeroMethod", zero_method)).to_dict()
        emit(fig, as_json=as_json, human=_human(fig))
