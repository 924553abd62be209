"""The JSON of a pair, written once: the one serializer of the ranking route, ``report --json``,
the HTML report and the terminal view, so that one figure has one key everywhere.

A pair object is built column by column from the kernel's :class:`~monitor.stats.figures.
PairFigures` (a report of 44,850 pairs builds each key for all pairs at once, then the
objects), with what the figures do not hold — the models' names, the verdict strings, when
each decision was taken — in a :class:`PairContext`. The keys, in order (docs/contract.md,
"Pair objects"):

* who and the verdict: ``model_a``, ``model_b`` (``rank_a``, ``rank_b`` where known),
  ``verdict``, ``decided`` (``{n, final, ts, e_value}`` or null), ``design``, ``undecidable``
  (why, only where the design allows no decision), ``clusters`` (sampled clusters);
* the pair: ``n``, ``mean_a``, ``mean_b``, ``delta``, ``sigma_d2``, ``rho``, ``s``, ``v``;
* the anytime figures: ``e_value``, ``log_e``, ``e_threshold``, ``cs_low``, ``cs_high``,
  ``n_star_anytime``, ``q_anytime``;
* ``fixed_n``: the planning and audit figures, valid for one look at a fixed N — ``n_star``,
  ``n_star_exact``, ``q``, ``mde``, ``design_effect``, ``n_clusters``, ``n_star_cluster``,
  ``q_cluster``, ``q_strata``, ``p_value`` (and, in a report of a family, ``p_adjusted`` and
  ``significant``);
* 0/1 pairs: ``n11``, ``n10``, ``n01``, ``n00``; repeated samples: ``samples``,
  ``sigma_between2``, ``sigma_within2``, ``within_share``, ``within_share_1``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from monitor.stats.figures import PairFigures, e_values

FloatArray = NDArray[np.float64]
ColumnKind = Literal["float", "count", "int", "bool", "str", "null", "any", "object"]

#: What the fixed-N figures are good for, said wherever they are shown.
FIXED_N_VALID_FOR = ("one look at a fixed N: planning and audit figures, not valid under "
                     "continuous monitoring and not the verdict")


@dataclass(frozen=True, eq=False)
class PairColumn:
    """One key of the pair objects over a run of pairs, all values of one form.

    ``kind`` says how ``values`` become the objects' plain values (:meth:`python`):
    ``float`` — a float array, as floats (NaN and ±∞ left to the JSON number rule);
    ``count`` — a float array of whole numbers or ±∞, as ints (∞ stays a float); ``int`` — an
    int array; ``bool`` — a bool array; ``str`` — a list of strings; ``null`` — None for
    every pair; ``any`` — a list of plain values; ``object`` — a nested object per pair whose
    keys are the columns in ``values`` (a list of :class:`PairColumn`, kept column by column
    so that a long report streams them as fast as flat keys). ``present``, when given, marks
    the pairs whose objects have the key at all.
    """

    key: str
    kind: ColumnKind
    values: Any
    present: NDArray[np.bool_] | None = None

    def __len__(self) -> int:
        if self.kind == "object":
            return len(self.values[0]) if self.values else 0
        return len(self.values)

    def python(self) -> list[Any]:
        """The plain value of every pair (also where the key is not present)."""
        if self.kind == "count":
            return [int(v) if math.isfinite(v) else v for v in self.values.tolist()]
        if self.kind in ("float", "int", "bool"):
            return list(self.values.tolist())
        if self.kind == "object":
            return pair_objects(self.values)
        return list(self.values)


def pair_objects(columns: Sequence[PairColumn]) -> list[dict[str, Any]]:
    """The pair objects of a run of pairs, keys in the order of ``columns``."""
    n = len(columns[0]) if columns else 0
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for c in columns:
        key = c.key
        if c.present is None:
            for entry, value in zip(out, c.python(), strict=True):
                entry[key] = value
        else:
            for entry, value, here in zip(out, c.python(), c.present.tolist(), strict=True):
                if here:
                    entry[key] = value
    return out


def ceil_counts(x: FloatArray) -> FloatArray:
    """⌈x⌉ of every finite entry and ∞ elsewhere (NaN too), as whole floats: a ``count``
    column."""
    return np.where(np.isfinite(x), np.ceil(x), math.inf)


@dataclass(frozen=True)
class PairContext:
    """What a run of pairs' objects need beside their figures, one entry per pair of the run:
    the models' names, each verdict string (the ranking route's), the paired item and the time
    of each decision (None while open); optionally the models' ranks and, in a report of a
    family, the family-adjusted p-values with the level ``alpha`` they are read at; the
    repeated-sample split (:class:`monitor.stats.samples.VarianceSplit`, over the run)."""

    model_a: Sequence[str]
    model_b: Sequence[str]
    verdicts: Sequence[str]
    decided_at: Sequence[int | None]
    decided_ts: Sequence[str | None] | None = None
    rank_a: NDArray[np.int64] | None = None
    rank_b: NDArray[np.int64] | None = None
    p_adjusted: FloatArray | None = None
    alpha: float | None = None
    split: Any = None
    undecidable: Sequence[str | None] | None = None


def pair_columns(f: PairFigures, idx: NDArray[np.int64], ctx: PairContext) -> list[PairColumn]:
    """The keys of the JSON objects of pairs ``idx`` of ``f`` (the context's entries follow
    ``idx``), column by column, in the objects' key order — the one definition of every pair
    key (see the module docstring)."""
    idx = np.asarray(idx, dtype=np.int64)

    def col(key: str, x: FloatArray | None) -> PairColumn:
        if x is None:
            return PairColumn(key, "null", [None] * idx.size)
        return PairColumn(key, "float", np.asarray(x)[idx])

    out = [PairColumn("model_a", "str", list(ctx.model_a)),
           PairColumn("model_b", "str", list(ctx.model_b))]
    if ctx.rank_a is not None and ctx.rank_b is not None:
        out += [PairColumn("rank_a", "int", ctx.rank_a), PairColumn("rank_b", "int", ctx.rank_b)]
    log_e_at = f.cluster_decided_log_e if f.design == "clusters" else f.decided_log_e
    decided: list[dict[str, Any] | None] = [None] * idx.size
    taken = [j for j, at in enumerate(ctx.decided_at) if at is not None]
    e_at = (None if log_e_at is None or not taken
            else e_values(np.asarray(log_e_at)[idx[taken]]).tolist())
    for i, j in enumerate(taken):
        decided[j] = {"n": ctx.decided_at[j], "final": True,
                      "ts": None if ctx.decided_ts is None else ctx.decided_ts[j],
                      "e_value": None if e_at is None else e_at[i]}
    out += [PairColumn("verdict", "str", list(ctx.verdicts)),
            PairColumn("decided", "any", decided),
            PairColumn("design", "str", [f.design] * idx.size)]
    if ctx.undecidable is not None:
        present = np.array([u is not None for u in ctx.undecidable], dtype=bool)
        if present.any():
            out.append(PairColumn("undecidable", "str", list(ctx.undecidable), present=present))
    if f.design == "clusters":
        out.append(_clusters(f, idx))
    log_e = f.log_e[idx]
    n_av = (np.full(idx.size, math.inf) if f.n_star_anytime is None
            else ceil_counts(f.n_star_anytime[idx]))
    out += [
        PairColumn("n", "count", np.rint(f.n[idx])),
        col("mean_a", f.mean_a), col("mean_b", f.mean_b), col("delta", f.delta),
        col("sigma_d2", f.sigma_d2), col("rho", f.rho), col("s", f.s), col("v", f.v),
        PairColumn("e_value", "float", e_values(log_e)),
        PairColumn("log_e", "float", log_e),
        PairColumn("e_threshold", "float", 1.0 / f.e_alpha[idx]),
        col("cs_low", f.cs_low), col("cs_high", f.cs_high),
        PairColumn("n_star_anytime", "count", n_av),
        col("q_anytime", f.q_anytime),
        PairColumn("fixed_n", "object", _fixed_n(f, idx, ctx)),
    ]
    binary = f.binary[idx]
    out += [PairColumn(key, "count", np.rint(c[idx]), present=binary)
            for key, c in (("n11", f.n11), ("n10", f.n10), ("n01", f.n01), ("n00", f.n00))]
    sp = ctx.split
    if sp is not None:
        out += [PairColumn("samples", "float", np.full(idx.size, float(sp.samples))),
                PairColumn("sigma_between2", "float", np.asarray(sp.between)),
                PairColumn("sigma_within2", "float", np.asarray(sp.within)),
                PairColumn("within_share", "float", np.asarray(sp.within_share)),
                PairColumn("within_share_1", "float", np.asarray(sp.within_share_one))]
    return out


def _clusters(f: PairFigures, idx: NDArray[np.int64]) -> PairColumn:
    """Sampled clusters: each pair's ``clusters`` block."""
    assert f.cluster_obs is not None and f.cluster_log_e is not None
    assert f.cluster_min is not None and f.cluster_decided_obs is not None
    at = np.asarray(f.cluster_decided_obs[idx], dtype=np.float64)
    decided_at: list[int | None] = [None] * idx.size
    for j in np.flatnonzero(at).tolist():
        decided_at[j] = round(float(at[j]))
    return PairColumn("clusters", "object", [
        PairColumn("observations", "count", np.rint(f.cluster_obs[idx])),
        PairColumn("seen", "int", np.full(idx.size, f.clusters_seen)),
        PairColumn("needed", "count", np.asarray(f.cluster_min[idx], dtype=np.float64)),
        PairColumn("e_value", "float", e_values(f.cluster_log_e[idx])),
        PairColumn("decided_at_observation", "any", decided_at),
    ])


def _fixed_n(f: PairFigures, idx: NDArray[np.int64], ctx: PairContext) -> list[PairColumn]:
    """The keys of each pair's ``fixed_n`` object (:data:`FIXED_N_VALID_FOR`)."""

    def null(key: str) -> PairColumn:
        return PairColumn(key, "null", [None] * idx.size)

    n = f.n[idx]
    out = [PairColumn("n_star", "count", ceil_counts(f.n_star[idx])),
           PairColumn("n_star_exact", "float", f.n_star[idx]),
           PairColumn("q", "float", f.q[idx]), PairColumn("mde", "float", f.mde[idx])]
    de, qg = f.design_effect, f.q_grouped
    grouped = de is not None and qg is not None
    cluster = grouped and f.group_kind == "cluster"
    g = np.asarray(qg)[idx] if grouped and qg is not None else np.zeros(0)
    out.append(PairColumn("design_effect", "float", np.asarray(de)[idx]) if grouped
               else null("design_effect"))
    # The clusters holding the pair's items: how far the design effect can be trusted.
    out.append(PairColumn("n_clusters", "count", np.asarray(f.n_clusters)[idx])
               if cluster and f.n_clusters is not None else null("n_clusters"))
    if cluster:
        # N*_cluster = N* · max(DE · G/(G − 1), 1) = n / q_cluster
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            n_cl = np.where(g > 0, ceil_counts(n / np.where(g > 0, g, 1.0)), math.inf)
        out += [PairColumn("n_star_cluster", "count", n_cl), PairColumn("q_cluster", "float", g)]
    else:
        out += [null("n_star_cluster"), null("q_cluster")]
    out.append(PairColumn("q_strata", "float", g) if grouped and not cluster
               else null("q_strata"))
    out.append(PairColumn("p_value", "float", f.p_value[idx]))
    if ctx.p_adjusted is not None and ctx.alpha is not None:
        out += [PairColumn("p_adjusted", "float", ctx.p_adjusted),
                PairColumn("significant", "bool", ctx.p_adjusted < ctx.alpha)]
    return out


# -- the core's public reads, typed --------------------------------------------------------
@dataclass(frozen=True)
class RankedModel:
    """One model of a ranking: its place, mean over its own items and their count, and its
    rank set and tier from the decisions."""

    model: str
    mean: float
    n: int
    rank: int
    rank_low: int
    rank_high: int
    tier: int

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "mean": self.mean, "n": self.n, "rank": self.rank,
                "rank_low": self.rank_low, "rank_high": self.rank_high, "tier": self.tier}


@dataclass(frozen=True)
class AnytimeRule:
    """How a board decides: the procedure, α, the planned board size, the declared design
    (with its items per cluster observation) and what it assumes, and the guarantee."""

    alpha: float
    planned_models: int
    design: str
    assumption: str
    statement: str
    cluster_items: int | None = None
    procedure: str = "online-bonferroni"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"procedure": self.procedure, "alpha": self.alpha,
                               "planned_models": self.planned_models, "design": self.design}
        if self.cluster_items is not None:
            out["cluster_items"] = self.cluster_items
        out.update(assumption=self.assumption, statement=self.statement)
        return out


@dataclass(frozen=True)
class FixedNFamily:
    """What the fixed-N figures of a ranking's pairs are corrected for: a snapshot at the
    current n, valid for one look (:data:`FIXED_N_VALID_FOR`)."""

    family: str
    m: int
    alpha: float
    correction: str

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "m": self.m, "alpha": self.alpha,
                "correction": self.correction, "snapshot": True,
                "valid_for": FIXED_N_VALID_FOR}


@dataclass(frozen=True)
class Ranking:
    """A benchmark's ranking as the core hands it out: the models best first with their rank
    sets and tiers, the adjacent pairs with their verdicts and figures, and the board's
    standing. :meth:`to_json` is the ranking route's object."""

    benchmark: str
    models: tuple[RankedModel, ...] = ()
    pairs: tuple[Any, ...] = ()  # monitor.core.table.PairView, adjacent pairs best first
    resolved: bool = False
    unresolved_pairs: int = 0
    top_resolved: bool = False
    tiers: int = 0
    design: str | None = None
    anytime: AnytimeRule | None = None
    fixed_n: FixedNFamily | None = None
    binary: bool | None = None
    excluded_items: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"benchmark": self.benchmark, "resolved": self.resolved,
                               "unresolved_pairs": self.unresolved_pairs}
        if self.anytime is not None and self.fixed_n is not None:
            out.update(design=self.design, anytime=self.anytime.to_json(),
                       fixed_n=self.fixed_n.to_json(), binary=self.binary,
                       excluded_items=self.excluded_items)
        out.update(top_resolved=self.top_resolved, tiers=self.tiers,
                   models=[m.to_json() for m in self.models],
                   pairs=[p.as_dict() for p in self.pairs])
        return out


@dataclass(frozen=True)
class PairPage:
    """A page of a benchmark's pairs (all pairs in ranking order, one model's, or one pair):
    ``total`` counts the pairs the page is taken from."""

    benchmark: str
    total: int
    offset: int
    limit: int
    pairs: tuple[Any, ...] = ()  # monitor.core.table.PairView

    def to_json(self) -> dict[str, Any]:
        return {"benchmark": self.benchmark, "total": self.total, "offset": self.offset,
                "limit": self.limit, "pairs": [p.as_dict() for p in self.pairs]}


@dataclass(frozen=True)
class StabilityCounts:
    """One model's (original, perturbed) pairs of one perturbation kind: the paired items,
    the flips (right on the original, wrong on the perturbed one) and the paired items right
    on the original (the flip rate's denominator)."""

    pairs: int
    flips: int
    right_on_original: int

    def stat(self, kind: str) -> Any:
        """The flip rate with its Wilson interval (:func:`monitor.audit.stability.flip_stat`,
        what ``llm-monitor stability`` reports): the one definition, read by the stability
        route and the metrics."""
        from monitor.audit.stability import flip_stat

        return flip_stat(kind, self.flips, self.right_on_original, math.nan)

    @classmethod
    def pooled(cls, counts: Sequence[StabilityCounts]) -> StabilityCounts:
        """The counts of several perturbation kinds together."""
        return cls(pairs=sum(c.pairs for c in counts), flips=sum(c.flips for c in counts),
                   right_on_original=sum(c.right_on_original for c in counts))

    def to_json(self) -> dict[str, int]:
        return {"pairs": self.pairs, "flips": self.flips,
                "right_on_original": self.right_on_original}
