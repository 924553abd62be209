"""State of one benchmark: a dense score matrix and the pair sums of every pair of its models.

Every pair statistic the monitor reports is a function of four (models × models) sums over
the items both models scored (M = presence mask, X = scores with absent as 0):

    n[a, b]   = Σ M_a M_b            (paired items)
    sx[a, b]  = Σ X_a M_b            (a's scores on the items b also has)
    p[a, b]   = Σ X_a X_b
    sx2[a, b] = Σ X_a² M_b           (= sx while every score is 0 or 1)

so ΣD = sx − sxᵀ, ΣD² = sx2 + sx2ᵀ − 2p, and for 0/1 scores n11 = p, n10 = sx − p,
n01 = sxᵀ − p. While a benchmark's scores are all 0/1 the sums are exact 32-bit integer
counts; its first other score turns sx and p into float64 and adds sx2.

A new score (r, c, x) changes only row c and column c of the sums, by its products with the
scores already on item r: folding a batch costs one pass over the present models of each
new result (:meth:`BenchmarkState.fold_new`, sparse or dense products, whichever costs less
for the batch), not a pass over every pair. Each sum is a :class:`PairSum`, whose arrays a
fold writes by rows only (a column of a 1,000-model array is a cache line per model).
Cluster sums for the design effect are not kept per pair: they are computed from the score
matrix for the pairs somebody reads (:meth:`BenchmarkState.cluster_sums`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.core.config import BenchmarkSpec
from monitor.core.table import PairTable
from monitor.stats.cluster_sequential import ClusterPaths
from monitor.stats.figures import ClusterDecisions, GroupKind, GroupSums, PairSums
from monitor.stats.sequential import PairPaths, pair_number

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

UNCLUSTERED = 0  # group 0 holds items without a cluster label: each is its own cluster
_CLUSTER_CELLS = 4_000_000  # (items × pairs) cells per chunk of the cluster sums
_BLOCK_BYTES = 8 << 20  # rows of the score matrix read at once by the cluster sums (≤ 8 MB)
_DENSE_BYTES = 16 << 20  # the dense fold's left operand ([Δm; Δx (; Δx²)]) at most
# Seconds per multiply-add of the fold's products, and the sparse products' fixed set-up
# (building, stacking and transposing the CSR operands, ~15 scipy calls), measured on one
# core (OpenBLAS, scipy 1.17): a dense float32 product of the shapes a batch makes runs at
# 0.04–0.06 ns per multiply-add (0.13 ns with a handful of rows), float64 at twice that; a
# CSR × dense product at 0.6–0.75 ns whatever the dtype; the set-up costs 1–3 ms.
_DENSE_MADD = {True: 0.06e-9, False: 0.12e-9}
_DENSE_CELL = 0.15e-9  # filling the dense left operand, per cell
_SPARSE_MADD = 0.65e-9
_SPARSE_SETUP = 2.0e-3
_SPARSE_OWN = 20e-9  # per entry of a CSR × CSR product (scipy's csr_matmat, then tocoo)

#: Bytes of the Python objects of each item, model and perturbed result beyond the arrays: dict
#: entries, list slots and the name itself (tracemalloc over 100,000 items named like
#: ``mmlu_pro-test-000123`` and 100,000 perturbed results: 75 and 313 bytes besides the id
#: strings, ~70 bytes each; models as items, rounded up).
ITEM_OBJECT_BYTES = 160
MODEL_OBJECT_BYTES = 200
PERTURBED_OBJECT_BYTES = 320

_BLAS: Any = None


@contextlib.contextmanager
def single_thread_blas() -> Iterator[None]:
    """Run the products on one BLAS thread.

    The products are small (touched rows × the models); on a busy machine OpenBLAS' thread
    pool makes them 10–20× slower than one thread, and the monitor's throughput is bound by
    them.
    """
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController().select(user_api="blas")
    with _BLAS.limit(limits=1):
        yield


def _more_rows(cap: int) -> int:
    return cap + cap // 2  # 1.5x: the matrix stays within ~12 bytes per stored score


def _more_cols(cap: int) -> int:
    return cap + max(1, cap // 4)  # models arrive rarely: grow by a quarter


def _capacity(cap: int, need: int, grow: Callable[[int], int]) -> int:
    while cap < need:
        cap = grow(cap)
    return cap


@dataclass(frozen=True)
class Growth:
    """What a batch adds to a benchmark: new items and models (rows and columns), stored
    scores (``cells``: accepted results, samples and perturbed variants included), perturbed
    results, whether it brings the board's first score other than 0/1 (``nonbinary``), and
    the K its first result declares (``k``, for a benchmark it would start)."""

    items: int = 0
    models: int = 0
    cells: int = 0
    perturbed: int = 0
    nonbinary: bool = False
    k: int | None = None


@dataclass(frozen=True)
class Footprint:
    """What state holds: models, items, stored scores (``cells``) and bytes (the arrays at
    their capacity plus the Python objects of the names, :data:`ITEM_OBJECT_BYTES` …)."""

    models: int = 0
    items: int = 0
    cells: int = 0
    nbytes: int = 0

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(self.models + other.models, self.items + other.items,
                         self.cells + other.cells, self.nbytes + other.nbytes)

    def __sub__(self, other: Footprint) -> Footprint:
        return Footprint(self.models - other.models, self.items - other.items,
                         self.cells - other.cells, self.nbytes - other.nbytes)


class PairSum:
    """One pair sum S[a, b] of every pair of columns, kept so that a fold writes rows only.

    A new cell of model c changes row c and column c of S. Writing a column of a (cap × cap)
    array touches a cache line per model (at 1,000 models it costs 8–20× the row), so the
    column half is written as rows of a second array: S[a, b] = rows[a, b] + cols[b, a]. A
    symmetric sum (n, p) needs no second array: S = W + Wᵀ − diag(W), W holding each new
    cell's pairs in its own model's row and the batch's own pairs once, in the row of the
    lower column. Reads of a pair gather two entries instead of one.
    """

    __slots__ = ("cols", "rows")

    def __init__(self, rows: NDArray[Any], cols: NDArray[Any] | None = None) -> None:
        self.rows = rows
        self.cols = cols  # None: symmetric

    @classmethod
    def zeros(cls, cap: int, dtype: Any, *, symmetric: bool) -> PairSum:
        return cls(np.zeros((cap, cap), dtype=dtype),
                   None if symmetric else np.zeros((cap, cap), dtype=dtype))

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.rows.dtype

    def arrays(self) -> list[NDArray[Any]]:
        return [self.rows] if self.cols is None else [self.rows, self.cols]

    def at(self, a: IntArray, b: IntArray) -> NDArray[Any]:
        """S[a[i], b[i]]."""
        cap = self.rows.shape[1]
        return self.at_flat(a * cap + b, b * cap + a)

    def at_flat(self, ab: IntArray, ba: IntArray) -> NDArray[Any]:
        """S[a[i], b[i]] of the flat places ab = a · cap + b and ba = b · cap + a (``take`` on
        the flat arrays: a third of the time of a two-axis fancy index)."""
        rows = self.rows.reshape(-1)
        if self.cols is not None:
            both: NDArray[Any] = rows.take(ab) + self.cols.reshape(-1).take(ba)
            return both
        out: NDArray[Any] = rows.take(ab) + rows.take(ba)
        same = ab == ba
        if same.any():
            out[same] = rows.take(ab[same])
        return out

    def row_block(self, a: IntArray, k: int) -> NDArray[Any]:
        """S[a, :k] (len(a) × k; ``a`` sorted)."""
        other = self.rows if self.cols is None else self.cols
        # consecutive columns (one item's results across the models, a few models): a view
        at: IntArray | slice = (slice(int(a[0]), int(a[-1]) + 1)
                                if a.size and int(a[-1]) - int(a[0]) + 1 == a.size else a)
        cols = other[:k, at] if isinstance(at, slice) else np.take(other[:k], at, axis=1)
        out: NDArray[Any] = self.rows[at, :k] + cols.T
        if self.cols is None:
            out[np.arange(a.size), a] = self.rows[a, a]
        return out

    def full(self, k: int) -> NDArray[Any]:
        """S[:k, :k]."""
        r = self.rows[:k, :k]
        if self.cols is not None:
            both: NDArray[Any] = r + self.cols[:k, :k].T
            return both
        out: NDArray[Any] = r + r.T
        np.fill_diagonal(out, np.diagonal(r))
        return out

    def diagonal(self, k: int) -> NDArray[Any]:
        d: NDArray[Any] = np.diagonal(self.rows)[:k]
        return d if self.cols is None else d + np.diagonal(self.cols)[:k]

    def add(self, at: IntArray | slice, row_part: NDArray[Any],
            col_part: NDArray[Any] | None = None, *, models: IntArray | slice | None = None
            ) -> None:
        """Add ``row_part`` (columns ``at`` × ``models``, the first ones by default: their
        rows of S) and ``col_part`` (the same shape: their column of S, transposed; None for
        a symmetric S)."""
        where = _block(at, slice(0, row_part.shape[1]) if models is None else models)
        _add_to(self.rows, where, row_part)
        if self.cols is not None:
            assert col_part is not None
            _add_to(self.cols, where, col_part)

    def add_own(self, at: IntArray | slice, own: NDArray[Any]) -> None:
        """Add the batch's own pairs (columns ``at`` × ``at``: Δfᵀ Δg, its cells against each
        other), to the rows of S — once, in the lower column's row, for a symmetric S (whose
        ``own`` is overwritten)."""
        if isinstance(at, slice):  # a view of the sums: added in place, masked
            view = self.rows[at, at]
            np.add(view, own, out=view, casting="unsafe",
                   where=_upper(own.shape[0]) if self.cols is None else True)
            return
        if self.cols is None:
            own *= _upper(own.shape[0])
        _add_to(self.rows, _block(at, at), own)

    def own_into(self, row_part: NDArray[Any], product: Any, cols: IntArray) -> None:
        """Add the batch's own pairs, a sparse (t × t) product over the batch's columns
        ``cols`` (sorted), to ``row_part`` (their rows of S, before :meth:`add`) — once, in
        the lower column's row, for a symmetric S."""
        row, col, data = self.own_entries(product)
        row_part[row, cols[col]] += data

    def own_entries(self, product: Any) -> tuple[IntArray, IntArray, NDArray[Any]]:
        """(row, column, value) of a sparse product of the batch's own pairs as S takes them:
        each (row, column) once — a product of CSR matrices holds each once (scipy's
        csr_matmat sums a row's terms before it writes them), so they are added by one fancy
        index — and, for a symmetric S, only those with row ≤ column (the lower column's)."""
        coo = product.tocoo()
        row, col, data = coo.row, coo.col, coo.data
        if self.cols is None:
            keep = row <= col
            row, col, data = row[keep], col[keep], data[keep]
        return row, col, data

    def set_full(self, k: int, s: NDArray[Any]) -> None:
        """Set S[:k, :k] to ``s`` (a restored snapshot)."""
        self.rows[:k, :k] = np.triu(s) if self.cols is None else s
        if self.cols is not None:
            self.cols[:k, :k] = 0

    def subtract(self, k: int, delta: NDArray[Any]) -> None:
        """S[:k, :k] −= ``delta`` (symmetric for a symmetric S)."""
        if self.rows.dtype.kind == "i":
            delta = np.rint(delta).astype(self.rows.dtype)
        self.rows[:k, :k] -= np.triu(delta) if self.cols is None else delta

    def grown(self, cap: int) -> PairSum:
        return PairSum(_grown(self.rows, cap), None if self.cols is None else _grown(self.cols, cap))

    def astype(self, dtype: Any) -> PairSum:
        return PairSum(self.rows.astype(dtype),
                       None if self.cols is None else self.cols.astype(dtype))

    def copy(self) -> PairSum:
        return self.astype(self.rows.dtype)


@functools.lru_cache(maxsize=4)
def _upper(t: int) -> NDArray[np.bool_]:
    """The upper triangle (diagonal included) of a (t × t) matrix."""
    return np.triu(np.ones((t, t), dtype=bool))


def _product(a: NDArray[Any], b: NDArray[Any]) -> NDArray[Any]:
    """a @ b, as an outer product when the inner size is 1 (one item's results across the
    models): OpenBLAS's product with an inner size of 1 takes 4× the outer product's time."""
    if a.shape[1] == 1:
        out: NDArray[Any] = np.multiply.outer(a[:, 0], b[0])
    else:
        out = a @ b
    return out


def _csr(major: IntArray, minor: IntArray, size: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """(indptr, indices) of the CSR matrix with an entry at (major[i], minor[i]) for each i
    (of ``size`` rows; a row's entries in the order given)."""
    indptr = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(np.bincount(major, minlength=size), out=indptr[1:])
    return indptr, minor[np.argsort(major, kind="stable")].astype(np.int32)


def _add_rows_product(target: NDArray[Any], row0: int, a: tuple[NDArray[Any], NDArray[Any]],
                      b: NDArray[Any]) -> None:
    """target[row0 : row0 + rows of a] += A @ b, A a 0/1 CSR matrix (indptr, indices) and b as
    wide as ``target``, in place: scipy's CSR × dense kernel (``csr_matvecs``) accumulates into
    its output, which here is the target's rows themselves — no (rows × models) product is
    made and then added. Where that kernel is not importable, the product and an add."""
    indptr, indices = a
    rows = indptr.size - 1
    if indices.size == 0:
        return
    # the kernel checks no shapes: b as wide as the target, A's rows within it
    assert b.shape[1] == target.shape[1] and row0 >= 0 and row0 + rows <= target.shape[0]
    out = target[row0:row0 + rows]
    data = np.ones(indices.size, dtype=target.dtype)
    kernel = _csr_matvecs()
    if kernel is None:
        from scipy import sparse

        out += sparse.csr_array((data, indices, indptr), shape=(rows, b.shape[0])) @ b
        return
    # 2-D operands: the kernel reads and writes through them (copying back an operand that is
    # not contiguous or not of its type), so no reshaped copy can take the sums
    kernel(rows, b.shape[0], b.shape[1], indptr, indices, data, b, out)


@functools.cache
def _csr_matvecs() -> Callable[..., None] | None:
    """scipy's CSR × dense kernel that adds into its output (not public API): None if absent,
    or if it does not add a known product into a known output (checked once)."""
    try:
        from scipy.sparse import _sparsetools
    except ImportError:  # pragma: no cover - a scipy without it
        return None
    kernel: Callable[..., None] | None = getattr(_sparsetools, "csr_matvecs", None)
    if kernel is None:  # pragma: no cover
        return None
    # [[1, 1], [0, 1]] @ b added twice to ones: 1 + 2 (A @ b)
    b = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = np.ones((2, 3), dtype=np.int32)
    try:
        for _ in range(2):
            kernel(2, 2, 3, np.array([0, 2, 3], dtype=np.int32),
                   np.array([0, 1, 1], dtype=np.int32), np.ones(3, dtype=np.int32), b, out)
    except Exception:  # pragma: no cover - another signature
        return None
    want = 1 + 2 * (np.array([[1, 1], [0, 1]], dtype=np.int32) @ b)
    return kernel if np.array_equal(out, want) else None


def _block(rows: IntArray | slice, cols: IntArray | slice) -> Any:
    """The index of the block ``rows`` × ``cols`` of a matrix."""
    if isinstance(rows, slice) or isinstance(cols, slice):
        return rows, cols
    return np.ix_(rows, cols)


def _add_to(target: NDArray[Any], where: Any, part: NDArray[Any]) -> None:
    if isinstance(where, tuple) and all(isinstance(w, slice) for w in where):
        view = target[where]  # a view: added in place, without a converted copy of ``part``
        np.add(view, part, out=view, casting="unsafe")
    elif target.dtype.kind == "i":  # 0/1 products: exact integers already
        target[where] += part.astype(target.dtype, copy=False)
    else:
        target[where] += part


class BenchmarkState:
    """Dense items × models score matrix (NaN = absent) of the ``original`` variant, with
    the pair sums over the items not excluded from resolution. With ``samples`` K > 1 the
    samples wait in ``Y`` (items × models × K) and a cell's score is the mean of its K samples,
    written once, when the last of them arrives."""

    def __init__(self, name: str, spec: BenchmarkSpec | None = None, *,
                 declared: str = "default") -> None:
        self.name = name
        # What the benchmark declared once (K, design), and who fixed K: "settings",
        # "result" (the first result's k) or "default".
        self.spec = spec = spec or BenchmarkSpec()
        self.declared = declared
        # K samples per (item, model): with K > 1 the samples wait in Y (items × models × K,
        # NaN = absent) and a cell enters X, with their mean, when its K-th sample arrives.
        samples = self.samples
        self.Y: FloatArray | None = np.full((256, 8, samples), np.nan) if samples > 1 else None
        self.item_row: dict[str, int] = {}
        self.item_ids: list[str] = []
        self.model_col: dict[str, int] = {}
        self.models: list[str] = []
        self.cluster_id: dict[str, int] = {}
        self.clusters: list[str | None] = [None]
        self.X: FloatArray = np.full((256, 8), np.nan)
        self.group = np.zeros(256, dtype=np.int32)
        self.excluded_rows = np.zeros(256, dtype=bool)
        # Pair sums (cap × cap, see the module docstring); sx2 is None while all scores are 0/1.
        self.n = PairSum.zeros(8, np.int32, symmetric=True)
        self.sx = PairSum.zeros(8, np.int32, symmetric=False)
        self.p = PairSum.zeros(8, np.int32, symmetric=True)
        self.sx2: PairSum | None = None
        # Accepted scores other than 0/1 per model column: a pair is binary (McNemar
        # e-process) while both of its columns have none.
        self.nonbinary: NDArray[np.int64] = np.zeros(8, dtype=np.int64)
        # Flags and exclusion: a queryable seam for the audit tools.
        self.flagged: dict[str, set[str]] = {}
        self.excluded: set[str] = set()
        # Perturbed variants, kept for stability figures only.
        self.perturbed: dict[tuple[str, str, str], float] = {}
        self.perturbed_by_cell: dict[tuple[str, str], list[str]] = {}
        self.stability: dict[str, dict[str, list[int]]] = {}
        # The verdict last emitted for each pair (cap × cap, [a, b] = −[b, a]).
        self.codes: NDArray[np.int8] = np.zeros((8, 8), dtype=np.int8)
        # Sequential state of each pair (lo, hi), lo < hi in arrival order, at flat index
        # lo · cap + hi with cap = the column capacity: e-process kind, switch, decision.
        self.paths = PairPaths.empty(8 * 8)
        # The paired items n each pair (lo, hi) needs before a run can decide it (flat as
        # ``paths``; :func:`monitor.stats.sequential.items_to_decide`; 0: read it at its next
        # item, the int32 maximum: decided), at hi · cap + lo too, so that a model's pairs
        # are one row (:meth:`set_recheck`). Derived: a restored state starts from zeros.
        self.recheck: NDArray[np.int32] = np.zeros(8 * 8, dtype=np.int32)
        # When each pair (lo, hi) was decided: an index into ``times`` (−1: undecided).
        self.decided_at: NDArray[np.int32] = np.full((8, 8), -1, dtype=np.int32)
        self.times: list[datetime] = []
        # (models best first, resolved, tiers) of the last RankingChange
        self.last_ranking: tuple[tuple[str, ...], bool, tuple[int, ...]] = ((), False, ())
        self.table: PairTable | None = None
        self.table_stale = False  # results applied since ``table`` was computed
        # Bumped by every change of the state: a table reads the state only at its version.
        self.version = 0
        # (planned models, block of each pair's share of α, columns filled): derived, cached
        self.blocks: tuple[int, NDArray[np.int8], int] | None = None
        # Sampled clusters: each pair's clustered decision (indexed by pair_number − 1, by
        # cluster id), the pair's verdict under that design.
        self.cpaths: ClusterPaths | None = (ClusterPaths.empty(28, 8)
                                            if spec.design == "clusters" else None)
        # The items' places in the benchmark's fixed random order (derived, cached).
        self._order_keys: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)

    def changed(self) -> None:
        """Mark the state changed (a batch applied, a decision adopted): tables handed out
        before refuse further reads, and the next read computes a new one."""
        self.table_stale = True
        self.version += 1

    def order_keys(self) -> NDArray[np.uint64]:
        """Each item's place in the benchmark's fixed random order (:func:`monitor.core.plan.
        item_keys`), computed for new items only."""
        from monitor.core.plan import item_keys

        have = self._order_keys
        rows = len(self.item_ids)
        if have.size < rows:
            self._order_keys = have = np.concatenate(
                [have, item_keys(self.name, self.item_ids[have.size:rows])])
        return have

    @property
    def samples(self) -> int:
        """K, the samples per (item, model) the benchmark takes."""
        return self.spec.samples

    @property
    def design(self) -> str:
        return self.spec.design

    # -- growth --------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.models)

    @property
    def cap(self) -> int:
        """Column capacity: the pair arrays are (cap × cap), paths flat lo · cap + hi."""
        return int(self.X.shape[1])

    @property
    def binary(self) -> bool:
        """Every score so far is 0 or 1 (the sums are integer counts)."""
        return self.sx2 is None

    def row_of(self, item_id: str, cluster: str | None) -> int:
        """Row of ``item_id``, created on first sight; its cluster is fixed then."""
        r = self.item_row.get(item_id)
        if r is not None:
            return r
        r = len(self.item_ids)
        if r == self.X.shape[0]:
            cap = _more_rows(r)
            X = np.full((cap, self.X.shape[1]), np.nan)
            X[:r] = self.X
            self.X = X
            if self.Y is not None:
                Y = np.full((cap, *self.Y.shape[1:]), np.nan)
                Y[:r] = self.Y
                self.Y = Y
            self.group = np.concatenate([self.group, np.zeros(cap - r, dtype=np.int32)])
            self.excluded_rows = np.concatenate([self.excluded_rows, np.zeros(cap - r, bool)])
        self.item_row[item_id] = r
        self.item_ids.append(item_id)
        if cluster is not None:
            g = self.cluster_id.get(cluster)
            if g is None:
                g = len(self.clusters)
                self.cluster_id[cluster] = g
                self.clusters.append(cluster)
            self.group[r] = g
        if item_id in self.excluded:
            self.excluded_rows[r] = True
        return r

    def col_of(self, model: str) -> int:
        """Column of ``model``, created on first sight."""
        c = self.model_col.get(model)
        if c is not None:
            return c
        c = len(self.models)
        if c == self.X.shape[1]:
            cap = _more_cols(c)
            X = np.full((self.X.shape[0], cap), np.nan)
            X[:, :c] = self.X
            self.X = X
            if self.Y is not None:
                Y = np.full((self.Y.shape[0], cap, self.samples), np.nan)
                Y[:, :c] = self.Y
                self.Y = Y
            self.n, self.sx, self.p = (s.grown(cap) for s in (self.n, self.sx, self.p))
            self.codes = _grown(self.codes, cap)
            self.decided_at = _grown(self.decided_at, cap, fill=-1)
            if self.sx2 is not None:
                self.sx2 = self.sx2.grown(cap)
            self.paths = _relayout(self.paths, c, cap)
            recheck = np.zeros((cap, cap), dtype=np.int32)
            recheck[:c, :c] = self.recheck.reshape(c, c)
            self.recheck = recheck.ravel()
            self.nonbinary = np.concatenate([self.nonbinary,
                                             np.zeros(cap - c, dtype=np.int64)])
        self.model_col[model] = c
        self.models.append(model)
        return c

    def nbytes(self, *, items: int | None = None, models: int | None = None,
               binary: bool | None = None) -> int:
        """Bytes held by the numeric state (score matrix, row labels, pair sums, paths, the
        pairs' cached α blocks); with ``items``, ``models`` or ``binary``: the bytes it would
        hold with that many items and models (at the capacities the growth rules give them)
        and with that kind of scores — what a batch would make of it, before it is applied."""
        rows = _capacity(self.X.shape[0], items or 0, _more_rows)
        cols = _capacity(self.cap, models or 0, _more_cols)
        binary = self.binary if binary is None else binary and self.binary
        samples = self.Y.shape[2] if self.Y is not None else 0
        per_row = (self.X.itemsize * cols * (1 + samples) + self.group.itemsize
                   + self.excluded_rows.itemsize)
        paths = sum(getattr(self.paths, f).itemsize for f in self.paths.__dataclass_fields__)
        # n, the verdict codes, the decision times, the α block (int8); sx (two arrays) and p
        # are int32 counts while every score is 0/1, then float64 with sx2 (two) beside them.
        sums = 3 * np.dtype(np.int32).itemsize if binary else 5 * np.dtype(np.float64).itemsize
        per_pair = (self.n.dtype.itemsize + self.codes.itemsize + self.decided_at.itemsize + 1
                    + self.recheck.itemsize + paths + sums)
        total = rows * per_row + cols * cols * per_pair + cols * self.nonbinary.itemsize
        if self.cpaths is not None:  # sampled clusters: a count and a total per pair and cluster
            cp = self.cpaths
            per_cell = cp.count.itemsize + cp.total.itemsize
            per_pair_cl = sum(getattr(cp, f).itemsize for f in cp.__dataclass_fields__
                              if f not in ("count", "total"))
            pairs = max(cols * (cols - 1) // 2, cp.shape[0])
            total += int(pairs * (max(len(self.clusters), cp.shape[1]) * per_cell + per_pair_cl))
        return int(total)

    def footprint(self, growth: Growth | None = None) -> Footprint:
        """Models, items and bytes held (``cells`` 0: the monitor counts them), after
        ``growth`` when given."""
        g = growth or Growth()
        items, models = len(self.item_ids) + g.items, self.k + g.models
        perturbed = len(self.perturbed) + g.perturbed
        nbytes = (self.nbytes(items=items, models=models, binary=not g.nonbinary)
                  + ITEM_OBJECT_BYTES * items + MODEL_OBJECT_BYTES * models
                  + PERTURBED_OBJECT_BYTES * perturbed)
        return Footprint(models=models, items=items, nbytes=nbytes)

    def to_float(self) -> None:
        """Switch the sums to float64 (the first score other than 0/1): sx2 = sx then."""
        if self.sx2 is None:
            self.sx = self.sx.astype(np.float64)
            self.p = self.p.astype(np.float64)
            self.sx2 = self.sx.copy()

    # -- folding -------------------------------------------------------------------------
    def rows_view(self, rows: IntArray) -> FloatArray:
        """Scores of ``rows`` (first k columns) as they count for resolution (excluded rows
        read as absent)."""
        out = self.X[rows, :self.k]
        out[self.excluded_rows[rows]] = np.nan
        return out

    def fold_new(self, rows: IntArray, cols: IntArray, scores: FloatArray) -> None:
        """Add new cells (absent before, on rows not excluded, one per cell) to the sums and
        write them into the score matrix.

        With Δ the new cells and A the scores before, the sums change by ΔᵀA′ + AᵀΔ
        (A′ = A + Δ): rows ``cols`` by the first, columns ``cols`` by the second — by sparse
        products, O(new cells × models), or by dense ones over the batch's (models × items)
        block where that costs less (:func:`dense_fold_cheaper`). The dense block spans the
        batch's columns as one range when they fill most of it (one item's results across
        the models, a few consecutive models), so its sums are written through slices.
        """
        uniq_r, r_inv = np.unique(rows, return_inverse=True)
        uniq_c, c_inv = np.unique(cols, return_inverse=True)
        if np.any((scores != 0.0) & (scores != 1.0)):
            self.to_float()
        parts = 2 if self.binary else 3  # [Δm; Δx (; Δx²)]
        width = int(uniq_c[-1] - uniq_c[0]) + 1
        span = width <= uniq_c.size + uniq_c.size // 2
        t = width if span else uniq_c.size
        block = parts * t * uniq_r.size * (4 if self.binary else 8)
        if block <= _DENSE_BYTES and dense_fold_cheaper(
                rows.size, uniq_r.size, t, self.k, binary=self.binary):
            if span:
                c0 = int(uniq_c[0])
                self._fold_dense(rows, cols, scores, uniq_r, r_inv, slice(c0, c0 + width),
                                 cols - c0)
            else:
                self._fold_dense(rows, cols, scores, uniq_r, r_inv, uniq_c, c_inv)
        else:
            self._fold_sparse(rows, cols, scores, uniq_r, r_inv, uniq_c, c_inv)

    def _fold_sparse(self, rows: IntArray, cols: IntArray, scores: FloatArray,
                     uniq_r: IntArray, r_inv: IntArray, uniq_c: IntArray, c_inv: IntArray
                     ) -> None:
        """:meth:`fold_new` by sparse products: the batch's cells (t columns × r rows, n of
        them) against the present scores of their rows, O(n × k) arithmetic (0/1 scores:
        :meth:`_fold_sparse_binary`)."""
        if self.binary:
            self._fold_sparse_binary(rows, cols, scores, uniq_r, r_inv, uniq_c, c_inv)
            return
        k = self.k
        from scipy import sparse

        before = self.X[uniq_r, :k]
        shape = (uniq_c.size, uniq_r.size)
        dm = sparse.csr_array((np.ones(rows.size), (c_inv, r_inv)), shape=shape)
        dx = sparse.csr_array((scores, (c_inv, r_inv)), shape=shape)
        right = np.empty((uniq_r.size, 3 * k))
        # Scores lie in [0, 1]: x ≥ 0 is the presence mask (NaN compares False), fmax(x, 0)
        # the score with absent as 0 — one pass each, straight into the product's operand.
        np.greater_equal(before, 0.0, out=right[:, :k])
        np.fmax(before, 0.0, out=right[:, k:2 * k])
        np.square(right[:, k:2 * k], out=right[:, 2 * k:])
        with single_thread_blas():
            left = sparse.vstack([dm, dx], format="csr")
            prod = left @ right  # [Δm; Δx]ᵀ (2t × r) against [m | x | x²] (r × 3k)
        t = uniq_c.size
        dm_m, dm_x = prod[:t, :k], prod[:t, k:2 * k]
        dx_m, dx_x = prod[t:, :k], prod[t:, k:2 * k]
        # Row part (Δfᵀ A′) = Δfᵀ A + Δfᵀ Δ; column part (Aᵀ Δg)ᵀ = Δgᵀ A. The batch's own
        # cells against each other (Δfᵀ Δ, sparse: items with two new scores) at uniq_c,
        # once for the symmetric sums.
        row_n, row_sx, row_p = dm_m, dx_m, dx_x
        dmt = dm.T.tocsr()
        for pair_sum, target, f, g in ((self.n, row_n, dm, dmt), (self.sx, row_sx, dx, dmt),
                                       (self.p, row_p, dx, dx.T.tocsr())):
            pair_sum.own_into(target, f @ g, uniq_c)
        self.n.add(uniq_c, row_n)
        self.sx.add(uniq_c, row_sx, dm_x)
        self.p.add(uniq_c, row_p)
        if self.sx2 is not None:
            dx2 = dx.multiply(dx).tocsr()
            row_sx2 = np.asarray(dx2 @ right[:, :k], dtype=np.float64)
            self.sx2.own_into(row_sx2, dx2 @ dmt, uniq_c)
            self.sx2.add(uniq_c, row_sx2, prod[:t, 2 * k:])
        self.X[rows, cols] = scores

    def _fold_sparse_binary(self, rows: IntArray, cols: IntArray, scores: FloatArray,
                            uniq_r: IntArray, r_inv: IntArray, uniq_c: IntArray, c_inv: IntArray
                            ) -> None:
        """:meth:`_fold_sparse` of 0/1 scores: each new cell's products with the present scores
        of its item added straight into its model's rows of the integer sums
        (:func:`_add_rows_product`), with no (columns × models) product between; then the
        batch's own pairs by sparse products (or by a dense product of its block, when many of
        its cells share items)."""
        c0 = int(uniq_c[0])
        span = int(uniq_c[-1]) + 1 - c0
        before = self.X[uniq_r]  # every column: absent (NaN) beyond the models present
        m = np.empty(before.shape, dtype=self.n.dtype)
        x = np.empty(before.shape, dtype=self.n.dtype)
        np.greater_equal(before, 0.0, out=m)  # present (NaN compares False)
        np.greater(before, 0.5, out=x)  # 1 (the scores are 0 or 1)
        local = cols - c0
        ones = scores == 1.0
        dm = _csr(local, r_inv, span)
        dx = _csr(local[ones], r_inv[ones], span)
        _add_rows_product(self.n.rows, c0, dm, m)  # Δmᵀ m
        _add_rows_product(self.sx.rows, c0, dx, m)  # Δxᵀ m
        assert self.sx.cols is not None
        _add_rows_product(self.sx.cols, c0, dm, x)  # Δmᵀ x: the column part, transposed
        _add_rows_product(self.p.rows, c0, dx, x)  # Δxᵀ x
        # The batch's own pairs (Δfᵀ Δ: its cells against each other on shared items).
        t = uniq_c.size
        per_row = np.bincount(r_inv)
        if dense_own_cheaper(t, uniq_r.size, int(per_row @ per_row)):
            block = np.zeros((2 * t, uniq_r.size), dtype=np.float32)
            block[c_inv, r_inv] = 1.0
            block[t + c_inv, r_inv] = scores
            with single_thread_blas():
                own = _product(block, block[:t].T)  # [Δm; Δx] against Δm
                own_p = _product(block[t:], block[t:].T)
            for pair_sum, part in ((self.n, own[:t]), (self.sx, own[t:]), (self.p, own_p)):
                pair_sum.add_own(uniq_c, part)
        else:
            # sparse products of the batch's cells, straight into the sums' rows
            from scipy import sparse

            fm, fx = (sparse.csr_array((np.ones(a[1].size, dtype=self.n.dtype), a[1], a[0]),
                                       shape=(span, uniq_r.size)) for a in (dm, dx))
            mt = fm.T.tocsr()
            for pair_sum, product in ((self.n, fm @ mt), (self.sx, fx @ mt),
                                      (self.p, fx @ fx.T.tocsr())):
                row, col, data = pair_sum.own_entries(product)
                pair_sum.rows[c0 + row, c0 + col] += data
        self.X[rows, cols] = scores

    def _fold_dense(self, rows: IntArray, cols: IntArray, scores: FloatArray, uniq_r: IntArray,
                    r_inv: IntArray, at: IntArray | slice, c_inv: IntArray) -> None:
        """:meth:`fold_new` with the batch's (columns × rows) block held dense (a full block:
        one model's results, one item's across the models, or a small board): the same sums,
        by one dense product instead of sparse ones, whose set-up costs more than the
        arithmetic of such a block. The block's columns are ``at`` (a range, or the batch's
        columns), ``c_inv`` each cell's place in it. Δᵀ A, over the models with a score on
        the batch's items, gives the rows of the sums and the transposed columns alike
        (:class:`PairSum`); Δᵀ Δ the batch's own pairs. 0/1 sums are exact integers in
        float32; other scores are summed in float64, with Σx² beside."""
        k = self.k
        t = at.stop - at.start if isinstance(at, slice) else at.size
        binary = self.binary
        # 0/1 sums: exact integers in float32 (BLAS), or in their own integers where the
        # products are outer products (one item: no conversion before the adds)
        ftype: Any = (np.float32 if uniq_r.size > 1 else self.n.dtype) if binary else np.float64
        parts = 2 if binary else 3  # [m | x (| x²)] and [Δm; Δx (; Δx²)]
        before = self.X[uniq_r, :k]
        have = np.flatnonzero((before >= 0.0).any(axis=0))  # models scored on these items
        models: IntArray | None = None if have.size > k // 2 else have
        if models is not None:
            before = before[:, models]
        w = before.shape[1]
        right = np.empty((uniq_r.size, parts * w), dtype=ftype)
        np.greater_equal(before, 0.0, out=right[:, :w])
        np.fmax(before, 0.0, out=right[:, w:2 * w], casting="unsafe")
        left = np.zeros((parts * t, uniq_r.size), dtype=ftype)  # one cell each
        left[c_inv, r_inv] = 1.0
        left[t + c_inv, r_inv] = scores
        if not binary:
            np.square(right[:, w:2 * w], out=right[:, 2 * w:])
            left[2 * t + c_inv, r_inv] = np.square(scores)
        with single_thread_blas():
            prod = _product(left, right)  # Δfᵀ A (parts·t × parts·w); 0/1: sums below 2^24
            own = _product(left, left[:t].T)  # [Δm; Δx (; Δx²)] against Δm: the batch's own pairs
            own_p = _product(left[t:2 * t], left[t:2 * t].T)
        # Rows Δfᵀ A′ = Δfᵀ A + Δfᵀ Δ; columns (Aᵀ Δg)ᵀ = Δgᵀ A.
        if w:
            self.n.add(at, prod[:t, :w], models=models)  # Δmᵀ m
            self.sx.add(at, prod[t:2 * t, :w], prod[:t, w:2 * w], models=models)  # Δxᵀ m, Δmᵀ x
            self.p.add(at, prod[t:2 * t, w:2 * w], models=models)  # Δxᵀ x
            if self.sx2 is not None:
                self.sx2.add(at, prod[2 * t:, :w], prod[:t, 2 * w:], models=models)  # Δx²ᵀ m, Δmᵀ x²
        self.n.add_own(at, own[:t])
        self.sx.add_own(at, own[t:2 * t])
        self.p.add_own(at, own_p)
        if self.sx2 is not None:
            self.sx2.add_own(at, own[2 * t:])
        self.X[rows, cols] = scores

    def remove_rows(self, rows: IntArray) -> None:
        """Take ``rows`` (present in the sums now) out of the pair sums."""
        old = self.rows_view(rows)
        m = (~np.isnan(old)).astype(np.float64)
        x = np.where(m > 0, old, 0.0)
        k = self.k
        with single_thread_blas():
            parts = [(self.n, m.T @ m), (self.sx, x.T @ m), (self.p, x.T @ x)]
            if self.sx2 is not None:
                parts.append((self.sx2, (x * x).T @ m))
        for target, delta in parts:
            target.subtract(k, delta)

    def set_recheck(self, flat: IntArray, n: Any) -> None:
        """Set ``recheck`` of the pairs (lo, hi) at ``flat`` (lo · cap + hi) to ``n``, in both
        of its places."""
        lo, hi = np.divmod(flat, self.cap)
        self.recheck[flat] = n
        self.recheck[hi * self.cap + lo] = n

    def stamp(self, flat: IntArray, when: datetime) -> None:
        """Record ``when`` as the decision time of the pairs at ``flat`` (lo · cap + hi)."""
        if flat.size:
            self.times.append(when)
            lo, hi = np.divmod(flat, self.cap)
            self.decided_at[lo, hi] = len(self.times) - 1

    def decided_time(self, lo: int, hi: int) -> datetime | None:
        """When the pair of columns lo < hi was decided (None while undecided)."""
        i = int(self.decided_at[lo, hi])
        return None if i < 0 else self.times[i]

    # -- reading -------------------------------------------------------------------------
    def sx2_of(self, a: IntArray, b: IntArray) -> NDArray[Any]:
        """Σ x_a² over the items b also has (= sx for 0/1 scores)."""
        return (self.sx if self.sx2 is None else self.sx2).at(a, b)

    def pair_nsv(self, a: IntArray, b: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """n, S (from a's side) and V over the non-excluded items of the pairs (a[i], b[i])."""
        cap = self.cap
        ab, ba = a * cap + b, b * cap + a
        sab = self.p.at_flat(ab, ba).astype(np.float64)
        sx_ab = self.sx.at_flat(ab, ba).astype(np.float64)
        sx_ba = self.sx.at_flat(ba, ab).astype(np.float64)
        sq = ((sx_ab, sx_ba) if self.sx2 is None  # 0/1 scores: x² = x
              else (self.sx2.at_flat(ab, ba), self.sx2.at_flat(ba, ab)))
        return (self.n.at_flat(ab, ba).astype(np.float64), sx_ab - sx_ba,
                sq[0] + sq[1] - 2.0 * sab)

    def path_sums(self, flat: IntArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """:meth:`pair_nsv` of the pairs (lo, hi) at ``flat`` (lo · cap + hi, as ``paths``)."""
        return self.pair_nsv(*np.divmod(flat, self.cap))

    def pair_sums(self, a: IntArray, b: IntArray, *, clusters: bool = True) -> PairSums:
        """The kernel's input for the pairs (a[i], b[i]) (A = a[i]): sums, binary flags,
        cluster sums (``clusters``) and each pair's sequential state seen from A."""
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        binary_col = self.nonbinary[:self.k] == 0
        return PairSums.build(
            n=self.n.at(a, b), sa=self.sx.at(a, b), sb=self.sx.at(b, a), saa=self.sx2_of(a, b),
            sbb=self.sx2_of(b, a), sab=self.p.at(a, b), binary=binary_col[a] & binary_col[b],
            groups=self.cluster_sums(a, b) if clusters else None,
            paths=self.paths.seen_from(lo * self.cap + hi, a > b),
            design=self.spec.design, clusters=self.cluster_decisions(a, b),
        )

    def cluster_decisions(self, a: IntArray, b: IntArray) -> ClusterDecisions | None:
        """The sampled-clusters state of the pairs (a[i], b[i]) seen from A (None under the
        other designs); pairs not yet in the state read as empty."""
        cp = self.cpaths
        if cp is None:
            return None
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        idx = np.where(lo < hi, pair_number(lo, hi) - 1, 0)
        inside = (lo < hi) & (idx < cp.shape[0])
        idx = np.where(inside, idx, 0)
        sign = np.where(a > b, -1, 1)

        def at(x: NDArray[Any]) -> NDArray[Any]:
            return np.where(inside, x[idx], 0)

        return ClusterDecisions(
            r=self.spec.cluster_items, n_obs=at(cp.n_obs).astype(np.float64),
            s=(at(cp.s) * sign).astype(np.float64), v=at(cp.v).astype(np.float64),
            decided=(at(cp.decided) * sign).astype(np.int8),
            decided_n=at(cp.decided_n).astype(np.float64),
            decided_obs=at(cp.decided_obs).astype(np.float64),
            decided_log_e=at(cp.decided_log_e).astype(np.float64),
            seen=len(self.clusters) - 1, equivalent=at(cp.equivalent).astype(np.int8))

    def within_sums(self, a: IntArray, b: IntArray) -> tuple[FloatArray, FloatArray]:
        """Σ (w_a + w_b) over the complete, non-excluded items of the pairs (a[i], b[i]), w the
        sampling variance of a cell's mean, s²/K, from its samples (O(items × K) per model
        read), and the number of those items (:func:`monitor.stats.samples.pair_within`)."""
        from monitor.stats.samples import mean_variance, pair_within

        rows, k = len(self.item_ids), self.k
        w = np.full((rows, k), np.nan)
        if self.Y is not None:
            cols = np.unique(np.r_[a, b])
            w[:, cols] = mean_variance(self.Y[:rows, cols])
        return pair_within(self.X[:rows, :k], w, a, b, keep=~self.excluded_rows[:rows])

    def cluster_sums(self, a: IntArray, b: IntArray) -> GroupSums:
        """Per-cluster sums of D = x_a − x_b for the cluster-robust design effect, from the
        score matrix (O(items) per pair). Unclustered items are singleton clusters, whose
        contributions to Σ T², Σ T n, Σ n² and Σ T²/n are ΣD², ΣD, the count and ΣD².

        The matrix is read in blocks of consecutive items (rows), each once for all the
        pairs: a block's rows lie together in memory, where one column of every item would
        touch a cache line per item for every model read (the first evaluation of a
        4,500-model board reads the columns of 3,071 pairs)."""
        rows, k = len(self.item_ids), self.k
        n_named = len(self.clusters) - 1
        g = self.group[:rows]
        excluded = self.excluded_rows[:rows]
        # 0/1 scores: D ∈ {−1, 0, 1} and its sums (≤ 2^24 items) are exact in float32
        ftype = np.float32 if self.binary else np.float64
        t = np.zeros((max(n_named, 1), a.size))
        nc = np.zeros_like(t)
        v0, s0, n0 = np.zeros(a.size), np.zeros(a.size), np.zeros(a.size)
        step = max(1, min(_CLUSTER_CELLS // max(a.size, 1), _BLOCK_BYTES // (8 * max(k, 1))))
        for lo in range(0, rows, step):
            hi = min(lo + step, rows)
            block = self.X[lo:hi, :k]
            d = np.empty((hi - lo, a.size), dtype=ftype)
            np.subtract(block[:, a], block[:, b], out=d, casting="same_kind")
            present = d == d  # not NaN: both models have the item
            if excluded[lo:hi].any():
                present[excluded[lo:hi]] = False
            d[~present] = 0.0
            gb = g[lo:hi]
            named = np.flatnonzero(gb > UNCLUSTERED)
            if named.size:  # the block's items summed by cluster: one dense product each
                indicator = np.zeros((t.shape[0], hi - lo), dtype=ftype)
                indicator[gb[named] - 1, named] = 1.0
                with single_thread_blas():
                    t += indicator @ d
                    nc += indicator @ present.astype(ftype)
            single = np.flatnonzero(gb == UNCLUSTERED)
            if single.size:
                d0 = d[single].astype(np.float64)
                v0 += (d0 * d0).sum(axis=0)
                s0 += d0.sum(axis=0)
                n0 += present[single].sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            t2n = np.where(nc > 0, t * t / np.where(nc > 0, nc, 1.0), 0.0).sum(axis=0)
        # Strata (the declared design): the same sums, read for the stratified variance.
        kind: GroupKind = "strata" if self.spec.design == "strata" else "cluster"
        return GroupSums(kind=kind, n_groups=n_named, t2=(t * t).sum(axis=0) + v0,
                         tn=(t * nc).sum(axis=0) + s0, n2=(nc * nc).sum(axis=0) + n0,
                         t2_over_n=t2n + v0, count=np.count_nonzero(nc > 0, axis=0) + n0)

    # -- stability -----------------------------------------------------------------------
    def count_stability(self, model: str, kind: str, original: float, perturbed: float) -> None:
        """Record one (original, perturbed:<kind>) pair of a model; flip = right → wrong.

        The cell is [pairs, flips, right on original]: the flip rate's denominator is the
        third, as in ``llm-monitor stability`` (a flip needs a right original answer).
        """
        cell = self.stability.setdefault(model, {}).setdefault(kind, [0, 0, 0])
        cell[0] += 1
        if original >= 0.5:
            cell[2] += 1
            if perturbed < 0.5:
                cell[1] += 1

    def count_batch_stability(self, perturbed: list[tuple[str, str, str]],
                              rows: IntArray, cols: IntArray) -> None:
        """Count the (original, perturbed) pairs a batch completed.

        ``perturbed`` are the (item_id, model, variant) perturbed results accepted in the batch
        and (``rows``, ``cols``) its accepted original cells; each newly paired
        (original, perturbed) cell is counted once.
        """
        if not self.perturbed:
            return
        this_batch = set()
        for item_id, model, variant in perturbed:
            this_batch.add((variant, item_id, model))
            r = self.item_row.get(item_id)
            c = self.model_col.get(model)
            if r is None or c is None or np.isnan(self.X[r, c]):
                continue
            self.count_stability(model, variant.split(":", 1)[1], float(self.X[r, c]),
                                 self.perturbed[(variant, item_id, model)])
        for item_id, model, variant in perturbed:
            self.perturbed_by_cell.setdefault((item_id, model), []).append(variant)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            item_id, model = self.item_ids[r], self.models[c]
            for variant in self.perturbed_by_cell.get((item_id, model), ()):
                if (variant, item_id, model) in this_batch:
                    continue  # counted above, against the original now present
                self.count_stability(model, variant.split(":", 1)[1], float(self.X[r, c]),
                                     self.perturbed[(variant, item_id, model)])


def dense_fold_cheaper(n: int, rows: int, cols: int, k: int, *, binary: bool) -> bool:
    """Whether the dense fold of ``n`` new cells on ``rows`` items of ``cols`` models, against
    a board of ``k`` models, costs less than the sparse one (the constants above).

    The dense products multiply the whole (parts·cols × rows) block, filled or not: parts·cols
    × rows × parts·k for the rows and columns of the sums, and (parts + 1)·cols² × rows for
    the batch's own cells.
    The sparse ones multiply only the n cells: parts·n × parts·k, after a fixed set-up. So a
    block that is full (one model's results, or one item's across the models) goes dense, and
    a thin one (shuffled results of many models over many items) sparse.
    """
    parts = 2 if binary else 3
    dense = (_DENSE_MADD[binary] * (parts * cols * rows * parts * k
                                    + (parts + 1) * cols * cols * rows)
             + _DENSE_CELL * parts * cols * rows)
    sparse = _SPARSE_MADD * parts * n * parts * k + _SPARSE_SETUP
    return dense <= sparse


def dense_own_cheaper(cols: int, rows: int, pairs: int) -> bool:
    """Whether the batch's own pairs (its cells against each other: ``pairs`` = Σ over its
    items of the new cells² of each) cost less by dense products of its (cols × rows) block
    than by sparse ones, which pay per pair they produce (three products of CSR operands:
    ~20 ns per entry, the same core and versions as above)."""
    dense = _DENSE_MADD[True] * 3 * cols * cols * rows + _DENSE_CELL * 2 * cols * rows
    return 2 * cols * rows * 4 <= _DENSE_BYTES and dense < _SPARSE_OWN * 3 * pairs


def _grown(a: NDArray[Any], cap: int, fill: int = 0) -> NDArray[Any]:
    out = np.full((cap, cap), fill, dtype=a.dtype)
    out[:a.shape[0], :a.shape[1]] = a
    return out


def _relayout(paths: PairPaths, old_cap: int, new_cap: int) -> PairPaths:
    """``paths`` moved from a (old_cap × old_cap) to a (new_cap × new_cap) flat layout."""
    out = PairPaths.empty(new_cap * new_cap)
    for name in paths.__dataclass_fields__:
        src = getattr(paths, name).reshape(old_cap, old_cap)
        dst = getattr(out, name).reshape(new_cap, new_cap)
        dst[:old_cap, :old_cap] = src
    return out
