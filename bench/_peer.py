"""The naive per-event pairing step shared by the core and ingest benchmarks' peers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench._pair_state import PairState


def pair_with_partners(
    pairs: dict[tuple[str, str], PairState],
    row: dict[str, float],
    model: str,
    score: float,
    group: str | None,
) -> list[tuple[str, str]]:
    """Update the ``PairState`` of ``model``'s new score with every partner already in ``row``.

    ``row`` maps the models that already have the item to their scores; pairs are keyed
    ``(a, b)`` with ``a < b``. Returns the keys of the pairs updated.
    """
    touched = []
    for other, s in row.items():
        a, b = (model, other) if model < other else (other, model)
        xa, xb = (score, s) if a == model else (s, score)
        st = pairs.get((a, b))
        if st is None:
            st = pairs[(a, b)] = PairState()
        st.update(xa, xb, group)
        touched.append((a, b))
    return touched


def results_db(path: Path) -> sqlite3.Connection:
    """A durable results table (WAL, synchronous=FULL), as the embedded runner keeps it."""
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE results (benchmark TEXT, item_id TEXT, model TEXT, score REAL,"
               " cluster TEXT)")
    return db
