"""One evaluation of a 4,500-model board with many decided pairs, in seconds.

The board: 4,500 seeded synthetic correlated models (``bench.bench_report.synthetic_board``)
on a few hundred items, ingested by model through ``Monitor.apply``; then decisions are set
on a share of the pairs (those farthest apart in the mean ranking, plus 70 % of the adjacent
pairs, each in the direction of the means), as a long-running board of 20,000 items reaches
them, and the board is evaluated once: the decisions read into the ranking, the rank sets and
tiers, and one change event per newly resolved adjacent pair with its figures. What an
evaluation costs depends on the models, the decided pairs and the events, not on the items,
so this measures the 4,500 × 20,000 board's evaluation without its hour of ingest.

Peer in the same run: the same evaluation with ``consistent_order`` of the commit before the
mean-order shortcut (``--baseline-ref REF``, read with ``git show``).

``--snapshot FILE``: instead, the first evaluation of a board ingested for real, read from
the snapshot ``bench.bench_scale --big --save-snapshot FILE`` wrote before its first
evaluation (``--profile``: and where that evaluation spends its time, by cProfile).

Run: ``.venv/bin/python -m bench.bench_evaluate [--items 200] [--share 0.3]
[--baseline-ref 5a733d3] [--snapshot FILE [--profile]]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from datetime import UTC, datetime

import numpy as np

from bench._record import record
from bench.bench_report import synthetic_board
from bench.bench_scale import batches, cells

M = 4500


TARGET_SECONDS = 2.0  # one evaluation of the 4,500-model board (issue 10)


def run(n_items: int, share: float, baseline: str | None) -> tuple[float, int, int]:
    """Seconds of one evaluation with the decisions set, change events, decided pairs."""
    import monitor.core.evaluate as evaluate_module
    from monitor.core import CoreConfig, Monitor

    if baseline is not None:
        src = subprocess.run(["git", "show", f"{baseline}:monitor/core/evaluate.py"],
                             capture_output=True, text=True, check=True).stdout
        ns: dict[str, object] = {}
        exec(compile(src.split("def evaluate(")[0], f"{baseline}:evaluate.py", "exec"), ns)
        evaluate_module.consistent_order = ns["consistent_order"]  # type: ignore[attr-defined,assignment]
    rng = np.random.default_rng(1)
    x, groups = synthetic_board(rng=rng, n_items=n_items, n_models=M)
    rows, cols = cells(n_items, M, "by-model", rng)
    mon = Monitor(CoreConfig())
    for events, _, _ in batches(x, groups, rows, cols):
        mon.apply(events, evaluate=False)  # type: ignore[arg-type]  # the fields it reads
    mon.evaluate()
    st = mon._benches["b"]
    k, cap = st.k, st.cap
    means = st.sx.diagonal(k) / st.n.diagonal(k)
    pos = np.empty(k, dtype=np.int64)
    pos[np.argsort(-means, kind="stable")] = np.arange(k)
    lo, hi = np.triu_indices(k, 1)
    gap = np.abs(pos[lo] - pos[hi])
    decide = (gap > np.quantile(gap, 1 - share)) | ((gap == 1) & (rng.random(gap.shape) < 0.7))
    flat = lo[decide] * cap + hi[decide]
    st.paths.decided[flat] = np.where(pos[lo[decide]] < pos[hi[decide]], 1, -1)
    st.paths.decided_n[flat] = float(n_items)
    st.paths.decided_log_e[flat] = 20.0
    st.stamp(flat, datetime.now(UTC))
    mon._dirty["b"] = None
    st.table_stale = True
    t0 = time.perf_counter()
    changes = mon.evaluate()
    return time.perf_counter() - t0, len(changes), int(decide.sum())


def first_evaluation(path: str, *, profile: bool) -> int:
    """The first evaluation of the board saved at ``path``, in this fresh process."""
    from monitor.core import CoreConfig, Monitor

    with open(path, "rb") as f:
        data = f.read()
    t0 = time.perf_counter()
    mon = Monitor.load_snapshot(data, CoreConfig())
    del data
    loaded = time.perf_counter() - t0
    name = mon.benchmarks()[0]
    st = mon._benches[name]
    mon._dirty[name] = None  # a restored board is evaluated again; this one never was
    st.table_stale = True
    print(f"board: {st.k:,} models × {len(st.item_ids):,} items, loaded in {loaded:.1f} s; "
          f"load average {os.getloadavg()[0]:.2f}")
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    changes = mon.evaluate()
    secs = time.perf_counter() - t0
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    print(f"first evaluation {secs:.2f} s, {len(changes):,} change events")
    t0 = time.perf_counter()
    mon.evaluate()
    mon.ranking(name).to_json()
    print(f"evaluate + ranking read after it {time.perf_counter() - t0:.2f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import scipy.stats  # noqa: F401  # imported outside the clock, as a running server has

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--share", type=float, default=0.3)
    parser.add_argument("--baseline-ref", default=None)
    parser.add_argument("--snapshot", metavar="FILE", default=None,
                        help="time the first evaluation of the board saved in FILE instead")
    parser.add_argument("--profile", action="store_true", help="with --snapshot: cProfile it")
    args = parser.parse_args(argv)
    if args.snapshot:
        return first_evaluation(args.snapshot, profile=args.profile)
    print(f"load average {os.getloadavg()[0]:.2f}")
    for label, ref in (("ours", None), ("baseline", args.baseline_ref)):
        if label == "baseline" and ref is None:
            continue
        secs, events, decided = run(args.items, args.share, ref)
        name = "ours" if ref is None else f"baseline {ref}"
        print(f"{name}: one evaluation of {M:,} models with {decided:,} decided pairs: "
              f"{secs:.2f} s, {events:,} change events")
        if ref is None:
            record(f"one evaluation of a {M:,}-model board, {decided:,} decided pairs",
                   goal=f"≤ {TARGET_SECONDS:g} s", figure=f"{secs:.2f} s ({events:,} change events)",
                   peer="a bound (--baseline-ref REF times another checkout in the same run)",
                   met=secs <= TARGET_SECONDS, command="python -m bench.bench_evaluate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
