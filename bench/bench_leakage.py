"""Leakage scan: ours (inverted n-gram index, vectorised batches) vs a naive scan that
re-tokenises every corpus document for every eval item.

Synthetic, seeded: 10k eval items × 200k corpus documents with planted verbatim and edited
copies. The naive scan is far too slow to run in full, so it is timed on a subset of eval
items (half planted, half not) and extrapolated linearly to all items; its top matches are
checked against ours on that subset. Run: .venv/bin/python -m bench.bench_leakage
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench._record import record
from monitor.audit import leakage as lk
from monitor.audit.synthetic import planted_corpus
from monitor.audit.tokenize import tokenize


def naive_best(item: str, corpus: list[tuple[str, str]], n: int) -> tuple[str | None, float, float]:
    """The peer: tokenise each candidate document afresh and intersect n-gram sets."""
    toks = tokenize(item)
    q = {tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)}
    best: tuple[float, float, int] = (0.0, 0.0, 0)
    best_doc: str | None = None
    for j, (doc_id, text) in enumerate(corpus):
        dt = tokenize(text)
        s = {tuple(dt[i : i + n]) for i in range(len(dt) - n + 1)}
        inter = len(q & s)
        if inter == 0:
            continue
        key = (inter / len(q), inter / (len(q) + len(s) - inter), -j)
        if key > best:
            best, best_doc = key, doc_id
    return best_doc, best[0], best[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--planted", type=int, default=500)
    ap.add_argument("--n", type=int, default=13)
    ap.add_argument("--subset", type=int, default=4, help="eval items for the naive scan")
    args = ap.parse_args()
    t = time.perf_counter()
    pc = planted_corpus(n_items=args.items, n_docs=args.docs, n_planted=args.planted,
                        rng=np.random.default_rng(2024))
    print(f"generated {args.items} eval items × {args.docs} docs ({args.planted} planted, "
          f"half lightly edited) in {time.perf_counter() - t:.1f} s; n = {args.n}")

    t0 = time.perf_counter()
    index = lk.build_index([x for _, x in pc.corpus], doc_ids=[d for d, _ in pc.corpus],
                           n=args.n)
    t1 = time.perf_counter()
    report = lk.scan(index, pc.items)
    t2 = time.perf_counter()
    ours = t2 - t0
    c = report.counts()
    print(f"ours: index {t1 - t0:.2f} s ({index.nbytes() / 2**20:.0f} MiB, "
          f"{len(index.postings)} postings) + scan {t2 - t1:.2f} s = {ours:.2f} s total")
    print(f"      statuses: {c}")
    found = sum(1 for m in report.matches if m.item_id in pc.planted and m.status == "leak"
                and m.best_doc == pc.planted[m.item_id])
    print(f"      planted copies found as leak in the right document: {found}/{len(pc.planted)}"
          f" (verbatim {len(pc.planted) - len(pc.edited)}, edited {len(pc.edited)})")

    planted = [i for i, (item_id, _) in enumerate(pc.items) if item_id in pc.planted]
    plain = [i for i, (item_id, _) in enumerate(pc.items) if item_id not in pc.planted]
    k = args.subset
    subset = planted[: (k + 1) // 2] + plain[: k // 2]
    t3 = time.perf_counter()
    same = 0
    for i in subset:
        doc, cont, jac = naive_best(pc.items[i][1], pc.corpus, args.n)
        m = report.matches[i]
        agree = doc == m.best_doc and abs(cont - m.containment) < 1e-12 \
            and abs(jac - m.jaccard) < 1e-12
        same += agree
        print(f"      {pc.items[i][0]}: naive {doc} c={cont:.3f} | ours {m.best_doc} "
              f"c={m.containment:.3f} {'same' if agree else 'DIFFERENT'}")
    per_item = (time.perf_counter() - t3) / len(subset)
    naive_total = per_item * len(pc.items)
    print(f"naive: {per_item:.2f} s per eval item on a {len(subset)}-item subset → "
          f"{naive_total:.0f} s extrapolated to {len(pc.items)} items")
    print(f"same top match on the subset: {same}/{len(subset)}")
    print(f"speed-up (naive extrapolated / ours total): {naive_total / ours:.0f}x")
    record("leakage scan, 10k eval items × 200k corpus docs",
           goal="≥ 50× a naive re-tokenising scan, same top matches",
           figure=f"{ours:.1f} s", peer=f"{naive_total / ours:.0f}× the naive scan; same top "
                                         f"match {same}/{len(subset)}",
           met=naive_total / ours >= 50.0 and same == len(subset),
           command="python -m bench.bench_leakage")


if __name__ == "__main__":
    main()
