"""``llm-monitor power``: required paired size for a planned comparison."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, titled_table
from monitor.defaults import PLANNED_MODELS
from monitor.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console


#: Which rule each anytime size is for, next to its key.
_LABELS = {
    "n_star_anytime": "n_star_anytime (live: one side ≥ 2/γ_p)",
    "q_anytime": "q_anytime (live rule)",
    "e_threshold": "e_threshold (1/γ_p)",
    "n_star_anytime_single_pair": "n_star_anytime_single_pair (E ≥ 1/α)",
    "q_anytime_single_pair": "q_anytime_single_pair (E ≥ 1/α)",
}


def _human(fig: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        table = titled_table(
            f"paired power: p_A={fig['p_a']}, p_B={fig['p_b']}, ρ={fig['rho']}", console)
        table.add_column("quantity")
        table.add_column("value", justify="right")
        labels = _LABELS
        for key, value in fig.items():
            if key in {"p_a", "p_b", "rho"}:
                continue
            table.add_row(labels.get(key, key),
                          f"{value:.6g}" if isinstance(value, float) else str(value))
        console.print(table)

    return render


def register(app: typer.Typer) -> None:
    @app.command("power")
    def power_cmd(
        pa: Annotated[float, typer.Option("--pa", help="accuracy of model A")],
        pb: Annotated[float, typer.Option("--pb", help="accuracy of model B")],
        rho: Annotated[float, typer.Option("--rho", help="phi correlation of the 0/1 columns")],
        n: Annotated[int | None, typer.Option("--n", help="paired items available")] = None,
        alpha: Annotated[float, typer.Option(help="two-sided level")] = 0.05,
        power: Annotated[float, typer.Option(help="target power 1−β")] = 0.8,
        samples: Annotated[int | None, typer.Option(
            "--samples", help="K answers per item, averaged (avg@k): N* at K samples and "
            "whether more items or more samples resolve with fewer answers")] = None,
        within_share: Annotated[float | None, typer.Option(
            "--within-share", help="share of σ_D² at one sample that is within-item sampling "
            "noise (a report of a repeated-sample table prints it as within_share_1)")] = None,
        planned_models: Annotated[int, typer.Option(
            "--planned-models", help="models the live board is planned for (as `run "
            "--planned-models`): N*_AV is sized for its rule, one side reaching 2/γ_p")
        ] = PLANNED_MODELS,
        pair: Annotated[int | None, typer.Option(
            "--pair", help="the pair's birth number on the board (1 = the first two models); "
            "default: a pair of the first block")] = None,
        block: Annotated[int | None, typer.Option(
            "--block", help="the pair's block b instead of --pair: γ_p = α/(P·2^(2b+1))")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Required paired size N* (McNemar–Connor), the Cohen's-h shortcut and, with --n, q and MDE;
        the anytime size N*_AV of the live monitor's rule for a pair of a board planned for
        --planned-models models (and of one pair alone, E ≥ 1/α); with --samples K and
        --within-share, N* at K samples per item and whether more items or more samples resolve
        cheaper."""
        from monitor.offline.power import plan_power

        try:
            plan = plan_power(pa, pb, rho, n=n, alpha=alpha, power=power, samples=samples,
                              within_share=within_share, planned_models=planned_models,
                              pair=pair, block=block)
        except ValueError as exc:  # an impossible plan is an option error: one line, exit 2
            raise ConfigError(str(exc)) from exc
        fig = plan.to_dict()
        emit(fig, as_json=as_json, human=_human(fig))
