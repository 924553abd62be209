"""``llm-monitor watch``: follow an evaluation's output directory and post its results live."""

from __future__ import annotations

import hashlib
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
STATE_VERSION = 2

#: At most this many bytes of a samples file's first line make its fingerprint.
HEAD_BYTES = 1 << 20


@dataclass
class FileState:
    """How far one file was posted: a samples file's byte offset and line (and the metric and
    filter its first line chose); an inspect log's posted samples and its last seen size.

    A samples file is known by its content, not its name (a renamed or copied file must not
    be posted again): ``head`` is the SHA-256 of its first line, ``digest`` that of the
    ``offset`` bytes posted, ``task`` the task its lines were read as. ``copy_of`` marks a
    copy of another followed file, whose lines are passed over. ``size`` and ``mtime_ns`` are
    the file's at the last read: while they stay, the posted bytes need no second look.
    ``scores`` are an inspect log's posted scores, in the order of ``posted``.
    """

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
    task: str | None = None
    head: str | None = None
    digest: str | None = None
    copy_of: str | None = None
    scores: list[float] = field(default_factory=list)


class WatchState:
    """The state file: the monitor's URL and one FileState per followed file."""

    def __init__(self, path: Path, url: str) -> None:
        self.path = path
        self.url = url
        self.files: dict[str, FileState] = {}
        # Per samples file, the SHA-256 of its first ``offset`` bytes as a hashlib object (not
        # saved): the next batch of a file goes on hashing instead of reading it all again.
        self.hashers: dict[str, tuple[int, Any]] = {}
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
            # Version 1 states lack the fingerprints: their fields take the defaults, and a
            # file's fingerprint is taken from it at its next read.
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


class Rewritten(InputError):
    """A file changed what was already posted from it: post it anew, or watch another state."""


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


# -- a samples file's identity: its bytes ---------------------------------------------------
def _head(path: Path) -> str | None:
    """SHA-256 of the file's first complete line (its first HEAD_BYTES bytes at most); None
    while that line is still being written."""
    try:
        with path.open("rb") as fh:
            line = fh.readline(HEAD_BYTES)
    except OSError:
        return None
    if not (line.endswith(b"\n") or len(line) == HEAD_BYTES):
        return None
    return hashlib.sha256(line).hexdigest()


def _prefix_hash(path: Path, n: int) -> Any:
    """The SHA-256 object of the file's first ``n`` bytes; None if it is shorter."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while n > 0:
            chunk = fh.read(min(n, 1 << 20))
            if not chunk:
                return None
            h.update(chunk)
            n -= len(chunk)
    return h


def _same_start(a: Path, b: Path) -> bool:
    """True when the shorter file's bytes are the start of the longer one's."""
    n = min(a.stat().st_size, b.stat().st_size)
    with a.open("rb") as fa, b.open("rb") as fb:
        while n > 0:
            size = min(n, 1 << 20)
            if fa.read(size) != fb.read(size):
                return False
            n -= size
    return True


def _model_of(path: Path, opts: Options) -> str:
    from monitor.io.lmeval import model_from_dir

    return opts.model or model_from_dir(path)


def _follow_renames(root: Path, state: WatchState, heads: dict[Path, str | None],
                    opts: Options) -> None:
    """Move the state of each samples file no longer under its name to the file that now
    holds its posted bytes (a rename, or a rotation that put a new file under the old name),
    so that the rest of it is posted once, as the same task's items."""
    names = {_key(p, root): p for p in heads}
    for name, fs in list(state.files.items()):
        if fs.kind != "lmeval" or fs.copy_of is not None or fs.head is None or not fs.offset:
            continue
        here = names.get(name)
        if here is not None and heads[here] == fs.head:
            continue
        moved, hasher = None, None
        for path, head in heads.items():
            other = _key(path, root)
            held = state.files.get(other)
            if (other == name or head != fs.head or _model_of(path, opts) != fs.model
                    or (held is not None and held.copy_of != name)):
                continue
            hasher = _prefix_hash(path, fs.offset)
            if hasher is not None and hasher.hexdigest() == fs.digest:
                moved = path
                break
        if moved is None:
            continue  # gone (kept, it may come back), or changed: _new_lmeval says so
        new = _key(moved, root)
        state.files[new] = fs
        del state.files[name]
        for other_fs in state.files.values():
            if other_fs.copy_of == name:
                other_fs.copy_of = new
        state.hashers.pop(name, None)
        state.hashers[new] = (fs.offset, hasher)
        state.save()
        print(f"llm-monitor: watch: {moved}: {name} renamed (its {fs.lineno} lines posted are "
              f"these bytes): followed on from line {fs.lineno + 1}", file=sys.stderr,
              flush=True)


def _copy_of(root: Path, state: WatchState, path: Path, head: str, opts: Options
             ) -> str | None:
    """The followed samples file whose bytes this new file starts with (or that starts with
    this file's bytes): a copy, whose lines were posted from there."""
    model = _model_of(path, opts)
    for owner, fs in state.files.items():
        if fs.kind != "lmeval" or fs.copy_of is not None or fs.head != head or fs.model != model:
            continue
        owned = root / owner
        if owned.is_file() and _head(owned) == head and _same_start(path, owned):
            return owner
    return None


def _copy_lines(path: Path, fs: FileState) -> tuple[dict[str, int], FileState]:
    """A copy's complete new lines, passed over (counted, not posted)."""
    count, end = 0, fs.offset
    with path.open("rb") as fh:
        fh.seek(fs.offset)
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            count += 1
            end += len(raw)
    if not count:
        return {}, fs
    return ({f"copy of {fs.copy_of}": count},
            FileState(kind="lmeval", offset=end, lineno=fs.lineno + count, model=fs.model,
                      head=fs.head, copy_of=fs.copy_of))


def _rewritten(path: Path, fs: FileState) -> Rewritten:
    return Rewritten(f"its first {fs.lineno} lines ({fs.offset} bytes), already posted, changed "
                     "since (the file was rewritten): the monitor holds what they said then. "
                     "Post the file with llm-monitor post to see its conflicts, or remove its "
                     "entry from the state file to follow it anew", source=str(path))


def _new_lmeval(path: Path, name: str, fs: FileState, opts: Options, max_lines: int,
                state: WatchState, head: str | None
                ) -> tuple[list[tuple[dict[str, Any], str]], FileState, dict[str, int]]:
    from monitor.io.lmeval import SamplesFollower, task_of

    st = path.stat()
    if st.st_size < fs.offset:
        raise InputError(f"shrank below the {fs.offset} bytes already posted; the file was "
                         "rewritten (remove its entry from the state file to post it anew)",
                         source=str(path))
    task = fs.task or task_of(path)
    benchmark = opts.benchmark or task
    if fs.lineno:  # the rest of a file goes where its first lines went, or not at all
        for option, kept, given in (("benchmark", fs.benchmark, benchmark),
                                    ("model", fs.model, opts.model),
                                    ("metric", fs.metric, opts.metric),
                                    ("filter", fs.filter, opts.filter)):
            if kept is not None and given is not None and kept != given:
                raise ConfigError(f"{path}: its first {fs.lineno} lines were posted with "
                                  f"{option} {kept!r}, not {given!r}: watch it with --{option} "
                                  f"{kept}, or with another --state to post it anew")
    unchanged = (st.st_size, st.st_mtime_ns) == (fs.size, fs.mtime_ns)
    if head is None or (unchanged and st.st_size == fs.offset):
        return [], fs, {}  # no first line yet, or nothing new
    # The bytes already posted must be those still there: a file rewritten under its name
    # (even at the same size) is an error, not a file silently passed over.
    cached = state.hashers.get(name)
    if unchanged and cached is not None and cached[0] == fs.offset:
        hasher = cached[1].copy()
    else:
        if fs.offset and fs.head is not None and head != fs.head:
            raise _rewritten(path, fs)
        hasher = _prefix_hash(path, fs.offset)
        if fs.digest is not None and hasher.hexdigest() != fs.digest:
            raise _rewritten(path, fs)
    follower = SamplesFollower(path, model=fs.model or _model_of(path, opts),
                               benchmark=opts.benchmark, offset=fs.offset, lineno=fs.lineno,
                               metric=fs.metric or opts.metric, filter=fs.filter or opts.filter,
                               task_name=task)
    pairs = follower.read_new(max_lines=max_lines, digest=hasher)
    if follower.filters and follower.filter not in follower.filters:
        print(f"llm-monitor: watch: {path}: lines {fs.lineno + 1}–{follower.lineno} have "
              f"filters {', '.join(follower.filters)}, none {follower.filter!r} (--filter); "
              "they are passed over", file=sys.stderr, flush=True)
    state.hashers[name] = (follower.offset, hasher)
    return pairs, FileState(kind="lmeval", offset=follower.offset, lineno=follower.lineno,
                            metric=follower.metric, filter=follower.filter,
                            model=follower.model, benchmark=benchmark, size=st.st_size,
                            mtime_ns=st.st_mtime_ns, task=task, head=fs.head or head,
                            digest=hasher.hexdigest()), follower.passed_over


def _new_inspect(path: Path, fs: FileState, opts: Options
                 ) -> tuple[list[tuple[dict[str, Any], str]], FileState, dict[str, int]]:
    from monitor.io.inspect import inspect_events

    st = path.stat()
    if st.st_size == fs.size and st.st_mtime_ns == fs.mtime_ns:
        return [], fs, {}
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
    # A posted sample whose score is now another was rewritten: an error, as for samples
    # files. (A state written before the scores were kept has none to compare, and keeps none.)
    scored = len(fs.scores) == len(fs.posted)
    known = dict(zip(fs.posted, fs.scores, strict=True)) if scored else dict.fromkeys(fs.posted)
    pairs = []
    for e, label in events:
        key = f"{e['item_id']}\x1f{e['sample']}"
        if key not in known:
            pairs.append((e, label))
        elif scored and known[key] != e["score"]:
            raise Rewritten(f"sample {e['item_id']!r} (epoch {e['sample'] + 1}) was posted "
                            f"with score {known[key]!r} and now has {e['score']!r}: the log "
                            "was rewritten; post it with llm-monitor post to see its "
                            "conflicts", source=str(path))
    keys = [f"{e['item_id']}\x1f{e['sample']}" for e, _ in pairs]
    scores = [*fs.scores, *(float(e["score"]) for e, _ in pairs)] if scored else []
    head = events[0][0] if events else {}
    return pairs, FileState(kind="inspect", posted=[*fs.posted, *keys], scores=scores,
                            size=st.st_size, mtime_ns=st.st_mtime_ns, metric=opts.scorer,
                            benchmark=fs.benchmark or head.get("benchmark"),
                            model=fs.model or head.get("model")), {}


def scan_once(root: Path, state: WatchState, client: MonitorClient, opts: Options,
              stop: threading.Event) -> PostReport:
    """Post what is new in every followed file; the monitor's account of it, with the lines
    passed over (another filter's, a copy's)."""
    from monitor.client import PostReport

    report = PostReport()
    candidates = _candidates(root, state.path)
    heads = {path: _head(path) for path, kind in candidates if kind == "lmeval"}
    _follow_renames(root, state, heads, opts)
    for path, kind in candidates:
        if stop.is_set():
            break
        name = _key(path, root)
        if kind == "lmeval" and name not in state.files and heads[path] is not None:
            owner = _copy_of(root, state, path, str(heads[path]), opts)
            if owner is not None:
                print(f"llm-monitor: watch: {path}: a copy of {owner} (its bytes are that "
                      "file's): its lines are passed over, not posted again", file=sys.stderr,
                      flush=True)
                state.files[name] = FileState(kind="lmeval", model=_model_of(path, opts),
                                              head=heads[path], copy_of=owner)
        while not stop.is_set():  # a samples file a batch at a time: bounded memory
            fs = state.files.get(name) or FileState(kind=kind)
            pairs: list[tuple[dict[str, Any], str]] = []
            try:
                if fs.copy_of is not None:
                    passed, new_fs = _copy_lines(path, fs)
                elif kind == "lmeval":
                    pairs, new_fs, passed = _new_lmeval(path, name, fs, opts,
                                                        client.batch_size, state, heads[path])
                else:
                    pairs, new_fs, passed = _new_inspect(path, fs, opts)
            except Rewritten:
                raise
            except InputError as exc:
                if kind == "inspect":  # a log caught mid-write: read it again at the next scan
                    print(f"llm-monitor: watch: {exc} (will retry)", file=sys.stderr,
                          flush=True)
                    break
                raise
            part = client.post_labelled(pairs) if pairs else PostReport()
            part.pass_over(passed)
            if pairs or passed:
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
