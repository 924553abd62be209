"""Scanning eval items against a training corpus from files: read both, index, scan."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from monitor.audit import leakage as lk
from monitor.audit.textio import read_texts
from monitor.offline.progress import StartTask, no_progress

NGRAM_SIZES = (5, 8, 13)


def scan_files(
    eval_path: str | Path,
    corpus_path: str | Path,
    *,
    n: int = 13,
    threshold_review: float = 0.3,
    threshold_leak: float = 0.5,
    minhash: bool = False,
    text_col: str | None = None,
    id_col: str | None = None,
    corpus_text_col: str | None = None,
    corpus_id_col: str | None = None,
    progress: StartTask | None = None,
) -> lk.LeakageReport:
    """Word n-gram containment of every eval item in its best-matching corpus document.

    The exact scan indexes the corpus and then scans the items; ``minhash`` sketches the
    corpus and queries an LSH Ensemble instead (approximate, for huge corpora). Ids come from
    ``id_col`` / ``corpus_id_col`` or a recognised column (``id``, ``item_id``,
    ``question_id``, ``doc_id``); where a file has none, the report's notes say that its
    texts are named by line.
    """
    if n not in NGRAM_SIZES:
        raise ValueError(f"`--n` must be 5, 8 or 13, got {n}")
    lk.check_thresholds(threshold_review, threshold_leak)
    items = read_texts(eval_path, text_col=text_col, id_col=id_col)
    corpus = read_texts(corpus_path, text_col=corpus_text_col, id_col=corpus_id_col)
    notes = tuple(note for note in (items.id_note("eval file", "--id-col"),
                                    corpus.id_note("corpus", "--corpus-id-col")) if note)
    task = progress or no_progress
    pairs = [(r.id, r.text) for r in items]
    if minhash:
        tick = task("sketching corpus + scanning", len(corpus) + len(items))
        report = lk.scan_minhash([(r.id, r.text) for r in corpus], pairs, n=n,
                                 threshold_review=threshold_review,
                                 threshold_leak=threshold_leak, progress=tick)
        return replace(report, notes=notes)
    tick = task("indexing corpus", len(corpus))
    index = lk.build_index([r.text for r in corpus], doc_ids=[r.id for r in corpus], n=n,
                           progress=tick)
    tick = task("scanning eval items", len(items))
    report = lk.scan(index, pairs, threshold_review=threshold_review,
                     threshold_leak=threshold_leak, progress=tick)
    return replace(report, notes=notes)
