"""``llm-monitor run`` (the embedded live monitor) and ``llm-monitor demo`` (it, on MMLU-Pro)."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._settings import SettingsCommand
from monitor.defaults import REPLAY_SEED
from monitor.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.runners.settings import Settings

DEMO_TABLE = "mmlu_pro_item_correctness_wide.csv"
DEMO_BENCHMARK = "mmlu_pro"


class ReplayState:
    """Progress of a replay, shared between the replay task and the terminal view."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.finished = False
        self.counts = {"accepted": 0, "duplicate": 0, "conflict": 0, "invalid": 0}


class Where:
    """Where to look: the server's base URL (known once it listens) and the next steps."""

    def __init__(self, paths: list[str], report: str | None, benchmark: str | None) -> None:
        self.base = ""
        self.paths = paths
        self.report = report  # the `llm-monitor report` command of the replayed table
        self.benchmark = benchmark

    def urls(self) -> list[str]:
        return [f"board {self.base}/", *self.paths]

    def next_steps(self, state: ReplayState | None) -> list[str]:
        steps = [f"next: board {self.base}/"
                 + (f" · /v1/benchmarks/{self.benchmark}/report.html"
                    if self.benchmark is not None else "")]
        if self.report is not None:
            steps.append(f"offline: {self.report}")
        if state is None:
            steps.append("serving; Ctrl-C stops")
        return steps


def _replay_task(stream: Any, state: ReplayState, *, rate: float | None, tty: bool,
                 where: Where) -> Any:
    import asyncio  # here and below, not at the top: --help need not pay for it

    async def task(service: Any, stop: asyncio.Event) -> None:
        # Without a rate, big batches with a yield in between keep HTTP responsive.
        size = 20_000 if rate is None else max(1, min(20_000, int(rate / 20)))
        start = time.perf_counter()
        next_note = 0.1
        for lo in range(0, len(stream), size):
            if stop.is_set():
                return
            events = stream.events(lo, min(lo + size, len(stream)))
            report = service.ingest(list(enumerate(events, start=lo)), source="replay")
            for k in state.counts:
                state.counts[k] += getattr(report, k)
            state.done += len(events)
            if rate is not None:
                delay = start + state.done / rate - time.perf_counter()
                await asyncio.sleep(max(delay, 0.0))
            else:
                await asyncio.sleep(0)
            if not tty and state.total and state.done / state.total >= next_note:
                next_note += 0.1
                print(f"llm-monitor: replayed {state.done}/{state.total} results "
                      f"({_counts(state)})", file=sys.stderr, flush=True)
        state.finished = True
        if not tty:  # on a terminal the view says it, and where to look next
            print(f"llm-monitor: replay finished: {state.done} results ({_counts(state)}); "
                  "still serving, Ctrl-C to stop\n  " + "\n  ".join(where.next_steps(state)),
                  file=sys.stderr, flush=True)

    return task


def _counts(state: ReplayState) -> str:
    return ", ".join(f"{k} {v}" for k, v in state.counts.items())


def _view_task(state: ReplayState | None, *, show_rankings: bool, console: Console,
               where: Where) -> Any:
    import asyncio

    async def task(service: Any, stop: asyncio.Event) -> None:
        from rich.live import Live
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        from monitor.runners.embedded.view import LazyRankings, rankings_view
        from monitor.runners.embedded.view import Progress as ViewProgress

        progress = Progress(TextColumn("replay"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                            console=console, auto_refresh=False)
        task_id = progress.add_task("replay", total=state.total if state else 0, rate="")
        t0, done0 = time.perf_counter(), 0

        def render() -> Any:
            nonlocal t0, done0
            header = None
            speed = 0.0
            if state is not None:
                now = time.perf_counter()
                speed = (state.done - done0) / max(now - t0, 1e-9)
                t0, done0 = now, state.done
                progress.update(task_id, completed=state.done,
                                rate=f"{speed:,.0f}/s" if not state.finished else "done")
                header = progress
            if not show_rankings:
                return header
            # Computed when read, each with the state lock held (no batch half applied): the
            # view reads only the benchmarks that fit.
            rankings = LazyRankings(service.benchmarks(),
                                    lambda b: service.locked(service.ranking, b))
            seen = None if state is None else ViewProgress(
                state.done, state.total, speed, state.finished)
            width, height = console.size
            # One line fewer than the terminal: the cursor's line must not scroll the top away.
            return rankings_view(rankings, width=width, height=height - 1, urls=where.urls(),
                                 progress=seen, next_steps=where.next_steps(state))

        # Cropped to the terminal: the view is laid out for its size, the URLs on top.
        console.clear()
        with Live(render(), console=console, auto_refresh=False, transient=False,
                  vertical_overflow="crop") as live:
            while not stop.is_set():
                # In a thread: the rankings wait for the state lock while a batch is applied,
                # and the event loop serves meanwhile.
                live.update(await asyncio.to_thread(render), refresh=True)
                if not show_rankings and state is not None and state.finished:
                    return
                await asyncio.sleep(0.5)

    return task


def report_command(settings: Settings, table: Path, benchmark: str | None, *,
                   exclude: list[str], cluster_col: str | None, seed: int | None) -> str:
    """The ``llm-monitor report`` command that takes the decisions a replay of ``table`` takes
    live: the benchmark's declared design (its labels as ``--strata-col`` or
    ``--cluster-col``), the board size planned for and the margin where they are not the
    report's defaults, and the replay's order (``--seed`` of a shuffled replay, the same
    permutation; ``--order file`` otherwise)."""
    import contextlib
    import os
    import shlex

    from monitor.defaults import MARGIN, PLANNED_MODELS

    spec = settings.benchmarks.get(benchmark or "")
    design = spec.design if spec is not None else settings.design
    margin = spec.margin if spec is not None else settings.margin
    opts = [a for x in exclude for a in ("--exclude", x)]
    if cluster_col and design != "items":
        opts += ["--strata-col" if design == "strata" else "--cluster-col", cluster_col]
    if settings.planned_models != PLANNED_MODELS:
        opts += ["--planned-models", str(settings.planned_models)]
    if margin != MARGIN:
        opts += ["--margin", "none" if margin is None else f"{margin:g}"]
    opts += ["--order", "file"] if seed is None else ["--seed", str(seed)]
    # The table as the shorter of its given and its cwd-relative path: the command must fit
    # the view's last lines.
    name = str(table)
    with contextlib.suppress(ValueError):  # another drive (Windows)
        name = min(name, os.path.relpath(name), key=len)
    return shlex.join(["llm-monitor", "report", name, *opts, "--html", "report.html"])


def _start(
    settings: Settings,
    *,
    replay: list[Path],
    seed: int | None,
    shuffle: bool,
    rate: float | None,
    view: bool,
    benchmark: str | None,
    model: str | None,
    metric: str | None,
    exclude: list[str],
    cluster_col: str | None,
    urls: list[str],
    filter: str | None = None,
) -> None:
    import asyncio

    import numpy as np
    from rich.console import Console

    from monitor.runners.embedded.server import serve
    from monitor.runners.replay import ReplayStream, load_blocks

    if rate is not None and rate <= 0:
        raise ValueError(f"`--rate` must be positive, got {rate}")
    console = Console()
    tty = console.is_terminal
    tasks = []
    state = None
    where = Where(urls, None, benchmark)
    if replay:
        blocks = load_blocks(replay, benchmark=benchmark, model=model, metric=metric,
                             exclude=exclude, cluster_col=cluster_col, filter=filter)
        if shuffle and seed is None:
            seed = int(np.random.SeedSequence().entropy % 2**32)  # type: ignore[operator]
        stream = ReplayStream(blocks, seed=seed if shuffle else None)
        state = ReplayState(len(stream))
        where.report = report_command(settings, replay[0], blocks[0].benchmark if blocks else
                                      benchmark, exclude=exclude, cluster_col=cluster_col,
                                      seed=seed if shuffle else None)
        tasks.append(_replay_task(stream, state, rate=rate, tty=tty, where=where))
        order = f"shuffled with seed {seed}" if shuffle else "in file order"
        print(f"llm-monitor: replaying {len(stream)} results from {len(blocks)} file(s), "
              f"{order}" + (f", {rate:g} results/s" if rate else ""), file=sys.stderr, flush=True)
    if tty and (view or state is not None):
        tasks.append(_view_task(state, show_rankings=view, console=console, where=where))

    def ready(service: Any, base: str) -> None:
        where.base = base
        print(f"llm-monitor: listening on {base}", flush=True)
        print(f"  {base}/ (the web board)", flush=True)
        for path in urls:
            print(f"  {base}{path}", flush=True)

    asyncio.run(serve(settings, tasks=tasks, on_ready=ready))


# Options of the monitor core, shared by `run` and `worker` (the same Settings fields).
ConfigOpt = Annotated[Path | None, typer.Option(
    "--config", help="settings file (.toml, .json, .yaml): keys are the option names with _; "
    "options and LLM_MONITOR_* variables override it")]
AlphaOpt = Annotated[float | None, typer.Option(help="family-wise level α of the verdicts")]
PowerOpt = Annotated[float | None, typer.Option(help="target power for N*")]
PlannedOpt = Annotated[int | None, typer.Option(
    "--planned-models", help="board size each pair's fixed share of α is planned for: the first "
    "M(M−1)/2 pairs share α/2, later blocks less")]
FamilyOpt = Annotated[str | None, typer.Option(help="pairs read together: adjacent or all")]
CorrectionOpt = Annotated[str | None, typer.Option(
    help="multiplicity correction of the fixed-N figures: none, bonferroni, holm, bh")]
PerPairSeriesOpt = Annotated[str | None, typer.Option(
    help="pairs with per-pair Prometheus series: adjacent or all")]
ExcludeFlagOpt = Annotated[list[str] | None, typer.Option(
    "--exclude-flag", help="items with this flag are excluded from resolution (repeatable)")]
IncludeLeakOpt = Annotated[bool | None, typer.Option(
    "--include-leak-suspect/--exclude-leak-suspect",
    help="count items flagged leak-suspect in resolution")]
SamplesOpt = Annotated[int | None, typer.Option(
    "--samples", help="K of a new benchmark that declares none (in the settings' benchmarks "
    "table, or by its first result's field `k`): the samples each model answers every item "
    "with (field `sample` 0 … K−1); an item counts with the mean of its K samples once all "
    "are in")]
EvalIntervalOpt = Annotated[float | None, typer.Option(
    help="seconds between verdict evaluations while results stream in, 0 after every batch")]


DesignOpt = Annotated[str | None, typer.Option(
    "--design", help="how the items of a new benchmark not declared in the settings' "
    "benchmarks table were drawn, which decides its verdicts: items, strata (the results' "
    "cluster labels are fixed strata) or clusters (sampled clusters); docs/clusters-vs-strata.md")]
MarginOpt = Annotated[str | None, typer.Option(
    "--margin", help="Δ, the equivalence margin of a new benchmark (0.01 = one point): a pair "
    "whose confidence sequence lies inside (−Δ, Δ) is declared equivalent; none: never")]


def core_options(*, alpha: float | None, power: float | None, family: str | None,
                 correction: str | None, per_pair_series: str | None,
                 exclude_flag: list[str] | None, include_leak_suspect: bool | None,
                 eval_interval: float | None, planned_models: int | None = None,
                 samples: int | None = None, design: str | None = None,
                 margin: str | None = None) -> dict[str, Any]:
    """The core options as Settings keywords (None: not given on the command line)."""
    return {"alpha": alpha, "power": power, "planned_models": planned_models, "samples": samples,
            "design": design, "margin": margin,
            "family": family, "correction": correction,
            "per_pair_series": per_pair_series,
            "exclude_flags": tuple(exclude_flag) if exclude_flag else None,
            "include_leak_suspect": include_leak_suspect, "eval_interval": eval_interval}


def register(app: typer.Typer) -> None:
    @app.command("run", cls=SettingsCommand)
    def run_cmd(
        config: ConfigOpt = None,
        db: Annotated[Path | None, typer.Option(help="SQLite database (created if absent)")] = None,
        host: Annotated[str | None, typer.Option(help="address to listen on (loopback unless a token is set)")] = None,
        port: Annotated[int | None, typer.Option(help="TCP port (0: any free port)")] = None,
        token_file: Annotated[Path | None, typer.Option(help="file holding the bearer token")] = None,
        replay: Annotated[list[Path] | None, typer.Option(help="table or lm-eval samples_*.jsonl to replay (repeatable)")] = None,
        shuffle: Annotated[bool, typer.Option(help="replay in a random order (see docs/live.md)")] = False,
        seed: Annotated[int | None, typer.Option(help="seed of --shuffle")] = None,
        rate: Annotated[float | None, typer.Option(help="replay pace in results/s (default: as fast as possible)")] = None,
        benchmark: Annotated[str | None, typer.Option(help="benchmark name of replayed files")] = None,
        model: Annotated[str | None, typer.Option(help="model name of replayed lm-eval samples")] = None,
        metric: Annotated[str | None, typer.Option(help="per-sample metric of lm-eval samples")] = None,
        filter: Annotated[str | None, typer.Option(
            "--filter", help="filter of lm-eval samples, e.g. flexible-extract (default: the first in the file)")] = None,
        exclude: Annotated[list[str] | None, typer.Option(help="table column to ignore (repeatable)")] = None,
        cluster_col: Annotated[str | None, typer.Option(help="table column holding the item cluster")] = None,
        alpha: AlphaOpt = None,
        power: PowerOpt = None,
        planned_models: PlannedOpt = None,
        family: FamilyOpt = None,
        correction: CorrectionOpt = None,
        per_pair_series: PerPairSeriesOpt = None,
        exclude_flag: ExcludeFlagOpt = None,
        include_leak_suspect: IncludeLeakOpt = None,
        eval_interval: EvalIntervalOpt = None,
        samples: SamplesOpt = None,
        design: DesignOpt = None,
        margin: MarginOpt = None,
        max_body_bytes: Annotated[str | None, typer.Option(help="request body limit, e.g. 10MB")] = None,
        sqlite_synchronous: Annotated[str | None, typer.Option(help="FULL (survives a power cut) or NORMAL (a crash)")] = None,
        view: Annotated[bool | None, typer.Option("--view/--no-view", help="live terminal view")] = None,
        snapshot_every: Annotated[int | None, typer.Option(
            help="store a snapshot of the state after this many accepted results, 0: not by "
            "count; a restart replays only the results after it")] = None,
        snapshot_interval: Annotated[float | None, typer.Option(
            help="store a snapshot this many seconds after the last one if results arrived, "
            "0: not by time")] = None,
    ) -> None:
        """Serve the live monitor: HTTP ingest, SQLite persistence, /metrics, a terminal view."""
        from monitor.runners.settings import Settings

        settings = Settings.build(
            config=config, token_file=token_file, db=db, host=host, port=port,
            max_body_bytes=max_body_bytes, sqlite_synchronous=sqlite_synchronous, view=view,
            snapshot_every=snapshot_every, snapshot_interval=snapshot_interval,
            **core_options(alpha=alpha, power=power, planned_models=planned_models,
                           family=family, correction=correction,
                           per_pair_series=per_pair_series, exclude_flag=exclude_flag,
                           include_leak_suspect=include_leak_suspect,
                           eval_interval=eval_interval, samples=samples, design=design,
                           margin=margin),
        )
        _start(settings, replay=list(replay or []), seed=seed, shuffle=shuffle, rate=rate,
               view=settings.view, benchmark=benchmark, model=model, metric=metric,
               exclude=list(exclude or []), cluster_col=cluster_col,
               urls=["/v1/benchmarks", "/v1/changes?since=0", "/metrics"], filter=filter)

    @app.command("demo", cls=SettingsCommand)
    def demo_cmd(
        data: Annotated[Path, typer.Option(help="directory holding mmlu_pro_item_correctness_wide.csv")],
        rate: Annotated[float, typer.Option(help="replay pace in results/s")] = 4000.0,
        seed: Annotated[int, typer.Option(
            help="seed of the shuffled order (report --seed takes the same decisions)")]
            = REPLAY_SEED,
        host: Annotated[str | None, typer.Option(help="address to listen on")] = None,
        port: Annotated[int | None, typer.Option(help="TCP port (0: any free port)")] = None,
        no_view: Annotated[bool, typer.Option("--no-view", help="no live terminal view")] = False,
    ) -> None:
        """Replay the real MMLU-Pro table into a fresh embedded monitor, in shuffled order."""
        from monitor.runners.settings import Settings

        table = data / DEMO_TABLE
        if not table.is_file():
            raise InputError(f"{DEMO_TABLE} not found; pass --data ../shared/data", source=str(data))
        tmp = Path(tempfile.mkdtemp(prefix="llm-monitor-demo-"))
        try:
            # A board of known size is planned for it: the table's 32 models. MMLU-Pro's 14
            # subjects are fixed strata (every subject of the benchmark is on the board): the
            # design its verdicts are taken under, as `report --strata-col`.
            settings = Settings.build(db=tmp / "demo.db", host=host, port=port,
                                      sqlite_synchronous="NORMAL", planned_models=32,
                                      view=False if no_view else None,
                                      benchmarks={DEMO_BENCHMARK: {"design": "strata"}})
            _start(settings, replay=[table], seed=seed, shuffle=True, rate=rate,
                   view=settings.view, benchmark=DEMO_BENCHMARK, model=None, metric=None,
                   exclude=["src"], cluster_col="category",
                   urls=[f"/v1/benchmarks/{DEMO_BENCHMARK}/ranking", "/metrics",
                         "/v1/changes?since=0"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
