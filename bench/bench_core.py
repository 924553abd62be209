"""Monitor core: fold a shuffled stream of real MMLU-Pro results (20 models) into pair state.

Ours: ``Monitor.apply`` in batches — dense items × models matrix, pair sums updated on the
new results' rows and columns, dedup/conflict checks — with verdicts evaluated every
``EVAL_EVERY`` results and once at the end. Peer: the straightforward per-event design, a
Python loop that pairs each new result with every model that already has the item and calls
``bench._pair_state.PairState.update`` on each of those pairs. Both see the same events
in the same order; the final n, ΣD and ΣD² of every pair are checked equal.
Run: ``.venv/bin/python -m bench.bench_core``.
"""

from __future__ import annotations

import csv
import time
from itertools import combinations
from pathlib import Path

import numpy as np

from bench._pair_state import PairState
from bench._record import record
from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor

from ._peer import pair_with_partners

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MODELS = 20
BATCH = 1000
EVAL_EVERY = 20_000


def load(seed: int = 1) -> list[ItemResult]:
    """The wide MMLU-Pro table as a shuffled stream of ItemResults (first 20 model columns)."""
    with open(DATA / "mmlu_pro_item_correctness_wide.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    models = [c for c in rows[0] if c not in ("question_id", "category", "src")][:MODELS]
    events = [
        ItemResult(benchmark="mmlu_pro", item_id=r["question_id"], model=m, score=float(r[m]),
                   cluster=r["category"])
        for r in rows for m in models if r[m] not in ("", "NA")
    ]
    order = np.random.default_rng(seed).permutation(len(events))
    return [events[i] for i in order]


def ours(events: list[ItemResult]) -> tuple[float, Monitor, int]:
    mon = Monitor(CoreConfig())
    changes = 0
    since = 0
    t0 = time.perf_counter()
    for j in range(0, len(events), BATCH):
        batch = events[j:j + BATCH]
        since += len(batch)
        due = since >= EVAL_EVERY
        changes += len(mon.apply(batch, evaluate=due).changes)
        if due:
            since = 0
    changes += len(mon.evaluate())
    return time.perf_counter() - t0, mon, changes


def peer(events: list[ItemResult]) -> tuple[float, dict[tuple[str, str], PairState]]:
    seen: dict[str, dict[str, float]] = {}
    cluster: dict[str, str | None] = {}
    states: dict[tuple[str, str], PairState] = {}
    t0 = time.perf_counter()
    for ev in events:
        cell = seen.setdefault(ev.item_id, {})
        if ev.model in cell:
            continue
        g = cluster.setdefault(ev.item_id, ev.cluster)
        pair_with_partners(states, cell, ev.model, ev.score, g)
        cell[ev.model] = ev.score
    return time.perf_counter() - t0, states


def main() -> None:
    events = load()
    # The kernel imports scipy.stats on first use; import it outside the clock, as the
    # peer's statistics modules are imported before its loop.
    import scipy.stats  # noqa: F401

    t_ours, mon, changes = ours(events)
    t_peer, states = peer(events)
    table = mon.table("mmlu_pro")
    assert table is not None
    idx = {m: i for i, m in enumerate(table.models)}
    for a, b in combinations(sorted(idx), 2):
        st = states.get((a, b))
        n = st.n if st is not None else 0
        i, j = idx[a], idx[b]
        assert table.n[i, j] == n, (a, b)
        if st is not None:
            assert abs(table.s[i, j] - st.s) < 1e-9 and abs(table.v[i, j] - st.v) < 1e-9
    rate_ours = len(events) / t_ours
    rate_peer = len(events) / t_peer
    print(f"stream: {len(events)} MMLU-Pro results, {MODELS} models, shuffled, batch={BATCH}")
    print(f"ours (Monitor.apply, row/column pair sums, evaluate every {EVAL_EVERY}): "
          f"{t_ours:.2f} s  ({rate_ours:,.0f} results/s, {changes} change events)")
    print(f"peer (per-event loop over partner pairs, PairState.update): "
          f"{t_peer:.2f} s  ({rate_peer:,.0f} results/s)")
    print(f"ratio ours/peer throughput: {rate_ours / rate_peer:.1f}x; "
          f"n, ΣD, ΣD² of all {len(idx) * (len(idx) - 1) // 2} pairs agree")
    record(f"live core, MMLU-Pro, {MODELS} models, shuffled", goal="faster than a per-pair "
           "running state, the same sums", figure=f"{rate_ours:,.0f} results/s",
           peer=f"{rate_ours / rate_peer:.1f}× a per-event loop over partner pairs",
           met=rate_ours > rate_peer, command="python -m bench.bench_core")


if __name__ == "__main__":
    main()
