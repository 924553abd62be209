"""Reader of lm-evaluation-harness ``--log_samples`` output (``samples_<task>_<timestamp>.jsonl``).

Mapping to llm-monitor results (documented in docs/live.md):

- benchmark = the task, from the file name ``samples_<task>_<timestamp>.jsonl`` (the timestamp
  ``2024-05-13T12-34-56.123456`` is optional, as in older harness versions);
- model = the ``model`` argument when given, else the name of the parent directory, where the
  harness writes ``<output_path>/<org>__<name>/``; ``__`` becomes ``/`` again;
- item_id = ``doc_id`` (as a string) when the file's task is the benchmark; when the file is a
  subtask of a group (``--benchmark mmlu`` over ``samples_mmlu_anatomy_….jsonl``,
  ``samples_mmlu_astronomy_….jsonl``, …, whose doc_ids all start at 0), item_id =
  ``<task>/<doc_id>`` and the subtask is the item's cluster;
- score = the per-sample metric: ``metric`` when given, else the first of the line's
  ``metrics`` list (harness ≥ 0.4.3 writes it), else the first present of
  acc, exact_match, acc_norm, pass@1, em, f1. It must be a number in [0, 1] (booleans count 0/1);
- tasks with several filters (e.g. gsm8k's ``strict-match`` and ``flexible-extract``) log one
  line per (doc, filter): ``filter`` selects one, by default the first seen in the file (the
  first filter of the task's config: the harness logs the filters in that order). The lines
  of the other filters, and blank lines, are counted in ``passed_over`` by why.

:class:`SamplesParser` reads one line at a time (``llm-monitor watch`` follows files as the
harness writes them); :func:`read_lmeval_samples` reads a whole file with it and
:func:`samples_table` joins the files of several models and subtasks into one score table.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.errors import InputError

if TYPE_CHECKING:
    from monitor.io.tables import ScoreTable

_NAME = re.compile(
    r"^samples_(?P<task>.+?)(?:_(?P<ts>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?))?\.jsonl$"
)
_PREFERRED_METRICS = ("acc", "exact_match", "acc_norm", "pass@1", "em", "f1")


@dataclass(frozen=True)
class LmEvalSamples:
    """The per-item scores of one model on one task, from one samples file."""

    source: str
    task: str
    model: str
    metric: str
    filter: str | None
    item_ids: np.ndarray
    scores: np.ndarray
    cluster: str | None = None

    def __len__(self) -> int:
        return int(self.scores.shape[0])


def is_samples_file(path: Path | str) -> bool:
    """True when the file name follows the harness pattern ``samples_<task>[_<ts>].jsonl``."""
    return _NAME.match(Path(path).name) is not None


def looks_like_samples(path: Path | str) -> bool:
    """True when the file is named like a samples file, or its first line is a harness sample
    (a JSON object with ``doc_id`` and the harness's ``doc``/``resps``/``arguments`` fields)."""
    path = Path(path)
    if is_samples_file(path):
        return True
    if not path.is_file() or path.suffix.lower() not in (".jsonl", ".json", ".ndjson"):
        return False
    try:
        with path.open("rb") as fh:
            first = fh.readline(1 << 20)
        rec = json.loads(first)
    except (OSError, ValueError):
        return False
    return (isinstance(rec, dict) and "doc_id" in rec
            and any(k in rec for k in ("doc", "resps", "filtered_resps", "arguments")))


def task_of(path: Path | str) -> str:
    """The task of a samples file: from its name, or its stem when the name is not the harness's."""
    name = Path(path).name
    m = _NAME.match(name)
    return m.group("task") if m else Path(name).stem


def parse_samples_name(name: str) -> tuple[str, str | None]:
    """(task, timestamp or None) from a samples file name.

    Example
    -------
    >>> parse_samples_name("samples_arc_easy_2024-05-13T12-34-56.123456.jsonl")
    ('arc_easy', '2024-05-13T12-34-56.123456')
    """
    m = _NAME.match(name)
    if m is None:
        raise InputError("not an lm-evaluation-harness samples file "
                         "(expected samples_<task>_<timestamp>.jsonl)", source=name)
    return m.group("task"), m.group("ts")


def model_from_dir(path: Path) -> str:
    """The model name the harness encoded in the output directory (``org__name`` → ``org/name``)."""
    name = path.resolve().parent.name
    return name.replace("__", "/")


def _score(value: object, *, source: str, line: int, field: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, list) and len(value) == 1:  # some metrics log a one-element list
        value = value[0]
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InputError(f"metric value must be a number in [0, 1], got {value!r}",
                         source=source, line=line, field=field)
    f = float(value)
    if not math.isfinite(f) or not 0.0 <= f <= 1.0:
        raise InputError(f"metric value must be a number in [0, 1], got {value!r}",
                         source=source, line=line, field=field)
    return f


def namespaced(task: str, benchmark: str | None) -> bool:
    """True when a file of ``task`` is a subtask of ``benchmark``: its ids need the task prefix."""
    return benchmark is not None and benchmark != task


def item_id_of(task: str, doc_id: str, *, benchmark: str | None) -> str:
    """The item id of a doc: ``doc_id``, or ``<task>/<doc_id>`` inside a group benchmark.

    Example
    -------
    >>> item_id_of("mmlu_anatomy", "12", benchmark="mmlu"), item_id_of("gsm8k", "12", benchmark=None)
    ('mmlu_anatomy/12', '12')
    """
    return f"{task}/{doc_id}" if namespaced(task, benchmark) else doc_id


class SamplesParser:
    """Scores the lines of one samples file, one at a time.

    The metric and the filter are fixed by the first scored line (unless given), so the lines
    of a file read in several passes — as ``watch`` does while the harness writes — get the
    same choice as a single pass. ``passed_over`` counts the lines not scored, by why
    (:func:`other_filter`, :data:`BLANK`).
    """

    def __init__(self, source: str, *, metric: str | None = None,
                 filter: str | None = None) -> None:
        self.source = source
        self.metric = metric
        self.filter = filter
        self.filters: dict[str, None] = {}  # every filter seen, in order
        self.passed_over: dict[str, int] = {}

    def _pass_over(self, why: str) -> None:
        self.passed_over[why] = self.passed_over.get(why, 0) + 1

    def parse(self, raw: str | bytes, lineno: int) -> tuple[str, float] | None:
        """(doc_id, score) of one line; None for a blank line or a line of another filter."""
        source = self.source
        if not raw.strip():
            self._pass_over(BLANK)
            return None
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", source=source, line=lineno) from None
        except UnicodeDecodeError:
            raise InputError("not UTF-8", source=source, line=lineno) from None
        if not isinstance(rec, dict):
            raise InputError("expected a JSON object", source=source, line=lineno)
        if "doc_id" not in rec:
            raise InputError("missing", source=source, line=lineno, field="doc_id")
        line_filter = rec.get("filter")
        if line_filter is not None:
            self.filters[str(line_filter)] = None
        if self.filter is None:
            self.filter = line_filter
        if line_filter is not None and line_filter != self.filter:
            self._pass_over(other_filter(str(line_filter)))
            return None
        if self.metric is None:
            listed = [m for m in rec.get("metrics") or [] if m in rec]
            candidates = listed or [m for m in _PREFERRED_METRICS if m in rec]
            if not candidates:
                raise InputError("no per-sample metric found (pass --metric)",
                                 source=source, line=lineno)
            self.metric = candidates[0]
        if self.metric not in rec:
            raise InputError("missing", source=source, line=lineno, field=self.metric)
        return str(rec["doc_id"]), _score(rec[self.metric], source=source, line=lineno,
                                          field=self.metric)


#: Why a blank line was passed over (``passed_over`` keys).
BLANK = "blank line"


def other_filter(name: str) -> str:
    """Why a line of filter ``name`` (not the one read) was passed over (``passed_over`` key)."""
    return f"lm-eval filter {name!r}"


def no_samples(source: str, filter: str | None, filters: Iterable[str]) -> InputError:
    """The error for a samples file without a scored line: naming the filters it has when the
    one asked for is not among them."""
    seen = list(filters)
    if filter is not None and seen and filter not in seen:
        return InputError(f"no line with filter {filter!r}; the file's filters are "
                          f"{', '.join(seen)} (pass one with --filter)", source=source)
    return InputError("no samples", source=source)


def read_lmeval_samples(
    path: Path | str,
    *,
    model: str | None = None,
    metric: str | None = None,
    filter: str | None = None,
    benchmark: str | None = None,
) -> LmEvalSamples:
    """Read one ``samples_<task>_<timestamp>.jsonl`` file; see the module docstring for the mapping.

    ``benchmark``, when it names a group rather than the file's task, namespaces the item ids
    by the task and makes the task the cluster.

    Raises :class:`InputError` naming the file, line and field on malformed lines, duplicate
    ``doc_id`` values, missing metrics or scores outside [0, 1].
    """
    path = Path(path)
    source = str(path)
    task = task_of(path)
    model_name = model if model else model_from_dir(path)
    if not model_name:
        raise InputError("cannot tell the model: pass --model", source=source)
    ids: list[str] = []
    scores: list[float] = []
    seen: set[str] = set()
    parser = SamplesParser(source, metric=metric, filter=filter)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", source=source) from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            parsed = parser.parse(raw, lineno)
            if parsed is None:
                continue
            doc_id, score = parsed
            if doc_id in seen:
                raise InputError(f"duplicate doc_id {doc_id!r}", source=source, line=lineno,
                                 field="doc_id")
            seen.add(doc_id)
            ids.append(item_id_of(task, doc_id, benchmark=benchmark))
            scores.append(score)
    if not ids:
        raise no_samples(source, parser.filter, parser.filters)
    return LmEvalSamples(
        source=source, task=task, model=model_name, metric=str(parser.metric),
        filter=parser.filter, item_ids=np.asarray(ids, dtype=object),
        scores=np.asarray(scores, dtype=np.float64),
        cluster=task if namespaced(task, benchmark) else None,
    )


def samples_table(
    paths: Sequence[Path | str],
    *,
    benchmark: str | None = None,
    model: str | None = None,
    metric: str | None = None,
    filter: str | None = None,
) -> ScoreTable:
    """The samples files of several models (and subtasks) as one items × models score table.

    Files of more than one task form a group: without ``benchmark`` it is named after the
    tasks' common prefix (``mmlu_anatomy``, ``mmlu_astronomy`` → ``mmlu``), item ids are
    namespaced by task and the tasks are the clusters (``group_kind == "cluster"``).
    """
    from monitor.io.tables import ScoreTable

    if not paths:
        raise InputError("no samples files given", source="samples")
    tasks = [task_of(p) for p in paths]
    if benchmark is None and len(set(tasks)) > 1:
        benchmark = group_name(tasks)
        if not benchmark:
            raise InputError(f"samples of unrelated tasks ({', '.join(sorted(set(tasks)))}): "
                             "pass --benchmark to read them as one group, or give the files "
                             "of one task", source=str(paths[0]))
    files = [read_lmeval_samples(p, model=model, metric=metric, filter=filter,
                                 benchmark=benchmark) for p in paths]
    chosen = {f.filter for f in files}
    if len(chosen) > 1:  # each file's default is its own first filter: never mix them
        first = {f.filter: f.source for f in reversed(files)}
        raise InputError("the files' first filters differ ("
                         + ", ".join(f"{name} in {first[name]}" for name in sorted(
                             first, key=str)) + "): pass --filter to read one of them",
                         source=files[0].source)
    item_index: dict[str, int] = {}
    cluster_of: dict[str, str | None] = {}
    model_index: dict[str, int] = {}
    for f in files:
        model_index.setdefault(f.model, len(model_index))
        for i in f.item_ids.tolist():
            if i not in item_index:
                item_index[i] = len(item_index)
                cluster_of[i] = f.cluster
    scores = np.full((len(item_index), len(model_index)), np.nan)
    for f in files:
        col = model_index[f.model]
        rows = np.fromiter((item_index[i] for i in f.item_ids.tolist()), dtype=np.int64,
                           count=len(f))
        if not np.all(np.isnan(scores[rows, col])):
            raise InputError(f"model {f.model!r} has two files with the same items of task "
                             f"{f.task!r} (pass --model, or one file per model and task)",
                             source=f.source)
        scores[rows, col] = f.scores
    ids = np.asarray(list(item_index), dtype=str)
    grouped = any(c is not None for c in cluster_of.values())
    return ScoreTable(
        source=", ".join(str(p) for p in paths), benchmark=benchmark or tasks[0],
        item_ids=ids, models=tuple(model_index), scores=scores,
        groups=(np.asarray([cluster_of[i] or "" for i in item_index], dtype=str)
                if grouped else None),
        group_kind="cluster" if grouped else None, group_col="task" if grouped else None,
    )


def group_name(tasks: Sequence[str]) -> str:
    """The group the files of several tasks are read as when no benchmark is named: the longest
    common ``_``-separated prefix of the task names (``mmlu_a``, ``mmlu_b`` → ``mmlu``; "" for
    unrelated tasks). ``report``, ``compare`` and ``post`` of a directory name it alike."""
    parts = [t.split("_") for t in tasks]
    common: list[str] = []
    for words in zip(*parts, strict=False):
        if len(set(words)) != 1:
            break
        common.append(words[0])
    return "_".join(common)


@dataclass
class SamplesFollower:
    """Follows one samples file as the harness appends to it: the results of the lines
    completed since the last call, each once.

    ``offset``, ``lineno``, ``metric`` and ``filter`` are the whole state: a follower rebuilt
    from them (``watch`` keeps them in its state file) goes on where the last one stopped, with
    the same metric and filter. A line without its newline yet is left for the next call.
    ``task_name`` keeps the task the first lines were read as when the file has been renamed
    since (its new name may spell another task, and the rest of it must be the same items).
    """

    path: Path
    model: str
    benchmark: str | None = None
    offset: int = 0
    lineno: int = 0
    metric: str | None = None
    filter: str | None = None
    filters: dict[str, None] = field(default_factory=dict)  # seen by this follower
    passed_over: dict[str, int] = field(default_factory=dict)  # lines not scored, by why
    task_name: str | None = None

    @property
    def task(self) -> str:
        return self.task_name or task_of(self.path)

    def read_new(self, max_lines: int | None = None, *, finished: bool = False,
                 digest: Any = None) -> list[tuple[dict[str, object], str]]:
        """(result, ``file:line``) of every complete new scored line; advances the state.

        With ``max_lines``, at most that many lines are read (memory stays bounded on a large
        file): call again until :attr:`offset` stops moving to read the rest. ``finished``
        says the file is complete, so a last line without its newline is read too (``post``);
        otherwise it waits for the rest of the line (``watch``). ``digest`` (a hashlib object)
        is updated with every byte consumed, as it was read (``watch`` keeps a fingerprint of
        what it posted).
        """
        if max_lines is not None and max_lines < 1:
            raise ValueError(f"`max_lines` must be at least 1, got {max_lines}")
        task = self.task
        bench = self.benchmark or task
        cluster = task if namespaced(task, self.benchmark) else None
        parser = SamplesParser(str(self.path), metric=self.metric, filter=self.filter)
        out: list[tuple[dict[str, object], str]] = []
        offset, lineno = self.offset, self.lineno
        try:
            with self.path.open("rb") as fh:
                fh.seek(offset)
                while max_lines is None or lineno - self.lineno < max_lines:
                    raw = fh.readline()
                    if not raw or not (raw.endswith(b"\n") or finished):
                        break  # end of file, or a line still being written
                    offset += len(raw)
                    lineno += 1
                    if digest is not None:
                        digest.update(raw)
                    parsed = parser.parse(raw, lineno)
                    if parsed is None:
                        continue
                    doc_id, score = parsed
                    event: dict[str, object] = {
                        "benchmark": bench, "model": self.model, "score": score,
                        "item_id": item_id_of(task, doc_id, benchmark=self.benchmark)}
                    if cluster is not None:
                        event["cluster"] = cluster
                    out.append((event, f"{self.path}:{lineno}"))
        except OSError as exc:
            raise InputError(f"cannot read ({exc.strerror})", source=str(self.path)) from exc
        self.offset, self.lineno = offset, lineno
        self.metric, self.filter = parser.metric, parser.filter
        self.filters.update(parser.filters)
        for why, n in parser.passed_over.items():
            self.passed_over[why] = self.passed_over.get(why, 0) + n
        return out
