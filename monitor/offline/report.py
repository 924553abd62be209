"""The offline resolution report: a score table → ranking, a family of pairs, and their verdicts.

Definitions (also in ``llm-monitor report --help`` and docs/mmlu-pro-top10.md):

* **ranking** — models by their mean score over the items each one has, best first.
* **family** — the pairs read together: adjacent pairs of the ranking (default) or all pairs.
  Each pair is (higher-ranked A, lower-ranked B); δ̂ = mean_A − mean_B on the shared items.
* **resolved** — q = N / N* ≥ 1, with N* = z² σ̂_D² / δ̂² and z = z_{1−α'/2} + z_{1−β} at the
  per-comparison level α' = family_alpha(α, m, correction) (α/m for Bonferroni and Holm, α for
  none and BH). A planning verdict: the shared items are enough to detect a gap of this size.
* **resolved_cluster** — q_cluster = q / DE ≥ 1 with the cluster-robust design effect DE
  (groups sampled); **resolved_strata** — the same with the stratified DE (groups fixed).
* **significant** — the family-adjusted p-value (exact McNemar on 0/1 data, paired t
  otherwise) is below α. A testing verdict on the observed gap.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from monitor.errors import InputError
from monitor.io.tables import ScoreTable
from monitor.stats import multiplicity
from monitor.stats.board import BoardResult, board

Family = Literal["adjacent", "all"]
FAMILIES: tuple[str, ...] = ("adjacent", "all")


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


def _ceil(x: float) -> float | int:
    return math.ceil(x) if math.isfinite(x) else math.inf


def build_report(
    table: ScoreTable,
    *,
    family: str = "adjacent",
    correction: str = "holm",
    alpha: float = 0.05,
    power: float = 0.8,
) -> dict[str, Any]:
    """The resolution report of one table as a plain dict (the JSON contract of ``report``).

    Keys: ``ranking`` (rank, model, mean, n), ``pairs`` (model_a, model_b, n, delta, sigma_d2,
    rho, n_star, q, mde, design_effect, q_cluster, p_value, p_adjusted, resolved, and more),
    ``verdicts`` (counts) and the settings that produced them.
    """
    correction = multiplicity.check_method(correction)
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    if not (0.0 < power < 1.0):
        raise ValueError(f"`power` must lie in (0, 1), got {power}")
    if len(table.models) < 2:
        raise InputError("a report needs at least two models", source=table.source)
    order, means, counts = ranking_order(table)
    a, b = family_pairs(order, family)
    _check_shared(table, a, b)
    m = int(a.size)
    alpha_pair = multiplicity.family_alpha(alpha, m, method=correction)
    res = board(table.scores, pairs=(a, b), groups=table.groups,
                group_kind=table.group_kind or "cluster", alpha=alpha_pair, power=power)
    p_adj = multiplicity.adjust_pvalues(res.p_value, method=correction)
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(1, order.size + 1)

    ranking = [
        {"rank": int(rank[j]), "model": table.models[j], "mean": float(means[j]),
         "n": int(counts[j])}
        for j in order
    ]
    pairs = [_pair_entry(table, res, p_adj, rank, k, alpha) for k in range(m)]
    kind = table.group_kind
    verdicts: dict[str, Any] = {
        "pairs": m,
        "resolved": int(np.sum(res.q >= 1.0)),
        "significant": int(np.sum(p_adj < alpha)),
        "resolved_cluster": None,
        "resolved_strata": None,
    }
    if res.q_grouped is not None:
        verdicts[f"resolved_{kind}"] = int(np.sum(res.q_grouped >= 1.0))
    return {
        "source": table.source,
        "benchmark": table.benchmark,
        "n_items": len(table.item_ids),
        "n_models": len(table.models),
        "binary": res.all_binary,
        "test": "mcnemar-exact" if res.all_binary else "paired-t",
        "family": family,
        "correction": correction,
        "alpha": alpha,
        "alpha_per_pair": alpha_pair,
        "power": power,
        "groups": None if kind is None else {
            "kind": kind, "column": table.group_col, "n_groups": res.n_groups},
        "ranking": ranking,
        "pairs": pairs,
        "verdicts": verdicts,
    }


def _pair_entry(table: ScoreTable, res: BoardResult, p_adj: np.ndarray, rank: np.ndarray,
                k: int, alpha: float) -> dict[str, Any]:
    ia, ib = int(res.a[k]), int(res.b[k])
    n_star = float(res.n_star[k])
    q = float(res.q[k])
    entry: dict[str, Any] = {
        "model_a": table.models[ia],
        "model_b": table.models[ib],
        "rank_a": int(rank[ia]),
        "rank_b": int(rank[ib]),
        "n": int(res.n[k]),
        "mean_a": float(res.mean_a[k]),
        "mean_b": float(res.mean_b[k]),
        "delta": float(res.delta[k]),
        "sigma_d2": float(res.sigma_d2[k]),
        "rho": float(res.rho[k]),
        "n_star": _ceil(n_star),
        "n_star_exact": n_star,
        "q": q,
        "mde": float(res.mde[k]),
        "design_effect": None,
        "n_star_cluster": None,
        "q_cluster": None,
        "q_strata": None,
        "p_value": float(res.p_value[k]),
        "p_adjusted": float(p_adj[k]),
        "resolved": bool(q >= 1.0),
        "resolved_cluster": None,
        "resolved_strata": None,
        "significant": bool(p_adj[k] < alpha),
    }
    if res.binary[k]:
        entry.update(n11=round(float(res.n11[k])), n10=round(float(res.n10[k])),
                     n01=round(float(res.n01[k])), n00=round(float(res.n00[k])))
    if res.design_effect is not None and res.q_grouped is not None:
        de = float(res.design_effect[k])
        qg = float(res.q_grouped[k])
        entry["design_effect"] = de
        if res.group_kind == "cluster":
            entry.update(n_star_cluster=_ceil(n_star * de), q_cluster=qg,
                         resolved_cluster=bool(qg >= 1.0))
        else:
            entry.update(q_strata=qg, resolved_strata=bool(qg >= 1.0))
    return entry
