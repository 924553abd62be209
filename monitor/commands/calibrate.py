"""``llm-monitor calibrate``: empirical power of the paired test at N = N*.

Simulation mode (``--pa --pb --rho``) draws correlated paired Bernoulli data; resampling mode
(``--table FILE --a A --b B``) draws N-item resamples of one real pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from monitor.commands._output import emit, err_console, titled_table
from monitor.errors import ConfigError
from monitor.stats import calibration as cal
from monitor.stats import power as pw
from monitor.stats.calibration import CalibrationResult
from monitor.stats.paired import paired_summary


@contextmanager
def _progress(total: int, *, enabled: bool, label: str) -> Iterator[Callable[[int], None] | None]:
    if not enabled:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda k: bar.advance(task, k)


def _result_figures(res: CalibrationResult, *, power: float) -> dict[str, Any]:
    low, high = res.ci()
    return {
        "n": res.n,
        "reps": res.reps,
        "rejections": res.rejections,
        "power": res.power,
        "ci_low": low,
        "ci_high": high,
        "ci_level": 0.95,
        "target_power": power,
        "test": res.test,
    }


def _planned_n(delta: float, sigma2: float, *, alpha: float, power: float) -> tuple[float, int]:
    exact = float(pw.n_star(delta, sigma2, alpha=alpha, power=power))
    if not math.isfinite(exact):
        raise ConfigError("N* is infinite (δ = 0): there is no planned size; pass --n")
    return exact, max(1, math.ceil(exact))


def calibrate_simulated(
    pa: float, pb: float, rho: float, *, n: int | None, reps: int, alpha: float, power: float,
    test: str, seed: int | None, show_progress: bool,
) -> dict[str, Any]:
    """Simulation mode: the figures `llm-monitor calibrate --pa --pb --rho` reports."""
    cal.cell_probabilities(pa, pb, rho)  # feasibility first, before any work
    exact, planned = _planned_n(pa - pb, float(pw.sigma_d2(pa, pb, rho)), alpha=alpha, power=power)
    size = planned if n is None else n
    rng = np.random.default_rng(seed)
    with _progress(reps, enabled=show_progress, label="simulating") as tick:
        res = cal.simulate_power(pa, pb, rho, n=size, reps=reps, alpha=alpha,
                                 test=test, rng=rng, progress=tick)
    out: dict[str, Any] = {"mode": "simulate", "p_a": pa, "p_b": pb, "rho": rho,
                           "alpha": alpha, "n_star": planned, "n_star_exact": exact}
    out.update(_result_figures(res, power=power))
    return out


def calibrate_resampled(
    table_path: str, a: str, b: str, *, exclude: list[str], n: int | None, reps: int,
    alpha: float, power: float, test: str, seed: int | None, show_progress: bool,
) -> dict[str, Any]:
    """Resampling mode: N-item resamples of one real pair, N = N* from the table's own figures."""
    from monitor.io.tables import read_table

    table = read_table(table_path, exclude=tuple(exclude))
    xa, xb, _ = table.pair(a, b)
    s = paired_summary(xa, xb)
    exact, planned = _planned_n(s.delta, s.sigma_d2, alpha=alpha, power=power)
    size = planned if n is None else n
    rng = np.random.default_rng(seed)
    with _progress(reps, enabled=show_progress, label=f"resampling {a} vs {b}") as tick:
        res = cal.resample_power(xa, xb, n=size, reps=reps, alpha=alpha,
                                 test=test, rng=rng, progress=tick)
    out: dict[str, Any] = {
        "mode": "resample", "table": table_path, "model_a": a, "model_b": b,
        "items": s.n, "p_a": s.mean_a, "p_b": s.mean_b, "rho": s.rho, "delta": s.delta,
        "sigma_d2": s.sigma_d2, "alpha": alpha, "n_star": planned, "n_star_exact": exact,
    }
    out.update(_result_figures(res, power=power))
    return out


def _human(fig: dict[str, Any]) -> Callable[[Console], None]:
    def render(console: Console) -> None:
        if fig["mode"] == "simulate":
            title = f"calibration (simulated): p_A={fig['p_a']}, p_B={fig['p_b']}, ρ={fig['rho']}"
        else:
            title = f"calibration (resampled {fig['table']}): {fig['model_a']} vs {fig['model_b']}"
        table = titled_table(title, console)
        table.add_column("quantity")
        table.add_column("value", justify="right")
        for key in ("n_star", "n", "reps", "rejections", "test"):
            table.add_row(key, str(fig[key]))
        table.add_row("power", f"{fig['power']:.4f}  (target {fig['target_power']})")
        table.add_row("95% CI (Wilson)", f"[{fig['ci_low']:.4f}, {fig['ci_high']:.4f}]")
        console.print(table)

    return render


def register(app: typer.Typer) -> None:
    @app.command("calibrate")
    def calibrate_cmd(
        pa: Annotated[float | None, typer.Option("--pa", help="accuracy of model A")] = None,
        pb: Annotated[float | None, typer.Option("--pb", help="accuracy of model B")] = None,
        rho: Annotated[float | None, typer.Option("--rho", help="phi correlation")] = None,
        table: Annotated[str | None, typer.Option(
            "--table", help="resample a real item-level table instead of simulating")] = None,
        a: Annotated[str | None, typer.Option("--a", help="model A (with --table)")] = None,
        b: Annotated[str | None, typer.Option("--b", help="model B (with --table)")] = None,
        exclude: Annotated[list[str] | None, typer.Option(
            "--exclude", help="wide-table columns that are not models (repeatable)")] = None,
        n: Annotated[int | None, typer.Option("--n", help="items per replication (default N*)")] = None,
        reps: Annotated[int, typer.Option("--reps", help="replications")] = 2000,
        alpha: Annotated[float, typer.Option(help="two-sided level")] = 0.05,
        power: Annotated[float, typer.Option(help="target power 1−β used for N*")] = 0.8,
        test: Annotated[str, typer.Option(
            "--test", help="z (paired z-test on D̄, what N* is sized for) or mcnemar (exact)")] = "z",
        seed: Annotated[int | None, typer.Option("--seed", help="random seed")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
        anytime: Annotated[bool, typer.Option(
            "--anytime", help="null streams monitored after every item: e-process vs naive "
            "peeked z-test (--reps streams of --n items, default 5000); power by N*_AV")] = False,
    ) -> None:
        """Empirical power at N = N*: simulated correlated pairs, or resamples of a real pair."""
        show = not as_json
        if anytime:
            from monitor.anytime_report import (
                anytime_calibration_figures,
                render_anytime_calibration,
            )

            fig = anytime_calibration_figures(pa, pb, rho, streams=reps, items=n or 5000,
                                              alpha=alpha, power=power, seed=seed)
            emit(fig, as_json=as_json, human=render_anytime_calibration(fig))
            return
        if table is not None:
            if any(v is not None for v in (pa, pb, rho)):
                raise ConfigError("--table resamples a real pair; do not combine it with --pa/--pb/--rho")
            if a is None or b is None:
                raise ConfigError("--table needs the two models: --a MODEL --b MODEL")
            fig = calibrate_resampled(table, a, b, exclude=exclude or [], n=n, reps=reps,
                                      alpha=alpha, power=power, test=test, seed=seed,
                                      show_progress=show)
        else:
            if pa is None or pb is None or rho is None:
                raise ConfigError("simulation needs --pa, --pb and --rho (or --table FILE --a --b)")
            fig = calibrate_simulated(pa, pb, rho, n=n, reps=reps, alpha=alpha, power=power,
                                      test=test, seed=seed, show_progress=show)
        emit(fig, as_json=as_json, human=_human(fig))
