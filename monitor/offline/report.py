"""The offline resolution report: a score table → ranking, a family of pairs, and their verdicts.

Definitions (also in ``llm-monitor report --help`` and docs/contract.md#report-json):

* **verdict** — the pair's anytime decision under the table's design (the live monitor's
  rule, replayed by :mod:`monitor.offline.replay`): ``resolved:<model>`` once the pair's
  e-process crossed its threshold 1/γ, ``equivalent`` once its confidence sequence lies inside
  the margin (±Δ), each decided at that paired item and final; ``unresolved`` until then;
  ``undecidable`` where the design allows no decision (sampled clusters, too few of them). The one verdict of a pair: the HTML page, the live board, the metrics and the
  alerts show the same one.
* **ranking** — models by their mean score over the items each one has, best first, except
  that a model decided above another comes first (the live monitor's order).
* **family** — the pairs read together: adjacent pairs of the ranking (default) or all pairs.
  Each pair is (higher-ranked A, lower-ranked B); δ̂ = mean_A − mean_B on the shared items.
* **rank sets, tiers** — rank_low = 1 + #models decided above, rank_high = M − #models
  decided below, from the decisions of all pairs; tiers are the consecutive groups of the
  ranking that no decision separates (:mod:`monitor.stats.ranks`).
* **fixed_n** — planning and audit figures, valid for one look at a fixed N (not under
  continuous monitoring): N* = z² σ̃² / δ̃² and q = N / N* at the per-comparison level
  α' = family_alpha(α, m, correction), MDE, the design effect with q_cluster or q_strata, the
  family-adjusted p-value (exact McNemar on 0/1 data, paired t otherwise), and the max-|t|
  stepdown rank sets over all pairs (``fixed_n_rank_low`` …, docs/ranks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import NDArray

from monitor.core.records import (
    FIXED_N_VALID_FOR,
    PairColumn,
    PairContext,
    pair_columns,
    pair_objects,
)
from monitor.core.table import ASSUMPTIONS, GUARANTEE, undecidable_text, verdict_text
from monitor.defaults import RANK_SEED
from monitor.errors import InputError
from monitor.io.tables import ScoreTable
from monitor.stats import multiplicity
from monitor.stats.board import BoardResult, board, board_sums
from monitor.stats.clusters import MIN_CLUSTERS, de_relative_se
from monitor.stats.figures import PairFigures
from monitor.stats.ranks import METHODS as RANK_METHODS
from monitor.stats.ranks import Covariance, Method, RankSets, rank_sets
from monitor.stats.samples import VarianceSplit, pair_within, variance_split

FloatArray = NDArray[np.float64]

Family = Literal["adjacent", "all"]
FAMILIES: tuple[str, ...] = ("adjacent", "all")
RANK_SET_METHODS: tuple[str, ...] = RANK_METHODS
# A fixed default seed: the same table gives the same rank sets on every run.
DEFAULT_RANK_SEED = RANK_SEED
DEFAULT_RANK_DRAWS = 2000
_COVARIANCE_NAMES = {"iid": "iid", "cluster": "cluster-robust", "strata": "stratified"}


def ranking_order(table: ScoreTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column order best-first by mean over each model's own items (ties by name), means, counts."""
    present = ~np.isnan(table.scores)
    counts = present.sum(axis=0)
    means = np.where(present, table.scores, 0.0).sum(axis=0) / counts
    names = np.asarray(table.models, dtype=object)
    order = np.lexsort((names, -means))
    return order, means, counts


def select_models(table: ScoreTable, *, complete_only: bool = False,
                  top: int | None = None) -> ScoreTable:
    """Keep the models with every item of the table (``complete_only``), then the ``top`` best.

    "Every item" means every item of the table as read, so that a board of models evaluated on
    the same full benchmark can be separated from partial uploads.
    """
    keep = list(table.models)
    if complete_only:
        counts = table.n_items()
        keep = [m for m, c in zip(table.models, counts.tolist(), strict=True)
                if c == len(table.item_ids)]
        if len(keep) < 2:
            raise InputError(f"fewer than two models have all {len(table.item_ids)} items",
                             source=table.source)
    sub = table.select(keep) if len(keep) != len(table.models) else table
    if top is not None:
        if top < 2:
            raise ValueError(f"`top` must be at least 2, got {top}")
        order, _, _ = ranking_order(sub)
        sub = sub.select([sub.models[j] for j in order[:top]])
    return sub


def family_pairs(order: np.ndarray, family: str) -> tuple[np.ndarray, np.ndarray]:
    """Column indices (A, B) of the family's pairs, A ranked above B."""
    if family == "adjacent":
        return order[:-1].astype(np.int64), order[1:].astype(np.int64)
    if family == "all":
        i, j = np.triu_indices(order.size, k=1)
        return order[i].astype(np.int64), order[j].astype(np.int64)
    raise ValueError(f"`family` must be one of {', '.join(FAMILIES)}, got {family!r}")


def _check_shared(table: ScoreTable, a: np.ndarray, b: np.ndarray) -> None:
    present = ~np.isnan(table.scores)
    if present.all():
        return
    m = present.astype(float)
    shared = np.einsum("ip,ip->p", m[:, a], m[:, b])
    if np.any(shared == 0):
        k = int(np.flatnonzero(shared == 0)[0])
        raise InputError(f"models {table.models[a[k]]!r} and {table.models[b[k]]!r} share no "
                         "item, so their gap cannot be assessed", source=table.source)


@dataclass(frozen=True)
class RankEntry:
    """One model of the ranking: 1-based rank, mean over its own items, and their count;
    its rank set [rank_low, rank_high] and 1-based tier from the decisions (None until the
    decisions are attached, :func:`monitor.offline.replay.with_anytime`); and the fixed-N
    ones of the max-|t| stepdown (None without them), valid for one look at a fixed N."""

    rank: int
    model: str
    mean: float
    n: int
    rank_low: int | None = None
    rank_high: int | None = None
    tier: int | None = None
    fixed_n_rank_low: int | None = None
    fixed_n_rank_high: int | None = None
    fixed_n_tier: int | None = None


#: The replay orders: how the items were met. ``shuffle``: a seeded permutation of the items
#: (each item's results together, models left to right); ``file``: the table's own order;
#: ``live``: the live monitor's own decisions, in the order its results arrived.
REPLAY_ORDERS: tuple[str, ...] = ("shuffle", "file", "live")


@dataclass(frozen=True)
class AnytimeReplay:
    """The decisions of the family's pairs, which are their verdicts (see
    :mod:`monitor.offline.replay`, or the live monitor's own for ``order == "live"``).

    ``figures`` holds the kernel's figures of A − B after the whole table, each pair at its
    own level ``figures.e_alpha`` (its share γ_p of α): e-value, confidence sequence, N*_AV,
    q_AV and the decision under the design (``figures.verdict_code()``: +1 A resolved better,
    −1 B, 0 open; ``figures.decidable()``); ``first_resolved_at`` the 1-based paired item at
    which the verdict was decided (None while open); ``decided_ts`` (live) the ISO time of
    each decision. ``order`` is one of :data:`REPLAY_ORDERS`, ``seed`` the shuffle's.
    """

    order: str
    seed: int | None
    alpha: float
    rule: str
    planned_models: int
    figures: PairFigures
    first_resolved_at: tuple[int | None, ...]
    decided_ts: tuple[str | None, ...] | None = None
    cluster_items: int | None = None  # sampled clusters: items per cluster observation

    @property
    def resolved(self) -> int:
        """Pairs whose verdict is resolved (decided in a direction, final)."""
        return int(np.count_nonzero(np.abs(self.figures.verdict_code()) == 1))

    def verdicts(self, idx: NDArray[np.int64], model_a: Sequence[str],
                 model_b: Sequence[str]) -> list[str]:
        """The verdict strings of pairs ``idx`` (A = ``model_a[i]``), as the ranking route
        gives them (:class:`monitor.core.table.PairView`)."""
        code = self.figures.verdict_code()[idx].tolist()
        ok = self.figures.decidable()[idx].tolist()
        # Only a resolved verdict names a model: the others are a few strings, made once.
        shared = {c: verdict_text(c, "", "") for c in (0, 2)}
        return [(shared.get(c) or verdict_text(c, a, b)) if d else "undecidable"
                for c, d, a, b in zip(code, ok, model_a, model_b, strict=True)]

    def context(self, idx: NDArray[np.int64], model_a: Sequence[str],
                model_b: Sequence[str], **more: Any) -> PairContext:
        """What the serializer needs of pairs ``idx`` beside their figures: verdicts, where
        each was decided (and when, live), and why a pair allows no decision."""
        verdicts = self.verdicts(idx, model_a, model_b)
        f = self.figures
        # Why a pair allows no decision: undecidable_reason of its record, from the arrays; a
        # text per distinct (share, clusters needed), which are few.
        undecidable: list[str | None] = [None] * idx.size
        if f.cluster_min is not None:
            at = np.flatnonzero(~f.decidable()[idx])
            if at.size:
                shares, share = np.unique(f.e_alpha[idx[at]], return_inverse=True)
                needs, need = np.unique(f.cluster_min[idx[at]], return_inverse=True)
                pairs, which = np.unique(share * needs.size + need, return_inverse=True)
                texts = [undecidable_text(f.clusters_seen, float(shares[k // needs.size]),
                                          round(float(needs[k % needs.size])))
                         for k in pairs.tolist()]
                reasons = np.full(idx.size, None, dtype=object)
                reasons[at] = np.array(texts, dtype=object)[which.reshape(-1)]
                undecidable = reasons.tolist()
        ks = idx.tolist()
        return PairContext(
            model_a=model_a, model_b=model_b, verdicts=verdicts,
            decided_at=list(map(self.first_resolved_at.__getitem__, ks)),
            decided_ts=(None if self.decided_ts is None
                        else list(map(self.decided_ts.__getitem__, ks))),
            undecidable=undecidable, **more)

    def summary(self, binary: bool) -> dict[str, Any]:
        """The top-level ``anytime`` object: the ranking route's, with how the items were
        met (``order``, ``seed``)."""
        design = self.figures.design
        return {
            "procedure": ("online-bonferroni" if self.rule == "board" else "e-bonferroni"),
            "alpha": self.alpha,
            "planned_models": self.planned_models if self.rule == "board" else None,
            "design": design,
            **({"cluster_items": self.cluster_items} if design == "clusters" else {}),
            "assumption": ASSUMPTIONS[design],
            "statement": GUARANTEE,
            "order": self.order, "seed": self.seed, "rule": self.rule,
            "construction": "mcnemar-beta-binomial" if binary else "gamma-exponential",
        }


@dataclass(frozen=True)
class ResolutionReport:
    """The resolution report of one table: the ranking, the family's pairs, their verdicts
    and their figures.

    ``figures`` are the kernel's figures of the family's pairs (pair k is
    ``models[figures.a[k]]`` against ``models[figures.b[k]]``, A ranked above B), at the
    per-comparison level ``alpha_per_pair``; ``p_adjusted`` the family-adjusted p-values.
    ``anytime`` holds the decisions, which are the verdicts
    (:func:`monitor.offline.replay.with_anytime` attaches them). :meth:`as_dict` is the JSON
    contract of ``llm-monitor report`` (docs/contract.md#report-json).
    """

    source: str
    benchmark: str | None
    n_items: int
    models: tuple[str, ...]
    family: str
    correction: str
    alpha: float
    alpha_per_pair: float
    power: float
    group_column: str | None
    ranking: tuple[RankEntry, ...]
    rank: tuple[int, ...]  # 1-based rank of each model column
    figures: BoardResult
    p_adjusted: FloatArray
    selection: dict[str, Any] | None = None
    anytime: AnytimeReplay | None = None
    ranks: RankSets | None = None
    rank_seed: int | None = None
    rank_sets_unavailable: str | None = None
    split: VarianceSplit | None = None  # repeated-sample tables: σ_D² between / within items
    # How the fixed-N rank sets were asked for, so that the report can be built again in
    # another ranking order (the decisions' order, :func:`monitor.offline.replay.with_anytime`).
    rank_method: str | None = None
    rank_draws: int = DEFAULT_RANK_DRAWS
    # With the decisions: the ranking's state as the ranking route gives it (``resolved``,
    # ``unresolved_pairs``, ``top_resolved``, ``tiers``).
    standing: dict[str, Any] | None = None

    @property
    def binary(self) -> bool:
        return self.figures.all_binary

    @property
    def design(self) -> str:
        """The design the verdicts are taken under (the table's groups say it)."""
        if self.anytime is not None:
            return self.anytime.figures.design
        kind = self.figures.group_kind
        return "items" if kind is None else "clusters" if kind == "cluster" else "strata"

    def significant(self) -> NDArray[np.bool_]:
        """Family-adjusted p < α."""
        return self.p_adjusted < self.alpha

    def pair_columns(self, ks: Sequence[int] | NDArray[np.int64] | None = None
                     ) -> list[PairColumn]:
        """The keys of the JSON objects of pairs ``ks`` (default all), column by column: the
        one pair serializer (:func:`monitor.core.records.pair_columns`), which the ranking
        route uses too, with the report's ranks and family-adjusted p-values."""
        res = self.figures
        idx = np.arange(len(res)) if ks is None else np.asarray(ks, dtype=np.int64)
        names = np.asarray(self.models, dtype=object)
        rank = np.asarray(self.rank, dtype=np.int64)
        a, b = res.a[idx], res.b[idx]
        name_a, name_b = names[a].tolist(), names[b].tolist()
        split = None
        if self.split is not None:
            sp = self.split
            split = VarianceSplit(sigma_d2=sp.sigma_d2[idx], within=sp.within[idx],
                                  samples=sp.samples)
        more: dict[str, Any] = {"rank_a": rank[a], "rank_b": rank[b],
                                "p_adjusted": self.p_adjusted[idx], "alpha": self.alpha,
                                "split": split}
        if self.anytime is None:  # figures only: no decision taken (build_report alone)
            ctx = PairContext(model_a=name_a, model_b=name_b,
                              verdicts=["unresolved"] * idx.size,
                              decided_at=[None] * idx.size, **more)
            return pair_columns(res, idx, ctx)
        return pair_columns(self.anytime.figures, idx,
                            self.anytime.context(idx, name_a, name_b, **more))

    def warnings(self) -> list[dict[str, Any]]:
        """What the reader must know before acting on the figures, as JSON objects with a
        ``kind`` and a ``message``. ``few-clusters``: some pairs' design effect comes from fewer
        than :data:`~monitor.stats.clusters.MIN_CLUSTERS` clusters. ``file-order``: the
        decisions were taken in the table's own order (``--order file``), which voids their
        guarantee if that order depends on the outcomes."""
        res = self.figures
        out: list[dict[str, Any]] = []
        if self.anytime is not None and self.anytime.order == "file":
            out.append({"kind": "file-order", "message": (
                "the decisions were taken in the table's own order (--order file): valid only "
                "if that order is independent of the outcomes (a file sorted by subject or "
                "difficulty is not); the default replays the items in a seeded shuffled "
                "order")})
        if res.group_kind != "cluster" or res.n_clusters is None or not len(res):
            return out
        g = np.asarray(res.n_clusters, dtype=np.float64)
        few = g < MIN_CLUSTERS
        if not few.any():
            return out
        low = int(g[few].min())
        rse = de_relative_se(low)
        why = ("no between-cluster variance can be estimated from one cluster" if low < 2 else
               f"the cluster-robust variance then has about {low - 1} degree"
               f"{'s' if low > 2 else ''} of freedom: its relative standard error is about "
               f"{rse:.0%} and it tends to be too small")
        out.append({
            "kind": "few-clusters", "n_clusters": low, "min_clusters": MIN_CLUSTERS,
            "pairs": int(few.sum()),
            "message": (f"the design effect of {int(few.sum())} of {len(res)} pairs comes from "
                        f"{low}{'' if g[few].max() == low else ' or more'} clusters, fewer "
                        f"than {MIN_CLUSTERS}; {why}. Read DE, N*_cluster and q_cluster as "
                        "indicative; if the groups are fixed by design, --strata-col asks the "
                        "question that does not need many of them (docs/clusters-vs-strata.md)"),
        })
        return out

    def pair_dicts(self, ks: Sequence[int] | NDArray[np.int64] | None = None
                   ) -> list[dict[str, Any]]:
        """The JSON objects of pairs ``ks`` (default all)."""
        return pair_objects(self.pair_columns(ks))

    def verdict_counts(self) -> dict[str, int]:
        """The family's pairs by verdict (``resolved``, ``equivalent``, ``unresolved``,
        ``undecidable`` and any other verdict the decisions give), and ``pairs``; ``pairs``
        alone without them."""
        out = {"pairs": len(self.figures)}
        if self.anytime is None:
            return out
        f = self.anytime.figures
        ok = f.decidable()
        counts = {"resolved": 0, "equivalent": 0, "unresolved": 0,
                  "undecidable": int(np.count_nonzero(~ok))}
        # The verdicts of the decidable pairs by code, a verdict's kind the text before ":"
        # of the verdict string (:meth:`AnytimeReplay.verdicts`).
        codes, number = np.unique(f.verdict_code()[ok], return_counts=True)
        for c, k in zip(codes.tolist(), number.tolist(), strict=True):
            kind = verdict_text(c, "", "").split(":", 1)[0]
            counts[kind] = counts.get(kind, 0) + k
        return out | counts

    def as_dict(self, *, pairs: Sequence[int] | NDArray[np.int64] | None = None
                ) -> dict[str, Any]:
        """The report as plain JSON-able values (the ``--json`` contract); ``pairs`` holds the
        objects of the pairs ``pairs`` (default all — ``verdicts`` always counts all)."""
        res = self.figures
        kind = res.group_kind
        out: dict[str, Any] = {
            "source": self.source, "benchmark": self.benchmark, "n_items": self.n_items,
            "n_models": len(self.models), "binary": self.binary,
            "family": self.family, "alpha": self.alpha, "power": self.power,
            "design": self.design,
            "groups": None if kind is None else {
                "kind": kind, "column": self.group_column, "n_groups": res.n_groups},
        }
        if self.standing is not None:
            out.update(self.standing)
        out["verdicts"] = self.verdict_counts()
        if self.anytime is not None:
            out["anytime"] = self.anytime.summary(self.binary)
        out["fixed_n"] = {
            "valid_for": FIXED_N_VALID_FOR,
            "test": "mcnemar-exact" if self.binary else "paired-t",
            "correction": self.correction, "alpha_per_pair": self.alpha_per_pair,
            "rank_sets": self.rank_sets_summary(),
        }
        out["ranking"] = [asdict(e) for e in self.ranking]
        out["pairs"] = self.pair_dicts(pairs)
        out["warnings"] = self.warnings()
        if self.selection is not None:
            out["selection"] = dict(self.selection)
        return out

    def rank_sets_summary(self) -> dict[str, Any] | None:
        """How the fixed-N rank sets (``fixed_n_rank_low`` …) were computed; None without."""
        r = self.ranks
        if r is None:
            return (None if self.rank_sets_unavailable is None
                    else {"unavailable": self.rank_sets_unavailable})
        return {
            "method": r.method,
            "procedure": "max-|t| stepdown" if r.stepdown else "max-|t| single step",
            "alpha": r.alpha, "coverage": 1.0 - r.alpha,
            "covariance": _COVARIANCE_NAMES[r.covariance],
            "draws": r.n_draws, "seed": self.rank_seed,
            "draw_distribution": "normal" if r.df is None else f"multivariate t, df = {r.df:g}",
            "critical_values": list(r.critical_values),
            "correlation_items": r.correlation_items,
            "exact_correlation": r.exact_correlation,
            "tiers": r.n_tiers, "top_resolved": r.top_resolved,
        }


def headline(rep: dict[str, Any]) -> str:
    """The report's one count, in the words of every face: the family's pairs by verdict,
    the tiers and the state of the ranking (``rep`` is :meth:`ResolutionReport.as_dict`)."""
    v = rep["verdicts"]
    fam = "adjacent pairs" if rep["family"] == "adjacent" else "pairs"
    parts = [f"{v['resolved']} of {v['pairs']:,} {fam} resolved (decided, final)",
             f"{v['unresolved']} unresolved"]
    parts += [f"{n} {kind}" for kind, n in v.items()
              if kind not in ("pairs", "resolved", "unresolved") and n]
    parts.append(f"{rep['tiers']} tier{'' if rep['tiers'] == 1 else 's'}")
    parts.append("ranking resolved" if rep["resolved"] else
                 "the leader resolved above all" if rep["top_resolved"] else "no sole leader")
    return " · ".join(parts)


def order_text(info: dict[str, Any]) -> str:
    """How the decisions met the items (``info`` is the report's ``anytime`` object)."""
    if info["order"] == "shuffle":
        return f"items replayed in a seeded shuffled order (seed {info['seed']})"
    if info["order"] == "file":
        return ("items replayed in the file's own order (--order file: valid only if that "
                "order is independent of the outcomes)")
    return "the live monitor's own decisions, in the order its results arrived"


def build_report(
    table: ScoreTable,
    *,
    family: str = "adjacent",
    correction: str = "holm",
    alpha: float = 0.05,
    power: float = 0.8,
    selection: dict[str, Any] | None = None,
    rank_method: str | None = None,
    rank_seed: int = DEFAULT_RANK_SEED,
    rank_draws: int = DEFAULT_RANK_DRAWS,
    order: Sequence[int] | NDArray[np.int64] | None = None,
) -> ResolutionReport:
    """The resolution report of one table (see the module docstring for the definitions),
    without its verdicts: :func:`monitor.offline.replay.with_anytime` takes the decisions.

    ``rank_method`` (``simultaneous``, ``marginal``; default None: none, so that the pair
    figures alone stay as fast as before — ``llm-monitor report`` asks for ``simultaneous``)
    chooses the rank sets,
    computed at level 1 − ``alpha`` over all models with ``rank_draws`` parametric draws from
    ``numpy.random.default_rng(rank_seed)``; the covariance follows the table's groups
    (clusters: cluster-robust, strata: stratified, none: iid). ``order``: the ranking's
    model columns, best first (default: by mean, :func:`ranking_order`); the decisions'
    order when a decision goes against the means.
    """
    if rank_method is not None and rank_method not in RANK_SET_METHODS:
        raise ValueError(f"`rank_method` must be one of {', '.join(RANK_SET_METHODS)}, got "
                         f"{rank_method!r}")
    correction = multiplicity.check_method(correction)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    if not (0.0 < power < 1.0):
        raise ValueError(f"`power` must lie in (0, 1), got {power}")
    if len(table.models) < 2:
        raise InputError("a report needs at least two models", source=table.source)
    by_mean, means, counts = ranking_order(table)
    if order is None:
        order = by_mean
    else:
        order = np.asarray(order, dtype=np.int64)
        if sorted(order.tolist()) != list(range(len(table.models))):
            raise ValueError("`order` must hold every model column once")
    a, b = family_pairs(order, family)
    _check_shared(table, a, b)
    alpha_pair = multiplicity.family_alpha(alpha, int(a.size), method=correction)
    # One set of Gram matrices for the family's pairs and the rank sets' all pairs.
    sums = board_sums(table.scores, groups=table.groups)
    res = board(table.scores, pairs=(a, b), groups=table.groups,
                group_kind=table.group_kind or "cluster", alpha=alpha_pair, power=power,
                sums=sums)
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)
    ranks = None
    missing: str | None = None
    if rank_method is not None:
        kind: Covariance = "iid" if table.groups is None else (table.group_kind or "cluster")
        try:
            ranks = rank_sets(table.scores, groups=table.groups, covariance=kind, order=order,
                              alpha=alpha, method=cast(Method, rank_method),
                              n_draws=rank_draws, rng=np.random.default_rng(rank_seed),
                              sums=sums, figures=res if family == "all" else None)
        except ValueError as exc:
            # Rank sets need every pair (and items every model has); a report of the family
            # stays useful without them, so say why they are missing instead of failing.
            missing = f"{exc}; try --complete-only"

    def entry(j: int) -> RankEntry:
        sets: dict[str, Any] = {}
        if ranks is not None:
            sets = {"fixed_n_rank_low": int(ranks.rank_low[j]),
                    "fixed_n_rank_high": int(ranks.rank_high[j]),
                    "fixed_n_tier": int(ranks.tier[j])}
        return RankEntry(rank=int(rank[j]), model=table.models[j], mean=float(means[j]),
                         n=int(counts[j]), **sets)

    return ResolutionReport(
        source=table.source, benchmark=table.benchmark, n_items=len(table.item_ids),
        models=tuple(table.models), family=family, correction=correction, alpha=alpha,
        alpha_per_pair=alpha_pair, power=power, group_column=table.group_col,
        ranking=tuple(entry(int(j)) for j in order),
        rank=tuple(int(r) for r in rank), figures=res,
        p_adjusted=multiplicity.adjust_pvalues(res.p_value, method=correction),
        selection=selection, ranks=ranks, rank_seed=None if ranks is None else rank_seed,
        rank_sets_unavailable=missing, rank_method=rank_method, rank_draws=rank_draws,
        split=None if table.mean_var is None else variance_split(
            res.sigma_d2, *pair_within(table.scores, table.mean_var, a, b),
            samples=table.sample_count()),
    )
