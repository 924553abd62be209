"""Simulated calibration of the anytime verdict against a naive peeked z-test (pure, seeded).

Null streams (δ = 0) are monitored after every item: the e-process declares a false
resolution the first time E_n ≥ 1/α; the naive test declares one the first time
|D̄|/(σ̂/√n) > z_{1−α/2} (from a burn-in of ``burn_in`` items on, so that σ̂ means something).
Alternative streams give the power of the e-process by N*_AV. Everything is vectorised over
streams with cumulative sums, in chunks to bound memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest, norm

from monitor.stats import eprocess as ep
from monitor.stats import power as pw
from monitor.stats.anytime_size import n_star_anytime
from monitor.stats.calibration import cell_probabilities

__all__ = [
    "SCENARIOS",
    "CoverageCalibration",
    "NullCalibration",
    "PowerCalibration",
    "simulate_cs_coverage",
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
    """Fraction of alternative streams resolved (E ≥ 1/α) by N*_AV items."""

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
    """Power of the McNemar e-process by N*_AV for 0/1 scores (p_A, p_B, ρ).

    Examples
    --------
    >>> res = simulate_power(0.65, 0.60, 0.30, streams=100, rng=np.random.default_rng(0))
    >>> res.horizon, 0.6 < res.rate
    (1980, True)
    """
    s2 = float(pw.sigma_d2(p_a, p_b, rho))
    n_av = float(n_star_anytime(p_a - p_b, s2, alpha=alpha, power=power))
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
