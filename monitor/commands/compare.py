"""``llm-monitor compare``: classical paired tests, a bootstrap CI and the resolution figures for two models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console

from monitor.commands._output import emit, titled_table
from monitor.io.tables import read_table
from monitor.stats import paired_tests as pt
from monitor.stats.bootstrap import bootstrap_mean_ci
from monitor.stats.paired import paired_summary

MEANING = (
    "These figures say whether {a} and {b} differ on average over these {n} shared items "
    "(p-values, intervals) and whether {n} items suffice to resolve a gap this size (N*, q); "
    "they say nothing about test-set contamination, robustness to rewording or other "
    "benchmarks, and several comparisons read together need a multiplicity correction."
)


def compare_figures(
    x_a: np.ndarray, x_b: np.ndarray, *, a: str, b: str, n_resamples: int = 10_000,
    seed: int = 0, alpha: float = 0.05, power: float = 0.8,
    zero_method: pt.ZeroMethod = "wilcox",
) -> dict[str, Any]:
    """Every figure ``compare`` reports, as a plain dict with stable keys."""
    r = pt.paired_tests(x_a, x_b, zero_method=zero_method, confidence=1 - alpha)
    s = paired_summary(x_a, x_b)
    d = np.asarray(x_a, dtype=float) - np.asarray(x_b, dtype=float)
    boot: dict[str, dict[str, Any]] = {}
    for method in ("percentile", "bca"):
        res = bootstrap_mean_ci(d, n_resamples=n_resamples, confidence=1 - alpha,
                                method=method, rng=np.random.default_rng(seed))
        boot[method] = {"low": res.low, "high": res.high, "standard_error": res.standard_error,
                        "strategy": res.strategy}
    tests: dict[str, Any] = {
        "mcnemar_exact": None if r.mcnemar is None else {
            "n10": r.mcnemar.n10, "n01": r.mcnemar.n01, "statistic": r.mcnemar.statistic,
            "pvalue": r.mcnemar.pvalue},
        "sign": {"n_pos": r.sign.n_pos, "n_neg": r.sign.n_neg, "n_zero": r.sign.n_zero,
                 "pvalue": r.sign.pvalue},
        "wilcoxon": {"statistic": r.wilcoxon.statistic, "z": r.wilcoxon.z,
                     "pvalue": r.wilcoxon.pvalue, "zero_method": r.wilcoxon.zero_method,
                     "zeros": "dropped before ranking" if zero_method == "wilcox" else
                     "ranked, then their ranks dropped (Pratt)" if zero_method == "pratt" else
                     "ranks split between R+ and R− (zsplit)",
                     "n_used": r.wilcoxon.n_used, "method": r.wilcoxon.method},
        "paired_t": None if r.ttest is None else {
            "statistic": r.ttest.statistic, "df": r.ttest.df, "pvalue": r.ttest.pvalue,
            "ci_low": r.ttest.ci_low, "ci_high": r.ttest.ci_high},
    }
    primary = "mcnemar_exact" if r.binary else "paired_t"
    p_primary = tests[primary]["pvalue"] if tests[primary] is not None else float("nan")
    n_star = s.n_star(alpha=alpha, power=power)
    return {
        "a": a, "b": b, "n": r.n, "binary": r.binary, "mean_a": r.mean_a, "mean_b": r.mean_b,
        "mean_diff": r.mean_diff, "median_diff": r.median_diff, "wins": r.wins,
        "losses": r.losses, "ties": r.ties, "tests": tests,
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "confidence": 1 - alpha,
                      **boot},
        "rank_biserial": r.rank_biserial,
        "resolution": {"alpha": alpha, "power": power, "sigma_d2": s.sigma_d2, "rho": s.rho,
                       "n_star": float(np.ceil(n_star)) if np.isfinite(n_star) else n_star,
                       "q": s.q(alpha=alpha, power=power), "mde": s.mde(alpha=alpha, power=power),
                       "resolved": bool(s.q(alpha=alpha, power=power) >= 1.0)},
        "primary_test": primary, "primary_pvalue": p_primary,
        "significant": bool(p_primary < alpha),
        "bootstrap_excludes_zero": bool(boot["percentile"]["low"] > 0
                                        or boot["percentile"]["high"] < 0),
        "warnings": list(r.warnings),
        "meaning": MEANING.format(a=a, b=b, n=r.n),
    }


def run_compare(
    path: str | Path, *, a: str, b: str, exclude: tuple[str, ...] = (), id_col: str | None = None,
    benchmark: str | None = None, n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05,
    power: float = 0.8, zero_method: pt.ZeroMethod = "wilcox",
) -> dict[str, Any]:
    """Read the table, pair the two models on their shared items and compute the figures."""
    if a == b:
        raise ValueError("--a and --b must name two different models")
    if n_resamples < 100:
        raise ValueError(f"--B must be at least 100, got {n_resamples}")
    table = read_table(path, id_col=id_col, exclude=exclude, benchmark=benchmark)
    for m in (a, b):
        if m not in table.models:
            shown = ", ".join(table.models[:12]) + (" …" if len(table.models) > 12 else "")
            raise ValueError(f"{path}: model {m!r} not found; models are {shown}")
    xa, xb, _ = table.pair(a, b)
    out = compare_figures(xa, xb, a=a, b=b, n_resamples=n_resamples, seed=seed, alpha=alpha,
                          power=power, zero_method=zero_method)
    return {"file": str(path), **out}


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
        path: Annotated[Path, typer.Argument(help="long or wide per-item score table")],
        a: Annotated[str, typer.Option("--a", help="model A")],
        b: Annotated[str, typer.Option("--b", help="model B")],
        exclude: Annotated[list[str] | None, typer.Option(
            "--exclude", help="wide tables: columns that are not models")] = None,
        id_col: Annotated[str | None, typer.Option("--id-col", help="item id column")] = None,
        benchmark: Annotated[str | None, typer.Option(help="long tables: benchmark")] = None,
        n_resamples: Annotated[int, typer.Option("--B", help="bootstrap resamples")] = 10_000,
        seed: Annotated[int, typer.Option(help="bootstrap seed")] = 0,
        alpha: Annotated[float, typer.Option(help="two-sided level")] = 0.05,
        power: Annotated[float, typer.Option(help="target power for N*")] = 0.8,
        zero_method: Annotated[str, typer.Option(
            "--zero-method", help="Wilcoxon zeros: wilcox (drop), pratt or zsplit")] = "wilcox",
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Paired tests, bootstrap CI, effect size and N*/q/MDE for model A against model B."""
        if zero_method not in ("wilcox", "pratt", "zsplit"):
            raise ValueError(f"--zero-method must be wilcox, pratt or zsplit, got {zero_method!r}")
        fig = run_compare(path, a=a, b=b, exclude=tuple(exclude or ()), id_col=id_col,
                          benchmark=benchmark, n_resamples=n_resamples, seed=seed, alpha=alpha,
                          power=power, zero_method=zero_method)  # type: ignore[arg-type]
        emit(fig, as_json=as_json, human=_human(fig))
