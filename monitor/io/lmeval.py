"""Reader of lm-evaluation-harness ``--log_samples`` output (``samples_<task>_<timestamp>.jsonl``).

Mapping to llm-monitor results (documented in docs/live.md):

- benchmark = the task, from the file name ``samples_<task>_<timestamp>.jsonl`` (the timestamp
  ``2024-05-13T12-34-56.123456`` is optional, as in older harness versions);
- model = the ``model`` argument when given, else the name of the parent directory, where the
  harness writes ``<output_path>/<org>__<name>/``; ``__`` becomes ``/`` again;
- item_id = ``doc_id`` (as a string);
- score = the per-sample metric: ``metric`` when given, else the first of the line's
  ``metrics`` list (harness ≥ 0.4.3 writes it), else the first present of
  acc, exact_match, acc_norm, pass@1, em, f1. It must be a number in [0, 1] (booleans count 0/1);
- tasks with several filters (e.g. gsm8k's ``strict-match`` and ``flexible-extract``) log one
  line per (doc, filter): ``filter`` selects one, by default the first seen in the file.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor.errors import InputError

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

    def __len__(self) -> int:
        return int(self.scores.shape[0])


def is_samples_file(path: Path | str) -> bool:
    """True when the file name follows the harness pattern ``samples_<task>[_<ts>].jsonl``."""
    return _NAME.match(Path(path).name) is not None


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


def read_lmeval_samples(
    path: Path | str,
    *,
    model: str | None = None,
    metric: str | None = None,
    filter: str | None = None,
) -> LmEvalSamples:
    """Read one ``samples_<task>_<timestamp>.jsonl`` file; see the module docstring for the mapping.

    Raises :class:`InputError` naming the file, line and field on malformed lines, duplicate
    ``doc_id`` values, missing metrics or scores outside [0, 1].
    """
    path = Path(path)
    source = str(path)
    task, _ = parse_samples_name(path.name)
    model_name = model if model else model_from_dir(path)
    if not model_name:
        raise InputError("cannot tell the model: pass --model", source=source)
    ids: list[str] = []
    scores: list[float] = []
    seen: set[str] = set()
    chosen_metric = metric
    chosen_filter = filter
    try:
        handle = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", source=source) from exc
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON ({exc.msg})", source=source, line=lineno) from None
            if not isinstance(rec, dict):
                raise InputError("expected a JSON object", source=source, line=lineno)
            if "doc_id" not in rec:
                raise InputError("missing", source=source, line=lineno, field="doc_id")
            line_filter = rec.get("filter")
            if chosen_filter is None:
                chosen_filter = line_filter
            if line_filter is not None and line_filter != chosen_filter:
                continue
            if chosen_metric is None:
                listed = [m for m in rec.get("metrics") or [] if m in rec]
                candidates = listed or [m for m in _PREFERRED_METRICS if m in rec]
                if not candidates:
                    raise InputError("no per-sample metric found (pass --metric)",
                                     source=source, line=lineno)
                chosen_metric = candidates[0]
            if chosen_metric not in rec:
                raise InputError("missing", source=source, line=lineno, field=chosen_metric)
            doc_id = str(rec["doc_id"])
            if doc_id in seen:
                raise InputError(f"duplicate doc_id {doc_id!r}", source=source, line=lineno,
                                 field="doc_id")
            seen.add(doc_id)
            ids.append(doc_id)
            scores.append(_score(rec[chosen_metric], source=source, line=lineno,
                                 field=chosen_metric))
    if not ids:
        raise InputError("no samples", source=source)
    return LmEvalSamples(
        source=source, task=task, model=model_name, metric=str(chosen_metric),
        filter=chosen_filter, item_ids=np.asarray(ids, dtype=object),
        scores=np.asarray(scores, dtype=np.float64),
    )
