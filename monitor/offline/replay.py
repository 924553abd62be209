"""Anytime-valid fields of the offline report: replay a table item by item through the e-processes.

For each pair of the family the table is replayed in a chosen item order (file order = order of
first appearance of item_id, or a seeded shuffle) and the pair is *resolved (anytime)* at the
first paired item where E_n ≥ m/α (e-Bonferroni over the m pairs of the family). Validity
assumes the items arrive in an order independent of their outcomes; shuffling the replay order
makes that true by construction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from monitor.io.tables import ScoreTable
from monitor.stats import eprocess as ep
from monitor.stats import power as pw

ORDERS = ("file", "shuffle")
_CHUNK_CELLS = 4_000_000  # items × pairs per chunk


def _mcnemar_bounds(n_disc: int, thr: float) -> np.ndarray:
    """u[k] = least j with log E(j, k − j) ≥ thr, j ≥ k/2 (k + 1 if none), k = 0..n_disc.

    E is symmetric in (n10, n01) and increases away from n10 = n01, so for k discordant pairs
    the pair has crossed iff max(n10, n01) ≥ u[k].
    """
    k = np.arange(n_disc + 1, dtype=np.float64)
    lo = np.ceil(k / 2.0)
    hi = k.copy()
    reach = ep.log_e_mcnemar(hi, k - hi) >= thr
    lo = lo - 1.0  # invariant: log E(lo) < thr (or lo below the range), log E(hi) ≥ thr
    while True:
        gap = hi - lo > 1
        if not np.any(gap & reach):
            break
        mid = np.clip(np.floor((lo + hi) / 2.0), 0.0, k)
        above = ep.log_e_mcnemar(mid, k - mid) >= thr
        move = gap & reach
        hi = np.where(move & above, mid, hi)
        lo = np.where(move & ~above, mid, lo)
    return np.where(reach, hi, k + 1.0).astype(np.int64)


def anytime_fields(
    table: ScoreTable,
    pairs: tuple[np.ndarray, np.ndarray],
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    order: str = "file",
    seed: int | None = None,
) -> list[dict[str, Any]]:
    """Per pair (columns a[k], b[k] of ``table.scores``): the anytime fields of the report.

    Keys: ``e_value``, ``log_e_value``, ``cs_low``, ``cs_high`` (confidence sequence at the
    family level α/m), ``n_star_anytime`` (at α/m), ``q_anytime``, ``resolved_anytime`` and
    ``first_resolved_at`` (1-based count of paired items in the replay order at which E first
    reached m/α, or None). ``e_value`` is the final E_n.
    """
    if order not in ORDERS:
        raise ValueError(f"`order` must be one of {', '.join(ORDERS)}, got {order!r}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    a_idx = np.asarray(pairs[0], dtype=np.intp)
    b_idx = np.asarray(pairs[1], dtype=np.intp)
    m = int(a_idx.size)
    if m == 0:
        return []
    x = table.scores
    if order == "shuffle":
        x = x[np.random.default_rng(seed).permutation(x.shape[0])]
    n_items = x.shape[0]
    alpha_pair = alpha / m  # e-Bonferroni: E ≥ m/α
    thr = math.log(1.0 / alpha_pair)
    finite = x[~np.isnan(x)]
    binary = bool(np.all((finite == 0) | (finite == 1)))
    bounds = _mcnemar_bounds(n_items, thr) if binary else None

    n = np.zeros(m)
    s = np.zeros(m)
    v = np.zeros(m)
    n10 = np.zeros(m)
    n01 = np.zeros(m)
    first = np.full(m, -1, dtype=np.int64)
    chunk = max(1, _CHUNK_CELLS // max(n_items, 1))
    for start in range(0, m, chunk):
        sl = slice(start, min(start + chunk, m))
        xa, xb = x[:, a_idx[sl]], x[:, b_idx[sl]]
        present = ~np.isnan(xa) & ~np.isnan(xb)
        d = np.where(present, xa - xb, 0.0)
        cum_n = np.cumsum(present, axis=0, dtype=np.int64)
        if bounds is not None:
            c10 = np.cumsum(d > 0, axis=0, dtype=np.int64)
            c01 = np.cumsum(d < 0, axis=0, dtype=np.int64)
            crossed = np.maximum(c10, c01) >= bounds[c10 + c01]
            n10[sl], n01[sl] = c10[-1], c01[-1]
            s[sl] = c10[-1] - c01[-1]
            v[sl] = c10[-1] + c01[-1]
        else:
            cs_ = np.cumsum(d, axis=0)
            cv_ = np.cumsum(d * d, axis=0)
            crossed = np.asarray(ep.log_e_bounded(cum_n, cs_, cv_)) >= thr
            s[sl], v[sl] = cs_[-1], cv_[-1]
        n[sl] = cum_n[-1]
        any_cross = crossed.any(axis=0)
        row = np.argmax(crossed, axis=0)
        cols = np.arange(row.size)
        first[sl] = np.where(any_cross, cum_n[row, cols], -1)

    if binary:
        log_e = np.asarray(ep.log_e_mcnemar(n10, n01), dtype=float)
        lo, hi = ep.cs_mcnemar(n - n10 - n01, n10, n01, 0, alpha=alpha_pair)
    else:
        log_e = np.asarray(ep.log_e_bounded(n, s, v), dtype=float)
        lo, hi = ep.cs_bounded(n, s, v, alpha=alpha_pair)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.where(n > 0, s / np.where(n > 0, n, 1), 0.0)
        s2 = np.where(n > 0, np.maximum(v / np.where(n > 0, n, 1) - delta * delta, 0.0), 0.0)
    n_av = np.atleast_1d(
        ep.n_star_anytime(delta, s2, alpha=alpha_pair, power=power,
                          construction="mcnemar" if binary else "bounded")
    )
    q_av = pw.resolution_ratio(n, n_av)
    lo, hi = np.atleast_1d(lo), np.atleast_1d(hi)
    out = []
    for k in range(m):
        le = float(log_e[k])
        out.append({
            "e_value": math.exp(le) if le < 709.0 else math.inf,
            "log_e_value": le,
            "cs_low": float(lo[k]),
            "cs_high": float(hi[k]),
            "n_star_anytime": math.ceil(n_av[k]) if math.isfinite(n_av[k]) else math.inf,
            "q_anytime": float(q_av[k]),
            "resolved_anytime": bool(first[k] >= 0),
            "first_resolved_at": int(first[k]) if first[k] >= 0 else None,
        })
    return out


def add_anytime(
    rep: dict[str, Any],
    table: ScoreTable,
    *,
    alpha: float,
    power: float,
    order: str = "file",
    seed: int | None = None,
) -> dict[str, Any]:
    """Extend a ``build_report`` dict in place with the anytime fields of its family's pairs."""
    index = {name: j for j, name in enumerate(table.models)}
    a = np.array([index[p["model_a"]] for p in rep["pairs"]], dtype=np.intp)
    b = np.array([index[p["model_b"]] for p in rep["pairs"]], dtype=np.intp)
    fields = anytime_fields(table, (a, b), alpha=alpha, power=power, order=order, seed=seed)
    for entry, extra in zip(rep["pairs"], fields, strict=True):
        entry.update(extra)
    m = len(fields)
    rep["anytime"] = {
        "order": order,
        "seed": seed,
        "threshold": "e-bonferroni",
        "e_threshold": m / alpha if m else None,
        "alpha_per_pair": alpha / m if m else None,
        "construction": "mcnemar-beta-binomial" if rep.get("binary") else "gamma-exponential",
        "resolved_anytime": int(sum(f["resolved_anytime"] for f in fields)),
    }
    return rep


def render_anytime(console: Console, rep: dict[str, Any]) -> None:
    """The anytime columns as a second table under the fixed-N report."""
    info = rep["anytime"]
    table = Table(
        title=(f"anytime-valid verdicts · order: {info['order']} · resolved when E ≥ "
               f"{info['e_threshold']:.4g} (e-Bonferroni) · "
               f"{info['resolved_anytime']}/{len(rep['pairs'])} resolved")
    )
    table.add_column("pair", overflow="fold", ratio=1, min_width=20)
    for col in ("n", "E", "CS for δ", "N*_AV", "q_AV", "first resolved at"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in rep["pairs"]:
        e = p["e_value"]
        table.add_row(
            f"{p['model_a']} > {p['model_b']}",
            str(p["n"]),
            f"{e:.3g}",
            f"[{p['cs_low']:+.3f}, {p['cs_high']:+.3f}]",
            str(p["n_star_anytime"]),
            f"{p['q_anytime']:.2f}",
            "—" if p["first_resolved_at"] is None else str(p["first_resolved_at"]),
        )
    console.print(table)


def anytime_calibration_figures(
    pa: float | None,
    pb: float | None,
    rho: float | None,
    *,
    streams: int,
    items: int,
    alpha: float,
    power: float,
    seed: int | None,
) -> dict[str, Any]:
    """`calibrate --anytime`: null streams (E-process vs naive peeked z-test) and, when a gap
    is given, power by N*_AV.

    The null streams are 0/1 pairs with both accuracies equal to (p_A + p_B)/2 and phi
    correlation ρ (defaults 0.5 and 0), monitored after every item; the naive test peeks from
    item 10 on. With p_A ≠ p_B, alternative streams run to N*_AV.
    """
    from monitor.stats import anytime_calibration as ac

    rng = np.random.default_rng(seed)
    p0 = 0.5 if pa is None or pb is None else (pa + pb) / 2.0
    r0 = 0.0 if rho is None else rho
    spec = {"kind": "binary", "p_a": p0, "p_b": p0, "rho": r0}
    null = ac.simulate_null(spec, streams=streams, items=items, alpha=alpha, rng=rng)
    e_lo, e_hi = null.e_ci()
    n_lo, n_hi = null.naive_ci()
    out: dict[str, Any] = {
        "mode": "anytime",
        "null": {
            "p": p0, "rho": r0, "streams": streams, "items": items, "alpha": alpha,
            "burn_in": null.burn_in,
            "e_process": {"false_resolution_rate": null.e_rate, "ci95": [e_lo, e_hi],
                          "p_value_rate_gt_alpha": null.p_e_exceeds_alpha()},
            "naive_peeked_z": {"false_resolution_rate": null.naive_rate, "ci95": [n_lo, n_hi],
                               "p_value_rate_gt_alpha": null.p_naive_exceeds_alpha()},
        },
        "seed": seed,
    }
    if pa is not None and pb is not None and pa != pb:
        res = ac.simulate_power(pa, pb, r0, streams=streams, alpha=alpha, power=power, rng=rng)
        lo, hi = res.ci()
        out["alternative"] = {
            "p_a": pa, "p_b": pb, "rho": r0, "power_target": power,
            "n_star_anytime": res.horizon, "streams": streams,
            "resolved_by_n_star_anytime": res.rate, "ci95": [lo, hi],
        }
    return out


def render_anytime_calibration(fig: dict[str, Any]) -> Any:
    def render(console: Console) -> None:
        null = fig["null"]
        table = Table(title=(f"null streams: {null['streams']} × {null['items']} items, p = "
                             f"{null['p']:g}, ρ = {null['rho']:g}, checked after every item"))
        table.add_column("rule")
        table.add_column("false-resolution rate", justify="right")
        table.add_column("95% CI", justify="right")
        for label, key in (("e-process, E ≥ 1/α", "e_process"),
                           (f"naive z-test peeked from n = {null['burn_in']}", "naive_peeked_z")):
            row = null[key]
            table.add_row(label, f"{row['false_resolution_rate']:.4f}",
                          f"[{row['ci95'][0]:.4f}, {row['ci95'][1]:.4f}]")
        console.print(table)
        alt = fig.get("alternative")
        if alt:
            console.print(
                f"alternative p_A={alt['p_a']:g}, p_B={alt['p_b']:g}, ρ={alt['rho']:g}: "
                f"resolved by N*_AV = {alt['n_star_anytime']} in "
                f"{alt['resolved_by_n_star_anytime']:.3f} of {alt['streams']} streams "
                f"(95% CI [{alt['ci95'][0]:.3f}, {alt['ci95'][1]:.3f}]; target {alt['power_target']:g})"
            )

    return render
