"""Sequential decisions: vectorised ``advance`` against a per-item scalar loop, and α shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.stats import eprocess as ep
from monitor.stats import sequential as sq


def _sides(kind: int, n: float, s: float, v: float) -> tuple[float, float]:
    if n <= 0:
        return 0.0, 0.0
    if kind == sq.MCNEMAR:
        p, m = ep.log_e_mcnemar_sides((v + s) / 2, (v - s) / 2)
    else:
        p, m = ep.log_e_bounded_sides(n, s, v)
    return float(p), float(m)


def _scalar_path(items: list[tuple[float, bool]], log_thr: float) -> dict[str, float]:
    """One pair followed item by item with plain Python, the definition in the docstring:
    one-sided e-processes E₊, E₋ (products over segments), decided when one reaches 2/γ."""
    kind = sq.UNSET
    n = s = v = 0.0
    sw: tuple[float, float, float, float, float] | None = None  # n, s, v, log E₊, log E₋
    out = {"kind": 0.0, "decided": 0.0, "n": 0.0, "log_e": 0.0, "switch_n": 0.0}
    for d, nonbinary in items:
        if kind == sq.UNSET:
            kind = sq.BOUNDED if nonbinary else sq.MCNEMAR
        if kind == sq.MCNEMAR and sw is None and nonbinary:
            p0, m0 = _sides(sq.MCNEMAR, n, s, v)
            sw = (n, s, v, p0, m0)
        n, s, v = n + 1, s + d, v + d * d
        if sw is None:
            plus, minus = _sides(kind, n, s, v)
        else:
            p1, m1 = _sides(sq.BOUNDED, n - sw[0], s - sw[1], v - sw[2])
            plus, minus = sw[3] + p1, sw[4] + m1
        if out["decided"] == 0 and max(plus, minus) >= log_thr + math.log(2.0):
            out.update(decided=1.0 if plus >= minus else -1.0, n=n,
                       log_e=float(np.logaddexp(plus, minus) - math.log(2.0)))
    out["kind"] = float(kind if sw is None else sq.BOUNDED)  # the current segment's mixture
    out["switch_n"] = 0.0 if sw is None else sw[0]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_advance_in_any_batching_equals_the_item_by_item_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_pairs, n_items = 12, 3000
    pair = rng.integers(0, n_pairs, n_items)
    gap = rng.choice([0.0, 0.3, -0.3], n_pairs)  # some pairs drift, some do not
    xa = (rng.random(n_items) < 0.5 + gap[pair]).astype(float)
    xb = (rng.random(n_items) < 0.5).astype(float)
    # A few pairs start continuous, a few meet a 0.5 later (the switch), the rest stay 0/1.
    cont_from = np.where(rng.random(n_pairs) < 0.25, 0,
                         np.where(rng.random(n_pairs) < 0.3, rng.integers(1, 60, n_pairs),
                                  n_items + 1))
    rank = np.zeros(n_items, dtype=np.int64)
    for p in range(n_pairs):
        idx = np.flatnonzero(pair == p)
        rank[idx] = np.arange(idx.size)
    nonbinary = rank >= cont_from[pair]
    xa = np.where(nonbinary & (rng.random(n_items) < 0.5), 0.5, xa)
    d = xa - xb
    nonbinary = nonbinary & ((xa != 0) & (xa != 1) | (xb != 0) & (xb != 1))
    log_thr = np.log(1 / sq.pair_share(np.arange(1, n_pairs + 1), alpha=0.05, planned=3))

    paths = sq.PairPaths.empty(n_pairs)
    base = np.zeros((3, n_pairs))
    cuts = np.sort(rng.choice(np.arange(1, n_items), size=7, replace=False))
    decided_total: list[int] = []
    for chunk in np.split(np.arange(n_items), cuts):
        got = sq.advance(paths, pair[chunk], d[chunk], nonbinary[chunk], base_n=base[0],
                         base_s=base[1], base_v=base[2], log_threshold=log_thr)
        decided_total.extend(got.tolist())
        np.add.at(base[0], pair[chunk], 1.0)
        np.add.at(base[1], pair[chunk], d[chunk])
        np.add.at(base[2], pair[chunk], d[chunk] ** 2)
    assert len(decided_total) == len(set(decided_total))  # each pair decided once
    for p in range(n_pairs):
        idx = np.flatnonzero(pair == p)
        ref = _scalar_path([(float(d[i]), bool(nonbinary[i])) for i in idx], float(log_thr[p]))
        assert paths.kind[p] == ref["kind"]
        assert paths.start_n[p] == ref["switch_n"]
        assert paths.decided[p] == ref["decided"], p
        if ref["decided"]:
            assert paths.decided_n[p] == ref["n"]
            assert paths.decided_log_e[p] == pytest.approx(ref["log_e"], rel=1e-12, abs=1e-12)
    assert sorted(decided_total) == [p for p in range(n_pairs) if paths.decided[p] != 0]
    assert any(paths.decided != 0) and any(paths.start_n > 0)


def test_shares_spend_alpha_over_a_board_of_any_size() -> None:
    planned = sq.planned_pairs(8)  # 28 pairs
    assert planned == 28
    gamma = sq.pair_share(np.arange(1, 28 * (2**12 - 1) + 1), alpha=0.05, planned=planned)
    assert np.all(np.diff(gamma) <= 0)  # later pairs never get more
    assert gamma[:28] == pytest.approx(0.05 / 56)  # the planned board shares α/2
    assert float(gamma.sum()) == pytest.approx(0.05 * (1 - 2.0**-12), rel=1e-12)
    assert float(gamma.sum()) < 0.05
    # birth order: all pairs of model k come before those of model k + 1
    lo, hi = np.triu_indices(8, 1)
    numbers = sq.pair_number(lo, hi)
    assert sorted(numbers.tolist()) == list(range(1, 29))
    assert np.all(numbers[hi == 7] > numbers[hi < 7].max())
    with pytest.raises(ValueError, match="planned_models"):
        sq.planned_pairs(1)


@pytest.mark.parametrize("level", [math.log(2 / 0.05), math.log(2 / 5e-5), math.log(2 / 1e-9)])
def test_mcnemar_boundary_is_the_first_crossing_of_the_one_sided_e_process(level: float) -> None:
    # T[b] = min{a : log E₊(a, b) ≥ level}, checked against a scan of a = 0, 1, 2, …
    bound = sq.mcnemar_boundary(level, 300)
    for b in range(0, 300, 13):
        a = np.arange(0, 4 * b + 200, dtype=float)
        plus = ep.log_e_mcnemar_sides(a, np.full(a.size, float(b)))[0]
        assert bound[b] == int(np.argmax(plus >= level)), b
    assert np.all(np.diff(bound[:300]) >= 0)
    # E₋ is the mirror: crossing where n01 ≥ T[n10]
    minus = ep.log_e_mcnemar_sides(np.full(5, 7.0), bound[7] + np.arange(-2, 3.0))[1]
    assert (minus >= level).tolist() == [False, False, True, True, True]


@pytest.mark.parametrize("seed", range(8))
def test_may_cross_false_is_a_proof_that_no_item_of_the_run_crossed(seed: int) -> None:
    # Random runs of items for many pairs (McNemar with and without frozen evidence, and
    # bounded), followed item by item: wherever may_cross says False, no item crossed.
    rng = np.random.default_rng(seed)
    n_pairs, length = 400, int(rng.integers(5, 120))
    kind = rng.choice([sq.MCNEMAR, sq.BOUNDED], n_pairs).astype(np.int8)
    gap = rng.uniform(-0.4, 0.4, n_pairs)
    frozen = np.where(rng.random(n_pairs) < 0.3, rng.uniform(0, 6, n_pairs), 0.0)
    lp, lm = frozen, np.where(frozen > 0, rng.uniform(0, 6, n_pairs), 0.0)
    n0 = rng.integers(0, 300, n_pairs).astype(float)
    s0 = np.round(n0 * gap * rng.uniform(0.5, 1.5, n_pairs))
    v0 = np.minimum(n0, np.abs(s0) + np.round(0.3 * n0))
    v0 = np.where((v0 + s0) % 2 == 1, v0 + 1, v0)  # McNemar: n10 and n01 integers
    n0 = np.maximum(n0, v0)
    thr = np.log(1 / sq.pair_share(rng.integers(1, 2000, n_pairs), alpha=0.05, planned=496))
    d = np.where(rng.random((n_pairs, length)) < 0.5 + gap[:, None],
                 1.0, np.where(rng.random((n_pairs, length)) < 0.6, 0.0, -1.0))
    cont = kind == sq.BOUNDED
    d[cont] = np.clip(d[cont] * rng.uniform(0.2, 1.0, (cont.sum(), length)), -1, 1)
    zeros = np.zeros(n_pairs)
    crossed_any = np.zeros(n_pairs, dtype=bool)
    for t in range(1, length + 1):
        n, s, v = n0 + t, s0 + d[:, :t].sum(1), v0 + (d[:, :t] ** 2).sum(1)
        plus, minus = sq.log_e_sides(kind, n, s, v, start_n=zeros, start_s=zeros,
                                     start_v=zeros, start_log_plus=lp, start_log_minus=lm)
        crossed_any |= (plus >= thr + math.log(2)) | (minus >= thr + math.log(2))
    maybe = sq.may_cross(kind, (n0, s0, v0), (n0 + length, s0 + d.sum(1), v0 + (d**2).sum(1)),
                         start_n=zeros, start_s=zeros, start_v=zeros, start_log_plus=lp,
                         start_log_minus=lm, log_threshold=thr)
    assert not np.any(crossed_any & ~maybe)
    assert crossed_any.any() and (~maybe).any()  # both cases occur
