"""Ids of eval items and corpus documents: recognised columns (doc_id among them), the
--corpus-id-col choice, and line numbers only ever said out loud, never substituted silently."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from monitor.audit.synthetic import planted_corpus
from monitor.audit.textio import read_texts
from monitor.cli import main
from monitor.errors import InputError
from monitor.offline.leakage import scan_files


def _files(tmp_path: Path, corpus_header: list[str]) -> tuple[Path, Path, dict[str, str]]:
    """Eval items (JSONL with ids) and a CSV corpus with the given header (text last)."""
    pc = planted_corpus(n_items=30, n_docs=120, n_planted=3, rng=np.random.default_rng(4))
    ev = tmp_path / "eval.jsonl"
    ev.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in pc.items))
    co = tmp_path / "corpus.csv"
    with co.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(corpus_header)
        for k, (d, t) in enumerate(pc.corpus):
            w.writerow([*([d, f"src-{k}"] if len(corpus_header) == 3 else []), t])
    return ev, co, pc.planted


def test_a_doc_id_column_names_the_documents(tmp_path: Path) -> None:
    ev, co, planted = _files(tmp_path, ["doc_id", "source", "text"])
    report = scan_files(ev, co, n=8)
    leaked = {m.item_id: m.best_doc for m in report.matches if m.status == "leak"}
    assert leaked == {i: planted[i] for i in leaked} and len(leaked) >= 2
    assert report.notes == ()
    # --corpus-id-col picks another column.
    other = scan_files(ev, co, n=8, corpus_id_col="source")
    assert all((m.best_doc or "").startswith("src-") for m in other.matches if m.status == "leak")


def test_without_an_id_column_the_report_says_the_ids_are_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev, co, _ = _files(tmp_path, ["text"])
    texts = read_texts(co)
    assert texts.id_source == "line numbers" and texts.records[0].id == "line 2"
    report = scan_files(ev, co, n=8)
    assert all(m.best_doc.startswith("line ") for m in report.matches if m.best_doc)
    assert len(report.notes) == 1 and "--corpus-id-col" in report.notes[0]
    assert main(["leakage", str(ev), str(co), "--n", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == list(report.notes)
    assert main(["leakage", str(ev), str(co), "--n", "8"]) == 0
    assert "note: corpus" in capsys.readouterr().out


def test_a_record_without_the_id_field_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"doc_id": "d1", "text": "a b c"}) + "\n"
                    + json.dumps({"text": "d e f"}) + "\n")
    with pytest.raises(InputError, match=r"line 2, field 'doc_id': id field missing"):
        read_texts(path)
