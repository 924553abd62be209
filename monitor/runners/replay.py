"""Replay of finished result files into a live monitor: tables and lm-eval-harness samples.

Every file becomes a block (items × models score matrix); the events of all blocks form one
stream of (item, model) results, in file order or — with a seed — in a seeded random order of
the items, each item's results together, models left to right: the order in which
``llm-monitor report --seed S`` replays a table (:func:`monitor.offline.replay.replay_arrival`),
so that a shuffled live replay and the report take the same decisions. The anytime-valid
guarantees assume that the order in which items arrive does not depend on their outcomes;
files are often sorted by subject or difficulty, so shuffling restores that.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor.contracts import ItemResult
from monitor.errors import InputError
from monitor.io.lmeval import looks_like_samples, read_lmeval_samples

_TABLE_SUFFIXES = re.compile(r"(\.(csv|tsv|jsonl|json|ndjson))?(\.gz)?$", re.IGNORECASE)
_LAYOUT_SUFFIX = re.compile(r"_(item_correctness_)?(wide|long)$")


@dataclass(frozen=True)
class Block:
    """One file's results: a dense matrix with NaN where a model has no result."""

    source: str
    benchmark: str
    item_ids: np.ndarray
    models: tuple[str, ...]
    scores: np.ndarray
    clusters: np.ndarray | None
    repeats: np.ndarray | None = None  # (items × models × K) samples of a repeated-sample table


def benchmark_from_path(path: Path) -> str:
    """A benchmark name from a table file name: ``mmlu_pro_item_correctness_wide.csv`` → ``mmlu_pro``."""
    stem = _TABLE_SUFFIXES.sub("", path.name)
    return _LAYOUT_SUFFIX.sub("", stem) or stem


def load_blocks(
    paths: Sequence[Path],
    *,
    benchmark: str | None = None,
    model: str | None = None,
    metric: str | None = None,
    exclude: Sequence[str] = (),
    cluster_col: str | None = None,
    filter: str | None = None,
) -> list[Block]:
    """Read every replay file: lm-eval samples (``samples_*.jsonl``) or long/wide tables.

    lm-eval files of a group (``benchmark`` other than their task) get item ids namespaced by
    the task and the task as cluster, so the subtasks' colliding doc_ids stay distinct items.
    """
    blocks: list[Block] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError("no such file", source=str(path))
        if looks_like_samples(path):
            s = read_lmeval_samples(path, model=model, metric=metric, filter=filter,
                                    benchmark=benchmark)
            blocks.append(Block(
                source=s.source, benchmark=benchmark or s.task, item_ids=s.item_ids,
                models=(s.model,), scores=s.scores.reshape(-1, 1),
                clusters=(np.full(len(s), s.cluster, dtype=object)
                          if s.cluster is not None else None),
            ))
            continue
        from monitor.io.tables import read_table

        t = read_table(path, cluster_col=cluster_col, exclude=tuple(exclude), benchmark=benchmark)
        blocks.append(Block(
            source=t.source, benchmark=benchmark or t.benchmark or benchmark_from_path(path),
            item_ids=np.asarray(t.item_ids, dtype=object), models=tuple(t.models),
            scores=np.asarray(t.scores, dtype=np.float64),
            clusters=(np.asarray(t.groups, dtype=object)
                      if t.groups is not None and t.group_kind == "cluster" else None),
            repeats=t.repeats,
        ))
    return blocks


class ReplayStream:
    """The (item, model) results of some blocks, in file order or a seeded order of items.

    File order: block after block, item by item, models left to right (a repeated-sample
    table: each cell's samples together). With ``seed``: the items of each benchmark in the
    permutation ``numpy.random.default_rng(seed).permutation(items)`` — its items numbered in
    order of first appearance over its blocks — each item's results together as in file
    order; several benchmarks' streams are interleaved evenly (each keeps its own order).
    """

    def __init__(self, blocks: Sequence[Block], *, seed: int | None = None) -> None:
        self.blocks = list(blocks)
        parts_b, parts_i, parts_m, parts_s, parts_g = [], [], [], [], []
        # Each benchmark's items, numbered in order of first appearance over its blocks.
        items: dict[str, dict[str, int]] = {}
        for b, block in enumerate(self.blocks):
            if block.repeats is not None:  # each sample its own event, a cell's together
                rows, cols, ks = np.nonzero(~np.isnan(block.repeats))
            else:
                rows, cols = np.nonzero(~np.isnan(block.scores))  # row-major: item by item
                ks = np.zeros(rows.shape, dtype=np.int64)
            number = items.setdefault(block.benchmark, {})
            ids = [number.setdefault(str(i), len(number)) for i in block.item_ids.tolist()]
            parts_b.append(np.full(rows.shape, b, dtype=np.int32))
            parts_i.append(rows.astype(np.int64))
            parts_m.append(cols.astype(np.int32))
            parts_s.append(ks.astype(np.int32))
            parts_g.append(np.asarray(ids, dtype=np.int64)[rows] if rows.size
                           else np.zeros(0, np.int64))
        self._b = np.concatenate(parts_b) if parts_b else np.zeros(0, np.int32)
        self._i = np.concatenate(parts_i) if parts_i else np.zeros(0, np.int64)
        self._m = np.concatenate(parts_m) if parts_m else np.zeros(0, np.int32)
        self._s = np.concatenate(parts_s) if parts_s else np.zeros(0, np.int32)
        if seed is not None and self._b.size:
            item = np.concatenate(parts_g)
            bench_of = np.array([list(items).index(blk.benchmark) for blk in self.blocks],
                                dtype=np.int64)[self._b]
            rank = np.zeros(item.size, dtype=np.float64)
            for j, number in enumerate(items.values()):
                here = bench_of == j
                # The report's permutation of this benchmark's items: item perm[r] comes r-th.
                perm = np.random.default_rng(seed).permutation(len(number))
                position = np.empty(len(number), dtype=np.int64)
                position[perm] = np.arange(len(number))
                pos = position[item[here]]
                # Events in item order (stable: an item's results keep their file order),
                # then spread over [0, 1) so that the benchmarks' streams interleave evenly.
                rank[here] = pos / max(len(number), 1)
            order = np.lexsort((np.arange(item.size), rank))
            self._b, self._i, self._m = self._b[order], self._i[order], self._m[order]
            self._s = self._s[order]

    def __len__(self) -> int:
        return int(self._b.shape[0])

    def events(self, start: int, stop: int) -> list[ItemResult]:
        """Events ``start:stop`` of the stream as validated ItemResults."""
        out: list[ItemResult] = []
        for b, i, m, k in zip(self._b[start:stop].tolist(), self._i[start:stop].tolist(),
                              self._m[start:stop].tolist(), self._s[start:stop].tolist(),
                              strict=True):
            block = self.blocks[b]
            cluster = block.clusters[i] if block.clusters is not None else None
            score = block.scores[i, m] if block.repeats is None else block.repeats[i, m, k]
            out.append(ItemResult(
                benchmark=block.benchmark, item_id=str(block.item_ids[i]),
                model=block.models[m], score=float(score), sample=k,
                # a table of K samples per cell declares its benchmark's K
                k=None if block.repeats is None else int(block.repeats.shape[2]),
                cluster=None if cluster is None else str(cluster),
            ))
        return out

    def batches(self, size: int, *, start: int = 0) -> Iterator[list[ItemResult]]:
        for lo in range(start, len(self), size):
            yield self.events(lo, min(lo + size, len(self)))
