"""``llm-monitor leakage``: word n-gram overlap of eval items against a training corpus."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from monitor.commands._output import emit, progress_tasks

if TYPE_CHECKING:
    from rich.console import Console

    from monitor.audit import leakage as lk


def write_csv(report: lk.LeakageReport, path: str | Path) -> None:
    """One row per eval item: item_id, best_doc, shared, n_ngrams, containment, jaccard, status."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "best_doc", "shared_ngrams", "item_ngrams", "containment",
                    "jaccard", "status"])
        for m in report.matches:
            w.writerow([m.item_id, m.best_doc or "", m.shared, m.n_ngrams,
                        f"{m.containment:.6f}", f"{m.jaccard:.6f}", m.status])


def _human(report: lk.LeakageReport, data: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        c = report.counts()
        console.print(
            f"[bold]leakage[/bold] ({report.method}, {report.n}-grams, review ≥ "
            f"{report.threshold_review}, leak ≥ {report.threshold_leak} containment): "
            f"{len(report.matches)} items vs {report.n_docs} documents — "
            f"leak {c['leak']}, review {c['review']}, clean {c['clean']}, "
            f"too short {c['too-short']}"
        )
        flagged = report.flagged()
        if flagged:
            from rich.table import Table

            table = Table(title="flagged items (highest containment first)")
            for col in ("item", "best document", "shared", "containment", "jaccard", "status"):
                table.add_column(col)
            for m in flagged[:25]:
                table.add_row(m.item_id, str(m.best_doc), f"{m.shared}/{m.n_ngrams}",
                              f"{m.containment:.3f}", f"{m.jaccard:.3f}", m.status)
            console.print(table)
            if len(flagged) > 25:
                console.print(f"… {len(flagged) - 25} more (use --out or --json)")
        for note in report.notes:
            console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
        console.print(
            "Containment is the share of an item's word n-grams found verbatim in one "
            "document: a high value means the text (not necessarily the answer) was in the "
            "corpus; a low value does not rule out paraphrased or translated contamination."
        )

    return render


def register(app: typer.Typer) -> None:
    @app.command("leakage")
    def leakage_cmd(
        eval_path: Annotated[Path, typer.Argument(help="eval items: CSV/TSV/JSONL or .txt dir")],
        corpus_path: Annotated[Path, typer.Argument(help="corpus: CSV/TSV/JSONL or .txt dir")],
        n: Annotated[int, typer.Option("--n", help="word n-gram length (5, 8 or 13)")] = 13,
        threshold_review: Annotated[float, typer.Option(
            "--threshold-review", help="containment from which an item needs review")] = 0.3,
        threshold_leak: Annotated[float, typer.Option(
            "--threshold-leak", help="containment from which an item counts as leaked")] = 0.5,
        minhash: Annotated[bool, typer.Option(
            "--minhash", help="approximate MinHash LSH Ensemble scan for huge corpora")] = False,
        text_col: Annotated[str | None, typer.Option(
            "--text-col", help="text column/field of the eval file")] = None,
        id_col: Annotated[str | None, typer.Option(
            "--id-col", help="id column/field of the eval file")] = None,
        corpus_text_col: Annotated[str | None, typer.Option(
            "--corpus-text-col", help="text column/field of the corpus file")] = None,
        corpus_id_col: Annotated[str | None, typer.Option(
            "--corpus-id-col", help="id column/field of the corpus file (default: id, "
            "item_id, question_id or doc_id; without one, documents are named 'line N')")]
            = None,
        out: Annotated[Path | None, typer.Option("--out", help="write per-item CSV here")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    ) -> None:
        """Per eval item, the best-matching corpus document, Jaccard, containment and a status."""
        from monitor.offline.leakage import scan_files

        with progress_tasks() as tasks:
            report = scan_files(eval_path, corpus_path, n=n, threshold_review=threshold_review,
                                threshold_leak=threshold_leak, minhash=minhash,
                                text_col=text_col, id_col=id_col,
                                corpus_text_col=corpus_text_col,
                                corpus_id_col=corpus_id_col, progress=tasks)
        if out is not None:
            write_csv(report, out)
        data = report.to_dict(items=True)
        emit(data, as_json=as_json, human=_human(report, data))
