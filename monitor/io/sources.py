"""One reader for every kind of result file: tables, lm-eval samples and inspect_ai logs.

``report`` and ``compare`` take any of them, or a directory: the harness output directory of
one or several runs, whose ``samples_*.jsonl`` files (lm-evaluation-harness) or ``.eval``
logs (inspect_ai) are read together as one score table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monitor.errors import ConfigError, InputError
from monitor.io.inspect import inspect_table, is_inspect_log
from monitor.io.lmeval import looks_like_samples, samples_table
from monitor.io.tables import ScoreTable, read_table


def harness_files(path: Path) -> tuple[list[Path], list[Path]]:
    """(lm-eval samples files, inspect_ai logs) at ``path``: the file itself, or every one
    under the directory, in name order."""
    if path.is_dir():
        samples = sorted(p for p in path.rglob("samples_*.jsonl") if p.is_file())
        logs = sorted(p for p in path.rglob("*.eval") if p.is_file())
        logs += sorted(p for p in path.rglob("*.json") if is_inspect_log(p))
        return samples, logs
    if looks_like_samples(path):
        return [path], []
    if is_inspect_log(path):
        return [], [path]
    return [], []


def is_harness_source(path: Path) -> bool:
    """True for an lm-eval samples file, an inspect_ai log, or a directory of either."""
    samples, logs = harness_files(path)
    return bool(samples or logs)


def read_scores(path: Path, *, benchmark: str | None = None, model: str | None = None,
                metric: str | None = None, filter: str | None = None,
                scorer: str | None = None, **table_options: Any) -> ScoreTable:
    """The score table of ``path``: harness output (see :func:`harness_files`) or a table
    (``table_options`` go to :func:`~monitor.io.tables.read_table`). Of the table options,
    ``cluster_col`` and ``strata_col`` name a sample metadata field of inspect_ai logs and are
    refused for lm-eval samples files; the others concern tables only."""
    if not path.exists():
        raise InputError("no such file or directory", source=str(path))
    samples, logs = harness_files(path)
    if samples and logs:
        raise InputError("holds both lm-eval samples files and inspect_ai logs; "
                         "give one kind", source=str(path))
    cluster_col = table_options.get("cluster_col")
    strata_col = table_options.get("strata_col")
    if samples:
        if cluster_col is not None or strata_col is not None:
            # Refused rather than ignored: the report would say "no groups" as if asked for none.
            raise ConfigError(
                f"--{'cluster' if cluster_col is not None else 'strata'}-col: lm-eval samples "
                "files have no item column to group by; the subtasks of a group are its "
                "clusters (read the group's directory, or pass --benchmark with its files)")
        return samples_table(samples, benchmark=benchmark, model=model, metric=metric,
                             filter=filter)
    if logs:
        # inspect_ai logs: the groups are a sample metadata field of that name.
        return inspect_table(logs, benchmark=benchmark, model=model, scorer=scorer,
                             cluster_col=cluster_col, strata_col=strata_col)
    if path.is_dir():
        raise InputError("no samples_*.jsonl or inspect_ai logs in this directory",
                         source=str(path))
    return read_table(path, benchmark=benchmark, **table_options)
