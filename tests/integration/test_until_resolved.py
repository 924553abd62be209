"""Evaluate until resolved, closed loop over a real monitor: three prior models × 3,000 items
with clear gaps, then a fourth model posted in the order the plan hands out, asking after each
batch; it stops before 3,000 items, every pair resolved or equivalent, no verdict against the
truth."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from tests.integration.embedded_harness import Server, cli

pytestmark = pytest.mark.integration

ITEMS = 3000
TRUTH = {"strong": 0.85, "mid": 0.70, "weak": 0.50, "new": 0.61}


def _scores(seed: int) -> dict[str, np.ndarray]:
    """0/1 scores with the accuracies of TRUTH, correlated through a shared item difficulty."""
    rng = np.random.default_rng(seed)
    easy = rng.normal(size=ITEMS)
    return {m: (0.7 * easy + 0.714 * rng.normal(size=ITEMS) > norm.ppf(1 - p)).astype(int)
            for m, p in TRUTH.items()}


def test_a_new_model_stops_once_its_place_is_settled(tmp_path: Path) -> None:
    x = _scores(7)
    srv = Server(tmp_path / "m.db", "--planned-models", "4").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        prior = [{"benchmark": "b", "item_id": f"q{i}", "model": m, "score": int(x[m][i])}
                 for m in ("strong", "mid", "weak") for i in range(ITEMS)]
        for lo in range(0, len(prior), 5000):
            assert srv.post(prior[lo:lo + 5000])[0] == 202
        # Before the new model's first result, the plan starts it at the first items of the
        # benchmark's order (what the harness loops ask first).
        status, first = srv.get_json("/v1/benchmarks/b/models/new/plan?count=5")
        assert status == 200 and first["action"] == "continue", first
        assert first["reason"] == "no result of 'new' yet" and first["items_done"] == 0
        assert first["items_total"] == ITEMS and len(first["next_items"]) == 5
        status, _ = srv.get_json("/v1/benchmarks/nonesuch/models/new/plan")
        assert status == 404
        assert srv.post([{"benchmark": "b", "item_id": "q0", "model": "new",
                          "score": int(x["new"][0])}])[0] == 202
        asked = 0
        while True:
            res = cli("plan", "--url", url, "--benchmark", "b", "--model", "new",
                      "--count", "100", "--json")
            plan = json.loads(res.stdout)
            asked += 1
            if plan["action"] == "stop":
                assert res.returncode == 3, res.stderr
                break
            assert res.returncode == 0, res.stderr
            assert plan["next_items"], plan
            batch = [{"benchmark": "b", "item_id": i, "model": "new",
                      "score": int(x["new"][int(i[1:])])} for i in plan["next_items"]]
            assert srv.post(batch)[0] == 202
            assert asked < 60
        _, ranking = srv.get_json("/v1/benchmarks/b/ranking")
    finally:
        srv.stop()
    assert plan["items_done"] < ITEMS, plan
    assert plan["reason"].startswith("settled: all 3 pairs are decided"), plan["reason"]
    assert not plan["open"] and len(plan["settled"]) == 3
    for pair in plan["settled"]:
        other = pair["model"]
        truth_better = "new" if TRUTH["new"] > TRUTH[other] else other
        assert pair["verdict"] in (f"resolved:{truth_better}", "equivalent"), pair
    # The route and the ranking agree on the verdicts.
    verdicts = {frozenset((p["model_a"], p["model_b"])): p["verdict"]
                for p in ranking["pairs"]}
    for pair in plan["settled"]:
        key = frozenset(("new", pair["model"]))
        if key in verdicts:
            assert verdicts[key] == pair["verdict"]


def test_the_plan_hands_out_a_fixed_order_and_narrows_the_question(tmp_path: Path) -> None:
    x = _scores(8)
    srv = Server(tmp_path / "m.db", "--planned-models", "4").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        rows = [{"benchmark": "b", "item_id": f"q{i}", "model": m, "score": int(x[m][i])}
                for m in ("strong", "mid", "weak") for i in range(ITEMS)]
        rows.append({"benchmark": "b", "item_id": "q5", "model": "new", "score": 1})
        assert srv.post(rows)[0] == 202
        first = json.loads(cli("plan", "--url", url, "--benchmark", "b", "--model", "new",
                               "--json").stdout)
        again = json.loads(cli("plan", "--url", url, "--benchmark", "b", "--model", "new",
                               "--json").stdout)
        assert first["next_items"] == again["next_items"] and len(first["next_items"]) == 100
        assert "q5" not in first["next_items"]  # done already
        assert first["next_items"] != [f"q{i}" for i in range(100)]  # not file order
        budget = cli("plan", "--url", url, "--benchmark", "b", "--model", "new",
                     "--budget", "1", "--json")
        assert budget.returncode == 3
        assert json.loads(budget.stdout)["reason"] == "the item budget of 1 is reached"
        narrowed = json.loads(cli("plan", "--url", url, "--benchmark", "b", "--model", "new",
                                  "--against", "weak", "--json").stdout)
        assert [p["model"] for p in narrowed["open"] + narrowed["settled"]] == ["weak"]
        unknown = cli("plan", "--url", url, "--benchmark", "b", "--model", "new",
                      "--against", "nobody")
        assert unknown.returncode not in (0, 3) and "nobody" in unknown.stderr
        # A model with no result yet starts where the order starts: the same items, before q5.
        fresh = json.loads(cli("plan", "--url", url, "--benchmark", "b", "--model", "nobody",
                               "--json").stdout)
        assert fresh["action"] == "continue" and fresh["items_done"] == 0
        assert [i for i in fresh["next_items"] if i != "q5"][:99] == first["next_items"][:99]
        no_bench = cli("plan", "--url", url, "--benchmark", "nonesuch", "--model", "new")
        assert no_bench.returncode not in (0, 3) and "nonesuch" in no_bench.stderr
    finally:
        srv.stop()
