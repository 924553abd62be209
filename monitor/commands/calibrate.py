"""``llm-monitor calibrate``: empirical power of the paired test at N = N*.

Simulation mode (``--pa --pb --rho``) draws correlated paired Bernoulli data; resampling mode
(``--table FILE --a A --b B``) draws N-item resamples of one real pair.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, progress_tasks, titled_table
from monitor.defaults import PLANNED_MODELS
from monitor.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console


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
            "peeked z-test (--reps streams of --n items, default 5000); power of the live "
            "rule by its N*_AV, and of one pair alone (E ≥ 1/α)")] = False,
        planned_models: Annotated[int, typer.Option(
            "--planned-models", help="with --anytime: models the live board is planned for "
            "(the pair's share γ_p of α)")] = PLANNED_MODELS,
        pair: Annotated[int | None, typer.Option(
            "--pair", help="with --anytime: the pair's birth number on the board (default: a "
            "pair of the first block)")] = None,
        block: Annotated[int | None, typer.Option(
            "--block", help="with --anytime: the pair's block instead of --pair")] = None,
    ) -> None:
        """Empirical power at N = N*: simulated correlated pairs, or resamples of a real pair."""
        from monitor.offline.calibrate import (
            calibrate_anytime,
            calibrate_resampled,
            calibrate_simulated,
        )

        show = not as_json
        if anytime:
            try:
                run_any = calibrate_anytime(pa, pb, rho, streams=reps, items=n or 5000,
                                            alpha=alpha, power=power, seed=seed,
                                            planned_models=planned_models, pair=pair,
                                            block=block)
            except ValueError as exc:  # an impossible plan is an option error
                raise ConfigError(str(exc)) from exc
            fig = run_any.to_dict()
            emit(fig, as_json=as_json, human=_render_anytime(fig))
            return
        if table is not None:
            if any(v is not None for v in (pa, pb, rho)):
                raise ConfigError("--table resamples a real pair; do not combine it with --pa/--pb/--rho")
            if a is None or b is None:
                raise ConfigError("--table needs the two models: --a MODEL --b MODEL")
            with progress_tasks(enabled=show, remaining=True) as tasks:
                run = calibrate_resampled(table, a, b, exclude=tuple(exclude or ()), n=n,
                                          reps=reps, alpha=alpha, power=power, test=test,
                                          seed=seed, progress=tasks)
        else:
            if pa is None or pb is None or rho is None:
                raise ConfigError("simulation needs --pa, --pb and --rho (or --table FILE --a --b)")
            with progress_tasks(enabled=show, remaining=True) as tasks:
                run = calibrate_simulated(pa, pb, rho, n=n, reps=reps, alpha=alpha, power=power,
                                          test=test, seed=seed, progress=tasks)
        fig = run.to_dict()
        emit(fig, as_json=as_json, human=_human(fig))


def _render_anytime(fig: dict[str, Any]) -> Callable[[Console], None]:
    """The null-stream table and the power line of ``calibrate --anytime``."""
    def render(console: Console) -> None:
        from rich.table import Table

        null = fig["null"]
        table = Table(title=(f"null streams: {null['streams']} × {null['items']} items, p = "
                             f"{null['p']:g}, ρ = {null['rho']:g}, checked after every item"))
        table.add_column("rule")
        table.add_column("false-resolution rate", justify="right")
        table.add_column("95% CI", justify="right")
        for label, key in (("e-process, E ≥ 1/α", "e_process"),
                           (f"naive z-test peeked from n = {null['burn_in']}", "naive_peeked_z")):
            row = null[key]
            table.add_row(label, f"{row['false_resolution_rate']:.4f}",
                          f"[{row['ci95'][0]:.4f}, {row['ci95'][1]:.4f}]")
        console.print(table)
        alt = fig.get("alternative")
        if alt:
            single = alt["single_pair"]
            q = alt["power_quantile_ci95"]
            console.print(
                f"alternative p_A={alt['p_a']:g}, p_B={alt['p_b']:g}, ρ={alt['rho']:g}, "
                f"{alt['streams']} streams, target power {alt['power_target']:g}:\n"
                f"  live rule (one side ≥ 2/γ_p, 1/γ_p = {alt['e_threshold']:.6g}: "
                f"{alt['planned_models']} planned models, block {alt['block']}): resolved by "
                f"N*_AV = {alt['n_star_anytime']} in {alt['resolved_by_n_star_anytime']:.3f} "
                f"(95% CI [{alt['ci95'][0]:.3f}, {alt['ci95'][1]:.3f}]); items to decision: "
                f"median {alt['median_items']:g}, {100 * alt['power_target']:g} % point "
                f"{alt['power_quantile_items']:g} (95% CI [{q[0]:g}, {q[1]:g}])\n"
                f"  one pair alone (E ≥ 1/α): resolved by N*_AV = {single['n_star_anytime']} "
                f"in {single['resolved_by_n_star_anytime']:.3f} (95% CI "
                f"[{single['ci95'][0]:.3f}, {single['ci95'][1]:.3f}])"
            )

    return render
