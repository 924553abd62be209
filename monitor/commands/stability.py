"""``llm-monitor stability``: flip rate of a model under perturbations of multiple-choice items."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, titled_table
from monitor.defaults import STABILITY_KINDS
from monitor.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.audit import stability as st


def parse_kinds(kinds: str) -> tuple[str, ...]:
    """The perturbation kinds of a ``--kinds`` comma list."""
    from monitor.audit import stability as st

    kind_list = tuple(k.strip() for k in kinds.split(",") if k.strip())
    bad = [k for k in kind_list if k not in st.KINDS]
    if bad or not kind_list:
        raise ConfigError(f"--kinds must be a comma list of {', '.join(st.KINDS)}; got {kinds!r}")
    return kind_list


def _human(rep: st.StabilityReport) -> Any:
    def render(console: Console) -> None:
        table = titled_table(f"stability of {rep.model}: {rep.n_items} items, "
                             f"original accuracy {rep.accuracy_original:.3f}", console)
        for col in ("perturbation", "right on original", "flipped", "flip rate", "95% Wilson CI",
                    "accuracy perturbed"):
            table.add_column(col)
        for s in (*rep.per_kind, rep.overall):
            table.add_row(s.kind, str(s.base), str(s.flips), f"{s.rate:.3f}",
                          f"[{s.ci_low:.3f}, {s.ci_high:.3f}]", f"{s.accuracy_perturbed:.3f}")
        console.print(table)
        if rep.alarm:
            how = "confirmed: the CI lies above 10 %" if rep.alarm_confirmed else \
                "the CI still reaches below 10 %"
            console.print(f"[bold red]ALARM[/bold red]: flip rate {rep.overall.rate:.1%} > 10 % ({how}).")
        else:
            console.print(f"flip rate {rep.overall.rate:.1%} is below the 10 % alarm level.")
        console.print("A flip is an item answered right in its original form and wrong once "
                      "perturbed; a high rate suggests memorised wording rather than skill, but "
                      "the pooled CI treats an item's perturbations as independent.")
        if rep.retries:
            console.print(f"{rep.retries} request(s) were retried.")

    return render


def register(app: typer.Typer) -> None:
    @app.command("stability")
    def stability_cmd(
        items_path: Annotated[Path, typer.Argument(
            help="JSONL items: id, question, options (list), answer (letter, index or text)")],
        model: Annotated[str, typer.Option("--model", help="model name sent to the endpoint")],
        adapter: Annotated[str, typer.Option(
            "--adapter", help="openai (chat-completions HTTP) or local (deterministic)")] = "openai",
        base_url: Annotated[str, typer.Option(
            "--base-url", help="OpenAI-compatible base URL")] = "http://127.0.0.1:8000/v1",
        api_key_env: Annotated[str, typer.Option(
            "--api-key-env", help="environment variable holding the API key")] = "OPENAI_API_KEY",
        timeout: Annotated[float, typer.Option(help="seconds per request")] = 30.0,
        retries: Annotated[int, typer.Option(help="retries per request (429, 5xx, timeouts)")] = 3,
        backoff: Annotated[float, typer.Option(help="first retry delay, doubled each time")] = 0.5,
        concurrency: Annotated[int, typer.Option(help="requests in flight")] = 8,
        kinds: Annotated[str, typer.Option(
            help="comma list of perturbations")] = ",".join(STABILITY_KINDS),
        seed: Annotated[int, typer.Option(help="seed of shuffles and templates")] = 0,
        benchmark: Annotated[str, typer.Option(help="benchmark name for events")] = "stability",
        events_out: Annotated[Path | None, typer.Option(
            "--events-out", help="write ItemResult JSON lines here")] = None,
        local_accuracy: Annotated[float, typer.Option(
            "--local-accuracy", help="local adapter: accuracy on originals")] = 0.8,
        local_flip: Annotated[float, typer.Option(
            "--local-flip", help="local adapter: flip probability per perturbation")] = 0.05,
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Flip rate (right on original, wrong perturbed) with a Wilson CI and the 10 % alarm."""
        from monitor.contracts import jsonable
        from monitor.offline.stability import stability_file

        rep = stability_file(
            items_path, kinds=parse_kinds(kinds), seed=seed, concurrency=concurrency,
            adapter=adapter, model=model, base_url=base_url,
            api_key=os.environ.get(api_key_env), timeout=timeout, retries=retries,
            backoff=backoff, local_accuracy=local_accuracy, local_flip=local_flip)
        if events_out is not None:
            with open(events_out, "w", encoding="utf-8") as fh:
                for ev in rep.events(benchmark=benchmark):
                    fh.write(json.dumps(jsonable(ev)) + "\n")
        emit(rep.to_dict(), as_json=as_json, human=_human(rep))
