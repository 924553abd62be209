"""``llm-monitor watch``: follow an evaluation's output directory and post its results live."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands.post import (
    BenchmarkOpt,
    FilterOpt,
    MetricOpt,
    ModelOpt,
    ScorerOpt,
    TokenFileOpt,
    UrlOpt,
    outcomes,
    read_token,
)
from monitor.errors import ConfigError, InputError

if TYPE_CHECKING:
    from monitor.client import MonitorClient, PostReport

HELP = "\n\n".join([
    "Follow DIR while an evaluation writes to it and post every new result once to the "
    "monitor at --url: lm-evaluation-harness samples_*.jsonl files (each complete new line) "
    "and inspect_ai logs (.eval, .json; each newly scored sample).",
    "What was posted is kept in a state file (--state, default DIR/.llm-monitor-watch.json), "
    "written after the monitor acknowledged it: a restarted watch goes on where the last one "
    "stopped, and a batch sent again after a crash is counted once (the monitor answers "
    "duplicate). SIGINT or SIGTERM stop it after the batch in flight; --once reads what is "
    "there and exits.",
    "--benchmark names the group when DIR holds subtasks of one (lm-eval mmlu_*): item ids "
    "become <task>/<doc_id> and the subtasks the clusters, as in post and report.",
])

STATE_NAME = ".llm-monitor-watch.json"
STATE_VERSION = 1


@dataclass
class FileState:
    """How far one file was posted: a samples file's byte offset and line (and the metric and
    filter its first line chose); an inspect log's posted samples and its last seen size."""

    kind: str
    offset: int = 0
    lineno: int = 0
    metric: str | None = None
    filter: str | None = None
    model: str | None = None
    benchmark: str | None = None
    posted: list[str] = field(default_factory=list)
    size: int = -1
    mtime_ns: int = -1


class WatchState:
    """The state file: the monitor's URL and one FileState per followed file."""

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url
        self.files: dict[str, FileState] = {}
        if path.exists():
            try:
                doc = json.loads(path.read_text(encoding="utf-8"))
                files = doc["files"]
                stored_url = doc["url"]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(f"not a watch state file ({exc}); remove it to start over",
                                 source=str(path)) from None
            if stored_url != url:
                raise ConfigError(f"{path} records what was posted to {stored_url}, not {url}: "
                                  "pass another --state to post the same files elsewhere")
            self.files = {name: FileState(**fs) for name, fs in files.items()}

    def save(self) -> None:
        """Atomically: a crash leaves the old state or the new one, never half of one."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        doc = {"version": STATE_VERSION, "url": self.url,
               "files": {k: asdict(v) for k, v in sorted(self.files.items())}}
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)


@dataclass(frozen=True)
class Options:
    benchmark: str | None
    model: str | None
    metric: str | None
    filter: str | None
    scorer: str | None


def _key(path: Path, root: Path) -> str:
    return str(path.relative_to(root))


def _candidates(root: Path, state_path: Path) -> list[tuple[Path, str]]:
    """(file, kind) of every followed file under ``root``, in name order."""
    from monitor.io.inspect import is_inspect_log
    from monitor.io.lmeval import is_samples_file

    out = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path == state_path or path.name.endswith(".tmp"):
            continue
        if is_samples_file(path):
            out.append((path, "lmeval"))
        elif path.suffix in (".eval", ".json") and is_inspect_log(path):
            out.append((path, "inspect"))
    return out


def _new_lmeval(path: Path, fs: FileState, opts: Options, max_lines: int
                ) -> tuple[list[tuple[dict[str, Any], str]], FileState]:
    from monitor.io.lmeval import SamplesFollower, model_from_dir, task_of

    size = path.stat().st_size
    if size < fs.offset:
        raise InputError(f"shrank below the {fs.offset} bytes already posted; the file was "
                         "rewritten (remove its entry from the state file to post it anew)",
                         source=str(path))
    benchmark = opts.benchmark or task_of(path)
    if fs.lineno:  # the rest of a file goes where its first lines went, or not at all
        for option, kept, given in (("benchmark", fs.benchmark, benchmark),
                                    ("model", fs.model, opts.model),
                                    ("metric", fs.metric, opts.metric),
                                    ("filter", fs.filter, opts.filter)):
            if kept is not None and given is not None and kept != given:
                raise ConfigError(f"{path}: its first {fs.lineno} lines were posted with "
                                  f"{option} {kept!r}, not {given!r}: watch it with --{option} "
                                  f"{kept}, or with another --state to post it anew")
    follower = SamplesFollower(path, model=fs.model or opts.model or model_from_dir(path),
                               benchmark=opts.benchmark, offset=fs.offset, lineno=fs.lineno,
                               metric=fs.metric or opts.metric, filter=fs.filter or opts.filter)
    pairs = follower.read_new(max_lines=max_lines)
    if follower.filters and follower.filter not in follower.filters:
        print(f"llm-monitor: watch: {path}: lines {fs.lineno + 1}–{follower.lineno} have "
              f"filters {', '.join(follower.filters)}, none {follower.filter!r} (--filter); "
              "they are passed over", file=sys.stderr, flush=True)
    return pairs, FileState(kind="lmeval", offset=follower.offset, lineno=follower.lineno,
                            metric=follower.metric, filter=follower.filter,
                            model=follower.model, benchmark=benchmark)


def _new_inspect(path: Path, fs: FileState, opts: Options, max_lines: int
                 ) -> tuple[list[tuple[dict[str, Any], str]], FileState]:
    from monitor.io.inspect import inspect_events

    st = path.stat()
    if st.st_size == fs.size and st.st_mtime_ns == fs.mtime_ns:
        return [], fs
    events = list(inspect_events(path, benchmark=opts.benchmark, model=opts.model,
                                 scorer=opts.scorer))
    if fs.posted and events and fs.benchmark is not None:  # the rest goes where the first went
        head = events[0][0]
        for option, kept, given in (("benchmark", fs.benchmark, head["benchmark"]),
                                    ("model", fs.model, head["model"]),
                                    ("scorer", fs.metric, opts.scorer)):
            if kept != given:
                raise ConfigError(f"{path}: its first {len(fs.posted)} samples were posted "
                                  f"with {option} {kept!r}, not {given!r}: watch it with the "
                                  "options of then, or with another --state to post it anew")
    posted = set(fs.posted)
    pairs = [(e, label) for e, label in events
             if f"{e['item_id']}\x1f{e['sample']}" not in posted]
    keys = [f"{e['item_id']}\x1f{e['sample']}" for e, _ in pairs]
    head = events[0][0] if events else {}
    return pairs, FileState(kind="inspect", posted=[*fs.posted, *keys], size=st.st_size,
                            mtime_ns=st.st_mtime_ns, metric=opts.scorer,
                            benchmark=fs.benchmark or head.get("benchmark"),
                            model=fs.model or head.get("model"))


def scan_once(root: Path, state: WatchState, client: MonitorClient, opts: Options,
              stop: threading.Event) -> PostReport:
    """Post what is new in every followed file; the monitor's account of it."""
    from monitor.client import PostReport

    report = PostReport()
    for path, kind in _candidates(root, state.path):
        if stop.is_set():
            break
        name = _key(path, root)
        reader = _new_lmeval if kind == "lmeval" else _new_inspect
        while not stop.is_set():  # a samples file a batch at a time: bounded memory
            fs = state.files.get(name) or FileState(kind=kind)
            try:
                pairs, new_fs = reader(path, fs, opts, client.batch_size)
            except InputError as exc:
                if kind == "inspect":  # a log caught mid-write: read it again at the next scan
                    print(f"llm-monitor: watch: {exc} (will retry)", file=sys.stderr,
                          flush=True)
                    break
                raise
            if pairs:
                part = client.post_labelled(pairs)
                report = report.merge(part)
                _print_part(part, path)
            if new_fs == fs:
                break
            state.files[name] = new_fs  # only after the monitor acknowledged the batch
            state.save()
            if kind == "inspect":
                break
    return report


def _print_part(part: PostReport, path: Path) -> None:
    print(f"llm-monitor: watch: {path}: {part.events} results: {outcomes(part)}",
          file=sys.stderr, flush=True)
    for r in part.rejected[:20]:
        print(f"  rejected {r.source}: {r.reason}: {r.detail}", file=sys.stderr, flush=True)


def register(app: typer.Typer) -> None:
    @app.command("watch", help=HELP)
    def watch_cmd(
        directory: Annotated[Path, typer.Argument(
            help="the evaluation's output directory", file_okay=False, show_default=False)],
        url: UrlOpt,
        token_file: TokenFileOpt = None,
        benchmark: BenchmarkOpt = None,
        model: ModelOpt = None,
        metric: MetricOpt = None,
        filter: FilterOpt = None,
        scorer: ScorerOpt = None,
        state: Annotated[Path | None, typer.Option(
            help=f"state file (default: DIR/{STATE_NAME})")] = None,
        interval: Annotated[float, typer.Option(help="seconds between scans")] = 1.0,
        once: Annotated[bool, typer.Option("--once", help="one scan, then exit")] = False,
        batch_size: Annotated[int, typer.Option(help="results per request")] = 2000,
    ) -> None:
        from monitor.client import MonitorClient, PostReport

        if not directory.is_dir():
            raise InputError("not a directory", source=str(directory))
        if interval <= 0:
            raise ConfigError(f"--interval must be positive, got {interval}")
        root = directory.resolve()
        ws = WatchState((state or root / STATE_NAME).resolve(), url.rstrip("/"))
        opts = Options(benchmark=benchmark, model=model, metric=metric, filter=filter,
                       scorer=scorer)
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set())
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        report = PostReport()
        print(f"llm-monitor: watching {root} → {ws.url} (state {ws.path})", file=sys.stderr,
              flush=True)
        try:
            with MonitorClient(url, token=read_token(token_file),
                               batch_size=batch_size) as client:
                while not stop.is_set():
                    report = report.merge(scan_once(root, ws, client, opts, stop))
                    if once:
                        break
                    stop.wait(interval)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        print(f"llm-monitor: watch stopped: {report.events} results posted: "
              f"{outcomes(report)}", file=sys.stderr, flush=True)
