"""SIGKILL the embedded monitor at random points of a 52,000-result ingest of real MMLU-Pro data;
restart on the same database each time, resend what was not acknowledged, finish — and the
final state must equal an offline recomputation from the acknowledged events."""

from __future__ import annotations

import http.client
import itertools
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from monitor.io.tables import read_table
from monitor.stats.eprocess import log_e_mcnemar
from tests.integration.embedded_harness import Server, metric_value

N_MODELS = 20
N_ITEMS = 2600
MIN_KILLS = 6


def _real_events(shared_data: Path, rng: np.random.Generator) -> tuple[list[dict], np.ndarray,
                                                                      list[str]]:
    t = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                   cluster_col="category")
    complete = ~np.isnan(t.scores)
    # 20 models that answered every item of a common set of at least N_ITEMS items.
    cols = [j for j in np.argsort(-complete.sum(axis=0), kind="stable")][:N_MODELS]
    rows = np.flatnonzero(complete[:, cols].all(axis=1))
    assert rows.size >= N_ITEMS
    rows = np.sort(rng.choice(rows, N_ITEMS, replace=False))
    models = [t.models[j] for j in cols]
    x = t.scores[np.ix_(rows, cols)]
    assert t.groups is not None
    cells = [(r, k) for r in range(N_ITEMS) for k in range(N_MODELS)]
    order = rng.permutation(len(cells))
    events = []
    for o in order.tolist():
        r, k = cells[o]
        events.append({"benchmark": "mmlu_pro", "item_id": str(t.item_ids[rows[r]]),
                       "model": models[k], "score": int(x[r, k]),
                       "cluster": str(t.groups[rows[r]])})
    return events, x, models


def _offline(x: np.ndarray, models: list[str]) -> tuple[list[str], dict[tuple[str, str], tuple]]:
    """The ranking and every pair's (n, delta, e-value), from the stats layer directly."""
    means = x.mean(axis=0)
    order = sorted(range(len(models)), key=lambda j: (-means[j], models[j]))
    pairs = {}
    for a, b in itertools.pairwise(order):
        xa, xb = x[:, a], x[:, b]
        n10 = float(np.sum((xa == 1) & (xb == 0)))
        n01 = float(np.sum((xa == 0) & (xb == 1)))
        pairs[(models[a], models[b])] = (
            len(xa), float(np.mean(xa - xb)), float(np.exp(log_e_mcnemar(n10, n01))))
    return [models[j] for j in order], pairs


@pytest.mark.slow
def test_sigkill_at_random_points_loses_and_doubles_nothing(
    shared_data: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(20241017)
    events, x, models = _real_events(shared_data, rng)
    assert len(events) == N_MODELS * N_ITEMS >= 50_000

    cuts = np.cumsum(rng.integers(400, 2500, size=200))
    cuts = [0, *[int(c) for c in cuts if c < len(events)], len(events)]
    batches = [events[lo:hi] for lo, hi in itertools.pairwise(cuts)]
    kill_at = set(rng.choice(len(batches), size=MIN_KILLS + 2, replace=False).tolist())

    srv = Server(tmp_path / "crash.db").start()
    kills = 0
    acknowledged: list[dict] = []
    accepted_in_acks = 0
    try:
        for b, batch in enumerate(batches):
            body = json.dumps(batch).encode()
            killer = None
            if b in kill_at:
                # The kill lands before, during or after processing of this request.
                pid_proc = srv.proc
                assert pid_proc is not None
                killer = threading.Timer(float(rng.uniform(0.0, 0.04)), pid_proc.kill)
                killer.start()
            while True:
                try:
                    status, data = srv.request("POST", "/v1/results", body, timeout=30)
                    reply = json.loads(data)
                    assert status == 202, reply
                    ok = True
                except (ConnectionError, http.client.HTTPException, OSError):
                    ok = False
                if killer is not None:
                    killer.join()
                    killer = None
                if not srv.alive():
                    kills += 1
                    srv.kill()
                    srv.start()  # same database; the state is rebuilt from it
                    if ok:
                        break  # acknowledged before the kill
                    continue  # not acknowledged: resend the same batch
                if ok:
                    break
            # Every event of an acknowledged batch is in, once: accepted now or already stored.
            assert reply["accepted"] + reply["duplicate"] == len(batch), reply
            assert reply["invalid"] == reply["conflict"] == 0, reply
            acknowledged.extend(batch)
            accepted_in_acks += reply["accepted"]

        assert kills >= MIN_KILLS - 1 and kills >= 5, kills
        assert acknowledged == events

        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == len(events)
        assert metric_value(text, "llm_monitor_events_total", outcome="conflict") == 0
        status, ranking = srv.get_json("/v1/benchmarks/mmlu_pro/ranking")
        assert status == 200
        ids = [c["change_id"] for c in srv.get_json("/v1/changes?since=0&limit=10000")[1]["changes"]]
        assert ids == list(range(1, len(ids) + 1))  # increasing, no gap, none repeated
    finally:
        srv.kill()

    want_order, want_pairs = _offline(x, models)
    assert [m["model"] for m in ranking["models"]] == want_order
    assert all(m["n"] == N_ITEMS for m in ranking["models"])
    got = {(p["model_a"], p["model_b"]): p for p in ranking["pairs"]}
    assert set(got) == set(want_pairs)
    for key, (n, delta, e_value) in want_pairs.items():
        p = got[key]
        assert p["n"] == n, key
        assert p["delta"] == pytest.approx(delta, rel=1e-12, abs=1e-15), key
        assert p["e_value"] == pytest.approx(e_value, rel=1e-9), key
        assert p["verdict"] == ("unresolved" if e_value < (N_MODELS - 1) / 0.05
                                else f"resolved:{key[0] if delta > 0 else key[1]}"), key
