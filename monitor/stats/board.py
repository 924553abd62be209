"""All pairs of a leaderboard at once: paired size, resolution and design effects from Gram matrices.

For an (items × models) score matrix X with NaN where a model has no result, let X₀ be X with
NaN → 0 and M the 0/1 presence mask. Every per-pair sum over the items both models have is an
entry of a Gram matrix: shared counts N = MᵀM, sums of A's scores on B's items X₀ᵀM, co-sums
X₀ᵀX₀ and sums of squares (X₀²)ᵀM. The same matrices restricted to one cluster give the
per-cluster sums of D that the cluster-robust variance needs. One matrix product replaces a
Python loop over thousands of pairs; the results equal :func:`monitor.stats.paired.paired_summary`
and :func:`monitor.stats.clusters.design_effect` applied pair by pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import binom
from scipy.stats import t as student_t

from monitor.stats import power as pw

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
GroupKind = Literal["cluster", "strata"]


@dataclass(frozen=True, eq=False)
class BoardResult:
    """Per-pair figures of a board, one array entry per pair (A = ``models[a]``).

    Attributes
    ----------
    a, b : ndarray of int
        Column indices of the two models of each pair.
    n : ndarray of int
        Items both models have.
    mean_a, mean_b, delta : ndarray
        Means on the shared items and δ̂ = mean_a − mean_b.
    sigma_d2 : ndarray
        Plug-in (ddof = 0) variance of D on the shared items.
    rho : ndarray
        Pearson (phi for 0/1) correlation of the two columns; NaN if one is constant.
    n_star, q, mde : ndarray
        Unrounded N* = z² σ̂_D²/δ̂² (``inf`` when δ̂ = 0), q = N/N* (0 when N* is infinite),
        MDE = z σ̂_D/√N, all at the ``alpha`` and ``power`` the board was computed with.
    binary : bool
        Whether every score is 0/1; then ``n11 … n00`` hold the 2×2 counts and ``p_value`` is
        the exact two-sided McNemar (binomial) test; otherwise the paired t-test.
    p_value : ndarray
    design_effect : ndarray or None
        Var_grouped(D̄) / Var_iid(D̄): cluster-robust for clusters, stratified for strata
        (1.0 where D has no variance), None without groups.
    q_grouped : ndarray or None
        q / design_effect (0 where N* is infinite): q_cluster or q_strata.
    group_kind : {"cluster", "strata"} or None
    n_groups : int
    alpha, power : float
    """

    a: IntArray
    b: IntArray
    n: IntArray
    mean_a: FloatArray
    mean_b: FloatArray
    delta: FloatArray
    sigma_d2: FloatArray
    rho: FloatArray
    n_star: FloatArray
    q: FloatArray
    mde: FloatArray
    binary: bool
    n11: IntArray | None
    n10: IntArray | None
    n01: IntArray | None
    n00: IntArray | None
    p_value: FloatArray
    design_effect: FloatArray | None
    q_grouped: FloatArray | None
    group_kind: GroupKind | None
    n_groups: int
    alpha: float
    power: float

    def __len__(self) -> int:
        return int(self.a.size)

    def resolved(self) -> NDArray[np.bool_]:
        """Resolved at fixed N: q ≥ 1."""
        return self.q >= 1.0

    def resolved_grouped(self) -> NDArray[np.bool_] | None:
        """q_cluster ≥ 1 (or q_strata ≥ 1); None without groups."""
        return None if self.q_grouped is None else self.q_grouped >= 1.0


def all_pairs(k: int) -> tuple[IntArray, IntArray]:
    """Indices (a, b), a < b, of every unordered pair of ``k`` models, row by row.

    Examples
    --------
    >>> [x.tolist() for x in all_pairs(3)]
    [[0, 0, 1], [1, 2, 2]]
    """
    a, b = np.triu_indices(int(k), k=1)
    return a.astype(np.int64), b.astype(np.int64)


def _group_codes(groups: ArrayLike, n_items: int) -> tuple[IntArray, int]:
    g = np.asarray(groups)
    if g.shape != (n_items,):
        raise ValueError(f"`groups` must have one label per item ({n_items}), got shape {g.shape}")
    _, codes = np.unique(g, return_inverse=True)
    codes = codes.reshape(-1).astype(np.int64)
    return codes, int(codes.max()) + 1 if codes.size else 0


def _check_matrix(scores: ArrayLike) -> FloatArray:
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"`scores` must be a 2-D (items × models) array, got shape {x.shape}")
    present = x[~np.isnan(x)]
    if np.any(~np.isfinite(present) | (present < 0) | (present > 1)):
        raise ValueError("`scores` must lie in [0, 1] (NaN marks an absent item)")
    return x


def _group_sums(
    x0: FloatArray, m: FloatArray, codes: IntArray, n_groups: int, a: IntArray, b: IntArray,
    *, complete: bool,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Σ_g T_g², Σ_g T_g n_g, Σ_g n_g² and Σ_g T_g²/n_g per pair.

    T_g = Σ_{i∈g, both present} D_i and n_g the shared items in group g.
    """
    st2 = np.zeros(a.size)
    stn = np.zeros(a.size)
    sn2 = np.zeros(a.size)
    st2_over_n = np.zeros(a.size)
    if complete:
        # No item is missing: the per-group sums are plain column sums, no Gram needed.
        sums = np.zeros((n_groups, x0.shape[1]))
        np.add.at(sums, codes, x0)
        counts = np.bincount(codes, minlength=n_groups).astype(float)
        t = sums[:, a] - sums[:, b]  # (groups, pairs)
        nn = counts[:, None]
        st2 = np.sum(t * t, axis=0)
        stn = np.sum(t * nn, axis=0)
        sn2 = np.full(a.size, float(np.sum(counts * counts)))
        with np.errstate(divide="ignore", invalid="ignore"):
            st2_over_n = np.sum(np.where(nn > 0, t * t / nn, 0.0), axis=0)
        return st2, stn, sn2, st2_over_n
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(n_groups + 1))
    for g in range(n_groups):
        rows = order[bounds[g]:bounds[g + 1]]
        xg, mg = x0[rows], m[rows]
        s = xg.T @ mg  # s[a, b] = Σ_{i∈g} x_a m_b
        c = mg.T @ mg  # shared items per pair in group g
        t = s[a, b] - s[b, a]
        nn = c[a, b]
        st2 += t * t
        stn += t * nn
        sn2 += nn * nn
        with np.errstate(divide="ignore", invalid="ignore"):
            st2_over_n += np.where(nn > 0, t * t / np.where(nn > 0, nn, 1.0), 0.0)
    return st2, stn, sn2, st2_over_n


def board(
    scores: ArrayLike,
    *,
    pairs: tuple[ArrayLike, ArrayLike] | None = None,
    groups: ArrayLike | None = None,
    group_kind: GroupKind = "cluster",
    alpha: float = 0.05,
    power: float = 0.8,
) -> BoardResult:
    """Paired figures, p-values and design effects for many pairs of one score matrix.

    Parameters
    ----------
    scores : array_like, shape (n_items, n_models)
        Scores in [0, 1]; NaN where a model has no result for an item. Each pair is computed
        on the items both models have.
    pairs : (a, b) index arrays, optional
        The pairs to compute (model column indices); default every pair a < b.
    groups : array_like, shape (n_items,), optional
        Item group labels (clusters or strata).
    group_kind : {"cluster", "strata"}
        ``cluster``: groups are sampled; the cluster-robust
        Var_cr = Σ_c (Σ_{i∈c}(D_i − D̄))² / N² gives DE = Var_cr / Var_iid.
        ``strata``: groups are fixed; Var_strat = Σ_h Σ_{i∈h}(D_i − D̄_h)² / N².
    alpha, power : float
        Level used for N*, q and MDE (pass a family-adjusted level for multiplicity).

    Returns
    -------
    BoardResult

    Examples
    --------
    >>> x = np.array([[1, 0], [1, 1], [0, 0], [1, 0]], dtype=float)
    >>> r = board(x)
    >>> r.n.tolist(), r.delta.tolist(), r.n10.tolist(), r.n01.tolist()
    ([4], [0.5], [2], [0])
    >>> round(float(r.p_value[0]), 3)  # exact McNemar: 2 · P(Bin(2, 1/2) ≤ 0)
    0.5
    """
    x = _check_matrix(scores)
    n_items, k = x.shape
    if group_kind not in ("cluster", "strata"):
        raise ValueError(f"`group_kind` must be 'cluster' or 'strata', got {group_kind!r}")
    if pairs is None:
        a, b = all_pairs(k)
    else:
        a = np.asarray(pairs[0], dtype=np.int64).reshape(-1)
        b = np.asarray(pairs[1], dtype=np.int64).reshape(-1)
        if a.shape != b.shape:
            raise ValueError("`pairs` must be two index arrays of equal length")
        if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= k):
            raise ValueError(f"`pairs` indices must lie in [0, {k})")
    z = pw.z_total(alpha=alpha, power=power)

    present = ~np.isnan(x)
    complete = bool(present.all())
    m = present.astype(float)
    x0 = np.where(present, x, 0.0)
    binary = bool(np.all((x0 == 0.0) | (x0 == 1.0)))

    # The Gram matrices: every per-pair sum on shared items is one entry.
    cross = x0.T @ x0  # Σ x_a x_b
    if complete:
        colsum = x0.sum(axis=0)
        colsq = colsum if binary else (x0 * x0).sum(axis=0)
        n = np.full(a.size, float(n_items))
        s_a, s_b = colsum[a], colsum[b]
        q_a, q_b = colsq[a], colsq[b]
    else:
        on = x0.T @ m  # on[a, b] = Σ x_a over the items b has
        shared = m.T @ m
        sq = on if binary else (x0 * x0).T @ m
        n = shared[a, b]
        s_a, s_b = on[a, b], on[b, a]
        q_a, q_b = sq[a, b], sq[b, a]
    p_ab = cross[a, b]
    if np.any(n == 0):
        raise ValueError(f"models {int(a[n == 0][0])} and {int(b[n == 0][0])} share no item")

    mean_a, mean_b = s_a / n, s_b / n
    delta = mean_a - mean_b
    sum_d2 = q_a + q_b - 2.0 * p_ab
    # ΣD²/N − δ̂² can dip a hair below 0 by cancellation when D is constant.
    sigma_d2 = np.maximum(sum_d2 / n - delta * delta, 0.0)
    var_a = np.maximum(q_a / n - mean_a * mean_a, 0.0)
    var_b = np.maximum(q_b / n - mean_b * mean_b, 0.0)
    cov = p_ab / n - mean_a * mean_b
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where((var_a > 0) & (var_b > 0),
                       np.clip(cov / np.sqrt(var_a * var_b), -1.0, 1.0), np.nan)
        n_star = np.where(delta == 0, np.inf, z * z * sigma_d2 / (delta * delta))
        q = np.where(np.isfinite(n_star) & (n_star > 0), n / n_star, 0.0)
        mde = z * np.sqrt(sigma_d2 / n)

    cells: dict[str, IntArray | None] = dict.fromkeys(("n11", "n10", "n01", "n00"))
    if binary:
        n11 = np.rint(p_ab).astype(np.int64)
        n10 = np.rint(s_a).astype(np.int64) - n11
        n01 = np.rint(s_b).astype(np.int64) - n11
        n00 = np.rint(n).astype(np.int64) - n11 - n10 - n01
        cells = {"n11": n11, "n10": n10, "n01": n01, "n00": n00}
        discordant = n10 + n01
        p_value = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(n10, n01), discordant, 0.5))
    else:
        p_value = _paired_t_p(delta, sigma_d2, n)

    de: FloatArray | None = None
    q_grouped: FloatArray | None = None
    n_groups = 0
    if groups is not None:
        codes, n_groups = _group_codes(groups, n_items)
        st2, stn, sn2, st2_over_n = _group_sums(x0, m, codes, n_groups, a, b, complete=complete)
        ss_total = sigma_d2 * n  # Σ (D_i − D̄)²
        if group_kind == "cluster":
            # Σ_c (T_c − n_c D̄)², expanded so that only per-group sums are needed.
            ss_grouped = st2 - 2.0 * delta * stn + delta * delta * sn2
        else:
            ss_grouped = sum_d2 - st2_over_n  # within-stratum sum of squares
        ss_grouped = np.maximum(ss_grouped, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            de = np.where(ss_total > 0, ss_grouped / np.where(ss_total > 0, ss_total, 1.0), 1.0)
            req = n_star * de
            q_grouped = np.where(np.isfinite(req) & (req > 0), n / req, 0.0)

    return BoardResult(
        a=a, b=b, n=np.rint(n).astype(np.int64), mean_a=mean_a, mean_b=mean_b, delta=delta,
        sigma_d2=sigma_d2, rho=rho, n_star=n_star, q=q, mde=mde, binary=binary,
        n11=cells["n11"], n10=cells["n10"], n01=cells["n01"], n00=cells["n00"],
        p_value=p_value, design_effect=de, q_grouped=q_grouped,
        group_kind=group_kind if groups is not None else None, n_groups=n_groups,
        alpha=alpha, power=power,
    )


def _paired_t_p(delta: FloatArray, sigma_d2: FloatArray, n: FloatArray) -> FloatArray:
    """Two-sided paired t-test p-value from δ̂, the plug-in σ̂_D² and N."""
    df = n - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(sigma_d2 / np.where(df > 0, df, 1.0))  # s/√N with s² = N σ̂²/(N − 1)
        tstat = np.abs(delta) / se
        p = 2.0 * student_t.sf(tstat, np.where(df > 0, df, 1.0))
    # No spread: a nonzero constant gap is certain, a zero gap carries no evidence.
    p = np.where(se > 0, p, np.where(delta != 0, 0.0, 1.0))
    return np.where(df > 0, p, 1.0)
