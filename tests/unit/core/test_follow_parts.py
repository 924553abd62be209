"""A run followed in parts (``paths._advance_in_parts``) decides as one ``advance`` over every
item: the same pairs, at the same item, with the same e-value, and the same state left behind."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from monitor.core import paths as core_paths
from monitor.stats import sequential as sq


def _case(seed: int) -> dict:
    """Pairs in every state a run can meet: new (kind chosen at the first item), McNemar with
    sums behind them, with a frozen segment, already decided, bounded, meeting a 0.5; each with
    a few hundred items spread over a run of 512 results, gaps from none to large."""
    rng = np.random.default_rng(seed)
    n_pairs, run = 60, 512
    st = sq.PairPaths.empty(n_pairs)
    state = rng.choice(["new", "mcnemar", "frozen", "decided", "bounded"], n_pairs,
                       p=[0.25, 0.4, 0.1, 0.1, 0.15])
    st.kind[:] = np.where(state == "new", sq.UNSET,
                          np.where(state == "bounded", sq.BOUNDED, sq.MCNEMAR))
    base_n = np.where(state == "new", 0.0, rng.integers(20, 400, n_pairs).astype(float))
    n10 = np.floor(base_n * rng.uniform(0.05, 0.2, n_pairs))
    n01 = np.floor(base_n * rng.uniform(0.05, 0.2, n_pairs))
    base_s, base_v = n10 - n01, n10 + n01
    frozen = state == "frozen"
    st.start_n[frozen] = np.floor(base_n[frozen] / 2)
    st.start_s[frozen] = np.floor(base_s[frozen] / 2)
    st.start_v[frozen] = np.floor(base_v[frozen] / 2) + np.abs(st.start_s[frozen]) % 2
    st.start_log_plus[frozen] = rng.uniform(0.0, 2.0, frozen.sum())
    st.start_log_minus[frozen] = rng.uniform(0.0, 2.0, frozen.sum())
    decided = state == "decided"
    st.decided[decided] = 1
    st.decided_n[decided] = base_n[decided]
    gap = rng.choice([0.0, 0.05, 0.15, 0.3, -0.3], n_pairs)
    idx_parts, tt_parts = [], []
    for p in range(n_pairs):
        m = int(rng.integers(70, 400))
        idx_parts.append(np.full(m, p))
        tt_parts.append(np.sort(rng.choice(run, m, replace=False)))
    idx, tt = np.concatenate(idx_parts), np.concatenate(tt_parts)
    xa = (rng.random(idx.size) < 0.5 + gap[idx] / 2).astype(float)
    xb = (rng.random(idx.size) < 0.5 - gap[idx] / 2).astype(float)
    halves = (state == "bounded")[idx] | ((rng.random(n_pairs) < 0.1)[idx]
                                          & (rng.random(idx.size) < 0.05))
    xa = np.where(halves & (rng.random(idx.size) < 0.5), 0.5, xa)
    nonbinary = (xa != 0.0) & (xa != 1.0)
    thr = np.log(1 / sq.pair_share(np.arange(1, n_pairs + 1), alpha=0.05, planned=12))
    return {"paths": st, "idx": idx, "tt": tt, "d": xa - xb, "nonbinary": nonbinary,
            "base": (base_n, base_s, base_v), "thr": thr,
            "equivalence": rng.random(n_pairs) < 0.8}


@pytest.mark.parametrize("margin", [None, 0.1])
@pytest.mark.parametrize("seed", range(8))
def test_a_run_followed_in_parts_decides_as_one_advance(seed: int, margin: float | None) -> None:
    case = _case(seed)
    whole = case["paths"].take(np.arange(case["paths"].kind.size))
    b_n, b_s, b_v = case["base"]
    want = sq.advance(whole, case["idx"], case["d"], case["nonbinary"], base_n=b_n, base_s=b_s,
                      base_v=b_v, log_threshold=case["thr"], margin=margin,
                      equivalence=case["equivalence"])
    parts = case["paths"].take(np.arange(case["paths"].kind.size))
    got = core_paths._advance_in_parts(parts, case["idx"], case["tt"], case["d"],
                                       case["nonbinary"], case["base"], case["thr"], margin,
                                       case["equivalence"])
    assert want.size > 3  # the case decides pairs; some of them after their first part
    np.testing.assert_array_equal(np.sort(got), np.sort(want))
    for field in whole.__dataclass_fields__:
        np.testing.assert_array_equal(getattr(parts, field), getattr(whole, field), err_msg=field)


def test_parts_that_cannot_decide_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the parts: a pair far from its threshold is followed in few of them (open
    McNemar pairs of 0/1 items here, all of whose parts the screen may leave out)."""
    case = _case(0)
    st = case["paths"]
    st.kind[:] = sq.MCNEMAR
    st.decided[:] = 0
    case["d"] = np.where(case["nonbinary"], 0.0, case["d"])
    case["nonbinary"][:] = False
    seen: list[int] = []
    real = sq.advance

    def counting(paths: sq.PairPaths, pair: np.ndarray, *args: object, **kw: object) -> object:
        seen.append(pair.size)
        return real(paths, pair, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(core_paths, "advance", counting)
    core_paths._advance_in_parts(case["paths"], case["idx"], case["tt"], case["d"],
                                 case["nonbinary"], case["base"], case["thr"], None,
                                 case["equivalence"])
    assert seen and seen[0] < case["idx"].size / 2


def _live(scores: np.ndarray, order: np.ndarray) -> tuple[bytes, ...]:
    """Every cell of ``scores`` (items × models) through a Monitor, one model after another in
    ``order`` per model, in batches of 500; the snapshot's arrays and the decisions' order."""
    from monitor.contracts import ItemResult
    from monitor.core import CoreConfig, Monitor
    from monitor.core.snapshot import bench_to_snapshot

    models = scores.shape[1]
    events = [ItemResult(benchmark="b", item_id=str(i), model=f"m{j}", score=float(scores[i, j]))
              for j in range(models) for i in order[j]]
    mon = Monitor(CoreConfig())
    outcomes: list[str] = []
    for at in range(0, len(events), 500):
        outcomes.extend(mon.apply(events[at:at + 500], evaluate=False).outcomes)
    _, arrays = bench_to_snapshot(mon._benches["b"])
    return (repr(outcomes).encode(), *(arrays[k].tobytes() for k in sorted(arrays)))


@pytest.mark.parametrize("thirds", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_live_runs_in_parts_leave_the_state_of_one_pass(seed: int, thirds: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole live runs (models arriving one after another, so a run holds many items of each
    pair) leave the same snapshot, bit for bit, with runs followed in parts or in one pass —
    on a board of 0/1 scores, and on one whose last two models have scores of 1/3 (no run is
    followed in parts after the first: one pass's running sums then round with the items
    before them)."""
    rng = np.random.default_rng(seed)
    items, models = 600, 7
    skill = rng.uniform(0.35, 0.8, models)
    scores = (rng.random((items, models)) < skill).astype(float)
    if thirds:
        some = rng.random((items, models)) < 0.2
        scores[some & (np.arange(models) >= models - 2)] = 1 / 3
    order = np.array([rng.permutation(items) for _ in range(models)])
    calls: list[int] = []
    real = core_paths._screen_parts  # the parts' screen, of the dense and the general pass

    def counting(*args: object, **kw: object) -> object:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(core_paths, "_screen_parts", counting)
    in_parts = _live(scores, order)
    assert calls  # runs were followed in parts (on the 1/3 board: before its first 1/3)
    monkeypatch.setattr(core_paths, "SUB", 10**9)  # one pass for every run
    assert _live(scores, order) == in_parts


@pytest.mark.parametrize("margin", [None, 0.05])
@pytest.mark.parametrize("seed", range(3))
def test_one_models_run_followed_densely_leaves_the_general_pass_state(
        seed: int, margin: float | None) -> None:
    """Runs of one model's results (a model's results in order, in batches of a few hundred)
    followed as a dense block (``paths._follow_one_model``) decide the same pairs at the same
    items, with the same e-values and the same state, as the general item-list pass."""
    from monitor.contracts import ItemResult, ResolutionChange
    from monitor.core import CoreConfig, Monitor
    from monitor.core.config import BenchmarkSpec
    from monitor.core.snapshot import bench_to_snapshot

    rng = np.random.default_rng(seed)
    n_models, n_items = 8, 1500
    skill = rng.uniform(0.2, 0.9, n_models)
    x = (rng.random((n_items, n_models)) < skill).astype(float)
    x[rng.random(x.shape) < 0.15] = np.nan  # some items a model never answered
    events = [ItemResult(benchmark="b", item_id=str(i), model=f"m{j}", score=float(x[i, j]))
              for j in range(n_models) for i in rng.permutation(n_items) if not np.isnan(x[i, j])]
    cuts = np.sort(rng.choice(np.arange(1, len(events)), 40, replace=False)).tolist()

    def run(dense: bool) -> tuple[Any, ...]:
        with pytest.MonkeyPatch.context() as mp:
            calls: list[int] = []
            real = core_paths._follow_one_model

            def counted(*a: Any, **k: Any) -> Any:
                calls.append(1)
                return real(*a, **k)

            mp.setattr(core_paths, "_dense_follow", lambda st, touched: dense and (
                touched.size == 1 and st.binary))
            mp.setattr(core_paths, "_follow_one_model", counted)
            spec = BenchmarkSpec(margin=margin)
            mon = Monitor(CoreConfig(benchmarks={"b": spec}))
            outcomes: list[str] = []
            for lo, hi in zip([0, *cuts], [*cuts, len(events)], strict=True):
                outcomes.extend(mon.apply(events[lo:hi], evaluate=False).outcomes)
            assert (len(calls) > 10) == dense
            head, arrays = bench_to_snapshot(mon._benches["b"])
            head["times"] = len(head["times"])
            changes = [(c.model_a, c.model_b, c.verdict, c.n) for c in mon.evaluate()
                       if isinstance(c, ResolutionChange)]
            decided = int((mon._benches["b"].paths.decided != 0).sum())
            return outcomes, head, {k: v.tobytes() for k, v in arrays.items()}, changes, decided

    dense, general = run(True), run(False)
    assert dense[4] >= 10  # the stream decides pairs (of 28)
    assert dense == general
