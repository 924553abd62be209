"""A real MMLU-Pro stream through a real ``llm-monitor run``, read after every batch: no anytime
verdict ever reverses, and the final verdicts equal ``llm-monitor report --order file`` on the
same results in the same order.

The stream: 8 models and 2,000 items drawn (seeded) from the real MMLU-Pro table, items in
random order, all models of an item consecutive. Four models answer from the first item and
the other four join at items 250, 500, 750 and 1,000 (a board whose models arrive over time,
so the pairs' shares of α follow their birth order). It is posted in 50 batches; after each
the ranking route, ``/metrics`` (every pair's series: ``--per-pair-series all``) and the new
change events are read. Every pair's verdict is read from the change stream (``--family all``:
changes follow every pair; with direction) and from ``llm_monitor_pair_resolved``, and at the
end from the all-pairs route; the decided n is on the ranking's adjacent pairs and the pairs
route, and for every pair the offline first crossing must fall inside the batch whose
evaluation emitted the live resolution.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.io.tables import read_table
from tests.integration.embedded_harness import Server, cli

pytestmark = pytest.mark.integration

SEED = 20240917
MODELS, ITEMS, BATCHES = 8, 2000, 50
JOIN = (0, 0, 0, 0, 250, 500, 750, 1000)  # item at which each model starts answering
BENCH = "mmlu_pro_stream"
_SAMPLE = re.compile(r'^(llm_monitor_pair_\w+)\{([^}]*)\} (\S+)$', re.M)


def _stream(data: Path) -> list[dict[str, Any]]:
    """Seeded results of the real table: (item, model) in posting order."""
    table = read_table(data / "mmlu_pro_item_correctness_wide.csv", exclude=["src"],
                       cluster_col="category")
    assert table.groups is not None
    x = table.scores
    rng = np.random.default_rng(SEED)
    complete = [j for j in range(x.shape[1]) if not np.isnan(x[:, j]).any()]
    cols = rng.choice(complete, size=MODELS, replace=False)
    rows = rng.choice(x.shape[0], size=ITEMS, replace=False)  # random order, too
    return [{"benchmark": BENCH, "item_id": str(table.item_ids[r]), "model": table.models[c],
             "score": int(x[r, c]), "cluster": str(table.groups[r])}
            for t, r in enumerate(rows) for c, join in zip(cols, JOIN, strict=True)
            if t >= join]


def _pair_metrics(text: str) -> dict[str, dict[frozenset[str], float]]:
    """Per-pair gauges of BENCH from the exposition: metric → {model_a, model_b} → value."""
    out: dict[str, dict[frozenset[str], float]] = {}
    for name, labels, value in _SAMPLE.findall(text):
        lab = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        if lab.get("benchmark") != BENCH or "kind" in lab:
            continue
        out.setdefault(name, {})[frozenset((lab["model_a"], lab["model_b"]))] = float(value)
    return out


@pytest.fixture()
def server(tmp_path: Path):
    srv = Server(tmp_path / "stream.db", "--eval-interval", "0", "--planned-models",
                 str(MODELS), "--per-pair-series", "all", "--family", "all").start()
    yield srv
    srv.kill()


def test_stream_in_batches_never_reverses_and_ends_as_report_anytime(
        server: Server, shared_data: Path, tmp_path: Path) -> None:
    events = _stream(shared_data)
    cuts = np.linspace(0, len(events), BATCHES + 1).round().astype(int).tolist()
    models = list(dict.fromkeys(e["model"] for e in events))
    assert len(models) == MODELS

    ranked: dict[frozenset[str], dict[str, Any]] = {}  # first resolved view on the ranking
    resolved_gauge: set[frozenset[str]] = set()
    live: dict[frozenset[str], tuple[str, float, int]] = {}  # verdict, n at emission, batch
    paired = {frozenset((a, b)): 0 for i, a in enumerate(models) for b in models[i + 1:]}
    paired_at: list[dict[frozenset[str], int]] = []  # each pair's n after each batch
    seen: dict[str, set[str]] = {}
    since = 0
    last_sets: dict[str, tuple[int, int]] = {}
    for batch, (lo, hi) in enumerate(itertools.pairwise(cuts)):
        status, body = server.post(events[lo:hi])
        assert status == 202 and body["accepted"] == hi - lo, body
        for e in events[lo:hi]:
            have = seen.setdefault(e["item_id"], set())
            for other in have:
                paired[frozenset((other, e["model"]))] += 1
            have.add(e["model"])
        paired_at.append(dict(paired))

        # The ranking route: an adjacent pair once resolved keeps its verdict and decision.
        status, ranking = server.get_json(f"/v1/benchmarks/{BENCH}/ranking")
        assert status == 200
        assert ranking["anytime"]["planned_models"] == MODELS
        for p in ranking["pairs"]:
            key = frozenset((p["model_a"], p["model_b"]))
            if key in ranked:
                assert (p["verdict"], p["decided"]["n"] if p["decided"] else None) == (
                    ranked[key]["verdict"], ranked[key]["decided"]["n"]), (batch, p)
            elif p["verdict"] != "unresolved":
                ranked[key] = p
        present = [m["model"] for m in ranking["models"]]
        if len(present) == MODELS:  # every model in: the rank sets may only shrink
            for m in ranking["models"]:
                lo_hi = (m["rank_low"], m["rank_high"])
                old = last_sets.get(m["model"], (1, MODELS))
                assert old[0] <= lo_hi[0] <= m["rank"] <= lo_hi[1] <= old[1], (batch, m)
                last_sets[m["model"]] = lo_hi

        # Every pair's gauge: once 1, always 1.
        gauges = _pair_metrics(server.metrics())
        now_resolved = {k for k, v in gauges["llm_monitor_pair_resolved"].items() if v == 1.0}
        assert resolved_gauge <= now_resolved, (batch, resolved_gauge - now_resolved)
        resolved_gauge = now_resolved
        assert len(gauges["llm_monitor_pair_resolved"]) == len(present) * (len(present) - 1) // 2

        # The change stream: every pair's verdict changes at most once, out of unresolved.
        status, ch = server.get_json(f"/v1/changes?since={since}&benchmark={BENCH}")
        assert status == 200
        for c in ch["changes"]:
            if c["kind"] != "resolution":
                continue
            key = frozenset((c["model_a"], c["model_b"]))
            assert c["previous"] == "unresolved" and key not in live, (batch, c)
            live[key] = (c["verdict"], c["n"], batch)
        since = ch["next_since"]
        assert {k for k in live} == resolved_gauge, batch

    assert BATCHES >= 40 and len(paired_at) == BATCHES
    # The same results, in the same order, as a long table for the offline replay.
    path = tmp_path / "stream.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "model", "score"])
        w.writerows((e["item_id"], e["model"], e["score"]) for e in events)
    proc = cli("report", str(path), "--order", "file", "--family", "all",
               "--planned-models", str(MODELS), "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["anytime"]["rule"] == "board" and rep["anytime"]["planned_models"] == MODELS
    assert len(rep["pairs"]) == len(paired) == MODELS * (MODELS - 1) // 2

    final = _pair_metrics(server.metrics())
    for p in rep["pairs"]:
        key = frozenset((p["model_a"], p["model_b"]))
        assert final["llm_monitor_pair_items"][key] == p["n"] == paired[key], p
        assert final["llm_monitor_pair_e_threshold"][key] == pytest.approx(
            p["e_threshold"], rel=1e-12), p
        at = (p["decided"] or {}).get("n")
        if at is None:
            assert key not in live and p["verdict"] == "unresolved", (p, live.get(key))
            continue
        verdict, n_emitted, batch = live[key]
        assert verdict == p["verdict"], (p, live[key])
        # Decided inside the batch whose evaluation emitted it: the same paired item.
        before = paired_at[batch - 1][key] if batch else 0
        assert n_emitted == paired_at[batch][key], (p, live[key])
        assert before < at <= n_emitted, (p, live[key], before)
        if key in ranked:
            assert ranked[key]["decided"]["n"] == at, (p, ranked[key])
            assert ranked[key]["verdict"] == verdict
    # The adjacent pairs of the final ranking carry the decided n of the report.
    status, ranking = server.get_json(f"/v1/benchmarks/{BENCH}/ranking")
    by_pair = {frozenset((p["model_a"], p["model_b"])): p for p in rep["pairs"]}
    for p in ranking["pairs"]:
        off = by_pair[frozenset((p["model_a"], p["model_b"]))]
        assert (p["decided"] or {}).get("n") == (off["decided"] or {}).get("n"), p
    # The all-pairs route, in pages of 5: every pair once, with the report's decided n.
    pages = [server.get_json(f"/v1/benchmarks/{BENCH}/pairs?offset={o}&limit=5")
             for o in range(0, len(by_pair) + 5, 5)]
    assert all(status == 200 and page["total"] == len(by_pair) for status, page in pages)
    routed = [p for _, page in pages for p in page["pairs"]]
    assert len(routed) == len({frozenset((p["model_a"], p["model_b"])) for p in routed}) == len(
        by_pair)
    for p in routed:
        off = by_pair[frozenset((p["model_a"], p["model_b"]))]
        assert (p["decided"] or {}).get("n") == (off["decided"] or {}).get("n"), p
        assert p["n"] == off["n"], p
    status, one = server.get_json(f"/v1/benchmarks/{BENCH}/pairs?model={routed[-1]['model_b']}"
                                  f"&other={routed[-1]['model_a']}")
    assert status == 200 and one["pairs"] == [routed[-1]]
    status, err = server.get_json(f"/v1/benchmarks/{BENCH}/pairs?model=nobody")
    assert status == 404 and err["error"] == "unknown-model"
    resolved = sum(p["verdict"].startswith("resolved:") for p in rep["pairs"])
    print(f"{len(events)} results in {BATCHES} batches: {resolved} of {len(rep['pairs'])} "
          f"pairs resolved, {len(ranked)} of them read resolved on the ranking route")
    assert resolved >= 5  # a stream where decisions happen, not a vacuous check
