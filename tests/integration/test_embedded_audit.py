"""Contamination-aware verdicts and stability tracking over real HTTP against ``llm-monitor run``.

The references are the offline commands on the same data: ``llm-monitor stability --json``
for flip rates, ``llm-monitor report --json`` on the table with the flagged items removed
for the pair statistics.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.embedded_harness import Server, cli, metric_value

pytestmark = pytest.mark.integration

MODELS = {"strong": 0.8, "mid": 0.6, "weak": 0.35}
N_ITEMS = 400
LEAKED = {f"q{i}" for i in range(N_ITEMS) if i % 10 == 0}


def _score(i: int, j: int, p: float) -> int:
    # Deterministic 0/1 scores with the given accuracy (the e2e test's generator).
    return int((i * 7919 + 13 * j) % 1000 < 1000 * p)


def _table(path: Path, *, skip: set[str]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", *MODELS])
        for i in range(N_ITEMS):
            if f"q{i}" not in skip:
                w.writerow([f"q{i}", *(_score(i, j, p) for j, p in enumerate(MODELS.values()))])
    return path


def _events() -> list[dict[str, Any]]:
    out = []
    for i in range(N_ITEMS):
        for j, (m, p) in enumerate(MODELS.items()):
            ev: dict[str, Any] = {"benchmark": "toy", "item_id": f"q{i}", "model": m,
                                  "score": _score(i, j, p)}
            # A leakage scan flags the item on one model's result only: that is enough.
            if f"q{i}" in LEAKED and m == "mid":
                ev["flags"] = ["leak-suspect"]
            out.append(ev)
    return out


def _report(table: Path) -> dict[str, Any]:
    res = cli("report", str(table), "--correction", "bonferroni", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _assert_ranking_matches(ranking: dict[str, Any], report: dict[str, Any]) -> None:
    assert [(m["model"], m["n"]) for m in ranking["models"]] == \
        [(r["model"], r["n"]) for r in report["ranking"]]
    for got, ref in zip(ranking["models"], report["ranking"], strict=True):
        assert got["mean"] == pytest.approx(ref["mean"], abs=1e-12)
    assert len(ranking["pairs"]) == len(report["pairs"])
    for got, ref in zip(ranking["pairs"], report["pairs"], strict=True):
        assert (got["model_a"], got["model_b"], got["n"]) == \
            (ref["model_a"], ref["model_b"], ref["n"])
        assert got["delta"] == pytest.approx(ref["delta"], abs=1e-12)
        assert got["fixed_n"]["q"] == pytest.approx(ref["fixed_n"]["q"], rel=1e-9)
        assert got["fixed_n"]["mde"] == pytest.approx(ref["fixed_n"]["mde"], rel=1e-9)


def test_leak_suspect_items_excluded_as_if_removed_and_restored_on_request(
        tmp_path: Path) -> None:
    full = _report(_table(tmp_path / "full.csv", skip=set()))
    cleaned = _report(_table(tmp_path / "cleaned.csv", skip=LEAKED))
    # The flagged items must matter, or the comparison proves nothing.
    assert full["pairs"][0]["n"] != cleaned["pairs"][0]["n"]
    assert full["pairs"][0]["fixed_n"]["q"] != pytest.approx(cleaned["pairs"][0]["fixed_n"]["q"],
                                                              rel=1e-6)

    db = tmp_path / "audit.db"
    srv = Server(db, "--eval-interval", "0").start()
    try:
        status, body = srv.post(_events())
        assert status == 202 and body["accepted"] == N_ITEMS * len(MODELS), body
        _, ranking = srv.get_json("/v1/benchmarks/toy/ranking")
        assert ranking["excluded_items"] == len(LEAKED)
        _assert_ranking_matches(ranking, cleaned)

        _, cont = srv.get_json("/v1/benchmarks/toy/contamination?limit=5")
        assert cont["exclusion"] is True and cont["exclude_flags"] == ["leak-suspect"]
        assert cont["excluded_items"] == cont["leak_suspect_items"] == len(LEAKED)
        assert cont["excluded_ids"] == sorted(LEAKED)[:5] and cont["truncated"] is True
        _, cont = srv.get_json("/v1/benchmarks/toy/contamination")
        assert set(cont["excluded_ids"]) == LEAKED and cont["truncated"] is False
        assert metric_value(srv.metrics(), "llm_monitor_excluded_items",
                            benchmark="toy") == len(LEAKED)
        status, _ = srv.get_json("/v1/benchmarks/nope/contamination")
        assert status == 404
    finally:
        assert srv.stop() == 0

    # The same stored results, rebuilt with the exclusion off: the full table's figures.
    srv = Server(db, "--eval-interval", "0", "--include-leak-suspect").start()
    try:
        _, ranking = srv.get_json("/v1/benchmarks/toy/ranking")
        assert ranking["excluded_items"] == 0
        _assert_ranking_matches(ranking, full)
        _, cont = srv.get_json("/v1/benchmarks/toy/contamination")
        assert cont["exclusion"] is False and cont["excluded_items"] == 0
        assert cont["leak_suspect_items"] == len(LEAKED) and cont["excluded_ids"] == []
    finally:
        srv.kill()


def _stability_run(tmp_path: Path, items: Path, model: str, *, accuracy: float,
                   flip: float) -> tuple[dict[str, Any], list[str]]:
    out = tmp_path / f"{model}.jsonl"
    res = cli("stability", str(items), "--model", model, "--adapter", "local",
              "--local-accuracy", str(accuracy), "--local-flip", str(flip),
              "--benchmark", "mc", "--events-out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), out.read_text().splitlines()


def test_stability_endpoint_equals_offline_stability_and_metrics(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text("".join(
        json.dumps({"id": f"m{i}", "question": f"What is {i} + 1?",
                    "options": [str(i + 1), str(i), str(i + 2), "none"], "answer": 0}) + "\n"
        for i in range(150)))
    # One model under the 10 % alarm level, one above it.
    offline = {}
    lines: list[str] = []
    for model, acc, flip in (("steady", 0.85, 0.02), ("brittle", 0.7, 0.3)):
        offline[model], out = _stability_run(tmp_path, items, model, accuracy=acc, flip=flip)
        lines += out
    assert [offline[m]["alarm"] for m in ("steady", "brittle")] == [False, True]

    srv = Server(tmp_path / "stab.db", "--eval-interval", "0").start()
    try:
        # Perturbed results first, then the originals: pairing must not depend on the order.
        perturbed = [ln for ln in lines if '"perturbed:' in ln]
        originals = [ln for ln in lines if '"perturbed:' not in ln]
        for chunk in (perturbed, originals):
            status, body = srv.post("\n".join(chunk) + "\n")
            assert status == 202 and body["accepted"] == len(chunk), body
        _, stab = srv.get_json("/v1/benchmarks/mc/stability")
        assert stab["alarm_level"] == 0.1
        live = {m["model"]: m for m in stab["models"]}
        assert set(live) == set(offline)
        text = srv.metrics()
        for model, ref in offline.items():
            got = live[model]
            assert got["alarm"] == ref["alarm"]
            overall = got["overall"]
            assert (overall["flips"], overall["right_on_original"]) == \
                (ref["flips"], ref["flip_base"])
            assert overall["flip_rate"] == ref["flip_rate"]
            assert overall["ci"] == ref["flip_ci"]
            assert overall["alarm_confirmed"] == ref["alarm_confirmed"]
            kinds = {k["kind"]: k for k in got["kinds"]}
            assert set(kinds) == {s["kind"] for s in ref["per_kind"]}
            for s in ref["per_kind"]:
                k = kinds[s["kind"]]
                assert k["pairs"] == ref["n_items"]
                assert (k["flips"], k["right_on_original"]) == (s["flips"], s["base"])
                assert k["flip_rate"] == s["rate"]
                assert k["ci"] == [s["ci_low"], s["ci_high"]]
                assert metric_value(text, "llm_monitor_model_flip_rate", benchmark="mc",
                                    model=model, kind=s["kind"]) == pytest.approx(s["rate"])
            assert metric_value(text, "llm_monitor_model_flip_rate", benchmark="mc",
                                model=model, kind="all") == pytest.approx(ref["flip_rate"])
            assert metric_value(text, "llm_monitor_model_flip_pairs", benchmark="mc",
                                model=model, kind="all") == 4 * ref["n_items"]
    finally:
        srv.kill()


def test_state_change_series_exist_at_zero_before_the_first_change(tmp_path: Path) -> None:
    srv = Server(tmp_path / "zero.db", "--eval-interval", "0").start()
    try:
        # Perturbed results only: the benchmark exists but has no ranking, hence no change.
        status, body = srv.post([{"benchmark": "quiet", "item_id": "a", "model": "m",
                                  "score": 1, "variant": "perturbed:noise"}])
        assert status == 202 and body["accepted"] == 1 and body["changes"] == 0, body
        text = srv.metrics()
        for kind in ("resolution", "ranking"):
            line = f'llm_monitor_state_changes_total{{benchmark="quiet",kind="{kind}"}} 0.0'
            assert line in text.splitlines(), text
    finally:
        srv.kill()


def test_post_of_a_stability_events_file_gives_the_offline_flip_rates(tmp_path: Path) -> None:
    """``post`` reads the file ``stability --events-out`` writes as curl sends it: each line one
    result, its variant kept (it was read as a table, where an item's perturbed variants are
    "two different scores" and the file was refused)."""
    items = tmp_path / "items.jsonl"
    items.write_text("".join(
        json.dumps({"id": f"m{i}", "question": f"What is {i} + 2?",
                    "options": [str(i + 2), str(i), str(i + 1), "none"], "answer": 0}) + "\n"
        for i in range(60)))
    ref, lines = _stability_run(tmp_path, items, "brittle", accuracy=0.7, flip=0.3)
    events = tmp_path / "brittle.jsonl"
    with events.open("a") as fh:  # a blank line is passed over, and said so
        fh.write("\n")
    srv = Server(tmp_path / "post.db", "--eval-interval", "0").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        res = cli("post", str(events), "--url", url, "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        account = json.loads(res.stdout)
        assert (account["events"], account["accepted"]) == (len(lines), len(lines))
        assert account["passed_over"] == {"blank line": 1}
        _, stab = srv.get_json("/v1/benchmarks/mc/stability")
        (got,) = stab["models"]
        assert (got["overall"]["flips"], got["overall"]["right_on_original"]) == (
            ref["flips"], ref["flip_base"])
        assert got["overall"]["flip_rate"] == ref["flip_rate"]
        # Twice: every line a duplicate; a changed score of a perturbed variant a conflict
        # naming its line.
        changed = [json.loads(x) for x in lines]
        k = next(i for i, e in enumerate(changed) if e["variant"] != "original")
        changed[k]["score"] = 1.0 - changed[k]["score"]
        events.write_text("".join(json.dumps(e) + "\n" for e in changed))
        res = cli("post", str(events), "--url", url)
        assert res.returncode == 1, res.stdout + res.stderr
        assert f"duplicate {len(lines) - 1}, conflict 1, invalid 0" in res.stdout
        assert f"rejected {events}:{k + 1}: conflict" in res.stdout
    finally:
        srv.kill()
