"""State of one benchmark: a dense score matrix and per-cluster Gram matrices of the pairs.

Every pair statistic the monitor reports is a function of four Gram matrices over the
items both models scored (M = presence mask, X = scores with absent as 0):

    n[a, b]   = Σ M_a M_b            (paired items)
    SX[a, b]  = Σ X_a M_b            (sum of a's scores on items b also has)
    P[a, b]   = Σ X_a X_b
    SX2[a, b] = Σ X_a² M_b

so ΣD = SX − SXᵀ, ΣD² = SX2 + SX2ᵀ − 2P, and for 0/1 scores n11 = P, n10 = SX − P,
n01 = SXᵀ − P. Keeping the four matrices per cluster gives the cluster sums of D needed for
the cluster-robust design effect. A batch of results is folded in by subtracting the old
contribution of the touched rows and adding the new one — two small matrix products per
cluster touched instead of a Python loop over the partner models of every result.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from monitor.core.table import PairTable
from monitor.stats.sequential import PairPaths

FloatArray = NDArray[np.float64]

# Gram matrix slots along axis 1 of ``BenchmarkState.grams``.
N, SX, P, SX2 = 0, 1, 2, 3
UNCLUSTERED = 0  # group 0 holds items without a cluster label: each is its own cluster


_BLAS: Any = None


@contextlib.contextmanager
def single_thread_blas() -> Iterator[None]:
    """Run the Gram products on one BLAS thread.

    The products are small (touched rows × a few dozen columns); on a busy machine OpenBLAS'
    thread pool makes them 10–20× slower than one thread, and the monitor's throughput is
    bound by them.
    """
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController().select(user_api="blas")
    with _BLAS.limit(limits=1):
        yield


class BenchmarkState:
    """Dense items × models score matrix (NaN = absent) of the ``original`` variant, with
    the per-cluster Gram matrices of the items not excluded from resolution."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.item_row: dict[str, int] = {}
        self.item_ids: list[str] = []
        self.model_col: dict[str, int] = {}
        self.models: list[str] = []
        self.cluster_id: dict[str, int] = {}
        self.clusters: list[str | None] = [None]
        self.X: FloatArray = np.full((256, 8), np.nan)
        self.group = np.zeros(256, dtype=np.int32)
        self.excluded_rows = np.zeros(256, dtype=bool)
        self.grams: FloatArray = np.zeros((1, 4, 8, 8))
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
        self.codes: NDArray[np.int8] = np.zeros((8, 8), dtype=np.int8)
        # Sequential state of each pair (lo, hi), lo < hi in arrival order, at flat index
        # lo · cap + hi with cap = the column capacity: e-process kind, switch, decision.
        self.paths = PairPaths.empty(8 * 8)
        self.decided_ts: dict[tuple[int, int], datetime] = {}
        # (models best first, resolved, tiers) of the last RankingChange
        self.last_ranking: tuple[tuple[str, ...], bool, tuple[int, ...]] = ((), False, ())
        self.table: PairTable | None = None
        self.table_stale = False  # results applied since ``table`` was computed

    # -- growth --------------------------------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.models)

    def row_of(self, item_id: str, cluster: str | None) -> int:
        """Row of ``item_id``, created on first sight; its cluster is fixed then."""
        r = self.item_row.get(item_id)
        if r is not None:
            return r
        r = len(self.item_ids)
        if r == self.X.shape[0]:
            cap = r + r // 2  # 1.5x: the matrix stays within ~12 bytes per stored score
            X = np.full((cap, self.X.shape[1]), np.nan)
            X[:r] = self.X
            self.X = X
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
                self.grams = np.concatenate([self.grams, np.zeros((1, *self.grams.shape[1:]))])
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
            cap = c + max(1, c // 4)  # models arrive rarely: grow by a quarter
            X = np.full((self.X.shape[0], cap), np.nan)
            X[:, :c] = self.X
            self.X = X
            grams = np.zeros((*self.grams.shape[:2], cap, cap))
            grams[:, :, :c, :c] = self.grams
            self.grams = grams
            codes = np.zeros((cap, cap), dtype=np.int8)
            codes[:c, :c] = self.codes
            self.codes = codes
            self.paths = _relayout(self.paths, c, cap)
            self.nonbinary = np.concatenate([self.nonbinary,
                                             np.zeros(cap - c, dtype=np.int64)])
        self.model_col[model] = c
        self.models.append(model)
        return c

    def nbytes(self) -> int:
        """Bytes held by the numeric state (score matrix, row labels, Gram matrices)."""
        return int(self.X.nbytes + self.group.nbytes + self.excluded_rows.nbytes
                   + self.grams.nbytes + self.codes.nbytes)

    # -- folding -------------------------------------------------------------------------
    def rows_view(self, rows: NDArray[np.int64]) -> FloatArray:
        """Scores of ``rows`` as they count for resolution (excluded rows read as absent)."""
        out = self.X[rows]
        out[self.excluded_rows[rows]] = np.nan
        return out

    def fold(self, rows: NDArray[np.int64], old: FloatArray, new: FloatArray) -> None:
        """Replace the contribution ``old`` of ``rows`` to the Gram matrices by ``new``."""
        groups = self.group[rows]
        with single_thread_blas():
            if groups.size and np.all(groups == groups[0]):
                self._fold_group(int(groups[0]), old, new)
                return
            order = np.argsort(groups, kind="stable")
            g_sorted = groups[order]
            cuts = np.flatnonzero(np.diff(g_sorted)) + 1
            for sl in np.split(order, cuts):
                self._fold_group(int(groups[sl[0]]), old[sl], new[sl])

    def _fold_group(self, g: int, old: FloatArray, new: FloatArray) -> None:
        r = old.shape[0]
        both = np.concatenate([new, old])
        present = ~np.isnan(both)
        x = np.where(present, both, 0.0)
        m = present.astype(np.float64)
        sign = np.ones((2 * r, 1))
        sign[r:] = -1.0
        ms = m * sign
        k = x.shape[1]
        # One product for n, SX and SX2 (they share the signed mask on the right).
        prod = np.concatenate([m, x, x * x], axis=1).T @ ms
        gram = self.grams[g]
        gram[N] += prod[:k]
        gram[SX] += prod[k:2 * k]
        gram[SX2] += prod[2 * k:]
        gram[P] += x.T @ (x * sign)

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
                              rows: NDArray[np.int64], cols: NDArray[np.int64]) -> None:
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

    # -- pair paths ----------------------------------------------------------------------
    def path_sums(self, flat: NDArray[np.int64]) -> tuple[FloatArray, FloatArray, FloatArray]:
        """n, S and V over the non-excluded items of the pairs (lo, hi) at ``flat``
        (lo · cap + hi, as ``paths``), summed over the clusters for those pairs only."""
        cap = self.X.shape[1]
        lo, hi = flat // cap, flat % cap
        ab = self.grams[:, :, lo, hi].sum(axis=0)  # (slot, pair): a's sums on b's items
        ba = self.grams[:, :, hi, lo].sum(axis=0)
        return ab[N], ab[SX] - ba[SX], ab[SX2] + ba[SX2] - 2.0 * ab[P]

    def grid_paths(self) -> PairPaths:
        """The path state of every ordered pair (a, b) of the k models, flat at a · k + b.

        (a, b) with a > b reads the state of (b, a) seen from b's side: S at the segment start
        and the decision change sign.
        """
        k, cap = self.k, self.X.shape[1]
        lo, hi = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
        a, b = np.minimum(lo, hi).ravel(), np.maximum(lo, hi).ravel()
        return self.paths.seen_from(a * cap + b, (lo > hi).ravel())


def _relayout(paths: PairPaths, old_cap: int, new_cap: int) -> PairPaths:
    """``paths`` moved from a (old_cap × old_cap) to a (new_cap × new_cap) flat layout."""
    out = PairPaths.empty(new_cap * new_cap)
    for name in paths.__dataclass_fields__:
        src = getattr(paths, name).reshape(old_cap, old_cap)
        dst = getattr(out, name).reshape(new_cap, new_cap)
        dst[:old_cap, :old_cap] = src
    return out
