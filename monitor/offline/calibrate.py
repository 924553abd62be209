"""Fixed-N calibration: the empirical power of the paired test at N = N*, on simulated
correlated pairs or on N-item resamples of one real pair."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from monitor.defaults import PLANNED_MODELS
from monitor.errors import ConfigError
from monitor.io.tables import read_table
from monitor.offline.progress import StartTask, no_progress
from monitor.stats import calibration as cal
from monitor.stats import power as pw
from monitor.stats.calibration import CalibrationResult
from monitor.stats.paired import PairedSummary, paired_summary

CI_LEVEL = 0.95


@dataclass(frozen=True)
class FixedNCalibration:
    """R replications of the paired test at N items, with the planned size they check.

    Attributes
    ----------
    mode : {"simulate", "resample"}
    p_a, p_b, rho : float
        The planned pair (simulation) or the real pair's own figures (resampling).
    alpha, target_power : float
        Level of each test and the power N* was sized for.
    n_star_exact : float
        Unrounded N* of the pair.
    result : CalibrationResult
        Replications, rejections and the test used.
    table, model_a, model_b : str or None
        Resampling only: the table and the two models.
    pair : PairedSummary or None
        Resampling only: the real pair's figures on all its shared items.
    """

    mode: Literal["simulate", "resample"]
    p_a: float
    p_b: float
    rho: float
    alpha: float
    target_power: float
    n_star_exact: float
    result: CalibrationResult
    table: str | None = None
    model_a: str | None = None
    model_b: str | None = None
    pair: PairedSummary | None = None

    @property
    def n_star(self) -> int:
        """N* rounded up (at least 1): the planned size."""
        return max(1, math.ceil(self.n_star_exact))

    @property
    def power(self) -> float:
        """Empirical power: the rejection rate."""
        return self.result.power

    def ci(self) -> tuple[float, float]:
        """95 % Wilson interval of the empirical power."""
        return self.result.ci(confidence=CI_LEVEL)

    def to_dict(self) -> dict[str, Any]:
        """The figures under the keys ``llm-monitor calibrate --json`` prints."""
        out: dict[str, Any] = {"mode": self.mode}
        if self.pair is None:
            out.update({"p_a": self.p_a, "p_b": self.p_b, "rho": self.rho})
        else:
            s = self.pair
            out.update({"table": self.table, "model_a": self.model_a, "model_b": self.model_b,
                        "items": s.n, "p_a": self.p_a, "p_b": self.p_b, "rho": self.rho,
                        "delta": s.delta, "sigma_d2": s.sigma_d2})
        low, high = self.ci()
        r = self.result
        out.update({"alpha": self.alpha, "n_star": self.n_star, "n_star_exact": self.n_star_exact,
                    "n": r.n, "reps": r.reps, "rejections": r.rejections, "power": r.power,
                    "ci_low": low, "ci_high": high, "ci_level": CI_LEVEL,
                    "target_power": self.target_power, "test": r.test})
        return out


def _n_star_exact(delta: float, sigma2: float, *, alpha: float, power: float) -> float:
    exact = float(pw.n_star(delta, sigma2, alpha=alpha, power=power))
    if not math.isfinite(exact):
        raise ConfigError("N* is infinite (δ = 0): there is no planned size; pass --n")
    return exact


def calibrate_simulated(
    p_a: float, p_b: float, rho: float, *, n: int | None = None, reps: int = 2000,
    alpha: float = 0.05, power: float = 0.8, test: str = "z", seed: int | None = None,
    progress: StartTask | None = None,
) -> FixedNCalibration:
    """Simulate ``reps`` correlated Bernoulli pairs of ``n`` items (default N*) and test each.

    Examples
    --------
    >>> c = calibrate_simulated(0.65, 0.60, 0.30, reps=400, seed=1)
    >>> c.n_star, 0.7 < c.power < 0.9
    (1028, True)
    """
    cal.cell_probabilities(p_a, p_b, rho)  # feasibility first, before any work
    exact = _n_star_exact(p_a - p_b, float(pw.sigma_d2(p_a, p_b, rho)), alpha=alpha,
                          power=power)
    size = max(1, math.ceil(exact)) if n is None else n
    tick = (progress or no_progress)("simulating", reps)
    res = cal.simulate_power(p_a, p_b, rho, n=size, reps=reps, alpha=alpha, test=test,
                             rng=np.random.default_rng(seed), progress=tick)
    return FixedNCalibration("simulate", p_a, p_b, rho, alpha, power, exact, res)


def calibrate_resampled(
    table: str | Path, a: str, b: str, *, exclude: tuple[str, ...] = (), n: int | None = None,
    reps: int = 2000, alpha: float = 0.05, power: float = 0.8, test: str = "z",
    seed: int | None = None, progress: StartTask | None = None,
) -> FixedNCalibration:
    """Test ``reps`` resamples of ``n`` items (default the pair's own N*) of a real pair."""
    xa, xb, _ = read_table(table, exclude=exclude).pair(a, b)
    s = paired_summary(xa, xb)
    exact = _n_star_exact(s.delta, s.sigma_d2, alpha=alpha, power=power)
    size = max(1, math.ceil(exact)) if n is None else n
    tick = (progress or no_progress)(f"resampling {a} vs {b}", reps)
    res = cal.resample_power(xa, xb, n=size, reps=reps, alpha=alpha, test=test,
                             rng=np.random.default_rng(seed), progress=tick)
    return FixedNCalibration("resample", s.mean_a, s.mean_b, s.rho, alpha, power, exact, res,
                             table=str(table), model_a=a, model_b=b, pair=s)


@dataclass(frozen=True)
class AnytimeCalibration:
    """``calibrate --anytime``: null streams (e-process vs naive peeked z-test) and, when a gap
    is given, the power of the live monitor's rule by its N*_AV beside the single-pair rule's.

    The null streams are 0/1 pairs with both accuracies equal to (p_A + p_B)/2 and phi
    correlation ρ (defaults 0.5 and 0), monitored after every item; the naive test peeks from
    ``null.burn_in`` on. With p_A ≠ p_B, alternative streams run under the live rule (one side
    reaching 2/γ_p for a pair of ``block`` on a board planned for ``planned_models`` models,
    item by item through :func:`monitor.stats.sequential.advance`) to 3 N*_AV, and under the
    single-pair rule (E ≥ 1/α) to its N*_AV.
    """

    p: float
    rho: float
    streams: int
    items: int
    alpha: float
    seed: int | None
    null: Any  # monitor.stats.anytime_calibration null-stream result
    p_a: float | None = None
    p_b: float | None = None
    power_target: float | None = None
    alternative: Any = None  # single-pair power-by-N*_AV result, when a gap was given
    live: Any = None  # the live rule's decision times, when a gap was given
    planned_models: int | None = None
    block: int | None = None
    pair: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` contract."""
        null = self.null
        e_lo, e_hi = null.e_ci()
        n_lo, n_hi = null.naive_ci()
        out: dict[str, Any] = {
            "mode": "anytime",
            "null": {
                "p": self.p, "rho": self.rho, "streams": self.streams, "items": self.items,
                "alpha": self.alpha, "burn_in": null.burn_in,
                "e_process": {"false_resolution_rate": null.e_rate, "ci95": [e_lo, e_hi],
                              "p_value_rate_gt_alpha": null.p_e_exceeds_alpha()},
                "naive_peeked_z": {"false_resolution_rate": null.naive_rate,
                                   "ci95": [n_lo, n_hi],
                                   "p_value_rate_gt_alpha": null.p_naive_exceeds_alpha()},
            },
            "seed": self.seed,
        }
        live, alt = self.live, self.alternative
        if live is not None and alt is not None:
            lo, hi = live.ci()
            target = float(self.power_target or 0.8)
            q_lo, q_hi = live.quantile_ci(target)
            s_lo, s_hi = alt.ci()
            out["alternative"] = {
                "p_a": self.p_a, "p_b": self.p_b, "rho": self.rho,
                "power_target": self.power_target, "streams": self.streams,
                "rule": "one side reaches 2/γ_p (the live monitor's)",
                "planned_models": self.planned_models, "block": self.block,
                "pair_level": live.level, "e_threshold": 1.0 / live.level,
                "n_star_anytime": math.ceil(live.n_star_anytime),
                "resolved_by_n_star_anytime": live.rate, "ci95": [lo, hi],
                "horizon": live.horizon, "median_items": live.quantile(0.5),
                "power_quantile_items": live.quantile(target),
                "power_quantile_ci95": [q_lo, q_hi], "wrong_direction": live.wrong,
                "single_pair": {
                    "rule": "E ≥ 1/α", "n_star_anytime": alt.horizon,
                    "resolved_by_n_star_anytime": alt.rate, "ci95": [s_lo, s_hi],
                },
            }
            if self.pair is not None:
                out["alternative"]["pair"] = self.pair
        return out


def calibrate_anytime(
    pa: float | None,
    pb: float | None,
    rho: float | None,
    *,
    streams: int,
    items: int,
    alpha: float,
    power: float,
    seed: int | None,
    planned_models: int = PLANNED_MODELS,
    pair: int | None = None,
    block: int | None = None,
) -> AnytimeCalibration:
    """Simulate the null streams and, with p_A ≠ p_B, the alternative streams (seeded)."""
    from monitor.offline.power import live_level
    from monitor.stats import anytime_calibration as ac

    level, b = live_level(alpha=alpha, planned_models=planned_models, pair=pair, block=block)
    rng = np.random.default_rng(seed)
    p0 = 0.5 if pa is None or pb is None else (pa + pb) / 2.0
    r0 = 0.0 if rho is None else rho
    spec = {"kind": "binary", "p_a": p0, "p_b": p0, "rho": r0}
    null = ac.simulate_null(spec, streams=streams, items=items, alpha=alpha, rng=rng)
    alternative = live = None
    if pa is not None and pb is not None and pa != pb:
        live = ac.simulate_live_power(pa, pb, r0, level=level, streams=streams, power=power,
                                      rng=rng)
        alternative = ac.simulate_power(pa, pb, r0, streams=streams, alpha=alpha, power=power,
                                        rng=rng)
    return AnytimeCalibration(p=p0, rho=r0, streams=streams, items=items, alpha=alpha,
                              seed=seed, null=null, p_a=pa, p_b=pb, power_target=power,
                              alternative=alternative, live=live,
                              planned_models=planned_models, block=b, pair=pair)
