"""``llm-monitor power``: required paired size for a planned comparison."""

from __future__ import annotations

import math
from typing import Annotated, Any

import typer
from rich.console import Console

from monitor.commands._output import emit, titled_table
from monitor.stats import power as pw
from monitor.stats import shortcut
from monitor.stats.eprocess import n_star_anytime


def power_figures(
    pa: float, pb: float, rho: float, *, n: int | None, alpha: float, power: float
) -> dict[str, Any]:
    """All the figures `llm-monitor power` reports, as a plain dict with the contract keys."""
    s2 = float(pw.sigma_d2(pa, pb, rho))
    delta = pa - pb
    exact = float(pw.n_star(delta, s2, alpha=alpha, power=power))
    out: dict[str, Any] = {
        "p_a": pa,
        "p_b": pb,
        "rho": rho,
        "alpha": alpha,
        "power": power,
        "delta": delta,
        "sigma_d2": s2,
        "n_star_exact": exact,
        "n_star": math.ceil(exact) if math.isfinite(exact) else math.inf,
    }
    out.update(_shortcut_figures(pa, pb, rho, alpha=alpha, power=power, n_star_exact=exact))
    n_av = float(n_star_anytime(delta, s2, alpha=alpha, power=power))
    out["n_star_anytime"] = math.ceil(n_av) if math.isfinite(n_av) else math.inf
    if n is not None:
        q = float(pw.resolution_ratio(n, exact))
        out.update({"n": n, "q": q, "mde": float(pw.mde(s2, n, alpha=alpha, power=power)),
                    "resolved": bool(q >= 1.0),
                    "q_anytime": float(pw.resolution_ratio(n, n_av))})
    return out


def _shortcut_figures(
    pa: float, pb: float, rho: float, *, alpha: float, power: float, n_star_exact: float
) -> dict[str, Any]:
    res = shortcut.shortcut_size(pa, pb, rho, alpha=alpha, power=power)
    return {
        "cohens_h": res.h,
        "n_shortcut_exact": res.n_exact,
        "n_shortcut": res.n,
        # Both sizes are infinite when p_A = p_B; their ratio is then undefined (null in JSON).
        "shortcut_ratio": res.n_exact / n_star_exact if math.isfinite(n_star_exact) else math.nan,
        "lemma1_c": float(shortcut.lemma1_c((pa + pb) / 2.0, rho)),
    }


def _human(fig: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        table = titled_table(
            f"paired power: p_A={fig['p_a']}, p_B={fig['p_b']}, ρ={fig['rho']}", console)
        table.add_column("quantity")
        table.add_column("value", justify="right")
        for key, value in fig.items():
            if key in {"p_a", "p_b", "rho"}:
                continue
            table.add_row(key, f"{value:.6g}" if isinstance(value, float) else str(value))
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
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Required paired size N* (McNemar–Connor), the Cohen's-h shortcut and, with --n, q and MDE."""
        fig = power_figures(pa, pb, rho, n=n, alpha=alpha, power=power)
        emit(fig, as_json=as_json, human=_human(fig))
