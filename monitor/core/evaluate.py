"""Pair statistics, e-values and verdicts of one benchmark, vectorised over all pairs.

Verdicts are evaluated at batch boundaries. A batch boundary is a stopping time of the
stream (whether to look again never depends on future results), so Ville's inequality
still bounds the chance that an e-process under δ = 0 ever crosses its threshold; looking
less often than after every item only delays crossings. The per-item crossing is what
``llm-monitor report --anytime`` computes offline.

Family correction: with m pairs in the family (``adjacent``: m = k − 1; ``all``:
m = k(k − 1)/2, k the models ranked), the anytime verdict is e-Bonferroni — a pair is
resolved when E_n ≥ m/α — and its confidence sequence is at level α/m. The fixed-N figures
(q, q_cluster, MDE) use ``family_alpha(α, m, method=correction)``.

Cluster-robust design effect: DE = Var_cr(D̄) / Var_iid(D̄), Var_cr = Σ_c (S_c − n_c D̄)² / N²
with S_c, n_c the sum of D and the paired count in cluster c, Var_iid = σ̂_D² / N. Items
without a cluster label count as clusters of their own (so no labels gives DE = 1), and
DE = 1 when σ̂_D² = 0 — the same conventions as ``monitor.stats.clusters.design_effect``.
"""

from __future__ import annotations

import math

import numpy as np

from monitor.core.board import SX, SX2, UNCLUSTERED, BenchmarkState, N, P, PairTable
from monitor.core.config import CoreConfig
from monitor.stats import power as pw
from monitor.stats.multiplicity import family_alpha


def family_size(k: int, family: str) -> int:
    """Number of pairs read together among k ranked models (at least 1)."""
    if family == "all":
        return max(k * (k - 1) // 2, 1)
    return max(k - 1, 1)


def evaluate(state: BenchmarkState, config: CoreConfig) -> PairTable:
    """Recompute every pair statistic and verdict of ``state`` from its Gram matrices."""
    from monitor.stats import eprocess as ep  # the anytime layer

    k = state.k
    grams = state.grams[:, :, :k, :k]
    total = grams.sum(axis=0)
    n, sx, pp, sx2 = total[N], total[SX], total[P], total[SX2]
    s = sx - sx.T
    v = sx2 + sx2.T - 2.0 * pp
    counts = np.rint(np.diag(n)).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(counts > 0, np.diag(sx) / counts, np.nan)
    models = tuple(state.models)
    active = [i for i in range(k) if counts[i] > 0]
    order = tuple(sorted(active, key=lambda i: (-means[i], models[i])))

    m = family_size(len(order), config.family)
    fam_alpha = family_alpha(config.alpha, m, method=config.correction)
    e_alpha = config.alpha / m
    binary = state.n_nonbinary == 0

    n11 = pp
    n10 = sx - pp
    n01 = sx.T - pp
    n00 = n - n11 - n10 - n01
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        delta = np.where(n > 0, s / n, np.nan)
        sigma2 = np.where(n > 0, np.maximum(v / np.where(n > 0, n, 1.0) - delta * delta, 0.0),
                          np.nan)
        if binary:
            log_e = np.asarray(ep.log_e_mcnemar(np.maximum(n10, 0.0), np.maximum(n01, 0.0)),
                               dtype=float)
        else:
            log_e = np.asarray(ep.log_e_bounded(n, s, v), dtype=float)
        log_e = np.where(n > 0, log_e, 0.0)

        d0 = np.where(n > 0, delta, 0.0)
        s0 = np.where(n > 0, sigma2, 0.0)
        q = _ratio(n, pw.n_star(d0, s0, alpha=fam_alpha, power=config.power))
        mde = np.where(n > 0, pw.mde(s0, n, alpha=fam_alpha, power=config.power), np.nan)

        de = _design_effect(grams, n, s, v, d0, s0)
        q_cluster = np.where(de > 0, q / np.where(de > 0, de, 1.0), np.where(q > 0, np.inf, 0.0))

    threshold = math.log(1.0 / e_alpha)
    resolved = (n > 0) & (log_e >= threshold) & (d0 != 0)
    code = (np.sign(d0) * resolved).astype(np.int8)
    np.fill_diagonal(code, 0)
    return PairTable(
        models=models, counts=counts, means=means, order=order, m=m,
        family_alpha=fam_alpha, e_alpha=e_alpha, binary=binary,
        n=n, s=s, v=v, n11=n11, n10=n10, n01=n01, n00=n00,
        delta=delta, sigma2=sigma2, log_e=log_e,
        q=q, de=de, q_cluster=q_cluster, mde=mde, code=code, power=config.power,
    )


def anytime_figures(table: PairTable, pairs: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """Confidence sequence and q_AV of the given pairs (solved numerically, so on demand)."""
    from monitor.stats import eprocess as ep

    a = np.asarray([p[0] for p in pairs], dtype=np.int64)
    b = np.asarray([p[1] for p in pairs], dtype=np.int64)
    n = table.n[a, b]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if table.binary:
            low, high = ep.cs_mcnemar(
                np.maximum(table.n11[a, b], 0.0), np.maximum(table.n10[a, b], 0.0),
                np.maximum(table.n01[a, b], 0.0), np.maximum(table.n00[a, b], 0.0),
                alpha=table.e_alpha,
            )
        else:
            low, high = ep.cs_bounded(n, table.s[a, b], table.v[a, b], alpha=table.e_alpha)
        d0 = np.where(n > 0, table.delta[a, b], 0.0)
        s0 = np.where(n > 0, table.sigma2[a, b], 0.0)
        nav = np.asarray(ep.n_star_anytime(
            d0, s0, alpha=table.e_alpha, power=table.power,
            construction="mcnemar" if table.binary else "bounded",
        ), dtype=float)
    return {
        "cs_low": np.where(n > 0, np.asarray(low, dtype=float), np.nan),
        "cs_high": np.where(n > 0, np.asarray(high, dtype=float), np.nan),
        "q_anytime": _ratio(n, nav),
    }


def _ratio(n: np.ndarray, required: np.ndarray) -> np.ndarray:
    # q = N / N*: infinite when N* = 0 (every item differs the same way), 0 when N* = ∞.
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(np.isfinite(required) & (required > 0), n / required, 0.0)
        return np.where((required == 0) & (n > 0), np.inf, out)


def _design_effect(
    grams: np.ndarray, n: np.ndarray, s: np.ndarray, v: np.ndarray,
    delta: np.ndarray, sigma2: np.ndarray,
) -> np.ndarray:
    # Σ_c (S_c − n_c D̄)² = Σ S_c² − 2 D̄ Σ S_c n_c + D̄² Σ n_c², expanded so that only the
    # three sums over clusters are needed. Unclustered items are singleton clusters, whose
    # contributions are ΣD², ΣD and the count of the unclustered group.
    named = grams[UNCLUSTERED + 1:]
    sc = named[:, SX] - np.swapaxes(named[:, SX], 1, 2)
    nc = named[:, N]
    g0 = grams[UNCLUSTERED]
    s_0 = g0[SX] - g0[SX].T
    v_0 = g0[SX2] + g0[SX2].T - 2.0 * g0[P]
    a = np.einsum("gij,gij->ij", sc, sc) + v_0
    b = np.einsum("gij,gij->ij", sc, nc) + s_0
    c = np.einsum("gij,gij->ij", nc, nc) + g0[N]
    with np.errstate(divide="ignore", invalid="ignore"):
        nn = np.where(n > 0, n, 1.0)
        var_cr = np.maximum(a - 2.0 * delta * b + delta * delta * c, 0.0) / (nn * nn)
        var_iid = sigma2 / nn
        return np.where((n > 0) & (var_iid > 0), var_cr / np.where(var_iid > 0, var_iid, 1.0),
                        1.0)
