"""Anytime layer: update 4,950 pair states and their e-values for a batch of items.

Ours: the McNemar e-process on discordant counts, vectorised over pairs and items (one matrix
of per-item increments, a cumulative sum, one ``log_e_mcnemar`` call). Peer: confseq's
``beta_binomial_log_mixture`` (the same mixture, C++), called per pair per item as a per-pair
monitor loop would. Both produce E_n after every item of the batch; the final values are
checked equal. Run: ``.venv/bin/python -m bench.bench_eprocess``.
"""

from __future__ import annotations

import time

import numpy as np
from confseq import boundaries as cb

from bench._record import record
from monitor.stats import eprocess as ep

MODELS = 100
BATCH = 20
ALPHA_OPT = ep.ALPHA_OPT
V_OPT = ep.V_OPT


def _data(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    skill = rng.uniform(0.3, 0.9, MODELS)
    x = (rng.random((BATCH, MODELS)) < skill).astype(np.float64)
    ia, ib = np.triu_indices(MODELS, k=1)
    return x, ia, ib


def ours(x: np.ndarray, ia: np.ndarray, ib: np.ndarray, n10: np.ndarray, n01: np.ndarray) -> np.ndarray:
    a, b = x[:, ia], x[:, ib]
    c10 = n10 + np.cumsum(a * (1.0 - b), axis=0)
    c01 = n01 + np.cumsum((1.0 - a) * b, axis=0)
    return np.asarray(ep.log_e_mcnemar(c10, c01))  # (BATCH, pairs): E_n after every item


def peer(x: np.ndarray, ia: np.ndarray, ib: np.ndarray, n10: np.ndarray, n01: np.ndarray) -> np.ndarray:
    out = np.empty((x.shape[0], ia.size))
    for p in range(ia.size):
        c10, c01 = float(n10[p]), float(n01[p])
        i, j = ia[p], ib[p]
        for t in range(x.shape[0]):
            c10 += x[t, i] * (1.0 - x[t, j])
            c01 += (1.0 - x[t, i]) * x[t, j]
            out[t, p] = cb.beta_binomial_log_mixture(
                c10 - c01, c10 + c01, V_OPT, 1.0, 1.0, ALPHA_OPT, False
            )
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    x, ia, ib = _data(rng)
    n10 = rng.integers(0, 2000, ia.size).astype(np.float64)
    n01 = rng.integers(0, 2000, ia.size).astype(np.float64)
    ours(x, ia, ib, n10, n01)  # warm-up
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        mine = ours(x, ia, ib, n10, n01)
    t_ours = (time.perf_counter() - t0) / reps
    t0 = time.perf_counter()
    ref = peer(x, ia, ib, n10, n01)
    t_peer = time.perf_counter() - t0
    np.testing.assert_allclose(mine, ref, rtol=1e-9, atol=1e-9)
    updates = x.shape[0] * ia.size
    print(f"pairs={ia.size} batch={x.shape[0]} items -> {updates} e-value updates")
    print(f"ours (vectorised log_e_mcnemar): {t_ours * 1e3:.2f} ms  ({updates / t_ours / 1e6:.1f} M/s)")
    print(f"peer (confseq beta_binomial_log_mixture per pair per item): {t_peer * 1e3:.1f} ms")
    print(f"ratio peer/ours: {t_peer / t_ours:.1f}x (target >= 20x); values agree to 1e-9")
    record("e-value updates (McNemar mixture)", goal="≥ 20× confseq per pair per item",
           figure=f"{updates / t_ours / 1e6:.1f} M updates/s",
           peer=f"{t_peer / t_ours:.1f}× confseq's beta_binomial_log_mixture",
           met=t_peer / t_ours >= 20.0, command="python -m bench.bench_eprocess")


if __name__ == "__main__":
    main()
