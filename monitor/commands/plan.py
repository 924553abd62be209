"""``llm-monitor plan``: should an evaluation go on? The stop signal of one model of a board."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, titled_table
from monitor.commands.post import JsonOpt, TokenFileOpt, UrlOpt, read_token

if TYPE_CHECKING:
    from rich.console import Console

HELP = (
    "Ask a running monitor whether MODEL's evaluation on BENCHMARK should continue: `continue` "
    "with the next items to evaluate (a random order fixed per benchmark), or `stop` with the "
    "reason — every pair with the models it is compared against resolved or equivalent, or "
    "the open ones unable to be settled within the items left (docs/until-resolved.md). "
    "Exit status 0 for continue, 3 for stop, so a loop can run `while llm-monitor plan …`.")

#: Exit status of ``plan`` when the answer is stop.
STOP_STATUS = 3


def render(plan: dict[str, Any], console: Console) -> None:
    head = (f"{plan['model']} on {plan['benchmark']}: {plan['action'].upper()} — "
            f"{plan['reason']}")
    console.print(head, style="bold", markup=False, highlight=False, soft_wrap=True)
    console.print(f"items done {plan['items_done']} of {plan['items_total']}"
                  + ("" if plan["items_needed"] is None else
                     f"; the open pairs need about {plan['items_needed']} more (estimate)"),
                  markup=False, highlight=False)
    table = titled_table("pairs (settled: decided and final)", console)
    for col in ("against", "verdict", "n", "δ̂", "decided at / chance"):
        table.add_column(col)
    for p in plan["settled"]:
        table.add_row(p["model"], p["verdict"], str(p["n"]), f"{p['delta']:+.4f}",
                      f"item {p['decided_at']} — final" if p.get("decided_at") else "—")
    for p in plan["open"]:
        chance = p.get("decision_chance")
        label = ("futile" if p.get("futile") else "open")
        table.add_row(p["model"], label, str(p["n"]), f"{p['delta']:+.4f}",
                      "—" if chance is None else f"{chance:.0%} by the last item")
    console.print(table)
    if plan["next_items"]:
        shown = ", ".join(plan["next_items"][:10])
        more = len(plan["next_items"]) - 10
        console.print(f"next items: {shown}{f' … (+{more})' if more > 0 else ''}",
                      markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command("plan", help=HELP)
    def plan_cmd(
        url: UrlOpt,
        benchmark: Annotated[str, typer.Option(help="the benchmark")],
        model: Annotated[str, typer.Option(help="the model being evaluated")],
        token_file: TokenFileOpt = None,
        against: Annotated[list[str] | None, typer.Option(
            help="compare only with this model (repeatable; default: every model on the board)")] = None,
        top: Annotated[int | None, typer.Option(
            help="the question is only whether MODEL is in the top K")] = None,
        budget: Annotated[int | None, typer.Option(help="stop after this many items")] = None,
        count: Annotated[int, typer.Option(help="next items to hand out")] = 100,
        items_out: Annotated[Path | None, typer.Option(
            "--items-out", help="also write the next items, one id per line, to this file")] = None,
        lm_eval_samples: Annotated[Path | None, typer.Option(
            "--lm-eval-samples", help="also write the next items as lm-evaluation-harness "
            "--samples JSON ({TASK: [doc ids]}) to this file (not on stop)")] = None,
        lm_eval_task: Annotated[str | None, typer.Option(
            "--lm-eval-task", help="the task of --lm-eval-samples (default: the benchmark)")
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        from monitor.client import MonitorClient

        with MonitorClient(url, token=read_token(token_file)) as client:
            plan = client.plan(benchmark, model, against=against, top=top, budget=budget,
                               count=count)
        if items_out is not None:
            items_out.write_text("".join(f"{i}\n" for i in plan["next_items"]),
                                 encoding="utf-8")
        if lm_eval_samples is not None and plan["action"] == "continue":
            import json

            from monitor.integrations.lmeval import samples_mapping

            mapping = samples_mapping(plan["next_items"], lm_eval_task or benchmark)
            lm_eval_samples.write_text(json.dumps(mapping), encoding="utf-8")
        emit(plan, as_json=as_json, human=lambda console: render(plan, console))
        if plan["action"] == "stop":
            raise typer.Exit(STOP_STATUS)
