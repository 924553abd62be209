"""Live core in every shape: results/s of ``Monitor.apply`` over a grid of board shapes.

The grid: models M ∈ {20, 100, 300, 1,000, 3,000} × items ∈ {2,000, 12,000} × arrival order
(``shuffled``, ``by-model``, ``by-item``; ``bench.bench_scale.cells``) × batch ∈ {1,000,
10,000} results. Boards are ``bench.bench_report.synthetic_board``'s seeded correlated 0/1
scores; events are built outside the clock (``bench.bench_scale.batches``) and the clock covers
``Monitor.apply(…, evaluate=False)`` only — the fold and the sequential pass, what every
result costs (an evaluation is paid per look, not per result).

Each cell runs in a process of its own, so its peak RSS (``ru_maxrss``) is its own. A cell of
more than ``--cap`` results is measured on a window of ``--cap`` results around the middle
of its stream, after the results before the window are applied unclocked (in item order,
batches of 10,000): a shuffled or by-model stream's cost per result grows with the partners
already present, and its middle is its average. Cells of more than ``LARGEST`` results
(M = 3,000 × 12,000 items) are left out: their unclocked prefix alone would take longer
than the rest of the grid.

Peer, in the same process: a plain ``json.loads`` loop over the same results as NDJSON lines
(``bench.bench_ingest._json_loop``; at most 200,000 of the clocked ones). Growth exponent:
for each shape (items, order, batch) and neighbouring sizes M₁ < M₂, e = log(c₂ / c₁) /
log(M₂ / M₁), c the seconds per result: the cost per result ∝ M^e, so e = 1 is linear in the
partners a result pairs with.

Run: ``.venv/bin/python -m bench.bench_shapes`` (the whole grid, ~30 min on one core),
``--quick`` (a smoke test: two small cells), or narrowed with ``--models 300,1000 --items
2000 --orders shuffled --batches 1000``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

MODELS = (20, 100, 300, 1000, 3000)
ITEMS = (2000, 12000)
ORDERS = ("shuffled", "by-model", "by-item")
BATCHES = (1000, 10_000)
CAP = 100_000  # clocked results per cell at most
LARGEST = 20_000_000  # cells of more results are left out (their unclocked prefix alone ≥ 10 min)
PEER_LINES = 200_000
PREFILL_BATCH = 10_000
COMMAND = "python -m bench.bench_shapes"


@dataclass(frozen=True)
class Cell:
    """One shape's measurement: results clocked (of ``total`` in the stream), the seconds
    ``Monitor.apply`` took for them, the json.loads loop's rate and the process's peak RSS."""

    models: int
    items: int
    order: str
    batch: int
    total: int
    results: int
    seconds: float
    json_rate: float
    rss_mb: float

    @property
    def rate(self) -> float:
        return self.results / self.seconds

    @property
    def per_result(self) -> float:
        return self.seconds / self.results


def measure(models: int, items: int, order: str, batch: int, *, cap: int = CAP,
            seed: int = 1) -> Cell:
    """Feed one shape's stream to a fresh ``Monitor`` and time ``apply`` (this process)."""
    from bench.bench_ingest import _json_loop, _timed
    from bench.bench_report import synthetic_board
    from bench.bench_scale import batches, cells
    from monitor.core import CoreConfig, Monitor

    rng = np.random.default_rng(seed)
    x, groups = synthetic_board(rng=rng, n_items=items, n_models=models)
    rows, cols = cells(items, models, order, rng)
    total = int(rows.size)
    mon = Monitor(CoreConfig())
    if total > cap:  # the window around the middle, after the stream before it
        start = total // 2 - cap // 2
        by_item = np.lexsort((cols[:start], rows[:start]))
        for events, _, _ in batches(x, groups, rows[:start][by_item], cols[:start][by_item],
                                    size=PREFILL_BATCH):
            mon.apply(events, evaluate=False)  # type: ignore[arg-type]  # the fields it reads
        rows, cols = rows[start:start + cap], cols[start:start + cap]
    gc.collect()
    seconds = 0.0
    for events, _, _ in batches(x, groups, rows, cols, size=batch):
        t0 = time.perf_counter()
        mon.apply(events, evaluate=False)  # type: ignore[arg-type]
        seconds += time.perf_counter() - t0
    n_peer = min(rows.size, PEER_LINES)
    lines = [json.dumps({"benchmark": "b", "item_id": f"item-{r:05d}", "model": f"model-{c:04d}",
                         "score": float(x[r, c]), "cluster": str(groups[r])},
                        separators=(",", ":")).encode()
             for r, c in zip(rows[:n_peer].tolist(), cols[:n_peer].tolist(), strict=True)]
    json_rate = n_peer / _timed(lambda: _json_loop(lines))
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
    return Cell(models, items, order, batch, total, int(rows.size), seconds, json_rate, rss_mb)


def _child(spec: str, cap: int) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    import scipy.stats  # noqa: F401  # imported on first use by the core: outside the clock

    m, n, order, b = spec.split(",")
    cell = measure(int(m), int(n), order, int(b), cap=cap)
    print(json.dumps(cell.__dict__))


def run_cell(models: int, items: int, order: str, batch: int, *, cap: int) -> Cell:
    """:func:`measure` in a process of its own (its own peak RSS)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_shapes", "--cell",
         f"{models},{items},{order},{batch}", "--cap", str(cap)],
        check=True, capture_output=True, text=True,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return Cell(**json.loads(out.stdout.strip().splitlines()[-1]))


def exponents(cells: list[Cell]) -> dict[tuple[int, str, int], list[tuple[int, int, float]]]:
    """Per shape (items, order, batch): (M₁, M₂, e) for neighbouring sizes measured."""
    out: dict[tuple[int, str, int], list[tuple[int, int, float]]] = {}
    for c1 in cells:
        shape = (c1.items, c1.order, c1.batch)
        if shape in out:
            continue
        row = sorted((c for c in cells if (c.items, c.order, c.batch) == shape),
                     key=lambda c: c.models)
        out[shape] = [(a.models, b.models,
                       math.log(b.per_result / a.per_result) / math.log(b.models / a.models))
                      for a, b in pairwise(row)]
    return out


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(","))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=_ints, default=MODELS)
    parser.add_argument("--items", type=_ints, default=ITEMS)
    parser.add_argument("--orders", type=lambda s: tuple(s.split(",")), default=ORDERS)
    parser.add_argument("--batches", type=_ints, default=BATCHES)
    parser.add_argument("--cap", type=int, default=CAP,
                        help=f"clocked results per cell at most (default {CAP:,})")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke test: M = 20, 100 on 2,000 items, shuffled, batches of 1,000")
    parser.add_argument("--cell", help=argparse.SUPPRESS)  # M,items,order,batch: one child
    args = parser.parse_args(argv)
    if args.cell:
        _child(args.cell, args.cap)
        return 0
    if args.quick:
        args.models, args.items, args.orders, args.batches = (20, 100), (2000,), ("shuffled",), (
            1000,)
        args.cap = min(args.cap, 50_000)
    print(f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; cells of more than "
          f"{args.cap:,} results: a window of {args.cap:,} around the stream's middle, the "
          f"results before it applied unclocked", flush=True)
    print(f"{'M':>5} {'items':>6} {'order':>8} {'batch':>6} {'clocked':>9} {'results/s':>10} "
          f"{'× json.loads':>12} {'peak RSS':>9}", flush=True)
    cells: list[Cell] = []
    for items in args.items:
        for order in args.orders:
            for batch in args.batches:
                for m in args.models:
                    if m * items > LARGEST:
                        print(f"{m:>5} {items:>6} {order:>8} {batch:>6}  not run: "
                              f"{m * items:,} results", flush=True)
                        continue
                    c = run_cell(m, items, order, batch, cap=args.cap)
                    cells.append(c)
                    print(f"{m:>5} {items:>6} {order:>8} {batch:>6} {c.results:>9,} "
                          f"{c.rate:>10,.0f} {c.rate / c.json_rate:>11.2f}× "
                          f"{c.rss_mb:>6.0f} MB", flush=True)
    print("growth exponent e of the cost per result in M between neighbouring sizes "
          "(cost per result ∝ M^e; 1 = linear):")
    worst: tuple[float, str] = (-math.inf, "")
    for (items, order, batch), steps in exponents(cells).items():
        text = ", ".join(f"{a}→{b} {e:.2f}" for a, b, e in steps)
        print(f"  {items:>6} items {order:>8} batch {batch:>6}: {text}")
        for a, b, e in steps:
            worst = max(worst, (e, f"{items:,} items, {order}, batches of {batch:,}, M {a}→{b}"))
    if math.isfinite(worst[0]):
        print(f"worst exponent {worst[0]:.2f} ({worst[1]})")
    if not args.quick:
        _record(cells, worst, " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])]))
    return 0


def _record(cells: list[Cell], worst: tuple[float, str], command: str) -> None:
    """The table's two rows: the worst growth exponent and the slowest shape at M = 1,000, each
    naming the sizes the run measured (the goal is over the whole grid)."""
    from bench._record import record

    sizes = sorted({c.models for c in cells})
    items = "/".join(f"{n:,}" for n in sorted({c.items for c in cells}))
    measured = f"M {', '.join(map(str, sizes))} on {items} items"
    if math.isfinite(worst[0]):
        record("live core: growth of the cost per result in M, every shape",
               goal="exponent ≤ 1.1 between neighbouring M",
               figure=f"worst {worst[0]:.2f} ({worst[1]}); {measured}",
               peer="the json.loads loop of each cell, same process",
               # a run of part of the grid can miss the goal, not meet it
               met=False if worst[0] > 1.1 else (True if set(MODELS) <= set(sizes) else None),
               command=command)
    at_1000 = [c for c in cells if c.models == 1000]
    if at_1000:
        low = min(at_1000, key=lambda c: c.rate)
        record("live core, M = 1,000, every shape",
               goal="≥ 40,000 results/s at 2k and 12k items",
               figure=f"slowest {low.rate:,.0f} results/s ({low.items:,} items, {low.order}, "
                      f"batches of {low.batch:,}); {measured}",
               peer=f"{low.rate / low.json_rate:.2f}× a json.loads loop (slowest shape)",
               met=all(c.rate >= 40_000 for c in at_1000), command=command)


if __name__ == "__main__":
    raise SystemExit(main())
