"""The leakage driver on a corpus with planted items: exact and MinHash scans, progress."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.audit import leakage as lk
from monitor.audit.synthetic import PlantedCorpus, planted_corpus
from monitor.offline.leakage import scan_files
from monitor.offline.progress import Tick


@pytest.fixture(scope="module")
def planted() -> PlantedCorpus:
    return planted_corpus(n_items=50, n_docs=300, n_planted=3, rng=np.random.default_rng(6))


def _files(tmp_path: Path, pc: PlantedCorpus) -> tuple[Path, Path]:
    ev, co = tmp_path / "eval.jsonl", tmp_path / "corpus.jsonl"
    ev.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in pc.items))
    co.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in pc.corpus))
    return ev, co


def test_exact_scan_finds_the_planted_items(tmp_path: Path, planted: PlantedCorpus) -> None:
    ev, co = _files(tmp_path, planted)
    started: list[tuple[str, int]] = []
    done: dict[str, int] = {}

    def start(label: str, total: int) -> Tick:
        started.append((label, total))
        done[label] = 0
        return lambda k: done.__setitem__(label, done[label] + k)

    rep = scan_files(ev, co, n=8, progress=start)
    leaked = {m.item_id: m.best_doc for m in rep.matches if m.status == "leak"}
    assert leaked == planted.planted
    assert rep.method == "exact" and rep.n == 8 and rep.n_docs == 300
    assert started == [("indexing corpus", 300), ("scanning eval items", 50)]
    assert done == {"indexing corpus": 300, "scanning eval items": 50}
    # The same as the audit engine called on the texts directly.
    index = lk.build_index([t for _, t in planted.corpus],
                           doc_ids=[d for d, _ in planted.corpus], n=8)
    assert rep == lk.scan(index, planted.items)


@pytest.mark.slow
def test_minhash_scan_finds_the_verbatim_copies(tmp_path: Path,
                                                planted: PlantedCorpus) -> None:
    ev, co = _files(tmp_path, planted)
    rep = scan_files(ev, co, n=8, minhash=True)
    leaked = {m.item_id for m in rep.matches if m.status == "leak"}
    # Approximate: every verbatim copy, and nothing that was not planted.
    assert set(planted.planted) - planted.edited <= leaked <= set(planted.planted)
    assert rep.method != "exact"
    assert rep == lk.scan_minhash(planted.corpus, planted.items, n=8)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n": 7}, "must be 5, 8 or 13"),
    ({"threshold_review": 0.9, "threshold_leak": 0.5}, "threshold_review"),
])
def test_bad_settings(tmp_path: Path, planted: PlantedCorpus, kwargs: dict[str, float],
                      message: str) -> None:
    ev, co = _files(tmp_path, planted)
    with pytest.raises(ValueError, match=message):
        scan_files(ev, co, **kwargs)  # type: ignore[arg-type]
