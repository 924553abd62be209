"""Power of the live rule against the board size it is planned for, M₀ (``--planned-models``).

The guarantee holds for any M₀ (Σ γ_p = α however many models arrive); M₀ only moves power:
the first M₀(M₀ − 1)/2 pairs share α/2, so a small M₀ gives the first pairs a large share and
later blocks a small one. Measured here, every pair decided by the live core's own sequential
pass (``stats.sequential.advance``, through ``offline.replay``), α = 0.05:

* the real MMLU-Pro (32 models × 12,032 items) and GSM8K (42 × 1,319) tables, items shuffled
  (seeds 1–5), models born in column order: adjacent pairs of the final ranking and all pairs
  resolved at the end, and the median paired items to decision of the adjacent pairs that
  every M₀ decides (the same pairs in every row);
* three-model boards: the top 3 of each real table (shuffled, seeds 1–5; items to decision of
  each adjacent pair, median over seeds) and simulated 0/1 models at 0.75, 0.70 and 0.60 with
  phi correlation 0.5 (adjacent gaps of 5 and 10 points; 2,000 streams per pair: median and
  80 % point of the decision time, and ``power``'s N*_AV for it).

Run: ``.venv/bin/python -m bench.bench_planned_models`` (about a minute on one core).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from monitor.io.tables import ScoreTable, read_table
from monitor.offline.power import live_level, plan_power
from monitor.offline.replay import _decide
from monitor.stats import anytime_calibration as ac

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PLANNED = (4, 5, 6, 8, 16, 32, 64)
SEEDS = (1, 2, 3, 4, 5)
ALPHA = 0.05
SIM_MODELS = (0.75, 0.70, 0.60)
SIM_RHO = 0.5
SIM_STREAMS = 2000


def _ranking(table: ScoreTable) -> np.ndarray:
    """Columns by mean score over each model's items, best first (ties by column)."""
    means = np.nanmean(table.scores, axis=0)
    return np.lexsort((np.arange(means.size), -means))


def _replays(table: ScoreTable, sizes: tuple[int, ...]) -> dict[int, list[tuple[np.ndarray, np.ndarray]]]:
    """Per M₀, per seed: (decided, decided_n) of every pair (a < b by column)."""
    k = len(table.models)
    a, b = np.triu_indices(k, 1)
    out: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for m0 in sizes:
        runs = []
        for seed in SEEDS:
            paths, _, a_first, _ = _decide(table, (a, b), alpha=ALPHA, order="shuffle", seed=seed,
                                           planned_models=m0, rule="board")
            runs.append((paths.decided * np.where(a_first, 1, -1), paths.decided_n.copy()))
        out[m0] = runs
    return out


def _triu_index(k: int, x: int, y: int) -> int:
    """Position of the pair of columns {x, y} in ``np.triu_indices(k, 1)``."""
    lo, hi = min(x, y), max(x, y)
    return lo * (2 * k - lo - 1) // 2 + hi - lo - 1


def _spread(counts: list[int]) -> str:
    return f"{np.mean(counts):.1f} ({min(counts)}–{max(counts)})"


def board_rows(name: str, table: ScoreTable) -> None:
    k = len(table.models)
    a, _ = np.triu_indices(k, 1)
    order = _ranking(table)
    adjacent = np.array([_triu_index(k, int(order[r]), int(order[r + 1])) for r in range(k - 1)])
    sizes = (*PLANNED, k) if k not in PLANNED else PLANNED
    runs = _replays(table, sizes)
    # The pairs decided by every M₀ under every seed: the same pairs in every row.
    every_m0 = np.ones(a.size, dtype=bool)
    for m0 in sizes:
        for decided, _ in runs[m0]:
            every_m0 &= decided != 0
    common = every_m0[adjacent]
    ref = np.concatenate([n[every_m0] for _, n in runs[k]])
    print(f"\n{name}: {k} models, {table.scores.shape[0]:,} items, shuffled seeds "
          f"{SEEDS[0]}–{SEEDS[-1]}; {k - 1} adjacent pairs, {a.size} pairs")
    print("resolved at the end: mean over the seeds (min–max)")
    print(f"{'M0':>8} {'1/γ block 0':>12} {'1/γ last pair':>14} {'adjacent resolved':>22} "
          f"{'all resolved':>22} {'median items':>13} {'items vs M0=M':>14}")
    for m0 in sizes:
        first, _ = live_level(alpha=ALPHA, planned_models=m0)
        last, _ = live_level(alpha=ALPHA, planned_models=m0, pair=int(a.size))
        adj = [int(np.count_nonzero(d[adjacent])) for d, _ in runs[m0]]
        every = [int(np.count_nonzero(d)) for d, _ in runs[m0]]
        items = np.concatenate([n[adjacent[common]] for _, n in runs[m0]])
        ratio = np.exp(np.mean(np.log(np.concatenate([n[every_m0] for _, n in runs[m0]]) / ref)))
        label = f"{m0}" + (" (=M)" if m0 == k else "")
        print(f"{label:>8} {1 / first:>12,.0f} {1 / last:>14,.0f} "
              f"{_spread(adj):>15} of {k - 1:<3} {_spread(every):>15} of {a.size:<3} "
              f"{np.median(items) if items.size else math.nan:>13,.0f} {ratio:>14.3f}")
    print(f"(median items: paired items to decision of the {int(common.sum())} adjacent pairs "
          f"decided under every M0 and seed; items vs M0=M: geometric mean over the "
          f"{int(every_m0.sum())} pairs decided under every M0 and seed of the items to decision "
          "against planning for the board's own size)")


def top3_rows(name: str, table: ScoreTable) -> None:
    order = _ranking(table)[:3]
    top = table.select([table.models[int(c)] for c in sorted(order)])  # born in column order
    col = {m: j for j, m in enumerate(top.models)}
    ranked = [col[table.models[int(c)]] for c in order]
    adj = [_triu_index(3, ranked[0], ranked[1]), _triu_index(3, ranked[1], ranked[2])]
    means = np.nanmean(top.scores, axis=0)
    gaps = [abs(means[ranked[0]] - means[ranked[1]]), abs(means[ranked[1]] - means[ranked[2]])]
    print(f"\n{name} top 3 ({', '.join(top.models[r] for r in ranked)}): adjacent gaps "
          f"{100 * gaps[0]:.1f} and {100 * gaps[1]:.1f} points, {top.scores.shape[0]:,} items, "
          f"shuffled seeds {SEEDS[0]}–{SEEDS[-1]}")
    print(f"{'M0':>10} {'1/γ':>8} {'pairs resolved':>15} {'items to decision 1–2':>22} "
          f"{'2–3':>8}")
    runs = _replays(top, (*PLANNED, 3))
    for m0 in (3, *PLANNED):
        level, _ = live_level(alpha=ALPHA, planned_models=m0)
        resolved = np.mean([np.count_nonzero(d) for d, _ in runs[m0]])
        cells = []
        for j in adj:
            ns = [float(n[j]) if d[j] else math.inf for d, n in runs[m0]]
            med = float(np.median(ns))
            cells.append("never" if not math.isfinite(med) else f"{med:,.0f}")
        label = f"{m0}" + (" (=M)" if m0 == 3 else "")
        print(f"{label:>10} {1 / level:>8,.0f} {resolved:>9.1f} of 3 {cells[0]:>22} {cells[1]:>8}")


def simulated_rows() -> None:
    p1, p2, p3 = SIM_MODELS
    print(f"\nsimulated 3-model board: accuracies {p1}, {p2}, {p3}, phi {SIM_RHO}; items to "
          f"decision over {SIM_STREAMS:,} streams per pair (median / 80 % point; power's N*_AV)")
    print(f"{'M0':>10} {'1/γ':>8} {'gap 5: median':>14} {'80 %':>7} {'N*_AV':>7} "
          f"{'gap 10: median':>15} {'80 %':>7} {'N*_AV':>7}")
    for m0 in (3, *PLANNED):
        level, _ = live_level(alpha=ALPHA, planned_models=m0)
        cells = []
        for j, (pa, pb) in enumerate(((p1, p2), (p2, p3))):
            n_av = int(plan_power(pa, pb, SIM_RHO, planned_models=m0).n_star_anytime)
            times, _ = ac.live_crossing_times(pa, pb, SIM_RHO, level=level, streams=SIM_STREAMS,
                                              items=3 * n_av,
                                              rng=np.random.default_rng(100 * m0 + j))
            q50, q80 = np.quantile(times, [0.5, 0.8], method="inverted_cdf")
            cells.append(f"{q50:>7,.0f} {q80:>7,.0f} {n_av:>7,}")
        label = f"{m0}" + (" (=M)" if m0 == 3 else "")
        print(f"{label:>10} {1 / level:>8,.0f} {cells[0]:>22} {cells[1]:>23}")


def planning_rows() -> None:
    """Items a board of M models pays for planning M0: power's N*_AV at each pair's share
    against planning for M (all pairs at α/(M(M − 1))), geometric mean over the board's pairs
    in birth order and over four plans (gaps of 2–10 points, ρ 0.3–0.5)."""
    plans = ((0.65, 0.60, 0.3), (0.75, 0.70, 0.5), (0.52, 0.50, 0.5), (0.90, 0.80, 0.5))
    boards = (3, 4, 5, 8, 16, 32, 42, 64, 100)
    print("\nitems relative to planning for the board's own size M (power's N*_AV; geometric "
          "mean over the board's pairs and four plans)")
    print(f"{'M0 / M':>8} " + " ".join(f"{m:>6}" for m in boards) + f" {'worst 3–64':>11}")
    for m0 in (3, *PLANNED):
        row = []
        for m in boards:
            pairs = m * (m - 1) // 2
            levels = np.array([live_level(alpha=ALPHA, planned_models=m0, pair=p)[0]
                               for p in range(1, pairs + 1)])
            ratios = []
            for pa, pb, rho in plans:
                own = plan_power(pa, pb, rho, planned_models=m).n_star_anytime_exact
                sizes = {lv: plan_power(pa, pb, rho, planned_models=m0, pair=p
                                        ).n_star_anytime_exact
                         for lv, p in _first_pair_of_each_level(levels).items()}
                ratios.append(np.mean([math.log(sizes[lv] / own) for lv in levels]))
            row.append(math.exp(float(np.mean(ratios))))
        worst = max(r for m, r in zip(boards, row, strict=True) if m <= 64)
        print(f"{m0:>8} " + " ".join(f"{r:>6.3f}" for r in row) + f" {worst:>11.3f}")


def _first_pair_of_each_level(levels: np.ndarray) -> dict[float, int]:
    """{γ: the first pair number (1-based) with that share}."""
    out: dict[float, int] = {}
    for p, lv in enumerate(levels.tolist(), start=1):
        out.setdefault(lv, p)
    return out


def main() -> None:
    t0 = time.perf_counter()
    # Items as exchangeable (no groups): the item-level rule, whose shares M0 sets.
    mmlu = read_table(DATA / "mmlu_pro_item_correctness_wide.csv", exclude=("src", "category"))
    gsm = read_table(DATA / "zeroeval_gsm8k_item_correctness_wide.csv", exclude=("gold",))
    print("power of the live rule (one side reaching 2/γ_p, α = 0.05) against the planned "
          "board size M0")
    board_rows("MMLU-Pro", mmlu)
    board_rows("GSM8K", gsm)
    top3_rows("MMLU-Pro", mmlu)
    top3_rows("GSM8K", gsm)
    simulated_rows()
    planning_rows()
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
