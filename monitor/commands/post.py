"""``llm-monitor post``: send finished result files to a running monitor over HTTP."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit
from monitor.errors import ConfigError, InputError, MonitorError

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.client import PostReport

HELP = "\n\n".join([
    "Send result files to a running monitor (llm-monitor run) at --url, in batches; a batch "
    "that fails in transit is sent again (the monitor counts a result it already holds as "
    "duplicate, so re-sending is safe).",
    "FILE is a long or wide table (as for report), a JSON-lines file of results in the "
    "monitor's contract (each line an ItemResult, as curl posts them and stability "
    "--events-out writes them: sent as they are, variant and flags kept), an "
    "lm-evaluation-harness samples file "
    "(samples_<task>_<timestamp>.jsonl: model from its directory or --model, item = doc_id, "
    "or <task>/<doc_id> with the task as cluster when --benchmark names a group of subtasks; "
    "one --filter of a task with several, by default the first in the file), "
    "an inspect_ai log (.eval, or .json written by inspect_ai), or a directory of harness "
    "output (every samples file and log under it).",
    "Prints what the monitor did: accepted, duplicate, conflict and invalid lines, and each "
    "rejected line with its file and line; and the lines read but not sent (passed over: "
    "another lm-eval filter's, blank lines). Exit status 1 when any line was rejected.",
])

UrlOpt = Annotated[str, typer.Option(
    "--url", envvar="LLM_MONITOR_URL", help="the monitor's base URL, e.g. http://127.0.0.1:8000")]
TokenFileOpt = Annotated[Path | None, typer.Option(
    "--token-file", help="file holding the monitor's bearer token (or LLM_MONITOR_TOKEN)")]
BenchmarkOpt = Annotated[str | None, typer.Option(
    help="benchmark name (default: the table's, the lm-eval task, the inspect task); for lm-eval "
    "subtask files the group name, which namespaces doc_ids by subtask")]
ModelOpt = Annotated[str | None, typer.Option(help="model name of lm-eval or inspect files")]
MetricOpt = Annotated[str | None, typer.Option(help="per-sample metric of lm-eval files")]
FilterOpt = Annotated[str | None, typer.Option(
    "--filter", help="lm-eval filter to read, e.g. flexible-extract (default: the first in the "
    "file); the other filters' lines are counted as passed over")]
ScorerOpt = Annotated[str | None, typer.Option(help="scorer of inspect logs (default: the first)")]
ExcludeOpt = Annotated[list[str] | None, typer.Option(help="table column to ignore (repeatable)")]
ClusterOpt = Annotated[str | None, typer.Option(
    help="table column holding the item cluster; of inspect_ai logs, the sample metadata field")]
BatchOpt = Annotated[int, typer.Option(help="results per request")]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]

#: Lines of a samples file read at a time.
READ_LINES = 10_000


def read_token(token_file: Path | None) -> str | None:
    """The bearer token from ``--token-file``, else LLM_MONITOR_TOKEN, else None."""
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"cannot read the token file {token_file}: {exc.strerror}") from None
        if not token:
            raise ConfigError(f"the token file {token_file} is empty")
        return token
    return os.environ.get("LLM_MONITOR_TOKEN") or None


def file_events(path: Path, *, benchmark: str | None, model: str | None, metric: str | None,
                filter: str | None, scorer: str | None, exclude: tuple[str, ...],
                cluster_col: str | None, passed_over: MutableMapping[str, int] | None = None
                ) -> Iterator[tuple[dict[str, Any], str]]:
    """(result, label) of every result in one file, in file order; the lines read and not
    sent are counted in ``passed_over`` by why."""
    from monitor.io.events import is_events_file, read_events
    from monitor.io.inspect import is_inspect_log
    from monitor.io.lmeval import (
        SamplesFollower,
        group_name,
        looks_like_samples,
        model_from_dir,
        no_samples,
        task_of,
    )

    if path.is_dir():  # a harness output directory: its samples files and logs, in name order
        from monitor.io.sources import harness_files

        samples, logs = harness_files(path)
        if not samples and not logs:
            raise InputError("no samples_*.jsonl or inspect_ai logs in this directory",
                             source=str(path))
        # The subtasks of a group (mmlu_anatomy, mmlu_astronomy, …) as report reads them.
        tasks = {task_of(p) for p in samples}
        group = benchmark or (group_name(sorted(tasks)) if len(tasks) > 1 else None) or None
        for inner in samples:
            yield from file_events(inner, benchmark=group, model=model, metric=metric,
                                   filter=filter, scorer=scorer, exclude=exclude,
                                   cluster_col=cluster_col, passed_over=passed_over)
        for inner in logs:
            yield from file_events(inner, benchmark=benchmark, model=model, metric=metric,
                                   filter=filter, scorer=scorer, exclude=exclude,
                                   cluster_col=cluster_col, passed_over=passed_over)
        return
    if not path.is_file():
        raise InputError("no such file", source=str(path))
    if looks_like_samples(path):
        if cluster_col is not None:  # refused rather than ignored, as report refuses it
            raise ConfigError("--cluster-col: lm-eval samples files have no item column to "
                              "group by; the subtasks of a group are its clusters (--benchmark "
                              "with the group's name)")
        follower = SamplesFollower(path, model=model or model_from_dir(path),
                                   benchmark=benchmark, metric=metric, filter=filter)
        sent = 0
        while True:  # a chunk of lines at a time: a large file is never held whole
            before = follower.offset
            chunk = follower.read_new(max_lines=READ_LINES, finished=True)
            sent += len(chunk)
            yield from chunk
            if follower.offset == before:
                break
        if not sent:  # as report: a file without a scored line (or of another filter) is no input
            raise no_samples(str(path), follower.filter, follower.filters)
        if passed_over is not None:
            for why, n in follower.passed_over.items():
                passed_over[why] = passed_over.get(why, 0) + n
        return
    if is_inspect_log(path):
        from monitor.io.inspect import inspect_events

        yield from inspect_events(path, benchmark=benchmark, model=model, scorer=scorer,
                                  cluster_field=cluster_col, passed_over=passed_over)
        return
    if is_events_file(path):
        # The table options name columns; a result of the contract has its fields instead.
        if exclude:
            raise ConfigError(f"{path} holds results of the monitor's contract (one ItemResult "
                              "per line), not a wide table: --exclude has no column to leave out")
        if cluster_col not in (None, "cluster"):
            raise ConfigError(f"{path} holds results of the monitor's contract (one ItemResult "
                              f"per line): their cluster is the field 'cluster', not "
                              f"{cluster_col!r} (--cluster-col)")
        yield from read_events(path, benchmark=benchmark, passed_over=passed_over)
        return
    from monitor.runners.replay import ReplayStream, load_blocks

    blocks = load_blocks([path], benchmark=benchmark, exclude=exclude, cluster_col=cluster_col)
    stream = ReplayStream(blocks)  # file order: item by item, models left to right
    for batch in stream.batches(10_000):
        for ev in batch:
            sample = f", sample {ev.sample}" if ev.sample else ""
            yield (ev.model_dump(mode="json", exclude_none=True),
                   f"{path}: item {ev.item_id}, model {ev.model}{sample}")


def outcomes(report: PostReport) -> str:
    """``accepted A, duplicate D, conflict C, invalid I``: the monitor's account in one line,
    and the lines read but not sent (``; passed over P lines: …``)."""
    c = report.counts()
    return (f"accepted {c['accepted']}, duplicate {c['duplicate']}, conflict {c['conflict']}, "
            f"invalid {c['invalid']}{passed_over_text(report.passed_over)}")


def passed_over_text(passed: Mapping[str, int]) -> str:
    """``; passed over P lines (n1 why1, n2 why2)``, or "" when every line was sent."""
    total = sum(passed.values())
    if not total:
        return ""
    parts = ", ".join(f"{n} {why}" for why, n in sorted(passed.items(), key=lambda kv: -kv[1]))
    return f"; passed over {total} line{'s' if total != 1 else ''} ({parts})"


def render_report(report: PostReport, files: list[str], console: Console) -> None:
    console.print(f"posted {report.events} results from {len(files)} file(s) in "
                  f"{report.batches} request(s)"
                  f"{f', {report.retries} sent again' if report.retries else ''}: "
                  f"{outcomes(report)}", soft_wrap=True)
    for r in report.rejected[:50]:
        console.print(f"  rejected {r.source or f'line {r.index}'}: {r.reason}: {r.detail}",
                      markup=False, highlight=False, soft_wrap=True)
    more = len(report.rejected) - 50 + report.rejected_unlisted
    if more > 0:
        console.print(f"  … and {more} more rejected lines (reasons: {report.reasons})",
                      markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command("post", help=HELP)
    def post_cmd(
        files: Annotated[list[Path], typer.Argument(
            help="result files or harness output directories", show_default=False)],
        url: UrlOpt,
        token_file: TokenFileOpt = None,
        benchmark: BenchmarkOpt = None,
        model: ModelOpt = None,
        metric: MetricOpt = None,
        filter: FilterOpt = None,
        scorer: ScorerOpt = None,
        exclude: ExcludeOpt = None,
        cluster_col: ClusterOpt = None,
        batch_size: BatchOpt = 2000,
        as_json: JsonOpt = False,
    ) -> None:
        from monitor.client import MonitorClient, PostReport

        token = read_token(token_file)
        report = PostReport()
        with MonitorClient(url, token=token, batch_size=batch_size) as client:
            try:
                for path in files:
                    passed: dict[str, int] = {}
                    pairs = file_events(path, benchmark=benchmark, model=model, metric=metric,
                                        filter=filter, scorer=scorer,
                                        exclude=tuple(exclude or ()), cluster_col=cluster_col,
                                        passed_over=passed)
                    client.post_labelled(pairs, into=report)
                    report.pass_over(passed)
            except MonitorError:
                if report.batches:  # what the monitor took before the error stays taken
                    print(f"llm-monitor: post: before the error the monitor answered "
                          f"{report.events} results in {report.batches} request(s): "
                          f"{outcomes(report)}", file=sys.stderr, flush=True)
                raise
        emit(report.as_dict() | {"files": [str(f) for f in files]}, as_json=as_json,
             human=lambda console: render_report(report, [str(f) for f in files], console))
        if report.conflict or report.invalid:
            sys.stdout.flush()
            raise typer.Exit(1)
