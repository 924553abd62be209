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

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.figures import GroupKind, GroupSums, PairFigures, PairSums, pair_figures

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class BoardResult(PairFigures):
    """The figures of the board's pairs (see :class:`~monitor.stats.figures.PairFigures`) with
    the column indices ``a``, ``b`` of the two models of each pair (A = ``models[a]``)."""

    a: IntArray
    b: IntArray

    @property
    def all_binary(self) -> bool:
        """Every pair's scores are 0/1: McNemar tests and e-processes throughout."""
        return bool(np.all(self.binary))


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
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Σ_g T_g², Σ_g T_g n_g, Σ_g n_g², Σ_g T_g²/n_g and the groups with n_g > 0, per pair.

    T_g = Σ_{i∈g, both present} D_i and n_g the shared items in group g.
    """
    count = np.zeros(a.size)
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
        count = np.full(a.size, float(np.count_nonzero(counts)))
        return st2, stn, sn2, st2_over_n, count
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
        count += nn > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            st2_over_n += np.where(nn > 0, t * t / np.where(nn > 0, nn, 1.0), 0.0)
    return st2, stn, sn2, st2_over_n, count


def pair_sums(
    scores: ArrayLike,
    *,
    pairs: tuple[ArrayLike, ArrayLike] | None = None,
    groups: ArrayLike | None = None,
    group_kind: GroupKind = "cluster",
) -> tuple[IntArray, IntArray, PairSums]:
    """The kernel's input for pairs of a score matrix: (a, b, :class:`PairSums`).

    Same arguments as :func:`board`; every sum is an entry of a Gram matrix over the items
    both models have.
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
    present = ~np.isnan(x)
    complete = bool(present.all())
    m = present.astype(float)
    x0 = np.where(present, x, 0.0)
    # A pair is binary when both models' scores are all 0/1 (its e-process is McNemar's).
    col_binary = np.all((x0 == 0.0) | (x0 == 1.0), axis=0)
    all_binary = bool(col_binary.all())

    # The Gram matrices: every per-pair sum on shared items is one entry.
    cross = x0.T @ x0  # Σ x_a x_b
    if complete:
        colsum = x0.sum(axis=0)
        colsq = colsum if all_binary else (x0 * x0).sum(axis=0)
        n = np.full(a.size, float(n_items))
        s_a, s_b = colsum[a], colsum[b]
        q_a, q_b = colsq[a], colsq[b]
    else:
        on = x0.T @ m  # on[a, b] = Σ x_a over the items b has
        shared = m.T @ m
        sq = on if all_binary else (x0 * x0).T @ m
        n = shared[a, b]
        s_a, s_b = on[a, b], on[b, a]
        q_a, q_b = sq[a, b], sq[b, a]
    if np.any(n == 0):
        raise ValueError(f"models {int(a[n == 0][0])} and {int(b[n == 0][0])} share no item")

    grouped: GroupSums | None = None
    if groups is not None:
        codes, n_groups = _group_codes(groups, n_items)
        st2, stn, sn2, st2_over_n, count = _group_sums(x0, m, codes, n_groups, a, b,
                                                       complete=complete)
        grouped = GroupSums(kind=group_kind, n_groups=n_groups, t2=st2, tn=stn, n2=sn2,
                            t2_over_n=st2_over_n, count=count)
    return a, b, PairSums.build(n=n, sa=s_a, sb=s_b, saa=q_a, sbb=q_b, sab=cross[a, b],
                                binary=col_binary[a] & col_binary[b], groups=grouped)


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
    ([4.0], [0.5], [2.0], [0.0])
    >>> round(float(r.p_value[0]), 3)  # exact McNemar: 2 · P(Bin(2, 1/2) ≤ 0)
    0.5
    """
    a, b, sums = pair_sums(scores, pairs=pairs, groups=groups, group_kind=group_kind)
    fig = pair_figures(sums, alpha=alpha, power=power, intervals=False)
    return BoardResult(a=a, b=b, **{f.name: getattr(fig, f.name) for f in fields(fig)})
