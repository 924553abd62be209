"""``llm-monitor verdict``: compare + leakage + stability combined into one of four scenarios."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, progress_tasks
from monitor.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.audit.leakage import LeakageReport
    from monitor.audit.stability import StabilityReport
    from monitor.offline.compare import CompareResult


def _human(v: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        colour = {"high-credibility": "green", "likely-overfit": "red"}.get(v["scenario"],
                                                                           "yellow")
        console.print(f"verdict: [bold {colour}]{v['label']}[/bold {colour}]")
        for line in v["evidence"]:
            console.print(f"  • {line}")

    return render


def register(app: typer.Typer) -> None:
    @app.command("verdict")
    def verdict_cmd(
        compare_json: Annotated[Path | None, typer.Option(
            "--compare-json", help="output of `compare --json`")] = None,
        leakage_json: Annotated[Path | None, typer.Option(
            "--leakage-json", help="output of `leakage --json`")] = None,
        stability_json: Annotated[Path | None, typer.Option(
            "--stability-json", help="output of `stability --json`")] = None,
        table: Annotated[Path | None, typer.Option(help="score table to run compare on")] = None,
        a: Annotated[str | None, typer.Option("--a", help="model A (claimed better)")] = None,
        b: Annotated[str | None, typer.Option("--b", help="model B")] = None,
        exclude: Annotated[list[str] | None, typer.Option(
            "--exclude", help="wide tables: columns that are not models")] = None,
        eval_path: Annotated[Path | None, typer.Option(
            "--eval", help="eval items to run leakage on")] = None,
        corpus: Annotated[Path | None, typer.Option(help="corpus to run leakage on")] = None,
        n: Annotated[int, typer.Option("--n", help="leakage n-gram length")] = 13,
        id_col: Annotated[str | None, typer.Option(
            "--id-col", help="leakage: id column of the eval file (default: id, item_id, "
            "question_id or doc_id)")] = None,
        corpus_id_col: Annotated[str | None, typer.Option(
            "--corpus-id-col", help="leakage: id column of the corpus")] = None,
        items: Annotated[Path | None, typer.Option(
            help="multiple-choice JSONL to run stability on")] = None,
        model: Annotated[str | None, typer.Option(help="stability: model name")] = None,
        adapter: Annotated[str, typer.Option(help="stability: openai or local")] = "openai",
        base_url: Annotated[str, typer.Option(
            "--base-url", help="stability: endpoint")] = "http://127.0.0.1:8000/v1",
        api_key_env: Annotated[str, typer.Option("--api-key-env")] = "OPENAI_API_KEY",
        n_resamples: Annotated[int, typer.Option("--B", help="bootstrap resamples")] = 10_000,
        seed: Annotated[int, typer.Option(help="seed for bootstrap and perturbations")] = 0,
        max_leak_share: Annotated[float, typer.Option(
            "--max-leak-share", help="leaked share of eval items that counts as contamination")]
        = 0.05,
        max_flip_rate: Annotated[float, typer.Option(
            "--max-flip-rate", help="flip rate that counts as unstable")] = 0.10,
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """A scenario from any of compare, leakage and stability, with the evidence and the
        checks not made: high credibility, gain not significant, likely overfit, gain holds on
        the items without leak status, partial gain, or what is known without the rest."""
        from monitor.offline.compare import compare_table
        from monitor.offline.leakage import scan_files
        from monitor.offline.stability import stability_file
        from monitor.offline.verdict import judge, leak_suspects, load_report

        def all_or_none(what: str, flags: dict[str, object]) -> None:
            given = [k for k, v in flags.items() if v]
            if given and len(given) < len(flags):
                raise ConfigError(f"{what}: {', '.join(given)} needs "
                                  f"{', '.join(k for k in flags if k not in given)} too")

        if leakage_json is None:
            all_or_none("leakage", {"--eval": eval_path, "--corpus": corpus})
        if compare_json is None:
            all_or_none("compare", {"--table": table, "--a": a, "--b": b})
        if stability_json is None:
            all_or_none("stability", {"--items": items, "--model": model})

        if model and a and model != a:
            raise ConfigError(f"stability --model {model!r} is not model A {a!r}: the checks "
                              "must be about the same model")
        lk: LeakageReport | dict[str, Any] | None = None
        if leakage_json is not None:
            lk = load_report(leakage_json, "leakage")
        elif eval_path is not None and corpus is not None:
            with progress_tasks() as tasks:
                lk = scan_files(eval_path, corpus, n=n, id_col=id_col,
                                corpus_id_col=corpus_id_col, progress=tasks)
        cmp: CompareResult | dict[str, Any] | None = None
        if compare_json is not None:
            cmp = load_report(compare_json, "compare")
            for flag, want, key in (("--a", a, "a"), ("--b", b, "b")):
                if want and cmp.get(key) != want:
                    raise ConfigError(f"{compare_json} compares {cmp.get('a')!r} with "
                                      f"{cmp.get('b')!r}, not {flag} {want!r}")
        elif table is not None and a and b:
            cmp = compare_table(table, a=a, b=b, exclude=tuple(exclude or ()),
                                n_resamples=n_resamples, seed=seed,
                                suspect_items=leak_suspects(lk) if lk is not None else ())
        st: StabilityReport | dict[str, Any] | None = None
        if stability_json is not None:
            st = load_report(stability_json, "stability")
        elif items is not None and model:
            st = stability_file(items, adapter=adapter, model=model, seed=seed,
                                base_url=base_url, api_key=os.environ.get(api_key_env))
        if cmp is None and lk is None and st is None:
            raise ConfigError("give at least one check: --compare-json or --table/--a/--b; "
                              "--leakage-json or --eval/--corpus; --stability-json or "
                              "--items/--model")
        v = judge(cmp, lk, st, max_leak_share=max_leak_share,
                  max_flip_rate=max_flip_rate).to_dict()
        emit(v, as_json=as_json, human=_human(v))
