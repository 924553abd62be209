"""``llm-monitor evaluate-until-resolved``: lm-evaluation-harness in rounds on the documents
the monitor hands out, until the model's place on the board is settled."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, titled_table
from monitor.commands.post import (
    FilterOpt,
    JsonOpt,
    MetricOpt,
    TokenFileOpt,
    UrlOpt,
    read_token,
)

if TYPE_CHECKING:
    from rich.console import Console

HELP = "\n\n".join([
    "Evaluate a model with lm-evaluation-harness until its place on the board is settled: "
    "ask the monitor's plan for the next documents, run the harness COMMAND on them "
    "(adding --samples FILE --log_samples --output_path DIR), post the samples it writes, "
    "and again, until the plan says stop (docs/until-resolved.md).",
    "COMMAND follows `--`, e.g. `-- lm-eval run --model hf --model_args pretrained=NAME "
    "--tasks arc_easy`; it must not set --samples, --limit or --output_path. The task's items "
    "on the board are its doc ids (as `llm-monitor post` gives them). Each round writes "
    "WORK_DIR/round-NNN/ (the documents asked, the harness output). Exit status 0 once the "
    "plan says stop.",
])


def render(out: dict[str, Any], console: Console) -> None:
    console.print(f"{out['action'].upper()} — {out['reason']}", style="bold", markup=False,
                  highlight=False, soft_wrap=True)
    console.print(f"{out['evaluated']} documents evaluated here in {len(out['rounds'])} "
                  f"round(s); the model has {out['items_done']} of the {out['items_total']} "
                  "items the compared models have", markup=False, highlight=False,
                  soft_wrap=True)
    table = titled_table("pairs", console)
    for col in ("against", "verdict", "n", "δ̂"):
        table.add_column(col)
    for p in out["settled"]:
        table.add_row(p["model"], p["verdict"], str(p["n"]), f"{p['delta']:+.4f}")
    for p in out["open"]:
        table.add_row(p["model"], "futile" if p.get("futile") else "open", str(p["n"]),
                      f"{p['delta']:+.4f}")
    console.print(table)


def register(app: typer.Typer) -> None:
    @app.command("evaluate-until-resolved", help=HELP)
    def until_resolved_cmd(
        command: Annotated[list[str], typer.Argument(
            help="the harness command line, after --", show_default=False)],
        url: UrlOpt,
        benchmark: Annotated[str, typer.Option(help="the benchmark on the board")],
        model: Annotated[str, typer.Option(help="the model's name on the board")],
        task: Annotated[str | None, typer.Option(
            help="the lm-eval task (default: the benchmark's name)")] = None,
        work_dir: Annotated[Path, typer.Option(
            help="where each round's documents and harness output go")] = Path("until-resolved"),
        count: Annotated[int, typer.Option(
            help="documents per round (each round starts the harness and loads the model "
                 "again: fewer, larger rounds cost less start-up, more overshoot)")] = 200,
        against: Annotated[list[str] | None, typer.Option(
            help="settled against this model only (repeatable; default: every model)")] = None,
        top: Annotated[int | None, typer.Option(
            help="the question is only whether the model is in the top K")] = None,
        budget: Annotated[int | None, typer.Option(help="stop after this many items")] = None,
        metric: MetricOpt = None,
        filter: FilterOpt = None,
        token_file: TokenFileOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        from monitor.client import MonitorClient
        from monitor.integrations.lmeval import run_until_resolved

        def say(line: str) -> None:
            print(f"llm-monitor: {line}", file=sys.stderr, flush=True)

        with MonitorClient(url, token=read_token(token_file)) as client:
            out = run_until_resolved(
                client, benchmark=benchmark, model=model, command=command, work_dir=work_dir,
                task=task, count=count, against=against, top=top, budget=budget,
                metric=metric, filter=filter, say=say)
        result = out.as_dict()
        emit(result, as_json=as_json, human=lambda console: render(result, console))
