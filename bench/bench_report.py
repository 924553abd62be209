"""Full-board resolution report, 100 models × 12,032 items, all 4,950 pairs with 14 clusters.

Ours: ``monitor.offline.report.build_report`` (Gram-matrix board + family + Holm) on the whole matrix.
Peer: a per-pair Python loop calling statsmodels' exact ``mcnemar`` on the 2×2 table plus the
same per-pair N*, q and cluster design-effect arithmetic in numpy. The peer is timed on all
4,950 pairs by default; ``--peer-pairs K`` times it on K random pairs and extrapolates per pair
(the output says which was done).

Run: ``.venv/bin/python -m bench.bench_report`` (single core: BLAS threads pinned to 1).
"""

from __future__ import annotations

import os

from bench._record import record

# Single core, as the target says; must happen before numpy is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

N_MODELS = 100
N_ITEMS = 12_032
N_CLUSTERS = 14


def synthetic_board(*, rng: np.random.Generator, n_items: int = N_ITEMS,
                    n_models: int = N_MODELS, n_clusters: int = N_CLUSTERS,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """0/1 matrix of correlated models: item difficulty + subject effect + model ability."""
    sizes = rng.multinomial(n_items - n_clusters, np.full(n_clusters, 1 / n_clusters)) + 1
    groups = np.repeat(np.array([f"subject-{c:02d}" for c in range(n_clusters)]), sizes)
    cluster_effect = rng.normal(0.0, 0.5, size=(n_clusters, n_models))  # per-model strengths
    codes = np.repeat(np.arange(n_clusters), sizes)
    difficulty = rng.normal(0.0, 1.5, size=n_items)
    ability = np.sort(rng.normal(0.0, 1.0, size=n_models))[::-1]
    logit = ability[None, :] - difficulty[:, None] + cluster_effect[codes]
    scores = (rng.random((n_items, n_models)) < 1.0 / (1.0 + np.exp(-logit))).astype(float)
    return scores, groups


def peer_pair(xa: np.ndarray, xb: np.ndarray, codes: np.ndarray, n_groups: int,
              z: float) -> tuple[float, float, float, float]:
    """statsmodels exact McNemar plus N*, q and the cluster-robust DE for one pair."""
    from statsmodels.stats.contingency_tables import mcnemar

    a, b = xa.astype(bool), xb.astype(bool)
    n11 = int(np.count_nonzero(a & b))
    n10 = int(np.count_nonzero(a & ~b))
    n01 = int(np.count_nonzero(~a & b))
    n00 = xa.size - n11 - n10 - n01
    p = float(mcnemar([[n11, n10], [n01, n00]], exact=True).pvalue)
    d = xa - xb
    n = d.size
    delta = float(d.mean())
    s2 = float(d.var())
    # N* from the sizing estimates (Agresti–Min pseudo-items, docs/contract.md)
    d_size = float(d.sum()) / (n + 2)
    s2_size = (float((d * d).sum()) + 1.0) / (n + 2) - d_size * d_size
    n_star = z * z * s2_size / (d_size * d_size) if d_size != 0 else np.inf
    q = n / n_star if np.isfinite(n_star) else 0.0
    sums = np.bincount(codes, weights=d - delta, minlength=n_groups)
    de = float(np.sum(sums * sums)) / (n * s2) if s2 > 0 else 1.0
    return p, n_star, q, de


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-pairs", type=int, default=0,
                        help="time the peer on this many random pairs and extrapolate per pair "
                             "(default 0: time it on every pair)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of ours (best kept)")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)

    from monitor.io.tables import ScoreTable
    from monitor.offline.report import build_report
    from monitor.stats.board import all_pairs, board
    from monitor.stats.power import z_total

    rng = np.random.default_rng(args.seed)
    scores, groups = synthetic_board(rng=rng)
    table = ScoreTable(source="synthetic", benchmark="synthetic",
                       item_ids=np.array([f"item-{i}" for i in range(N_ITEMS)]),
                       models=tuple(f"model-{j:03d}" for j in range(N_MODELS)),
                       scores=scores, groups=groups, group_kind="cluster", group_col="subject")

    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        rep = build_report(table, family="all", correction="holm").as_dict()
        times.append(time.perf_counter() - t0)
    ours = min(times)
    n_pairs = len(rep["pairs"])
    board_times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = board(scores, groups=groups)
        board_times.append(time.perf_counter() - t0)

    # Peer on a random subset, checked against ours pair by pair.
    a_all, b_all = all_pairs(N_MODELS)
    if 0 < args.peer_pairs < a_all.size:
        pick = np.sort(rng.choice(a_all.size, size=args.peer_pairs, replace=False))
        how = f"measured on {pick.size} random pairs, extrapolated per pair to {a_all.size:,}"
    else:
        pick = np.arange(a_all.size)
        how = f"measured on all {a_all.size:,} pairs"
    _, codes = np.unique(groups, return_inverse=True)
    z = z_total(alpha=0.05, power=0.8)
    peer_pair(scores[:, 0], scores[:, 1], codes, N_CLUSTERS, z)  # import outside the clock
    t0 = time.perf_counter()
    peer = [peer_pair(scores[:, a_all[k]], scores[:, b_all[k]], codes, N_CLUSTERS, z)
            for k in pick]
    peer_elapsed = time.perf_counter() - t0
    peer_per_pair = peer_elapsed / pick.size
    peer_total = peer_per_pair * n_pairs

    pv = np.array([r[0] for r in peer])
    q_peer = np.array([r[2] for r in peer])
    de = np.array([r[3] for r in peer])
    if res.design_effect is None:
        raise RuntimeError("board() returned no design effect although groups were given")
    max_p = float(np.max(np.abs(pv - res.p_value[pick])))
    max_de = float(np.max(np.abs(de / res.design_effect[pick] - 1)))
    # q = n / N* is 0 where the sizing estimate of δ is 0 (N* = ∞): a relative difference is
    # 0/0 there, so those pairs are checked for equality and the ratio is taken elsewhere.
    q_ours = res.q[pick]
    both = np.isfinite(q_peer) & np.isfinite(q_ours)
    zero_peer, zero_ours = both & (q_peer == 0), both & (q_ours == 0)
    if not np.array_equal(zero_peer, zero_ours):
        raise AssertionError(f"q = 0 on different pairs: peer {int(zero_peer.sum())}, "
                             f"ours {int(zero_ours.sum())}, "
                             f"disagreeing {int((zero_peer != zero_ours).sum())}")
    if not np.array_equal(np.isfinite(q_peer), np.isfinite(q_ours)):
        raise AssertionError("q is non-finite on different pairs")
    cmp_q = both & ~zero_peer
    max_q = float(np.max(np.abs(q_peer[cmp_q] / q_ours[cmp_q] - 1))) if cmp_q.any() else 0.0

    print(f"board: {N_MODELS} models × {N_ITEMS:,} items, {n_pairs:,} pairs, "
          f"{N_CLUSTERS} clusters, 0/1 scores, single core (BLAS threads = 1)")
    print(f"ours  build_report(family=all, holm, clusters): {ours:.3f} s "
          f"(best of {args.repeat}; board() alone {min(board_times):.3f} s)")
    print(f"peer  per-pair loop, statsmodels mcnemar(exact) + N*/q/DE: {peer_total:.2f} s "
          f"({peer_per_pair * 1e3:.3f} ms/pair, {how})")
    print(f"agreement on those pairs: max |Δp| = {max_p:.1e}, max relative ΔDE = {max_de:.1e}, "
          f"max relative Δq = {max_q:.1e} (on {int(cmp_q.sum()):,} pairs with q ≠ 0; "
          f"q = 0 on the same {int(zero_peer.sum())} pair(s) in both)")
    print(f"ratio peer/ours: {peer_total / ours:.1f}×  (targets: ours ≤ 2 s, ratio ≥ 20×)")
    record("resolution report, 100 models × 12,032 items, all pairs + clusters",
           goal="≤ 2 s on one core, ≥ 20× statsmodels mcnemar per pair",
           figure=f"{ours:.3f} s", peer=f"{peer_total / ours:.1f}× a statsmodels per-pair loop",
           met=ours <= 2.0 and peer_total / ours >= 20.0, command="python -m bench.bench_report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
