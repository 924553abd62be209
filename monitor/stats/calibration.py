"""Calibration of N*: does the paired test really reach the planned power at N = N*?

Two sources of replications:

* **simulation** — correlated paired Bernoulli data with exact joint cell probabilities
  p11 = p_A p_B + ρ √(p_A q_A p_B q_B), p10 = p_A − p11, p01 = p_B − p11, p00 = 1 − p11 − p10 − p01,
  drawn as one multinomial per replication (vectorised);
* **resampling** — N items drawn with replacement from a real table's pair of columns, so the
  empirical distribution plays the population whose δ, σ_D² gave N*.

The default test is the two-sided paired z-test on D̄ with the plug-in variance of D: N* is
derived for that test, so it is the honest check. McNemar's exact test (binomial on the
discordant pairs) is available for 0/1 data; it is conservative and so slightly less powerful.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import binom, norm

from monitor.stats import power as pw

Test = Literal["z", "mcnemar"]
Progress = Callable[[int], None]

#: Replications per vectorised chunk (the progress callback fires once per chunk).
CHUNK = 250
#: Upper bound on the number of drawn item indices held in memory at once (resampling).
MAX_DRAWS = 4_000_000


def cell_probabilities(p_a: float, p_b: float, rho: float) -> NDArray[np.float64]:
    """Joint cell probabilities (p11, p10, p01, p00) of two 0/1 scores with phi correlation ρ.

    Raises ValueError naming ``rho`` when no joint distribution has these margins and this
    correlation (the Fréchet bounds on p11).

    Examples
    --------
    >>> cell_probabilities(0.65, 0.60, 0.30).round(4).tolist()
    [0.4601, 0.1899, 0.1399, 0.2101]
    """
    pa = float(pw.check_probability("p_a", p_a))
    pb = float(pw.check_probability("p_b", p_b))
    r = pw.check_feasible_rho(pa, pb, rho)
    s = math.sqrt(pa * (1 - pa) * pb * (1 - pb))
    p11 = pa * pb + r * s
    cells = np.array([p11, pa - p11, pb - p11, 1.0 - pa - pb + p11])
    cells = np.clip(cells, 0.0, 1.0)  # rounding at a Fréchet bound
    return cells / cells.sum()


def wilson_interval(successes: int, trials: int, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Examples
    --------
    >>> [round(v, 4) for v in wilson_interval(1600, 2000)]
    [0.7819, 0.8169]
    """
    if trials <= 0:
        raise ValueError(f"`trials` must be positive, got {trials}")
    if not (0 <= successes <= trials):
        raise ValueError(f"`successes` must lie in [0, {trials}], got {successes}")
    if not (0.0 < confidence < 1.0):
        raise ValueError(f"`confidence` must lie in (0, 1), got {confidence}")
    z = float(norm.isf((1.0 - confidence) / 2.0))
    n, x = float(trials), float(successes)
    centre = (x + z * z / 2.0) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(x * (n - x) / n + z * z / 4.0)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class CalibrationResult:
    """Outcome of R replications of the paired test at N items.

    Attributes
    ----------
    n, reps, rejections : int
    alpha : float
        Two-sided level of each test.
    test : {"z", "mcnemar"}
    """

    n: int
    reps: int
    rejections: int
    alpha: float
    test: str

    @property
    def power(self) -> float:
        """Empirical power: the rejection rate."""
        return self.rejections / self.reps

    def ci(self, *, confidence: float = 0.95) -> tuple[float, float]:
        """Wilson interval for the power."""
        return wilson_interval(self.rejections, self.reps, confidence=confidence)


def z_test_rejects(
    s: NDArray[np.float64], s2: NDArray[np.float64], n: int, *, alpha: float
) -> NDArray[np.bool_]:
    """Two-sided paired z-test on D̄ from S = ΣD and S2 = ΣD² (plug-in variance, vectorised).

    A sample whose D is constant has zero variance: it rejects iff its mean is non-zero.
    """
    mean = s / n
    var = np.maximum(s2 / n - mean * mean, 0.0)
    crit = float(norm.isf(alpha / 2.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, mean / np.sqrt(var / n), np.where(mean == 0, 0.0, np.inf))
    return np.asarray(np.abs(z) > crit)


def mcnemar_rejects(n10: ArrayLike, n01: ArrayLike, *, alpha: float) -> NDArray[np.bool_]:
    """McNemar's exact two-sided test (binomial on the discordant pairs), vectorised.

    p = min(1, 2 · P(Bin(n10 + n01, 1/2) ≤ min(n10, n01))); no discordant pair gives p = 1.
    """
    b = np.asarray(n10)
    c = np.asarray(n01)
    m = b + c
    p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(b, c), m, 0.5))
    p = np.where(m == 0, 1.0, p)
    return np.asarray(p <= alpha)


def _check_run(n: int, reps: int, alpha: float, test: str) -> None:
    if int(n) != n or n < 1:
        raise ValueError(f"`n` must be a positive integer, got {n}")
    if int(reps) != reps or reps < 1:
        raise ValueError(f"`reps` must be a positive integer, got {reps}")
    if not (0.0 < alpha < 1.0):
        raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}")
    if test not in ("z", "mcnemar"):
        raise ValueError(f"`test` must be 'z' or 'mcnemar', got {test!r}")


def _rejects_from_cells(counts: NDArray[np.int64], n: int, *, alpha: float, test: str) -> int:
    n10, n01 = counts[:, 1], counts[:, 2]
    if test == "mcnemar":
        return int(np.count_nonzero(mcnemar_rejects(n10, n01, alpha=alpha)))
    s = (n10 - n01).astype(float)
    s2 = (n10 + n01).astype(float)  # D² = 1 exactly on the discordant items
    return int(np.count_nonzero(z_test_rejects(s, s2, n, alpha=alpha)))


def _run_cells(
    cells: NDArray[np.float64], n: int, reps: int, *, alpha: float, test: str,
    rng: np.random.Generator, progress: Progress | None,
) -> CalibrationResult:
    rejections = 0
    done = 0
    while done < reps:
        k = min(CHUNK, reps - done)
        counts = rng.multinomial(n, cells, size=k)
        rejections += _rejects_from_cells(counts, n, alpha=alpha, test=test)
        done += k
        if progress is not None:
            progress(k)
    return CalibrationResult(n=int(n), reps=int(reps), rejections=rejections, alpha=alpha, test=test)


def simulate_power(
    p_a: float,
    p_b: float,
    rho: float,
    *,
    n: int,
    reps: int = 2000,
    alpha: float = 0.05,
    test: str = "z",
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> CalibrationResult:
    """Empirical power of the paired test on simulated correlated Bernoulli pairs.

    Parameters
    ----------
    p_a, p_b, rho : float
        Accuracies and phi correlation; must be a feasible joint distribution.
    n : int
        Paired items per replication (typically ``ceil(N*)``).
    reps : int
        Replications; each is one multinomial draw of the four cell counts.
    test : {"z", "mcnemar"}
        The two-sided paired z-test on D̄ (what N* is sized for) or McNemar's exact test.
    rng : numpy.random.Generator
    progress : callable, optional
        Called with the number of replications finished after each chunk.

    Examples
    --------
    >>> res = simulate_power(0.65, 0.60, 0.30, n=1028, reps=400, rng=np.random.default_rng(1))
    >>> 0.7 < res.power < 0.9
    True
    """
    _check_run(n, reps, alpha, test)
    cells = cell_probabilities(p_a, p_b, rho)
    return _run_cells(cells, n, reps, alpha=alpha, test=test, rng=rng, progress=progress)


def resample_power(
    x_a: ArrayLike,
    x_b: ArrayLike,
    *,
    n: int,
    reps: int = 2000,
    alpha: float = 0.05,
    test: str = "z",
    rng: np.random.Generator,
    progress: Progress | None = None,
) -> CalibrationResult:
    """Rejection rate of the paired test on N-item resamples (with replacement) of a real pair.

    Items are drawn with replacement so that N may exceed the table and every replication is
    an iid sample from the same population (the empirical distribution), whose δ̂ and σ̂_D²
    are the ones N* was computed from. For 0/1 data this equals a multinomial draw of the four
    cell counts at the empirical cell frequencies, which is what is done.

    Examples
    --------
    >>> rng = np.random.default_rng(2)
    >>> a = (rng.uniform(size=3000) < 0.7).astype(float)
    >>> b = np.where(rng.uniform(size=3000) < 0.3, 1 - a, a)
    >>> resample_power(a, b, n=200, reps=200, rng=rng).reps
    200
    """
    _check_run(n, reps, alpha, test)
    a = np.asarray(x_a, dtype=float)
    b = np.asarray(x_b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError("`x_a` and `x_b` must be non-empty one-dimensional arrays of equal length")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("`x_a` and `x_b` must be paired on shared items (no NaN)")
    binary = bool(np.all((a == 0) | (a == 1)) and np.all((b == 0) | (b == 1)))
    if binary:
        ia, ib = a.astype(bool), b.astype(bool)
        counts = np.array([np.sum(ia & ib), np.sum(ia & ~ib), np.sum(~ia & ib), np.sum(~ia & ~ib)])
        cells = counts / counts.sum()
        return _run_cells(cells, n, reps, alpha=alpha, test=test, rng=rng, progress=progress)
    if test == "mcnemar":
        raise ValueError("`test` 'mcnemar' needs 0/1 scores; use the z-test for continuous scores")
    d = a - b
    step = max(1, min(CHUNK, MAX_DRAWS // n))
    rejections = 0
    done = 0
    while done < reps:
        k = min(step, reps - done)
        draws = d[rng.integers(0, d.size, size=(k, n))]
        s, s2 = draws.sum(axis=1), (draws * draws).sum(axis=1)
        rejections += int(np.count_nonzero(z_test_rejects(s, s2, n, alpha=alpha)))
        done += k
        if progress is not None:
            progress(k)
    return CalibrationResult(n=int(n), reps=int(reps), rejections=rejections, alpha=alpha, test=test)
