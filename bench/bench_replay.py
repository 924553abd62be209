"""The replay behind ``report``'s verdicts: every pair of the real MMLU-Pro table.

Ours: the decisions of ``monitor.offline.replay.anytime_replay`` (and, separately, the whole
replay with its final figures) on all 496 pairs of the 32 models (shuffled
items, seed 1): each pair's items in arrival order through ``stats.sequential.advance`` (the
live core's function), then the kernel's final figures. Peer: what a user would write from
the definition — per pair, the cumulative discordant counts along the replay order, the two
one-sided McNemar e-values at every item (``eprocess.log_e_mcnemar_sides``) and the first
item where one reaches 2/γ. The decisions (item and direction) are compared pair by pair.

Run: ``.venv/bin/python -m bench.bench_replay``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench._record import record
from monitor.io.tables import read_table
from monitor.offline.replay import _decide, anytime_replay
from monitor.stats import eprocess as ep
from monitor.stats import sequential as sq

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SEED = 1
REPEAT = 3


def peer(x: np.ndarray, a: np.ndarray, b: np.ndarray, log_thr: np.ndarray) -> list[int | None]:
    """Per pair: the first paired item (1-based) where a one-sided e-value reaches 2/γ."""
    out: list[int | None] = []
    for k in range(a.size):
        xa, xb = x[:, a[k]], x[:, b[k]]
        d = (xa - xb)[~np.isnan(xa) & ~np.isnan(xb)]
        plus, minus = ep.log_e_mcnemar_sides(np.cumsum(d > 0), np.cumsum(d < 0))
        hit = np.flatnonzero(np.maximum(plus, minus) >= log_thr[k] + np.log(2.0))
        out.append(int(hit[0]) + 1 if hit.size else None)
    return out


def main() -> None:
    # Its categories as fixed strata: the item-level decisions the peer takes (sampled
    # clusters would decide on the 14 categories instead).
    table = read_table(DATA / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                       strata_col="category")
    k = len(table.models)
    a, b = np.triu_indices(k, 1)
    anytime_replay(table, (a[:1], b[:1]), order="shuffle", seed=SEED)  # imports, tables
    decisions, ours = [], []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        _decide(table, (a, b), alpha=0.05, order="shuffle", seed=SEED, planned_models=32,
                rule="board")
        decisions.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rep = anytime_replay(table, (a, b), order="shuffle", seed=SEED, planned_models=32)
        ours.append(time.perf_counter() - t0)

    # The peer reads the same shuffled rows; every model of this table is present on the
    # first rows, so births follow the column order and the shares are the board's.
    x = table.scores[np.random.default_rng(SEED).permutation(table.scores.shape[0])]
    assert not np.isnan(x[0]).any()
    log_thr = sq.log_threshold(sq.pair_share(sq.pair_number(a, b), alpha=0.05,
                                             planned=sq.planned_pairs(32)))
    peers = []
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        want = peer(x, a, b, log_thr)
        peers.append(time.perf_counter() - t0)
    t_decide, t_ours, t_peer = min(decisions), min(ours), min(peers)
    assert list(rep.first_resolved_at) == want, "the replay and the peer disagree"

    print(f"pairs: {a.size} (MMLU-Pro, {k} models, {table.scores.shape[0]:,} items, "
          f"shuffled seed {SEED}); {sum(w is not None for w in want)} decided")
    print(f"ours  decisions (the replay's sequential pass, stats.sequential.advance): "
          f"{t_decide:.2f} s (best of {REPEAT})")
    print(f"ours  whole anytime_replay (decisions + final kernel figures with intervals): "
          f"{t_ours:.2f} s")
    print(f"peer  per-pair loop (cumulative one-sided McNemar e-values, first crossing): "
          f"{t_peer:.2f} s (best of {REPEAT})")
    print(f"ratio peer/ours on the decisions: {t_peer / t_decide:.1f}×; decisions identical "
          f"on all pairs")
    record("anytime replay of MMLU-Pro, all 496 pairs", goal="faster than a per-pair loop, "
           "the same decisions", figure=f"{t_decide:.2f} s decisions, {t_ours:.2f} s whole",
           peer=f"{t_peer / t_decide:.1f}× a per-pair first-crossing loop",
           met=t_peer > t_decide, command="python -m bench.bench_replay")


if __name__ == "__main__":
    main()
