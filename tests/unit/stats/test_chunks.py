"""The anytime layer's solves give the same floats in one chunk or in many on a thread pool
(each element is solved on its own), under the caller's numpy error state."""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pytest

from monitor.stats import anytime_size, chunks, eprocess
from monitor.stats.chunks import each_chunk


def _pairs(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    n = rng.integers(0, 15_000, m).astype(float)
    v = np.floor(rng.random(m) * n)
    s = np.round(rng.uniform(-1.0, 1.0, m) * v)
    levels = rng.choice([0.05, 1e-3, 1e-7], m)
    return n, s, v, levels


def test_confidence_sequences_do_not_depend_on_the_chunks(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    n, s, v, levels = _pairs(6_000)
    monkeypatch.setattr(chunks, "cores", lambda: 4)  # a pool even on one CPU
    monkeypatch.setattr(eprocess, "_CS_CHUNK", 1 << 20)
    whole = eprocess.cs_bounded(n, s, v, alpha=levels)
    monkeypatch.setattr(eprocess, "_CS_CHUNK", 700)
    parts = eprocess.cs_bounded(n, s, v, alpha=levels)
    for a, b in zip(whole, parts, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.all(whole[0] <= whole[1])


@pytest.mark.parametrize("construction", ["mcnemar", "bounded"])
def test_anytime_sizes_do_not_depend_on_the_chunks(monkeypatch: pytest.MonkeyPatch,
                                                   construction: Literal["mcnemar", "bounded"]
                                                   ) -> None:
    rng = np.random.default_rng(5)
    d = rng.uniform(0.0, 0.4, 5_000)
    d[:100] = 0.0  # N*_AV = inf
    s2 = rng.uniform(0.01, 0.6, 5_000)
    monkeypatch.setattr(chunks, "cores", lambda: 4)
    monkeypatch.setattr(anytime_size, "_CHUNK", 1 << 20)
    whole = anytime_size.n_star_anytime(d, s2, alpha=1e-5, construction=construction)
    monkeypatch.setattr(anytime_size, "_CHUNK", 333)
    parts = anytime_size.n_star_anytime(d, s2, alpha=1e-5, construction=construction)
    np.testing.assert_array_equal(whole, parts)
    assert np.isinf(whole[:100]).all() and np.isfinite(whole[100:]).all()


def test_chunks_run_on_threads_under_the_callers_error_state(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks, "cores", lambda: 4)
    seen: list[tuple[int, int]] = []
    out = np.zeros(10)

    def solve(at: slice) -> None:
        seen.append((at.start, at.stop))
        out[at] = np.log(np.zeros(at.stop - at.start))  # divide by zero

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(divide="ignore"):
            each_chunk(solve, 10, 3)
    assert sorted(seen) == [(0, 3), (3, 6), (6, 9), (9, 10)]
    assert np.isneginf(out).all()
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        each_chunk(solve, 10, 3)  # the pool's threads see np.errstate's "raise" too
