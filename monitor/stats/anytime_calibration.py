"""Simulated calibration of the anytime verdict against a naive peeked z-test (pure, seeded).

Null streams (δ = 0) are monitored after every item: the e-process declares a false
resolution the first time E_n ≥ 1/α; the naive test declares one the first time
|D̄|/(σ̂/√n) > z_{1−α/2} (from a burn-in of ``burn_in`` items on, so that σ̂ means something).
Alternative streams give the power of the e-process by N*_AV: of the single-pair rule
E ≥ 1/α (:func:`simulate_power`), and of the live monitor's rule — one side reaching 2/γ_p,
followed item by item by :func:`monitor.stats.sequential.advance`, the live core's own
function (:func:`simulate_live_power`). Everything is vectorised over streams, in chunks to
bound memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest, norm

from monitor.stats import eprocess as ep
from monitor.stats import power as pw
from monitor.stats import sequential as sq
from monitor.stats.anytime_size import n_star_anytime
from monitor.stats.calibration import cell_probabilities

__all__ = [
    "SCENARIOS",
    "CoverageCalibration",
    "LivePowerCalibration",
    "NullCalibration",
    "PowerCalibration",
    "live_crossing_times",
    "simulate_cs_coverage",
    "simulate_live_power",
    "simulate_null",
    "simulate_power",
]

#: Null scenarios: 0/1 scores with ρ = 0 (p = 0.5), 0/1 with ρ = 0.5 and p = 0.8, and
#: continuous Beta(2, 2) scores with identical marginals.
SCENARIOS: dict[str, dict[str, Any]] = {
    "binary_rho0": {"kind": "binary", "p_a": 0.5, "p_b": 0.5, "rho": 0.0},
    "binary_rho05": {"kind": "binary", "p_a": 0.8, "p_b": 0.8, "rho": 0.5},
    "continuous": {"kind": "beta", "a": (2.0, 2.0), "b": (2.0, 2.0)},
}

_CHUNK_CELLS = 1_500_000  # streams × items per chunk: a few arrays of this size stay < 1 GB


def _draw_d(spec: dict[str, Any], shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Paired differences D for one chunk of streams."""
    if spec["kind"] == "binary":
        _, p10, p01, _ = cell_probabilities(spec["p_a"], spec["p_b"], spec["rho"])
        u = rng.random(shape)
        return (u < p10).astype(np.float64) - ((u >= p10) & (u < p10 + p01)).astype(np.float64)
    (a1, b1), (a2, b2) = spec["a"], spec["b"]
    a = rng.beta(float(a1), float(b1), size=shape)
    b = rng.beta(float(a2), float(b2), size=shape)
    return a - b


def _log_e_paths(spec: dict[str, Any], d: np.ndarray, *, delta: float = 0.0) -> np.ndarray:
    """log E_n after every item of every stream (rows)."""
    if spec["kind"] == "binary" and delta == 0.0:
        n10 = np.cumsum(d > 0, axis=1)
        n01 = np.cumsum(d < 0, axis=1)
        return np.asarray(ep.log_e_mcnemar(n10, n01))
    n = np.arange(1, d.shape[1] + 1, dtype=np.float64)
    return np.asarray(
        ep.log_e_bounded(n, np.cumsum(d, axis=1), np.cumsum(d * d, axis=1), delta=delta)
    )


def _ci(k: int, n: int, confidence: float) -> tuple[float, float]:
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


@dataclass(frozen=True)
class NullCalibration:
    """False-resolution counts over null streams, e-process and naive peeked test side by side."""

    scenario: str
    streams: int
    items: int
    alpha: float
    burn_in: int
    e_resolved: int
    naive_resolved: int

    @property
    def e_rate(self) -> float:
        return self.e_resolved / self.streams

    @property
    def naive_rate(self) -> float:
        return self.naive_resolved / self.streams

    def e_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Clopper–Pearson interval of the e-process false-resolution rate."""
        return _ci(self.e_resolved, self.streams, confidence)

    def naive_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Clopper–Pearson interval of the naive peeked test's false-resolution rate."""
        return _ci(self.naive_resolved, self.streams, confidence)

    def p_e_exceeds_alpha(self) -> float:
        """One-sided binomial p-value against H: rate ≤ α (small = the e-process is invalid)."""
        return float(binomtest(self.e_resolved, self.streams, self.alpha, alternative="greater").pvalue)

    def p_naive_exceeds_alpha(self) -> float:
        """One-sided binomial p-value against H: naive rate ≤ α (small = naive inflates α)."""
        return float(
            binomtest(self.naive_resolved, self.streams, self.alpha, alternative="greater").pvalue
        )


def simulate_null(
    scenario: str | dict[str, Any],
    *,
    streams: int = 2000,
    items: int = 5000,
    alpha: float = 0.05,
    burn_in: int = 10,
    rng: np.random.Generator,
) -> NullCalibration:
    """Monitor ``streams`` null streams of ``items`` items after every item.

    ``scenario`` names one of ``SCENARIOS`` or is such a spec dict (0/1 cells with equal
    accuracies, or two equal Beta laws).

    Examples
    --------
    >>> res = simulate_null("binary_rho0", streams=200, items=500, rng=np.random.default_rng(0))
    >>> res.e_rate <= 0.05 < res.naive_rate
    True
    """
    if isinstance(scenario, dict):
        spec, scenario = scenario, "custom"
    elif scenario in SCENARIOS:
        spec = SCENARIOS[scenario]
    else:
        raise ValueError(f"`scenario` must be one of {sorted(SCENARIOS)}, got {scenario!r}")
    if streams < 1 or items < 2:
        raise ValueError("`streams` must be ≥ 1 and `items` ≥ 2")
    if not (2 <= burn_in <= items):
        raise ValueError(f"`burn_in` must lie in [2, items], got {burn_in}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    thr = math.log(1.0 / alpha)
    z = float(norm.isf(alpha / 2.0))
    chunk = max(1, _CHUNK_CELLS // items)
    n = np.arange(1, items + 1, dtype=np.float64)
    e_hits = naive_hits = 0
    for start in range(0, streams, chunk):
        c = min(chunk, streams - start)
        d = _draw_d(spec, (c, items), rng)
        e_hits += int(np.count_nonzero((_log_e_paths(spec, d) >= thr).any(axis=1)))
        s = np.cumsum(d, axis=1)
        v = np.cumsum(d * d, axis=1)
        mean = s / n
        with np.errstate(divide="ignore", invalid="ignore"):
            var = (v - n * mean * mean) / (n - 1.0)  # sample variance (ddof = 1)
            reject = (np.abs(mean) * np.sqrt(n) > z * np.sqrt(var)) & (var > 1e-12)
        reject[:, : burn_in - 1] = False
        naive_hits += int(np.count_nonzero(reject.any(axis=1)))
    return NullCalibration(scenario, streams, items, alpha, burn_in, e_hits, naive_hits)


@dataclass(frozen=True)
class PowerCalibration:
    """Fraction of alternative streams resolved (E ≥ 1/α) by that rule's N*_AV items."""

    p_a: float
    p_b: float
    rho: float
    alpha: float
    power: float
    n_star_anytime: float
    horizon: int
    streams: int
    resolved: int

    @property
    def rate(self) -> float:
        return self.resolved / self.streams

    def ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Clopper–Pearson interval of the resolved fraction."""
        return _ci(self.resolved, self.streams, confidence)


def simulate_power(
    p_a: float,
    p_b: float,
    rho: float,
    *,
    streams: int = 1000,
    alpha: float = 0.05,
    power: float = 0.8,
    rng: np.random.Generator,
) -> PowerCalibration:
    """Power of the McNemar e-process by N*_AV for 0/1 scores (p_A, p_B, ρ): the single-pair
    rule E ≥ 1/α, and its N*_AV.

    Examples
    --------
    >>> res = simulate_power(0.65, 0.60, 0.30, streams=100, rng=np.random.default_rng(0))
    >>> res.horizon, 0.6 < res.rate
    (1694, True)
    """
    s2 = float(pw.sigma_d2(p_a, p_b, rho))
    n_av = float(n_star_anytime(p_a - p_b, s2, alpha=alpha, power=power, rule="mean"))
    if not math.isfinite(n_av):
        raise ValueError("`p_a` and `p_b` must differ for a power calibration")
    horizon = math.ceil(n_av)
    spec = {"kind": "binary", "p_a": p_a, "p_b": p_b, "rho": rho}
    thr = math.log(1.0 / alpha)
    chunk = max(1, _CHUNK_CELLS // horizon)
    hits = 0
    for start in range(0, streams, chunk):
        c = min(chunk, streams - start)
        d = _draw_d(spec, (c, horizon), rng)
        hits += int(np.count_nonzero((_log_e_paths(spec, d) >= thr).any(axis=1)))
    return PowerCalibration(p_a, p_b, rho, alpha, power, n_av, horizon, streams, hits)


def live_crossing_times(
    p_a: float,
    p_b: float,
    rho: float,
    *,
    level: float,
    streams: int,
    items: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    """Decision times of the live rule on simulated 0/1 pairs (p_A, p_B, ρ) at share ``level``.

    Each stream is one pair followed item by item by :func:`monitor.stats.sequential.advance`
    (the live core's function: exact McNemar, decided when E₊ or E₋ reaches 2/``level``), for
    at most ``items`` items. Returns the paired items at the decision of every stream (``inf``
    where undecided by ``items`` or decided in the wrong direction) and the number of
    wrong-direction decisions.
    """
    if streams < 1 or items < 1:
        raise ValueError("`streams` and `items` must be ≥ 1")
    if not (0.0 < level < 1.0):
        raise ValueError(f"`level` must lie in (0, 1), got {level}")
    _, p10, p01, _ = cell_probabilities(p_a, p_b, rho)
    paths = sq.PairPaths.empty(streams)
    base_n, base_s, base_v = np.zeros(streams), np.zeros(streams), np.zeros(streams)
    log_thr = np.full(streams, float(sq.log_threshold(level)))
    done = 0
    while done < items:
        live = np.flatnonzero(paths.decided == 0)
        if live.size == 0:
            break
        width = min(items - done, max(64, _CHUNK_CELLS // live.size))
        u = rng.random((live.size, width))
        d = (u < p10).astype(np.float64) - ((u >= p10) & (u < p10 + p01)).astype(np.float64)
        sq.advance(paths, np.repeat(live, width), d.ravel(), np.zeros(d.size, dtype=bool),
                   base_n=base_n, base_s=base_s, base_v=base_v, log_threshold=log_thr)
        base_n[live] += width
        base_s[live] += d.sum(axis=1)
        base_v[live] += np.abs(d).sum(axis=1)
        done += width
    right = 1 if p_a >= p_b else -1
    times = np.where(paths.decided == right, paths.decided_n, np.inf)
    return times, int(np.count_nonzero(paths.decided == -right))


@dataclass(frozen=True)
class LivePowerCalibration:
    """Decision times of the live rule (one side at 2/γ_p) against its N*_AV.

    ``times`` holds every stream's paired items at its decision (``inf``: undecided within the
    horizon, or wrong direction).
    """

    p_a: float
    p_b: float
    rho: float
    level: float
    power: float
    n_star_anytime: float
    horizon: int
    times: np.ndarray
    wrong: int

    @property
    def streams(self) -> int:
        return int(self.times.size)

    @property
    def resolved(self) -> int:
        """Streams decided (right direction) by N*_AV items."""
        return int(np.count_nonzero(self.times <= math.ceil(self.n_star_anytime)))

    @property
    def rate(self) -> float:
        return self.resolved / self.streams

    def ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Clopper–Pearson interval of the fraction resolved by N*_AV."""
        return _ci(self.resolved, self.streams, confidence)

    def quantile(self, p: float) -> float:
        """The p-quantile of the decision time (``inf`` beyond the streams decided)."""
        return float(np.quantile(self.times, p, method="inverted_cdf"))

    def quantile_ci(self, p: float, confidence: float = 0.95) -> tuple[float, float]:
        """Distribution-free interval of the p-quantile: the order statistics whose ranks
        bracket the binomial(streams, p) count at ``confidence``."""
        from scipy.stats import binom

        srt = np.sort(self.times)
        lo = int(binom.ppf((1.0 - confidence) / 2.0, self.streams, p))
        hi = int(binom.isf((1.0 - confidence) / 2.0, self.streams, p))
        return float(srt[max(lo - 1, 0)]), float(srt[min(hi, self.streams - 1)])


def simulate_live_power(
    p_a: float,
    p_b: float,
    rho: float,
    *,
    level: float,
    streams: int = 2000,
    power: float = 0.8,
    rng: np.random.Generator,
) -> LivePowerCalibration:
    """The live rule's decision times for 0/1 pairs (p_A, p_B, ρ) at share ``level``, with
    its N*_AV (one side at 2/γ_p); streams run to 3 N*_AV items.

    Examples
    --------
    >>> res = simulate_live_power(0.65, 0.55, 0.3, level=0.05 / 992, streams=200,
    ...                           rng=np.random.default_rng(0))
    >>> res.horizon, 0.7 < res.rate < 0.9
    (3309, True)
    """
    s2 = float(pw.sigma_d2(p_a, p_b, rho))
    n_av = float(n_star_anytime(p_a - p_b, s2, alpha=level, power=power))
    if not math.isfinite(n_av):
        raise ValueError("`p_a` and `p_b` must differ for a power calibration")
    horizon = 3 * math.ceil(n_av)
    times, wrong = live_crossing_times(p_a, p_b, rho, level=level, streams=streams,
                                       items=horizon, rng=rng)
    return LivePowerCalibration(p_a, p_b, rho, level, power, n_av, horizon, times, wrong)


@dataclass(frozen=True)
class CoverageCalibration:
    """Time-uniform miscoverage: streams whose confidence sequence ever excludes the true δ."""

    scenario: str
    delta: float
    streams: int
    items: int
    alpha: float
    missed: int

    @property
    def miss_rate(self) -> float:
        return self.missed / self.streams

    def p_miss_exceeds_alpha(self) -> float:
        """One-sided binomial p-value against H: miscoverage ≤ α."""
        return float(binomtest(self.missed, self.streams, self.alpha, alternative="greater").pvalue)


def simulate_cs_coverage(
    spec: dict[str, Any],
    *,
    streams: int = 1000,
    items: int = 2000,
    alpha: float = 0.05,
    rng: np.random.Generator,
) -> CoverageCalibration:
    """Run streams under ``spec`` (a ``SCENARIOS``-style dict, any δ) and count CS misses.

    The CS at n is {δ : E_n(δ) < 1/α}, so it misses the truth at some n exactly when
    sup_n E_n(δ_true) ≥ 1/α; that is what is counted, after every item.
    """
    if spec["kind"] == "binary":
        delta = float(spec["p_a"] - spec["p_b"])
        name = f"binary p_a={spec['p_a']} p_b={spec['p_b']} rho={spec['rho']}"
    else:
        (a1, b1), (a2, b2) = spec["a"], spec["b"]
        delta = a1 / (a1 + b1) - a2 / (a2 + b2)
        name = f"beta{spec['a']} - beta{spec['b']}"
    thr = math.log(1.0 / alpha)
    chunk = max(1, _CHUNK_CELLS // items)
    missed = 0
    bounded = {"kind": "bounded"}
    for start in range(0, streams, chunk):
        c = min(chunk, streams - start)
        d = _draw_d(spec, (c, items), rng)
        missed += int(np.count_nonzero((_log_e_paths(bounded, d, delta=delta) >= thr).any(axis=1)))
    return CoverageCalibration(name, delta, streams, items, alpha, missed)
