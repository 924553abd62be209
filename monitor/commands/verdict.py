"""``llm-monitor verdict``: compare + leakage + stability combined into one of four scenarios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console

from monitor.audit.verdict import decide
from monitor.commands._output import emit
from monitor.contracts import jsonable
from monitor.errors import ConfigError, InputError


def _load(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("no such file", source=str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not the JSON output of `llm-monitor {what} --json` ({exc})",
                         source=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"not the JSON output of `llm-monitor {what} --json`", source=str(path))
    return data


def _human(v: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        colour = {"high-credibility": "green", "not-significant": "yellow",
                  "likely-overfit": "red", "partial-gain": "yellow"}[v["scenario"]]
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
        """High credibility / gain not significant / likely overfit / partial gain, with evidence."""
        if leakage_json is not None:
            lk = _load(leakage_json, "leakage")
        elif eval_path is not None and corpus is not None:
            from monitor.commands.leakage import run_leakage

            lk = jsonable(run_leakage(eval_path, corpus, n=n).to_dict(items=False))
        else:
            raise ConfigError("leakage: give --leakage-json, or --eval and --corpus")
        if compare_json is not None:
            cmp = _load(compare_json, "compare")
        elif table is not None and a and b:
            from monitor.commands.compare import compare_figures, run_compare
            from monitor.io.tables import read_table

            ex = tuple(exclude or ())
            cmp = run_compare(table, a=a, b=b, exclude=ex, n_resamples=n_resamples, seed=seed)
            suspects = set(lk.get("leak_suspects") or ())
            if suspects:
                t = read_table(table, exclude=ex)
                keep = ~np.isin(t.item_ids.astype(str), sorted(suspects))
                xa, xb = t.column(a)[keep], t.column(b)[keep]
                both = ~np.isnan(xa) & ~np.isnan(xb)
                if both.sum() >= 2 and both.sum() < cmp["n"]:
                    cmp["clean_items"] = compare_figures(xa[both], xb[both], a=a, b=b,
                                                         n_resamples=n_resamples, seed=seed)
        else:
            raise ConfigError("compare: give --compare-json, or --table with --a and --b")
        if stability_json is not None:
            st = _load(stability_json, "stability")
        elif items is not None and model:
            from monitor.commands.stability import run_stability_cli

            st = run_stability_cli(items, kinds="paraphrase,shuffle,format,noise", seed=seed,
                                   concurrency=8, adapter=adapter, model=model,
                                   base_url=base_url, api_key_env=api_key_env, timeout=30.0,
                                   retries=3, backoff=0.5, local_accuracy=0.8,
                                   local_flip=0.05).to_dict()
        else:
            raise ConfigError("stability: give --stability-json, or --items with --model")
        v = decide(jsonable(cmp), lk, jsonable(st), max_leak_share=max_leak_share,
                   max_flip_rate=max_flip_rate).to_dict()
        emit(v, as_json=as_json, human=_human(v))
