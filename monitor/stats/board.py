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
from typing import Any

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


#: Pairs per chunk of the per-pair arithmetic (group sums, the kernel): its temporaries stay
#: a few MB for any number of pairs (499,500 at 1,000 models).
_CHUNK_PAIRS = 1 << 16


def _gram(u: FloatArray, v: FloatArray, *, exact32: bool) -> FloatArray:
    """uᵀv; in float32 where every entry is an integer count below 2²⁴ (0/1 scores), which
    float32 sums exactly — the same values at twice the speed and half the memory."""
    if exact32:
        u32 = u.astype(np.float32)
        v32 = u32 if v is u else v.astype(np.float32)
        # + 0.0: a −0.0 score (equal to 0) leaves no −0.0 sum behind.
        return (u32.T @ v32).astype(np.float64) + 0.0
    return u.T @ v


@dataclass(frozen=True, eq=False)
class _Complete:
    """No item is missing: a pair's sums are the two models' column sums (and per group)."""

    colsum: FloatArray
    colsq: FloatArray
    group_colsum: FloatArray | None  # groups × models


@dataclass(frozen=True, eq=False)
class _Partial:
    """Items are missing: presence mask M, X₀ᵀM, MᵀM and (X₀²)ᵀM."""

    m: FloatArray
    on: FloatArray
    shared: FloatArray
    sq: FloatArray


@dataclass(frozen=True, eq=False)
class BoardSums:
    """Every pair's sums of one score matrix, as Gram matrices (models × models) and per-group
    column sums: the sums of any pair are entries (:meth:`pairs`). Computed once per table by
    :func:`board_sums`, so that several sets of pairs (a report's family, the rank sets' all
    pairs) read the same matrices.

    ``x0`` is the matrix with NaN → 0, ``cross`` = X₀ᵀX₀; ``codes`` are the items' group codes
    (None without groups).
    """

    x0: FloatArray
    col_binary: NDArray[np.bool_]
    exact32: bool
    cross: FloatArray
    layout: _Complete | _Partial
    codes: IntArray | None
    n_groups: int

    @property
    def n_models(self) -> int:
        return int(self.x0.shape[1])

    def pairs(self, pairs: tuple[ArrayLike, ArrayLike] | None = None, *,
              group_kind: GroupKind = "cluster", grouped: bool = True,
              ) -> tuple[IntArray, IntArray, PairSums]:
        """(a, b, :class:`PairSums`) of ``pairs`` (default every pair a < b); ``grouped``
        False leaves the groups out (items independent)."""
        k = self.n_models
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
        lay = self.layout
        if isinstance(lay, _Complete):
            n = np.full(a.size, float(self.x0.shape[0]))
            s_a, s_b = lay.colsum[a], lay.colsum[b]
            q_a, q_b = lay.colsq[a], lay.colsq[b]
        else:
            n = lay.shared[a, b]
            s_a, s_b = lay.on[a, b], lay.on[b, a]
            q_a, q_b = lay.sq[a, b], lay.sq[b, a]
        if np.any(n == 0):
            raise ValueError(f"models {int(a[n == 0][0])} and {int(b[n == 0][0])} share no "
                             "item")
        grouped_sums: GroupSums | None = None
        if grouped and self.codes is not None:
            st2, stn, sn2, st2_over_n, count = self._group_sums(self.codes, a, b)
            grouped_sums = GroupSums(kind=group_kind, n_groups=self.n_groups, t2=st2, tn=stn,
                                     n2=sn2, t2_over_n=st2_over_n, count=count)
        return a, b, PairSums.build(n=n, sa=s_a, sb=s_b, saa=q_a, sbb=q_b,
                                    sab=self.cross[a, b],
                                    binary=self.col_binary[a] & self.col_binary[b],
                                    groups=grouped_sums)

    def _group_sums(self, codes: IntArray, a: IntArray, b: IntArray
                    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """Σ_g T_g², Σ_g T_g n_g, Σ_g n_g², Σ_g T_g²/n_g and the groups with n_g > 0, per pair.

        T_g = Σ_{i∈g, both present} D_i and n_g the shared items in group g.
        """
        n_groups, x0, lay = self.n_groups, self.x0, self.layout
        count = np.zeros(a.size)
        st2 = np.zeros(a.size)
        stn = np.zeros(a.size)
        sn2 = np.zeros(a.size)
        st2_over_n = np.zeros(a.size)
        if isinstance(lay, _Complete):
            # No item is missing: the per-group sums are plain column sums, no Gram needed.
            sums = (lay.group_colsum if lay.group_colsum is not None
                    else _group_colsum(x0, codes, n_groups, exact32=self.exact32))
            counts = np.bincount(codes, minlength=n_groups).astype(float)
            nn = counts[:, None]
            # Per pair, the sums run over the groups in order (axis 0): chunks of pairs change
            # nothing but the size of the temporaries.
            for lo in range(0, a.size, _CHUNK_PAIRS):
                hi = min(a.size, lo + _CHUNK_PAIRS)
                t = sums[:, a[lo:hi]] - sums[:, b[lo:hi]]  # (groups, pairs)
                t2 = t * t
                st2[lo:hi] = np.sum(t2, axis=0)
                stn[lo:hi] = np.sum(t * nn, axis=0)
                with np.errstate(divide="ignore", invalid="ignore"):
                    st2_over_n[lo:hi] = np.sum(np.where(nn > 0, t2 / nn, 0.0), axis=0)
            sn2 = np.full(a.size, float(np.sum(counts * counts)))
            count = np.full(a.size, float(np.count_nonzero(counts)))
            return st2, stn, sn2, st2_over_n, count
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(n_groups + 1))
        for g in range(n_groups):
            rows = order[bounds[g]:bounds[g + 1]]
            xg, mg = x0[rows], lay.m[rows]
            s = _gram(xg, mg, exact32=self.exact32)  # s[a, b] = Σ_{i∈g} x_a m_b
            c = _gram(mg, mg, exact32=self.exact32)  # shared items per pair in group g
            t = s[a, b] - s[b, a]
            nn = c[a, b]
            st2 += t * t
            stn += t * nn
            sn2 += nn * nn
            count += nn > 0
            with np.errstate(divide="ignore", invalid="ignore"):
                st2_over_n += np.where(nn > 0, t * t / np.where(nn > 0, nn, 1.0), 0.0)
        return st2, stn, sn2, st2_over_n, count


def _group_colsum(x0: FloatArray, codes: IntArray, n_groups: int, *, exact32: bool
                  ) -> FloatArray:
    """Σ_{i∈g} x_i per group g and model (groups × models) of a complete matrix."""
    if exact32:
        # Integer sums: exact in any order (+ 0.0: no −0.0 from a −0.0 score).
        return np.stack([x0[codes == g].sum(axis=0) for g in range(n_groups)]) + 0.0
    sums = np.zeros((n_groups, x0.shape[1]))
    np.add.at(sums, codes, x0)
    return sums


def board_sums(scores: ArrayLike, *, groups: ArrayLike | None = None) -> BoardSums:
    """The Gram matrices of a score matrix (and its item groups): see :class:`BoardSums`."""
    x = _check_matrix(scores)
    n_items = x.shape[0]
    present = ~np.isnan(x)
    complete = bool(present.all())
    # The presence mask and the NaN-free copy only where some item is missing.
    m = None if complete else present.astype(float)
    x0 = x if complete else np.where(present, x, 0.0)
    del present
    # A pair is binary when both models' scores are all 0/1 (its e-process is McNemar's).
    col_binary = np.all((x0 == 0.0) | (x0 == 1.0), axis=0)
    all_binary = bool(col_binary.all())
    # 0/1 scores: every Gram entry is an integer count, exact in float32 below 2²⁴ items.
    exact32 = all_binary and n_items < 1 << 24
    cross = _gram(x0, x0, exact32=exact32)  # Σ x_a x_b
    codes: IntArray | None = None
    n_groups = 0
    if groups is not None:
        codes, n_groups = _group_codes(groups, n_items)
    layout: _Complete | _Partial
    if m is None:
        colsum = x0.sum(axis=0)
        layout = _Complete(
            colsum=colsum, colsq=colsum if all_binary else (x0 * x0).sum(axis=0),
            group_colsum=None if codes is None else _group_colsum(x0, codes, n_groups,
                                                                  exact32=exact32))
    else:
        on = _gram(x0, m, exact32=exact32)  # on[a, b] = Σ x_a over the items b has
        layout = _Partial(m=m, on=on, shared=_gram(m, m, exact32=exact32),
                          sq=on if all_binary else (x0 * x0).T @ m)
    return BoardSums(x0=x0, col_binary=col_binary, exact32=exact32, cross=cross,
                     layout=layout, codes=codes, n_groups=n_groups)


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
    if group_kind not in ("cluster", "strata"):
        raise ValueError(f"`group_kind` must be 'cluster' or 'strata', got {group_kind!r}")
    return board_sums(scores, groups=groups).pairs(pairs, group_kind=group_kind)


def board(
    scores: ArrayLike,
    *,
    pairs: tuple[ArrayLike, ArrayLike] | None = None,
    groups: ArrayLike | None = None,
    group_kind: GroupKind = "cluster",
    alpha: float = 0.05,
    power: float = 0.8,
    sums: BoardSums | None = None,
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
    sums : BoardSums, optional
        :func:`board_sums` of ``scores`` and ``groups``, when the caller has it already
        (``scores`` is then not read again); ``groups`` None leaves its groups out.

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
    if sums is None:
        sums = board_sums(scores, groups=groups)
    a, b, ps = sums.pairs(pairs, group_kind=group_kind, grouped=groups is not None)
    # The kernel is elementwise over pairs: in chunks, its temporaries stay small.
    parts = [pair_figures(ps.take(slice(lo, lo + _CHUNK_PAIRS)), alpha=alpha, power=power,
                          intervals=False)
             for lo in range(0, max(len(ps), 1), _CHUNK_PAIRS)]
    return BoardResult(a=a, b=b, **_concat(parts))


def _concat(parts: list[PairFigures]) -> dict[str, Any]:
    """The fields of chunks of one kernel call joined: arrays end to end, scalars once."""
    out: dict[str, Any] = {}
    for f in fields(parts[0]):
        first = getattr(parts[0], f.name)
        out[f.name] = (first if len(parts) == 1 or not isinstance(first, np.ndarray)
                       else np.concatenate([getattr(p, f.name) for p in parts]))
    return out
