"""Confidence sets for the ranks of a leaderboard's models, and tiers of models not separated.

A rank confidence set [rank_low, rank_high] for every model, simultaneous at level 1 − α
(with probability ≥ 1 − α, asymptotically, every model's true rank lies in its set), follows
from testing every ordered pair: rank_low(a) = 1 + #{b resolved above a} and
rank_high(a) = M − #{b resolved below a}. The pairwise tests are the max-|t| procedure of
Mogstad, Romano, Shaikh & Wilhelm (2023, "Inference for ranks with applications to mobility
across neighbourhoods and academic achievement across countries", *Rev. Econ. Stud.*, the
R/Python package csranks), with stepdown, on the *paired* covariance of the model means
(cluster-robust when items cluster). Tiers partition the ranking into consecutive groups such
that every model of a tier is resolved above every model of every lower tier.

:func:`tiers` and :func:`rank_sets_from_resolved` take any boolean resolved matrix, so that
other layers (the anytime one) reuse them with their own pairwise verdicts.

Over 400 lines on purpose: the rank sets from a resolved matrix (which the live board uses)
and the fixed-N max-|t| stepdown that produces one are read together; the stepdown's draws
and its covariance are private to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from monitor.stats.board import BoardResult, BoardSums, board

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

Method = Literal["simultaneous", "marginal"]
Covariance = Literal["iid", "cluster", "strata"]
METHODS: tuple[str, ...] = ("simultaneous", "marginal")

__all__ = ["METHODS", "PairResolution", "RankSets", "consistent_order", "means_covariance",
           "rank_sets", "rank_sets_from_resolved", "ranks_and_tiers", "resolve_pairs", "tiers"]

# The normal draws are made in blocks of at most this many pair values: the blocks fix which
# random numbers each draw gets (the same rank sets for the same seed).
_BLOCK_VALUES = 1 << 23
# Pairs per bin of the sorted draws: W of one bin (pairs × draws, float32) is the largest
# temporary of the stepdown, 2 MB at 2,000 draws.
_BIN_PAIRS = 256


def _check_resolved(resolved: ArrayLike) -> BoolArray:
    r = np.asarray(resolved)
    if r.ndim != 2 or r.shape[0] != r.shape[1]:
        raise ValueError(f"`resolved` must be a square (M × M) matrix, got shape {r.shape}")
    if r.dtype != np.bool_:
        raise ValueError(f"`resolved` must be boolean, got dtype {r.dtype}")
    if np.any(np.diagonal(r)):
        raise ValueError("`resolved` must have a False diagonal (no model is above itself)")
    if np.any(r & r.T):
        a, b = np.argwhere(r & r.T)[0]
        raise ValueError(f"`resolved` says models {a} and {b} are each above the other")
    return r


def _check_order(order: ArrayLike, m: int) -> IntArray:
    o = np.asarray(order)
    if o.shape != (m,) or not np.issubdtype(o.dtype, np.integer):
        raise ValueError(f"`order` must be {m} integer column indices, got shape {o.shape}")
    if not np.array_equal(np.sort(o), np.arange(m)):
        raise ValueError(f"`order` must be a permutation of 0..{m - 1}")
    return o.astype(np.int64)


def rank_sets_from_resolved(resolved: ArrayLike) -> tuple[IntArray, IntArray]:
    """Rank sets [rank_low, rank_high] of every model from a resolved matrix.

    Parameters
    ----------
    resolved : array_like of bool, shape (M, M)
        ``resolved[a, b]``: model a is resolved above model b (better). Antisymmetric in the
        sense that a and b are never each above the other; False diagonal.

    Returns
    -------
    rank_low, rank_high : ndarray of int, shape (M,)
        1-based, per model column: rank_low(a) = 1 + #{b : resolved[b, a]},
        rank_high(a) = M − #{b : resolved[a, b]}. When every resolution is true (no pair
        resolved in the wrong direction or between equal models), every model's true rank
        (1 + #models strictly better) lies in its set; the sets inherit the guarantee of
        the procedure that produced ``resolved``.

    Examples
    --------
    >>> r = np.array([[False, True, True], [False, False, False], [False, False, False]])
    >>> [x.tolist() for x in rank_sets_from_resolved(r)]
    [[1, 2, 2], [1, 3, 3]]
    """
    r = _check_resolved(resolved)
    m = r.shape[0]
    low = 1 + r.sum(axis=0, dtype=np.int64)
    high = m - r.sum(axis=1, dtype=np.int64)
    return low, high


def tiers(order: ArrayLike, resolved: ArrayLike) -> IntArray:
    """Tier of every model: consecutive groups of the ranking not separated from each other.

    A cut between ranking positions i and i + 1 exists iff every model at positions ≤ i is
    resolved above every model at positions > i; the tiers are the segments between cuts,
    numbered 1, 2, … from the top. One O(M²) pass (no loop over cuts).

    Parameters
    ----------
    order : array_like of int, shape (M,)
        Model column indices, best first.
    resolved : array_like of bool, shape (M, M)
        ``resolved[a, b]``: model a is resolved above model b.

    Returns
    -------
    ndarray of int, shape (M,)
        The 1-based tier of each model column.

    Examples
    --------
    >>> r = np.zeros((4, 4), dtype=bool)
    >>> r[0, 1:] = True          # model 0 above everyone
    >>> r[1, 3] = r[2, 3] = True  # 1 and 2 above 3, not separated from each other
    >>> tiers([0, 1, 2, 3], r).tolist()
    [1, 2, 2, 3]
    """
    r = _check_resolved(resolved)
    return _tiers(_check_order(order, r.shape[0]), r)


def _tiers(o: IntArray, r: BoolArray) -> IntArray:
    m = r.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    p = r[np.ix_(o, o)] if not np.array_equal(o, np.arange(m)) else r  # by ranking position
    # Row x is above every later position from g(x) on: g(x) = 1 + the last position y with
    # p[x, y] False (at least x: the diagonal is False). The cut after position i − 1 needs
    # every row x < i above every y ≥ i: max over x < i of g(x) ≤ i. One pass over p.
    g = m - np.argmax(~p[:, ::-1], axis=1)
    i = np.arange(1, m, dtype=np.int64)
    cut = np.maximum.accumulate(g[:-1]) <= i
    by_position = np.concatenate([[1], 1 + np.cumsum(cut)]).astype(np.int64)
    out = np.empty(m, dtype=np.int64)
    out[o] = by_position
    return out


def ranks_and_tiers(resolved: ArrayLike) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`rank_sets_from_resolved` and :func:`tiers` of a matrix already by ranking
    position (order 0, 1, …, M − 1), checked once."""
    r = _check_resolved(resolved)
    m = r.shape[0]
    low = 1 + r.sum(axis=0, dtype=np.int64)
    high = m - r.sum(axis=1, dtype=np.int64)
    return low, high, _tiers(np.arange(m, dtype=np.int64), r)


def consistent_order(by_mean: list[int], above: np.ndarray) -> tuple[int, ...]:
    """The ranking: by mean score, except that a model resolved above another always comes
    first (a topological order of the decisions, ties broken by mean).

    Means are over each model's own items and decisions over paired items, so with missing
    items the two can disagree; the displayed rank then stays inside the model's rank set.
    A cycle of decisions (only possible through a false one) falls back to the mean order.
    """
    import heapq

    sub = above[np.ix_(by_mean, by_mean)]
    if not np.tril(sub).any():
        # No decision goes against the mean order (every edge runs down the list): the
        # topological order below would return the mean order itself, without a step per edge.
        return tuple(by_mean)
    indegree = sub.sum(axis=0).astype(np.int64)
    ready = [r for r in range(len(by_mean)) if indegree[r] == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        r = heapq.heappop(ready)
        out.append(by_mean[r])
        for c in np.flatnonzero(sub[r]).tolist():
            indegree[c] -= 1
            if indegree[c] == 0:
                heapq.heappush(ready, c)
    return tuple(out) if len(out) == len(by_mean) else tuple(by_mean)


def means_covariance(scores: ArrayLike, *, groups: ArrayLike | None = None,
                     kind: Covariance = "iid") -> tuple[FloatArray, int]:
    """Estimated covariance of the model means, on the items every model has.

    Parameters
    ----------
    scores : array_like, shape (n_items, M)
        Scores in [0, 1], NaN where a model has no result. Only the rows without NaN are used.
    groups : array_like, shape (n_items,), optional
        Item group labels; required for ``kind`` ``cluster`` and ``strata``.
    kind : {"iid", "cluster", "strata"}
        ``iid``: Σ̂ = Σ_i (x_i − x̄)(x_i − x̄)ᵀ / N² (the plug-in covariance of the items / N).
        ``cluster``: Σ̂ = Σ_c u_c u_cᵀ / N² with u_c = Σ_{i∈c}(x_i − x̄) (groups sampled).
        ``strata``: Σ̂ = Σ_h Σ_{i∈h}(x_i − x̄_h)(x_i − x̄_h)ᵀ / N² (groups fixed).
        For a pair, (e_a − e_b)ᵀ Σ̂ (e_a − e_b) is the kernel's Var(D̄) = σ̂_D² · DE / N.

    Returns
    -------
    cov : ndarray, shape (M, M)
    n : int
        The complete items used.

    Examples
    --------
    >>> x = np.array([[1, 0], [1, 1], [0, 0], [1, 0]], dtype=float)
    >>> cov, n = means_covariance(x)
    >>> float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]), n  # σ̂_D² / N = 0.25 / 4
    (0.0625, 4)
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"`scores` must be a 2-D (items × models) array, got shape {x.shape}")
    if kind not in ("iid", "cluster", "strata"):
        raise ValueError(f"`kind` must be 'iid', 'cluster' or 'strata', got {kind!r}")
    keep = ~np.isnan(x).any(axis=1)
    xc = x[keep]
    n = int(xc.shape[0])
    if n == 0:
        raise ValueError("no item has a score from every model: the covariance of the means "
                         "cannot be estimated")
    centred = xc - xc.mean(axis=0)
    if kind == "iid":
        return (centred.T @ centred) / (n * n), n
    if groups is None:
        raise ValueError(f"`groups` is required for kind={kind!r}")
    g = np.asarray(groups)
    if g.shape != (x.shape[0],):
        raise ValueError(f"`groups` must have one label per item ({x.shape[0]}), got shape "
                         f"{g.shape}")
    _, codes = np.unique(g[keep], return_inverse=True)
    codes = codes.reshape(-1)
    n_groups = int(codes.max()) + 1
    sums = np.zeros((n_groups, x.shape[1]))
    np.add.at(sums, codes, centred)
    if kind == "cluster":
        return (sums.T @ sums) / (n * n), n
    counts = np.bincount(codes, minlength=n_groups).astype(float)
    within = centred - (sums / counts[:, None])[codes]
    return (within.T @ within) / (n * n), n


@dataclass(frozen=True, eq=False)
class RankSets:
    """Rank confidence sets and tiers of the M models of one board (arrays per model column).

    Attributes
    ----------
    order : ndarray of int
        Model columns, best first (the point ranking).
    rank : ndarray of int
        1-based position of each model in ``order``.
    rank_low, rank_high : ndarray of int
        The rank confidence set [rank_low, rank_high] of each model.
    tier : ndarray of int
        1-based tier of each model (:func:`tiers` of ``order`` and ``resolved``).
    resolved : ndarray of bool, shape (M, M)
        ``resolved[a, b]``: a resolved above b by the procedure (for ``marginal``: in both
        models' own families).
    t : ndarray, shape (M, M)
        t_ab = δ̂_ab / se_ab on the pair's shared items (antisymmetric).
    method : {"simultaneous", "marginal"}
    stepdown : bool
    alpha : float
    covariance : {"iid", "cluster", "strata"}
    n_draws : int
    critical_values : tuple of float
        ``simultaneous``: the critical value of each step (non-increasing; the first is the
        single-step max-|t| value). ``marginal``: each model's final critical value.
    correlation_items : int
        Items every model has, from which the correlations between differences come.
    exact_correlation : bool
        Every model has every item: the correlations are those of the pairs' own items.
    df : float or None
        Degrees of freedom of the multivariate-t draws (None: normal draws).
    """

    order: IntArray
    rank: IntArray
    rank_low: IntArray
    rank_high: IntArray
    tier: IntArray
    resolved: BoolArray
    t: FloatArray
    method: Method
    stepdown: bool
    alpha: float
    covariance: Covariance
    n_draws: int
    critical_values: tuple[float, ...]
    correlation_items: int
    exact_correlation: bool
    df: float | None = None

    def __len__(self) -> int:
        return int(self.order.size)

    @property
    def n_tiers(self) -> int:
        """Number of tiers (1: no model separated from any other; M: a fully resolved ranking)."""
        return int(self.tier.max()) if self.tier.size else 0

    @property
    def top_resolved(self) -> bool:
        """The leader's set is {1}: it is resolved above every other model."""
        return bool(self.rank_high[self.order[0]] == 1) if self.order.size else False

    def interval(self, j: int) -> tuple[int, int]:
        """The rank set of model column ``j`` as (rank_low, rank_high)."""
        return int(self.rank_low[j]), int(self.rank_high[j])


def _pairwise_t(x: FloatArray, groups: ArrayLike | None, kind: Covariance,
                sums: BoardSums | None, figures: BoardResult | None = None
                ) -> tuple[IntArray, IntArray, FloatArray, int]:
    """Every pair (a, b) once and t_ab = δ̂_ab / se_ab with se_ab² = σ̂²_ab · DE / n from the
    pair kernel: ``figures`` when given (its pairs in either orientation), else pairs a < b."""
    res = figures if figures is not None else board(
        x, groups=None if kind == "iid" else groups,
        group_kind="strata" if kind == "strata" else "cluster", sums=sums)
    de = np.ones_like(res.n) if res.design_effect is None else res.design_effect
    se = np.sqrt(res.sigma_d2 * de / res.n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = res.delta / se
    # se = 0: a constant nonzero D is decisive (t = ±∞, as the kernel's p = 0); no gap, or a
    # grouped variance that cannot be estimated (DE = 0: one group), resolves nothing.
    decisive = (res.sigma_d2 == 0) & (res.delta != 0)
    t = np.where(se > 0, t, np.where(decisive, np.where(res.delta > 0, np.inf, -np.inf), 0.0))
    return res.a, res.b, t, res.n_groups


def _cov_root(cov: FloatArray) -> FloatArray:
    """A matrix L with L Lᵀ = Σ̂ (eigen-decomposition: Σ̂ may be singular, e.g. fewer clusters
    than models)."""
    w, v = np.linalg.eigh(cov)
    return np.asarray(v * np.sqrt(np.clip(w, 0.0, None)))


def _inverse_sd(root: FloatArray, a: IntArray, b: IntArray) -> NDArray[np.float32]:
    """1/sd_ab (float32) of Z_a − Z_b for Z ~ N(0, L Lᵀ), L = ``root``; 0 where the difference
    has no variance under Σ̂.

    Standardising by the sd implied by Σ̂ itself keeps only its correlations: the scale of
    each difference is the kernel's se (the two agree whenever every model has every item).
    """
    var = np.einsum("ij,ij->i", root, root)
    cross = np.empty(a.size)
    # L_a · L_b per pair, one run of pairs sharing model a at a time: L_a broadcast against
    # the rows of the b's (a slice when they are consecutive, as in the all-pairs order)
    # instead of gathering both rows of every pair (pairs × models values: 4 GB at 1,000
    # models). The same products summed in the same order: the same bits.
    cuts = np.flatnonzero(a[1:] != a[:-1]) + 1
    starts = np.concatenate([[0], cuts]).astype(np.int64)
    ends = np.concatenate([cuts, [a.size]]).astype(np.int64)
    if a.size and a.size >= 16 * starts.size:
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            rows = b[s:e]
            first = int(rows[0])
            if int(rows[-1]) - first == e - s - 1 and np.all(np.diff(rows) == 1):
                other = root[first:first + e - s]
            else:
                other = root[rows]
            cross[s:e] = np.einsum("ij,ij->i", np.broadcast_to(root[a[s]], other.shape), other)
    else:
        step = max(1, _BLOCK_VALUES // (8 * max(1, root.shape[1])))
        for s in range(0, a.size, step):
            cross[s:s + step] = np.einsum("ij,ij->i", root[a[s:s + step]], root[b[s:s + step]])
    sd = np.sqrt(np.maximum(var[a] + var[b] - 2.0 * cross, 0.0))
    ok = sd > 1e-9 * np.sqrt(var[a] + var[b])
    return np.where(ok, 1.0 / np.where(ok, sd, 1.0), 0.0).astype(np.float32)


def _draws(root: FloatArray, n_pairs: int, n_draws: int, rng: np.random.Generator,
           df: float | None) -> NDArray[np.float32]:
    """Z ~ N(0, L Lᵀ), models × draws, float32 (a pair's draws are one row difference).

    With ``df``, each draw is divided by √(χ²_df / df): a multivariate t, for variances
    estimated from few clusters. The normals are drawn in blocks of at most ``_BLOCK_VALUES``
    pair values (the block size fixes which random numbers each draw gets, so it stays as
    when the blocks of standardised differences were materialised one by one).
    """
    per_block = max(1, _BLOCK_VALUES // max(1, n_pairs))
    z32 = np.empty((root.shape[0], n_draws), dtype=np.float32)
    done = 0
    while done < n_draws:
        k = min(per_block, n_draws - done)
        z = root @ rng.standard_normal((root.shape[1], k))
        if df is not None:
            z /= np.sqrt(rng.chisquare(df, size=k) / df)
        z32[:, done:done + k] = z
        done += k
    return z32


class _SortedDraws:
    """The standardised draws W_pd = (Z_ad − Z_bd) / sd_p of pairs sorted by their t, with the
    maximum and minimum of W over each bin of ``_BIN_PAIRS`` consecutive pairs per draw.

    A step of the stepdown needs, per draw, max W over the up-hypotheses still active and
    max −W over the down ones. Rejections are {t > c}, so the active up-hypotheses are a
    prefix of the pairs sorted by t and the active down-hypotheses a suffix: whole bins come
    from the bin extremes, only the bin cut by the boundary is recomputed. One pass over the
    pairs × draws serves every step, and W is never held for more than one bin.
    """

    def __init__(self, t: FloatArray, z32: NDArray[np.float32], inv: NDArray[np.float32],
                 a: IntArray, b: IntArray) -> None:
        order = np.argsort(t, kind="stable")
        self.z32, self.a, self.b, self.inv = z32, a[order], b[order], inv[order]
        n_bins = -(-t.size // _BIN_PAIRS)
        n_draws = z32.shape[1]
        self.bin_max = np.empty((n_bins, n_draws), dtype=np.float32)
        self.bin_min = np.empty((n_bins, n_draws), dtype=np.float32)
        # Two bins' worth of buffers, reused: fresh 2 MB temporaries per bin cost page faults.
        self._buf = np.empty((2, min(_BIN_PAIRS, t.size), n_draws), dtype=np.float32)
        for k in range(n_bins):
            w = self._w(k * _BIN_PAIRS, min(t.size, (k + 1) * _BIN_PAIRS))
            np.max(w, axis=0, out=self.bin_max[k])
            np.min(w, axis=0, out=self.bin_min[k])

    def _w(self, start: int, stop: int) -> NDArray[np.float32]:
        # The same float32 operations as (Z_a − Z_b) · inv on the whole matrix: the same bits.
        w, zb = self._buf[0, :stop - start], self._buf[1, :stop - start]
        # mode="clip" (the indices are model columns, always in range): with ``out``, the
        # default mode="raise" gathers into a temporary first, three times slower.
        np.take(self.z32, self.a[start:stop], axis=0, out=w, mode="clip")
        np.take(self.z32, self.b[start:stop], axis=0, out=zb, mode="clip")
        np.subtract(w, zb, out=w)
        np.multiply(w, self.inv[start:stop, None], out=w)
        return w

    def max_up(self, stop: int) -> NDArray[np.float32]:
        """max W over sorted pairs [0, stop) per draw (−∞ for none)."""
        full = stop // _BIN_PAIRS
        out = np.full(self.z32.shape[1], -np.inf, dtype=np.float32)
        if full:
            np.max(self.bin_max[:full], axis=0, out=out)
        if stop > full * _BIN_PAIRS:
            np.maximum(out, self._w(full * _BIN_PAIRS, stop).max(axis=0), out=out)
        return out

    def min_down(self, start: int) -> NDArray[np.float32]:
        """min W over sorted pairs [start, pairs) per draw (+∞ for none)."""
        n = self.a.size
        first = -(-start // _BIN_PAIRS)
        out = np.full(self.z32.shape[1], np.inf, dtype=np.float32)
        if first * _BIN_PAIRS < n:
            np.min(self.bin_min[first:], axis=0, out=out)
        if start < min(n, first * _BIN_PAIRS):
            np.minimum(out, self._w(start, min(n, first * _BIN_PAIRS)).min(axis=0), out=out)
        return out


def _stepdown(t: FloatArray, draws: _SortedDraws, alpha: float, stepdown: bool
              ) -> tuple[BoolArray, BoolArray, list[float]]:
    """Reject H_ab: μ_a ≤ μ_b (``up``) and H_ba: μ_b ≤ μ_a (``down``) for every pair.

    The critical value of a step is the 1 − α quantile over the draws of the maximum of the
    standardised draws over the hypotheses still active (one-sided each: both directions of
    a pair give |W|). The same draws serve every step, so the critical values never increase.
    """
    up = np.zeros(t.size, dtype=bool)
    down = np.zeros(t.size, dtype=bool)
    crit: list[float] = []
    while True:
        act_up, act_down = ~up, ~down
        # Every rejection so far is {t > c} (up) or {−t > c} (down): the active hypotheses
        # are the first (up) and last (down) pairs in the order of t.
        n_up, n_down = int(np.count_nonzero(act_up)), int(np.count_nonzero(act_down))
        # + 0 and 0 − turn −0 into +0, as adding the 0 offset of an active hypothesis did.
        maxima = np.maximum(draws.max_up(n_up) + np.float32(0.0),
                            np.float32(0.0) - draws.min_down(t.size - n_down))
        c = float(np.quantile(maxima, 1.0 - alpha))
        crit.append(c)
        new_up = act_up & (t > c)
        new_down = act_down & (-t > c)
        if not (new_up.any() or new_down.any()):
            break
        up |= new_up
        down |= new_down
        if not stepdown:
            break
    return up, down, crit


@dataclass(frozen=True, eq=False)
class PairResolution:
    """Which ordered pairs the max-|t| procedure resolves, and the rank sets that follow.

    ``resolved[a, b]``: a resolved above b (``marginal``: in both models' own families);
    ``rank_low``, ``rank_high`` per model; ``critical_values`` as in :class:`RankSets`.
    """

    resolved: BoolArray
    rank_low: IntArray
    rank_high: IntArray
    critical_values: tuple[float, ...]


def resolve_pairs(
    t: ArrayLike,
    cov: ArrayLike,
    *,
    rng: np.random.Generator,
    alpha: float = 0.05,
    method: Method = "simultaneous",
    stepdown: bool = True,
    n_draws: int = 2000,
    df: float | None = None,
) -> PairResolution:
    """The max-|t| tests of every ordered pair from t-statistics and the covariance of the means.

    H_ab: μ_a ≤ μ_b is rejected (a resolved above b) when t_ab > c, c the 1 − α quantile over
    ``n_draws`` draws Z ~ N(0, Σ) of the maximum, over the hypotheses still active, of
    (Z_a − Z_b)/sd_ab with sd_ab² = Σ_aa + Σ_bb − 2Σ_ab. ``simultaneous``: one family of all
    M(M − 1) ordered pairs (the first critical value is that of max_{a<b} |·|); ``marginal``: a
    family per model, its 2(M − 1) ordered pairs. ``stepdown`` repeats with the hypotheses not
    yet rejected until nothing new is rejected, on the same draws.

    Parameters
    ----------
    t : array_like, shape (M, M)
        t_ab = δ̂_ab / se_ab, antisymmetric (t_ba = −t_ab); ±∞ allowed.
    cov : array_like, shape (M, M)
        Covariance of the model means (positive semi-definite); only its correlations between
        differences matter.
    rng : numpy.random.Generator
    alpha, method, stepdown, n_draws
        As in :func:`rank_sets`.
    df : float, optional
        Draw from the multivariate t with ``df`` degrees of freedom instead of the normal.

    Returns
    -------
    PairResolution

    Examples
    --------
    Two models: the single step is the two-sided z-test, the step down the one-sided one.

    >>> t = np.array([[0.0, 2.5], [-2.5, 0.0]])
    >>> r = resolve_pairs(t, np.eye(2), rng=np.random.default_rng(0), n_draws=20000)
    >>> r.resolved.tolist(), [round(c, 1) for c in r.critical_values]
    ([[False, True], [False, False]], [2.0, 1.6])
    """
    tm = np.asarray(t, dtype=float)
    cv = np.asarray(cov, dtype=float)
    if tm.ndim != 2 or tm.shape[0] != tm.shape[1] or tm.shape[0] < 2:
        raise ValueError(f"`t` must be a square (M × M) matrix, M ≥ 2, got shape {tm.shape}")
    if cv.shape != tm.shape or not np.all(np.isfinite(cv)):
        raise ValueError(f"`cov` must be a finite {tm.shape} matrix, got shape {cv.shape}")
    if np.any(np.isnan(tm)) or not np.allclose(tm, -tm.T, equal_nan=False):
        raise ValueError("`t` must be antisymmetric (t[b, a] = −t[a, b]) without NaN")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {', '.join(METHODS)}, got {method!r}")
    if int(n_draws) != n_draws or n_draws < 100:
        raise ValueError(f"`n_draws` must be an integer ≥ 100, got {n_draws}")
    n_draws = int(n_draws)
    m = tm.shape[0]
    root = _cov_root(cv)
    if method == "simultaneous":
        a, b = np.triu_indices(m, k=1)
        a, b = a.astype(np.int64), b.astype(np.int64)
        seed = int(rng.integers(2**63))  # the draws' own stream
        t_ab = tm[a, b]
        z32 = _draws(root, a.size, n_draws, np.random.default_rng(seed), df)
        draws = _SortedDraws(t_ab, z32, _inverse_sd(root, a, b), a, b)
        up, down, crit = _stepdown(t_ab, draws, alpha, stepdown)
        resolved = np.zeros((m, m), dtype=bool)
        resolved[a[up], b[up]] = True
        resolved[b[down], a[down]] = True
        low, high = rank_sets_from_resolved(resolved)
        return PairResolution(resolved=resolved, rank_low=low, rank_high=high,
                              critical_values=tuple(crit))
    above = np.zeros((m, m), dtype=bool)  # above[j, k]: j above k, in j's family
    below = np.zeros((m, m), dtype=bool)  # below[j, k]: k above j, in j's family
    finals = []
    for j in range(m):
        others = np.delete(np.arange(m, dtype=np.int64), j)
        ja = np.full(others.size, j, dtype=np.int64)
        t_j = tm[j, others]
        z32 = _draws(root, others.size, n_draws, rng, df)
        draws_j = _SortedDraws(t_j, z32, _inverse_sd(root, ja, others), ja, others)
        up, down, c = _stepdown(t_j, draws_j, alpha, stepdown)
        above[j, others[up]] = True
        below[j, others[down]] = True
        finals.append(c[-1])
    # A pair separates tiers only when both models' own families resolve it.
    return PairResolution(resolved=above & below.T,
                          rank_low=1 + below.sum(axis=1, dtype=np.int64),
                          rank_high=m - above.sum(axis=1, dtype=np.int64),
                          critical_values=tuple(finals))


def _default_order(x: FloatArray) -> IntArray:
    present = ~np.isnan(x)
    means = np.where(present, x, 0.0).sum(axis=0) / np.maximum(present.sum(axis=0), 1)
    return np.argsort(-means, kind="stable").astype(np.int64)


def rank_sets(
    scores: ArrayLike,
    *,
    rng: np.random.Generator,
    groups: ArrayLike | None = None,
    covariance: Covariance = "iid",
    order: ArrayLike | None = None,
    alpha: float = 0.05,
    method: Method = "simultaneous",
    stepdown: bool = True,
    n_draws: int = 2000,
    small_sample: bool = True,
    sums: BoardSums | None = None,
    figures: BoardResult | None = None,
) -> RankSets:
    """Rank confidence sets (csranks' max-|t| with stepdown) and tiers of a paired score matrix.

    For every pair a ≠ b, t_ab = δ̂_ab / se_ab, with δ̂_ab the mean difference on the items both
    models have and se_ab² = σ̂²_ab · DE_ab / n_ab the kernel's
    (:func:`monitor.stats.board.board`: plug-in σ̂_D², design effect DE of ``covariance``).
    The critical value c is the 1 − α quantile of max over the hypotheses of the standardised
    (Z_a − Z_b)/sd_ab, Z ~ N(0, Σ̂) (``n_draws`` parametric draws from ``rng``), Σ̂ the covariance
    of the model means (:func:`means_covariance`); H_ab: μ_a ≤ μ_b is rejected (a resolved above
    b) when t_ab > c. With ``stepdown`` the critical value is recomputed over the hypotheses not
    yet rejected until nothing new is rejected (Mogstad, Romano, Shaikh & Wilhelm 2023, Alg. 3.1;
    the same draws at every step, so every step's sets are inside the previous ones).

    Missing items: se_ab is exact on each pair's shared items; the correlations between
    different pairs' differences come from Σ̂ on the items every model has. When some models
    lack items this is an approximation (``exact_correlation`` is False); the scale of each
    t is still the pair's own.

    Parameters
    ----------
    scores : array_like, shape (n_items, M)
        Scores in [0, 1], NaN where a model has no result.
    rng : numpy.random.Generator
        Source of the parametric draws.
    groups : array_like, shape (n_items,), optional
        Item group labels, used when ``covariance`` is ``cluster`` or ``strata``.
    covariance : {"iid", "cluster", "strata"}
        Items independent; groups sampled (cluster-robust); groups fixed (stratified).
    order : array_like of int, optional
        The point ranking (model columns, best first); default by the mean over each model's
        own items, ties by column.
    alpha : float
        1 − α is the coverage: joint over all models (``simultaneous``) or of each model's
        own set (``marginal``, each model's family is its M − 1 pairs).
    method : {"simultaneous", "marginal"}
    stepdown : bool
        Step down (default) or a single step.
    n_draws : int
        Parametric draws for the critical values.
    small_sample : bool
        With ``cluster`` covariance, draw from the multivariate t with G − 1 degrees of
        freedom (G clusters) instead of the normal: the variances rest on G cluster sums.
        Coverage is still below nominal for tied models with few clusters (docs/ranks.md).
    sums : BoardSums, optional
        :func:`monitor.stats.board.board_sums` of ``scores`` and ``groups``, when the caller
        has it already (the report reads its family's pairs from the same matrices).
    figures : BoardResult, optional
        The kernel's figures of every pair once, in either orientation, computed with these
        ``groups`` and ``covariance`` (the report's of the family of all pairs): its t are
        read instead of computing the kernel again.

    Returns
    -------
    RankSets

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = (rng.random((2000, 3)) < [0.8, 0.5, 0.48]).astype(float)
    >>> r = rank_sets(x, rng=np.random.default_rng(1))
    >>> [r.interval(j) for j in range(3)], r.tier.tolist()
    ([(1, 1), (2, 3), (2, 3)], [1, 2, 2])
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"`scores` must be an (items × models) array with at least two "
                         f"models, got shape {x.shape}")
    if covariance not in ("iid", "cluster", "strata"):
        raise ValueError(f"`covariance` must be 'iid', 'cluster' or 'strata', got {covariance!r}")
    m = x.shape[1]
    o = _default_order(x) if order is None else _check_order(order, m)
    if sums is not None and (sums.x0.shape != x.shape
                             or (covariance != "iid" and sums.codes is None)):
        raise ValueError(f"`sums` must be board_sums of the {x.shape} scores and their groups")
    if figures is not None:
        lo, hi = np.minimum(figures.a, figures.b), np.maximum(figures.a, figures.b)
        if (figures.a.size != m * (m - 1) // 2 or np.any(lo == hi)
                or np.unique(lo * m + hi).size != lo.size):
            raise ValueError(f"`figures` must hold every pair of the {m} models once")
        kind = None if covariance == "iid" else ("strata" if covariance == "strata" else "cluster")
        if figures.group_kind != kind:
            raise ValueError(f"`figures` must be computed with the {covariance} covariance's "
                             f"groups, got groups of kind {figures.group_kind}")
    a, b, t, n_groups = _pairwise_t(x, groups, covariance, sums, figures)
    cov, n_complete = means_covariance(x, groups=groups, kind=covariance)
    tmat = np.zeros((m, m))
    tmat[a, b] = t
    tmat[b, a] = -t
    # Cluster-robust variances rest on G clusters: multivariate-t draws with G − 1 degrees
    # of freedom (as multcomp does with residual df); items as the unit: Gaussian.
    df = float(n_groups - 1) if covariance == "cluster" and small_sample else None
    if df is not None and df < 1:
        raise ValueError("a cluster-robust covariance needs at least two clusters")
    res = resolve_pairs(tmat, cov, rng=rng, alpha=alpha, method=method, stepdown=stepdown,
                        n_draws=n_draws, df=df)
    rank = np.empty(m, dtype=np.int64)
    rank[o] = np.arange(1, m + 1)
    return RankSets(
        order=o, rank=rank, rank_low=res.rank_low, rank_high=res.rank_high,
        tier=tiers(o, res.resolved), resolved=res.resolved, t=tmat, method=method,
        stepdown=bool(stepdown), alpha=float(alpha), covariance=covariance, n_draws=n_draws,
        critical_values=res.critical_values,
        correlation_items=n_complete, exact_correlation=n_complete == x.shape[0], df=df,
    )
