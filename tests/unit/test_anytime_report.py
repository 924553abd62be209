"""The report's verdict keys against a brute-force replay; power/calibrate CLI keys."""

from __future__ import annotations

import json

import numpy as np
import pytest

from monitor.cli import main
from monitor.core.records import pair_columns, pair_objects
from monitor.io.tables import ScoreTable
from monitor.offline.replay import anytime_replay
from monitor.offline.report import AnytimeReplay
from monitor.stats import eprocess as ep
from monitor.stats import sequential as sq


def _table(rng: np.random.Generator) -> ScoreTable:
    x = (rng.random((3000, 5)) < np.array([0.75, 0.7, 0.69, 0.5, 0.5])).astype(float)
    x[rng.random(x.shape) < 0.05] = np.nan  # absent items
    return ScoreTable(source="synthetic", benchmark=None,
                      item_ids=np.array([f"q{i}" for i in range(3000)]),
                      models=tuple("abcde"), scores=x)


def _birth(x: np.ndarray) -> np.ndarray:
    # models are born at their first score in the replay order, ties by column
    present = ~np.isnan(x)
    first = np.where(present.any(axis=0), present.argmax(axis=0), x.shape[0])
    birth = np.empty(x.shape[1], dtype=np.int64)
    birth[np.lexsort((np.arange(x.shape[1]), first))] = np.arange(x.shape[1])
    return birth


def _fields(replay: AnytimeReplay, a: np.ndarray, b: np.ndarray) -> list[dict[str, object]]:
    """The verdict and anytime keys of the report's pair objects (A = a[k], names a…e)."""
    idx = np.arange(a.size, dtype=np.int64)
    names = np.array(list("abcde"))
    return pair_objects(pair_columns(replay.figures, idx, replay.context(
        idx, names[a].tolist(), names[b].tolist())))


@pytest.mark.parametrize("rule", ["board", "family"])
def test_first_resolved_at_matches_brute_force(rule: str) -> None:
    table = _table(np.random.default_rng(0))
    a, b = np.triu_indices(5, 1)
    for order, seed in [("file", None), ("shuffle", 3)]:
        replay = anytime_replay(table, (a, b), alpha=0.05, order=order, seed=seed, rule=rule,
                                planned_models=32)
        fields = _fields(replay, a, b)
        x = table.scores if seed is None else table.scores[np.random.default_rng(seed).permutation(3000)]
        birth = _birth(x)
        for k in range(a.size):
            if rule == "board":  # the pair's fixed share, from its birth order
                lo, hi = sorted((birth[a[k]], birth[b[k]]))
                gamma = float(sq.pair_share(sq.pair_number(lo, hi), alpha=0.05,
                                            planned=sq.planned_pairs(32)))
            else:
                gamma = 0.05 / a.size
            xa, xb = x[:, a[k]], x[:, b[k]]
            d = (xa - xb)[~np.isnan(xa) & ~np.isnan(xb)]
            n10, n01 = np.cumsum(d > 0), np.cumsum(d < 0)
            le = ep.log_e_mcnemar(n10, n01)
            # each direction by its own one-sided e-process at γ/2
            plus, minus = ep.log_e_mcnemar_sides(n10, n01)
            hits = np.flatnonzero(np.maximum(plus, minus) >= np.log(2 / gamma))
            f = fields[k]
            decided = f["decided"]
            assert (None if decided is None else decided["n"]) == (  # type: ignore[index]
                int(hits[0]) + 1 if hits.size else None)
            assert f["e_threshold"] == pytest.approx(1 / gamma)
            assert f["log_e"] == pytest.approx(float(le[-1]), rel=1e-12, abs=1e-12)
            if hits.size:
                winner = "abcde"[a[k]] if plus[hits[0]] >= minus[hits[0]] else "abcde"[b[k]]
                assert f["verdict"] == f"resolved:{winner}"
                assert decided["final"] is True  # type: ignore[index]
            else:
                assert f["verdict"] == "unresolved"
    # a vs d differs by 0.25: resolved; d vs e has no gap.
    replay = anytime_replay(table, (a, b), order="shuffle", seed=1, rule=rule)
    fields = _fields(replay, a, b)
    assert fields[2]["verdict"] == "resolved:a" and fields[2]["cs_low"] > 0  # type: ignore[operator]


def test_power_json_has_n_star_anytime(capsys: pytest.CaptureFixture[str]) -> None:
    # docs/anytime.md's worked example: the live rule on a board planned for 32 models (a
    # simulated 80 % point of 4,081 items, tests/statistical/test_live_power.py) beside one
    # pair alone (1,675 simulated).
    assert main(["power", "--pa", "0.65", "--pb", "0.60", "--rho", "0.30",
                 "--planned-models", "32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_star"] == 1028 and out["n_star_anytime"] == 4051
    assert out["n_star_anytime_single_pair"] == 1694 and out["e_threshold"] == 19840


def test_calibrate_anytime_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--anytime", "--reps", "200", "--n", "400", "--seed", "2",
                 "--pa", "0.65", "--pb", "0.55", "--rho", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["null"]["naive_peeked_z"]["false_resolution_rate"] > out["null"]["e_process"]["false_resolution_rate"]
    alt = out["alternative"]
    assert 0 <= alt["resolved_by_n_star_anytime"] <= 1
    assert 0 <= alt["single_pair"]["resolved_by_n_star_anytime"] <= 1
    # the live rule's N*_AV is the power command's for the same board
    assert main(["power", "--pa", "0.65", "--pb", "0.55", "--rho", "0.3", "--json"]) == 0
    assert alt["n_star_anytime"] == json.loads(capsys.readouterr().out)["n_star_anytime"]
    assert alt["median_items"] <= alt["power_quantile_items"] <= alt["horizon"]
