"""Live core at scale: results/s against the number of models M, and a 4,500-model board.

Boards: seeded synthetic 0/1 scores of correlated models (item difficulty + per-model subject
strengths + ability, ``bench.bench_report.synthetic_board``), 14 clusters. Events are fed to
``Monitor.apply`` in batches of 10,000 and evaluated once at the end; the clock covers
``apply`` and ``evaluate`` only (the events are built outside it, as light objects with the
``ItemResult`` fields: decoding and validating the contract is the ingest benchmark's part).

Two arrival orders, both over every cell of the board:
* ``shuffled`` — every (item, model) cell in a seeded random order: the hardest case for the
  core (every batch touches every pair);
* ``by-model`` — one model's whole evaluation after another (items in order): how a
  leaderboard receives results.

Peer, measured in the same run on the same batches: the physical floor of O(M) ingest — for
each batch, reading the batch's item rows across the present models once
(``X[rows] → isnan``, what any per-result update must at least touch) — reported as
ours / floor time.

Run: ``.venv/bin/python -m bench.bench_scale`` (M = 100, 300, 1,000 on 12,000 items), with
``--big`` the 4,500-model × 20,000-item board (by-model; peak RSS, one evaluation, the
/metrics scrape; no floor: its copy of the board and its row reads would dominate both the
peak RSS and the time; ``--big --items 300`` the same models on fewer items).
``--models 100,1000 --orders shuffled`` narrows a run.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from bench._record import record
from bench.bench_report import synthetic_board

BATCH = 10_000
N_ITEMS = 12_000
RATE_AT_1000 = 50_000  # results/s at M = 1,000 with 14 clusters (issue 10)
BIG_RSS_GB, BIG_EVALUATE_S, BIG_SCRAPE_S = 8.0, 2.0, 1.0  # the 4,500-model board (issue 10)


@dataclass(slots=True)
class Event:
    """The fields of ``monitor.contracts.ItemResult`` that the core reads."""

    benchmark: str
    item_id: str
    model: str
    score: float
    cluster: str | None
    variant: str = "original"
    flags: list[str] = field(default_factory=list)
    sample: int = 0
    k: int | None = None


def cells(n_items: int, n_models: int, order: str, rng: np.random.Generator
          ) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of every cell of the board in arrival order: ``shuffled``, ``by-model``
    (one model's items after another's) or ``by-item`` (every model's result for one item,
    then the next item's)."""
    total = n_items * n_models
    if order == "shuffled":
        flat = rng.permutation(total)
    elif order == "by-model":
        flat = np.arange(total).reshape(n_items, n_models).T.ravel()
    elif order == "by-item":
        flat = np.arange(total)
    else:
        raise ValueError(f"`order` must be shuffled, by-model or by-item, got {order!r}")
    return np.divmod(flat, n_models)


def batches(x: np.ndarray, groups: np.ndarray, rows: np.ndarray, cols: np.ndarray, *,
            size: int = BATCH) -> Iterator[tuple[list[Event], np.ndarray, np.ndarray]]:
    """The events of the cells (``rows``, ``cols``) of ``x``, ``size`` at a time."""
    items = [f"item-{i:05d}" for i in range(x.shape[0])]
    models = [f"model-{j:04d}" for j in range(x.shape[1])]
    cluster = groups.tolist()
    for s in range(0, rows.size, size):
        rr, cc = rows[s:s + size], cols[s:s + size]
        yield ([Event("b", items[r], models[c], float(x[r, c]), cluster[r])
                for r, c in zip(rr.tolist(), cc.tolist(), strict=True)], rr, cc)


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def run(n_models: int, n_items: int, order: str, *, seed: int = 1, metrics: bool = False,
        floor: bool = True, progress: bool = False, save: str | None = None
        ) -> dict[str, float]:
    from monitor.core import CoreConfig, Monitor

    rng = np.random.default_rng(seed)
    x, groups = synthetic_board(rng=rng, n_items=n_items, n_models=n_models)
    rows, cols = cells(n_items, n_models, order, rng)
    mon = Monitor(CoreConfig())
    # The floor's own copy of the board (and its time) only when it is measured: at 4,500 ×
    # 20,000 it would add 0.7 GB to the peak RSS and, reading 10,000 item rows of 4,500 models
    # per batch, twice the core's time.
    seen = np.full(x.shape, np.nan) if floor else None
    t_ours = t_floor = 0.0
    done = 0
    for events, rr, cc in batches(x, groups, rows, cols):
        done += len(events)
        if progress and done % (rows.size // 20 or 1) < len(events):
            print(f"  {done:,} of {rows.size:,} results, core {t_ours:.0f} s, peak RSS "
                  f"{rss_gb():.2f} GB", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        mon.apply(events, evaluate=False)  # type: ignore[arg-type]  # the fields it reads
        t1 = time.perf_counter()
        t_ours += t1 - t0
        if seen is not None:
            present = ~np.isnan(seen[rr])  # the floor: read each result's item row once
            seen[rr, cc] = x[rr, cc]
            t_floor += time.perf_counter() - t1
            del present
    if save:  # the ingested board, before its first evaluation (bench_evaluate --snapshot)
        with open(save, "wb") as f:
            f.write(mon.dump_snapshot())
    t0 = time.perf_counter()
    changes = mon.evaluate()
    t_eval = time.perf_counter() - t0
    t0 = time.perf_counter()
    mon.evaluate()
    table = mon.table("b")
    assert table is not None
    ranking = mon.ranking("b").to_json()
    t_read = time.perf_counter() - t0
    out = {"models": n_models, "items": n_items, "results": float(rows.size),
           "rate": rows.size / (t_ours + t_eval),
           "floor_rate": rows.size / t_floor if t_floor else math.nan,
           "ours_s": t_ours + t_eval, "floor_s": t_floor, "evaluate_s": t_eval,
           "ranking_s": t_read, "changes": float(len(changes)),
           "resolved_adjacent": float(sum(p["verdict"] != "unresolved"
                                          for p in ranking["pairs"])),
           "state_gb": mon._benches["b"].nbytes() / 1e9}
    if metrics:
        from prometheus_client import CollectorRegistry, generate_latest

        from monitor.sinks.prometheus import MonitorCollector

        registry = CollectorRegistry()
        registry.register(MonitorCollector(mon))
        t0 = time.perf_counter()
        body = generate_latest(registry)
        out["scrape_s"] = time.perf_counter() - t0
        # A second scrape of the same state: a server's every scrape after its first, whose
        # N*_AV boundary tables (one per threshold level) are built once per process.
        t0 = time.perf_counter()
        generate_latest(registry)
        out["scrape_warm_s"] = time.perf_counter() - t0
        out["scrape_mb"] = len(body) / 1e6
        out["series"] = float(sum(1 for line in body.splitlines()
                                  if line and not line.startswith(b"#")))
    del mon, x, seen
    gc.collect()
    out["peak_rss_gb"] = rss_gb()
    return out


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The kernel imports scipy.stats on first use; import it outside the clock, as a running
    # server has.
    import scipy.stats  # noqa: F401

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="100,300,1000")
    parser.add_argument("--orders", default="shuffled,by-model")
    parser.add_argument("--items", type=int, default=None,
                        help=f"items of the boards (default {N_ITEMS:,}; with --big 20,000)")
    parser.add_argument("--big", action="store_true",
                        help="the 4,500 × 20,000 board (by-model) instead")
    parser.add_argument("--save-snapshot", metavar="FILE",
                        help="with --big: write the ingested board's snapshot (before its first "
                             "evaluation) to FILE")
    args = parser.parse_args(argv)
    if args.big:
        items = args.items or 20_000
        r = run(4500, items, "by-model", metrics=True, floor=False, progress=True,
                save=args.save_snapshot)
        print(f"board: 4,500 models × {items:,} items, 14 clusters, 0/1, by-model, "
              f"{r['results']:,.0f} results")
        print(f"ingest {r['ours_s']:.0f} s ({r['rate']:,.0f} results/s; the floor is not run "
              f"at this size)")
        print(f"peak RSS {r['peak_rss_gb']:.2f} GB (numeric state {r['state_gb']:.2f} GB); "
              f"first evaluation {r['evaluate_s']:.2f} s ({r['changes']:.0f} change events); "
              f"evaluate + ranking read {r['ranking_s']:.2f} s")
        print(f"/metrics scrape {r['scrape_s']:.2f} s the first, {r['scrape_warm_s']:.2f} s "
              f"the next ({r['scrape_mb']:.1f} MB, {r['series']:,.0f} samples)")
        ok = (r["peak_rss_gb"] <= BIG_RSS_GB and r["evaluate_s"] <= BIG_EVALUATE_S
              and r["scrape_warm_s"] <= BIG_SCRAPE_S)
        record(f"live core, 4,500 models × {items:,} items, by model",
               goal=f"peak RSS ≤ {BIG_RSS_GB:g} GB, one evaluation ≤ {BIG_EVALUATE_S:g} s, "
                    f"/metrics ≤ {BIG_SCRAPE_S:g} s",
               figure=f"{r['peak_rss_gb']:.2f} GB, {r['evaluate_s']:.2f} s, "
                      f"{r['scrape_warm_s']:.2f} s ({r['rate']:,.0f} results/s)",
               peer="bounds (the floor is not run at this size)", met=ok,
               command=f"python -m bench.bench_scale --big --items {items}")
        return 0
    rates: dict[tuple[str, int], float] = {}
    for order in args.orders.split(","):
        for m in (int(v) for v in args.models.split(",")):
            r = run(m, args.items or N_ITEMS, order)
            rates[(order, m)] = r["rate"]
            print(f"{order:9s} M={m:5d}: {r['results']:>12,.0f} results in {r['ours_s']:7.1f} s"
                  f" = {r['rate']:>9,.0f} results/s (floor {r['floor_rate']:>11,.0f}/s, "
                  f"ours/floor {r['ours_s'] / r['floor_s']:5.1f}×); evaluate "
                  f"{r['evaluate_s']:.2f} s, {r['changes']:.0f} changes; state "
                  f"{r['state_gb']:.2f} GB, peak RSS {r['peak_rss_gb']:.2f} GB", flush=True)
            if m == 1000:
                record(f"live core, 1,000 models × {args.items or N_ITEMS:,} items, {order}",
                       goal=f"≥ {RATE_AT_1000:,} results/s",
                       figure=f"{r['rate']:,.0f} results/s",
                       peer=f"{r['ours_s'] / r['floor_s']:.1f}× the floor's time (each batch's "
                            "item rows read once)",
                       met=r["rate"] >= RATE_AT_1000,
                       command=f"python -m bench.bench_scale --models 1000 --orders {order}")
    for order in args.orders.split(","):
        ms = sorted(m for o, m in rates if o == order)
        if len(ms) > 1:
            lo, hi = ms[0], ms[-1]
            print(f"{order}: results/s at M={hi} is 1/{rates[(order, lo)] / rates[(order, hi)]:.1f}"
                  f" of M={lo} (×{hi / lo:.0f} models)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
