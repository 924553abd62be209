"""What the core hands out about a benchmark's pairs: its verdicts, ranking and pair views.

Every figure comes from :func:`monitor.stats.figures.pair_figures`, computed for the pairs
somebody reads (the family's, a queried pair's; cached): a board of thousands of models has
millions of pairs, and nobody reads them all at once. Entry [a, b] is model a against b.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from monitor.stats.figures import PairFigures, PairRecord, PairSums, pair_figures
from monitor.stats.ranks import ranks_and_tiers
from monitor.stats.samples import VarianceSplit, variance_split

FloatArray = NDArray[np.float64]


#: What each design's verdicts assume (the board's guarantee statement names it).
ASSUMPTIONS = {
    "items": "items are exchangeable and arrive in an order independent of their outcomes",
    "strata": "the cluster labels are fixed strata (every stratum of the population is on the "
              "board) and items arrive in an order independent of their outcomes",
    "clusters": "the cluster labels are clusters sampled independently from a population of "
                "clusters, and items arrive in an order independent of their outcomes; each "
                "cluster enters once, as the mean of its first r paired items",
}


#: The board's one guarantee, stated wherever its verdicts are (the ranking route, the report).
GUARANTEE = ("with probability ≥ 1 − α no pair is ever declared resolved while its models are "
             "equal or in the wrong direction, however models arrive and whenever read; a "
             "decision, once taken, is final")


def undecidable_reason(f: PairRecord) -> str | None:
    """Why the design allows this pair no decision (None when it does)."""
    if f.decidable:
        return None
    return undecidable_text(f.clusters_seen, f.e_alpha, f.cluster_min)


@functools.lru_cache(maxsize=256)
def undecidable_text(clusters_seen: int | None, e_alpha: float, cluster_min: int | None) -> str:
    """Why a pair at share ``e_alpha`` allows no decision with ``clusters_seen`` clusters
    (a pair's share is one of a few levels: the texts repeat)."""
    return (f"not decidable with {clusters_seen} clusters: at this pair's share "
            f"γ = {e_alpha:.2g}, even clusters all won by one model reach 2/γ only with "
            f"{cluster_min} or more")


@dataclass(frozen=True, eq=False)
class PairView:
    """One pair as readers see it: the two models (A ranked above B when it matters), the
    verdict (``resolved:<model>``, ``equivalent``, ``unresolved``; ``undecidable`` where the
    design allows no decision) and the kernel's figures of A − B (entry ``j`` of ``source``,
    the figures computed with it)."""

    model_a: str
    model_b: str
    verdict: str
    source: PairFigures = field(repr=False)
    j: int = 0
    decided_ts: str | None = None  # ISO time of the decision (None while unresolved)
    # Repeated samples: the between-item / within-item split of sigma_d2 (this pair alone)
    split: VarianceSplit | None = None

    @property
    def figures(self) -> PairRecord:
        """The pair's figures as plain numbers."""
        return self.source.record(self.j)

    def as_dict(self) -> dict[str, Any]:
        """The pair's JSON object (:func:`monitor.core.records.pair_columns`, the serializer
        ``report --json`` uses too; non-finite values are left to the JSON writer)."""
        from monitor.core.records import PairContext, pair_columns, pair_objects

        f = self.figures
        why = undecidable_reason(f)
        ctx = PairContext(model_a=[self.model_a], model_b=[self.model_b],
                          verdicts=["undecidable" if why is not None else self.verdict],
                          decided_at=[f.headline_decided_n], decided_ts=[self.decided_ts],
                          undecidable=[why], split=self.split)
        return pair_objects(pair_columns(self.source, np.array([self.j]), ctx))[0]


class _Grid:
    """A read-only (k × k) view of one of the kernel's figures over every pair (flat a · k + b),
    computed on first use: O(k²), for small boards and tests — large boards read pairs."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, table: PairTable, owner: type | None = None) -> Any:
        k = len(table.models)
        return np.asarray(getattr(table.all_figures(), self.name)).reshape(k, k)


class PairSource(Protocol):
    """Where a table reads pair sums from (the live state: the benchmark's pair sums), with
    the version of that state (bumped by every change)."""

    version: int

    def pair_sums(self, a: NDArray[np.int64], b: NDArray[np.int64], *,
                  clusters: bool = True) -> PairSums: ...


class StaleTable(RuntimeError):
    """A table was read after the state it was computed from changed: ask the monitor for the
    current one (``Monitor.table``)."""


@dataclass(frozen=True)
class PairTable:
    """The verdicts and ranking of one benchmark at an evaluation, with every pair's figures
    on demand.

    ``code[a, b]`` is +1 when a is resolved better than b, −1 when b is, 2 when the two are
    declared equivalent, 0 otherwise (the decisions, fixed at the evaluation). Figures are computed by the kernel for the pairs
    read (:meth:`records`, cached) from ``source``, which is the live state: a table handed out
    is current until the next batch is applied (the monitor hands out a new one then). The grid
    properties (``n``, ``delta``, ``q`` …) are (k × k) views over every pair, for small boards.
    """

    models: tuple[str, ...]
    counts: NDArray[np.int64]
    means: FloatArray
    order: tuple[int, ...]  # indices of active models, best first
    m: int
    family_alpha: float
    power: float
    code: NDArray[np.int8]
    source: PairSource = field(compare=False, repr=False)
    levels_of: Callable[[NDArray[np.int64], NDArray[np.int64]], FloatArray] = field(
        compare=False, repr=False)
    decided_ts: Callable[[int, int], datetime | None] = field(
        default=lambda a, b: None, compare=False, repr=False)
    binary_board: bool = True  # every score so far is 0 or 1
    version: int = 0  # the source's version the table was computed at
    samples: int = 1  # K samples per (item, model); with K > 1 views carry the variance split
    within_of: Callable[[NDArray[np.int64], NDArray[np.int64]],
                        tuple[FloatArray, FloatArray]] | None = field(
        default=None, compare=False, repr=False)
    _records: dict[tuple[int, int], tuple[PairFigures, int]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _all: list[PairFigures] = field(default_factory=list, compare=False, repr=False)
    _ranks: list[tuple[list[int], list[int], list[int]]] = field(
        default_factory=list, compare=False, repr=False)

    def _check_fresh(self) -> None:
        if self.source.version != self.version:
            raise StaleTable("this pair table was computed before the last change of the "
                             "benchmark's state; ask the monitor for the current one")

    def all_figures(self) -> PairFigures:
        """The kernel's figures of every ordered pair (flat a · k + b), without the intervals
        (which need root finding): O(k²) time and memory, cached."""
        if not self._all:
            self._check_fresh()
            k = len(self.models)
            a, b = (x.ravel() for x in np.meshgrid(np.arange(k), np.arange(k), indexing="ij"))
            self._all.append(pair_figures(
                self.source.pair_sums(a, b), alpha=self.family_alpha, power=self.power,
                e_alpha=self.levels_of(a, b), intervals=False, p_values=False))
        return self._all[0]

    # -- grid views: (k × k) views of the kernel's figures ------------------------------------
    n = _Grid("n")
    s = _Grid("s")
    v = _Grid("v")
    delta = _Grid("delta")
    log_e = _Grid("log_e")
    q = _Grid("q")
    q_cluster = _Grid("q_grouped")
    de = _Grid("design_effect")
    mde = _Grid("mde")
    binary = _Grid("binary")  # both models' scores all 0/1: the McNemar e-process applies
    n10 = _Grid("n10")
    n01 = _Grid("n01")

    # -- pairs -----------------------------------------------------------------------------
    def adjacent(self) -> list[tuple[int, int]]:
        """Adjacent pairs (higher ranked, lower ranked) of the ranking."""
        return list(zip(self.order[:-1], self.order[1:], strict=True))

    def all_pairs(self, limit: int | None = None) -> list[tuple[int, int]]:
        """Every pair of active models (the first ``limit``), the higher ranked first."""
        o = self.order
        pairs = ((o[i], o[j]) for i in range(len(o)) for j in range(i + 1, len(o)))
        return list(itertools.islice(pairs, limit))

    def pair_page(self, offset: int, limit: int) -> list[tuple[int, int]]:
        """Pairs ``offset`` … ``offset + limit − 1`` of :meth:`all_pairs`' order, found without
        walking the pairs before them (a board of 4,500 models has 10 M)."""
        o = self.order
        k = len(o)
        total = k * (k - 1) // 2
        if offset < 0 or limit < 0:
            raise ValueError(f"offset and limit must be ≥ 0, got {offset} and {limit}")
        if offset >= total or limit == 0:
            return []
        # Pairs before row i (the i-th ranked model against those below it): i(k−1) − i(i−1)/2.
        rows = np.arange(k, dtype=np.int64)
        before = rows * (k - 1) - rows * (rows - 1) // 2
        i = int(np.searchsorted(before, offset, side="right")) - 1
        j = i + 1 + offset - int(before[i])
        out: list[tuple[int, int]] = []
        while len(out) < limit and i < k - 1:
            stop = min(k, j + limit - len(out))
            out.extend((o[i], o[jj]) for jj in range(j, stop))
            i, j = i + 1, i + 2
        return out

    def pairs_of(self, model: int) -> list[tuple[int, int]]:
        """Every pair of ``model`` with another active model, the higher ranked first."""
        o = self.order
        pos = o.index(model)
        return [(o[r], model) for r in range(pos)] + [(model, o[r]) for r in range(pos + 1, len(o))]

    def resolved(self) -> bool:
        """Every adjacent pair resolved in the ranking's direction (and at least two models)."""
        adj = self.adjacent()
        return bool(adj) and all(self.code[a, b] == 1 for a, b in adj)

    def unresolved_pairs(self) -> int:
        """Adjacent pairs not resolved in the ranking's direction."""
        return sum(1 for a, b in self.adjacent() if self.code[a, b] != 1)

    def rank_sets(self) -> tuple[list[int], list[int], list[int]]:
        """Anytime rank sets and tiers of the ranked models (in ``order``), from the decisions:
        rank_low = 1 + #models resolved above, rank_high = M − #models resolved below, and the
        tiers of :func:`monitor.stats.ranks.tiers`. Valid whenever the decisions are (the
        board's one guarantee), so for a fixed set of models they only ever shrink. Cached."""
        if not self._ranks:
            o = np.asarray(self.order, dtype=np.int64)
            if o.size == 0:
                self._ranks.append(([], [], []))
            else:
                low, high, tier = ranks_and_tiers(self.code[np.ix_(o, o)] == 1)
                self._ranks.append((low.tolist(), high.tolist(), tier.tolist()))
        low_, high_, tier_ = self._ranks[0]
        return list(low_), list(high_), list(tier_)

    def top_resolved(self) -> bool:
        """The leader is resolved above every other ranked model."""
        o = self.order
        return len(o) >= 2 and all(self.code[o[0], b] == 1 for b in o[1:])

    def verdict(self, a: int, b: int) -> str:
        """``unresolved`` or ``resolved:<model>`` for the pair (a, b)."""
        return verdict_text(int(self.code[a, b]), self.models[a], self.models[b])

    def _computed(self, pairs: list[tuple[int, int]]) -> list[tuple[PairFigures, int]]:
        """Each pair's full figures (with the confidence sequence and q_AV), as (the figures
        computed with it, its entry), cached."""
        todo = [p for p in pairs if p not in self._records]
        if todo:
            self._check_fresh()
            a = np.asarray([p[0] for p in todo], dtype=np.int64)
            b = np.asarray([p[1] for p in todo], dtype=np.int64)
            fig = pair_figures(self.source.pair_sums(a, b), alpha=self.family_alpha,
                               power=self.power, e_alpha=self.levels_of(a, b))
            for j, p in enumerate(todo):
                self._records[p] = (fig, j)
        return [self._records[p] for p in pairs]

    def light(self, pairs: list[tuple[int, int]]) -> PairFigures:
        """The kernel's figures of ``pairs`` (entry j: pair j) without the intervals and
        p-values: the sums, estimates and decisions, for readers that need no more of every
        pair (the plan solves the intervals of its open pairs itself). Not cached."""
        self._check_fresh()
        a = np.asarray([p[0] for p in pairs], dtype=np.int64)
        b = np.asarray([p[1] for p in pairs], dtype=np.int64)
        return pair_figures(self.source.pair_sums(a, b), alpha=self.family_alpha,
                            power=self.power, e_alpha=self.levels_of(a, b), intervals=False,
                            p_values=False)

    def records(self, pairs: list[tuple[int, int]]) -> list[PairRecord]:
        """Full figures (with the confidence sequence and q_AV) of ``pairs``, cached."""
        return [fig.record(j) for fig, j in self._computed(pairs)]

    def views(self, pairs: list[tuple[int, int]]) -> list[PairView]:
        """The pairs as :class:`PairView` (A = the first index of each pair)."""
        out = []
        computed = self._computed(pairs)
        split = None
        if self.within_of is not None and pairs:
            self._check_fresh()
            a = np.asarray([p[0] for p in pairs], dtype=np.int64)
            b = np.asarray([p[1] for p in pairs], dtype=np.int64)
            split = variance_split([float(fig.sigma_d2[j]) for fig, j in computed],
                                   *self.within_of(a, b), samples=self.samples)
        for i, ((a_, b_), (fig, j)) in enumerate(zip(pairs, computed, strict=True)):
            ts = self.decided_ts(min(a_, b_), max(a_, b_))
            one = None if split is None else VarianceSplit(
                sigma_d2=split.sigma_d2[i:i + 1], within=split.within[i:i + 1],
                samples=split.samples)
            out.append(PairView(self.models[a_], self.models[b_], self.verdict(a_, b_), fig,
                                j, None if ts is None else ts.isoformat(), one))
        return out

    def view(self, a: int, b: int) -> PairView:
        return self.views([(a, b)])[0]


def verdict_text(code: int, model_a: str, model_b: str) -> str:
    """The verdict string of a code (+1: A resolved better, −1: B, 2: equivalent, 0:
    unresolved)."""
    if code == 0:
        return "unresolved"
    if code == 2:
        return "equivalent"
    return f"resolved:{model_a if code > 0 else model_b}"
