"""Reader of inspect_ai evaluation logs (``.eval``, or ``.json`` written by inspect_ai).

The logs are read with inspect_ai's own reader (the optional ``inspect`` extra:
``pip install 'llm-monitor[inspect]'``). Mapping to llm-monitor results (docs/feeding.md):

- benchmark = the log's task (``eval.task``), unless given;
- model = the log's model (``eval.model``, e.g. ``openai/gpt-4o``), unless given;
- item_id = the sample's ``id`` (as a string); sample = its ``epoch`` − 1, so the epochs of a
  run with ``epochs > 1`` are repeated samples of the item;
- cluster (or stratum) = the sample's metadata field named by ``group_field`` (``--cluster-col``
  / ``--strata-col``), when given: a string, number or boolean, as text;
- score = the value of one scorer, ``scorer`` when given, else the log's first scorer (the
  first of ``results.scores``), turned into a number by inspect_ai's own ``value_to_float``
  (``C`` → 1, ``I`` → 0, ``P`` → 0.5, ``N`` → 0, booleans and numbers as they are). It must lie
  in [0, 1]. Samples that ended in an error carry no score and are left out, as inspect_ai
  leaves them out of its metrics.

With these choices the mean of a model's item scores (its epochs averaged first, inspect_ai's
default ``mean`` reducer) is the scorer's ``accuracy`` metric.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from monitor.errors import ConfigError, InputError

if TYPE_CHECKING:
    from monitor.io.tables import ScoreTable

# inspect_ai writes its JSON logs with these keys first.
_JSON_LOG_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')


@dataclass(frozen=True)
class InspectScores:
    """The per-sample scores of one inspect_ai log."""

    source: str
    task: str
    model: str
    scorer: str
    status: str
    item_ids: np.ndarray
    epochs: np.ndarray
    scores: np.ndarray
    #: The epochs the task was run with (K samples per item); 1 when the log does not say.
    k: int = 1
    groups: np.ndarray | None = None  # the ``group_field`` label of each sample
    errored: int = 0  # samples that ended in an error without a score (left out)

    def __len__(self) -> int:
        return int(self.scores.shape[0])

    def item_means(self) -> tuple[np.ndarray, np.ndarray]:
        """(item ids in first-seen order, the mean score of each item over its epochs, as
        :func:`~monitor.stats.samples.cell_means` gives it)."""
        from monitor.stats.samples import cell_means

        ids, first, inverse = np.unique(self.item_ids, return_index=True, return_inverse=True)
        y = np.full((len(ids), int(self.epochs.max(initial=1))), np.nan)
        y[inverse.reshape(-1), self.epochs - 1] = self.scores
        order = np.argsort(first, kind="stable")
        return ids[order], cell_means(y)[order]


def is_inspect_log(path: Path | str) -> bool:
    """True for a ``.eval`` file, or a ``.json`` file that starts the way inspect_ai writes logs."""
    path = Path(path)
    if path.suffix == ".eval":
        return True
    if path.suffix != ".json":
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(200)
    except OSError:
        return False
    return _JSON_LOG_HEAD.match(head) is not None


def _inspect_log_api() -> Any:
    try:
        import inspect_ai.log as log_api
    except ImportError:
        raise ConfigError("reading inspect_ai logs needs inspect_ai: "
                          "pip install 'llm-monitor[inspect]'") from None
    return log_api


def _group_label(s: Any, group_field: str, source: str) -> str:
    """The sample's metadata field ``group_field`` as a cluster label."""
    metadata = s.metadata or {}
    if group_field not in metadata:
        have = ", ".join(sorted(metadata)) or "none"
        raise InputError(f"sample {s.id!r} (epoch {s.epoch}) has no metadata field "
                         f"{group_field!r} (its fields: {have}; inspect_ai keeps only values "
                         "under 1 kB in a log's sample summaries)", source=source,
                         field=group_field)
    value = metadata[group_field]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value == "":
        raise InputError(f"sample {s.id!r}: metadata field {group_field!r} is {value!r}; a "
                         "cluster or stratum label must be a non-empty string or a number",
                         source=source, field=group_field)
    return str(value)


def read_inspect_log(path: Path | str, *, scorer: str | None = None,
                     group_field: str | None = None) -> InspectScores:
    """The per-sample scores of one log; see the module docstring for the mapping.

    ``group_field`` names the sample metadata field holding each sample's cluster or stratum.
    Raises :class:`InputError` naming the file (and the sample) when the log cannot be read,
    has no scorer, names no such scorer, a score is not a number in [0, 1], or a sample lacks
    the ``group_field``.
    """
    log_api = _inspect_log_api()
    from inspect_ai.scorer import value_to_float

    source = str(path)
    try:
        header = log_api.read_eval_log(source, header_only=True)
        summaries = log_api.read_eval_log_sample_summaries(source)
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except Exception as exc:  # inspect_ai raises its own and pydantic's errors
        raise InputError(f"not a readable inspect_ai log ({type(exc).__name__}: {exc})",
                         source=source) from None
    names = [s.name for s in (header.results.scores if header.results else [])]
    if scorer is None:
        if not names:  # a log still running has no results yet: take the samples' first
            names = [n for s in summaries for n in (s.scores or {})][:1]
        if not names:
            raise InputError("no scorer in the log (no scored samples yet?)", source=source)
        scorer = names[0]
    to_float = value_to_float()
    ids: list[str] = []
    epochs: list[int] = []
    scores: list[float] = []
    groups: list[str] = []
    errored = 0
    for s in summaries:
        if s.error is not None and not s.scores:
            errored += 1
            continue
        if not s.scores or scorer not in s.scores:
            raise InputError(f"sample {s.id!r} (epoch {s.epoch}) has no score of scorer "
                             f"{scorer!r} (scorers: {sorted(s.scores or {})}; pass --scorer)",
                             source=source)
        value = s.scores[scorer].value
        if isinstance(value, (dict, list)):
            raise InputError(f"scorer {scorer!r} gives several values per sample ({value!r}); "
                             "llm-monitor needs one score in [0, 1]", source=source)
        f = float(to_float(value))
        if not math.isfinite(f) or not 0.0 <= f <= 1.0:
            raise InputError(f"sample {s.id!r}: score {value!r} of scorer {scorer!r} is not "
                             "a number in [0, 1]", source=source)
        if group_field is not None:
            groups.append(_group_label(s, group_field, source))
        ids.append(str(s.id))
        epochs.append(int(s.epoch))
        scores.append(f)
    return InspectScores(
        source=source, task=str(header.eval.task), model=str(header.eval.model),
        scorer=scorer, status=str(header.status), item_ids=np.asarray(ids, dtype=object),
        epochs=np.asarray(epochs, dtype=np.int64), scores=np.asarray(scores, dtype=np.float64),
        k=max(int(header.eval.config.epochs or 1), max(epochs, default=1)),
        groups=None if group_field is None else np.asarray(groups, dtype=object),
        errored=errored)


#: Why a sample of a log was not sent (``passed_over`` key of post's account).
ERRORED = "inspect_ai sample ended in an error, no score"


def inspect_events(path: Path | str, *, benchmark: str | None = None, model: str | None = None,
                   scorer: str | None = None, cluster_field: str | None = None,
                   passed_over: MutableMapping[str, int] | None = None
                   ) -> Iterator[tuple[dict[str, Any], str]]:
    """(result, label) of every scored sample of a log, in the log's order; with
    ``cluster_field`` each result's cluster is that sample metadata field. Samples left out
    (an error, no score) are counted in ``passed_over``."""
    log = read_inspect_log(path, scorer=scorer, group_field=cluster_field)
    if passed_over is not None and log.errored:
        passed_over[ERRORED] = passed_over.get(ERRORED, 0) + log.errored
    bench = benchmark or log.task
    name = model or log.model
    groups = log.groups.tolist() if log.groups is not None else [None] * len(log)
    for item, epoch, score, group in zip(log.item_ids.tolist(), log.epochs.tolist(),
                                         log.scores.tolist(), groups, strict=True):
        # Each epoch is a sample of the item, and the log declares how many the benchmark
        # takes (k), so that a monitor holds it beside one-sample benchmarks.
        event: dict[str, Any] = {"benchmark": bench, "item_id": item, "model": name,
                                 "score": score, "sample": epoch - 1, "k": log.k}
        if group is not None:
            event["cluster"] = group
        yield event, f"{log.source}: sample {item}, epoch {epoch}"


def inspect_table(paths: list[Path], *, benchmark: str | None = None, model: str | None = None,
                  scorer: str | None = None, cluster_col: str | None = None,
                  strata_col: str | None = None) -> ScoreTable:
    """The logs of several models as one items × models table of item means over epochs.

    With several epochs the table also holds every epoch's score (``repeats``: the epochs are
    repeated samples), so ``report`` states the between-item / within-item split as the live
    monitor holds them (K samples per item); the means are :func:`~monitor.stats.samples.cell_means`
    of them, the live monitor's item means. ``cluster_col`` or ``strata_col`` names the sample
    metadata field that groups the items (sampled clusters or fixed strata); every sample of
    an item must carry the same label.
    """
    from monitor.io.tables import ScoreTable
    from monitor.stats.samples import cell_means, mean_variance

    if cluster_col is not None and strata_col is not None:
        raise ValueError("give `cluster_col` or `strata_col`, not both")
    group_field = cluster_col if cluster_col is not None else strata_col
    logs = [read_inspect_log(p, scorer=scorer, group_field=group_field) for p in paths]
    tasks = sorted({log.task for log in logs})
    if benchmark is None and len(tasks) > 1:  # post and watch would feed one board per task
        raise InputError(f"logs of several tasks ({', '.join(tasks)}): give the logs of one "
                         "task, or pass --benchmark to read them as one", source=str(paths[0]))
    item_index: dict[str, int] = {}
    model_index: dict[str, int] = {}
    group_of: dict[str, str] = {}
    for log in logs:
        model_index.setdefault(model or log.model, len(model_index))
        labels = log.groups.tolist() if log.groups is not None else [None] * len(log)
        for i, label in zip(log.item_ids.tolist(), labels, strict=True):
            item_index.setdefault(i, len(item_index))
            if label is not None and group_of.setdefault(i, label) != label:
                raise InputError(f"sample {i!r} has metadata {group_field}={label!r} here and "
                                 f"{group_of[i]!r} in an earlier log or epoch: an item belongs "
                                 "to one group", source=log.source, field=group_field)
    k = max((int(log.epochs.max()) for log in logs if len(log)), default=1)
    y = np.full((len(item_index), len(model_index), k), np.nan)
    for log in logs:
        col = model_index[model or log.model]
        rows = np.fromiter((item_index[i] for i in log.item_ids.tolist()), dtype=np.int64,
                           count=len(log))
        cells = y[rows, col, log.epochs - 1]
        if not np.all(np.isnan(cells)):
            raise InputError(f"model {model or log.model!r} has two logs with the same samples",
                             source=log.source)
        y[rows, col, log.epochs - 1] = log.scores
    repeated = k > 1
    grouped = group_field is not None
    return ScoreTable(source=", ".join(map(str, paths)), benchmark=benchmark or logs[0].task,
                      item_ids=np.asarray(list(item_index), dtype=str),
                      models=tuple(model_index), scores=cell_means(y),
                      groups=np.asarray([group_of[i] for i in item_index], dtype=str)
                      if grouped else None,
                      group_kind=("cluster" if cluster_col is not None else "strata")
                      if grouped else None,
                      group_col=group_field,
                      samples=(~np.isnan(y)).sum(axis=-1) if repeated else None,
                      mean_var=mean_variance(y) if repeated else None,
                      repeats=y if repeated else None)
