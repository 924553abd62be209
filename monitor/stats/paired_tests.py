"""Classical paired tests on per-item scores: McNemar exact, sign test, Wilcoxon signed-rank,
paired t, and the matched-pairs rank-biserial effect size.

All tests are two-sided and take the two score columns of the shared items (no NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import binom, norm, rankdata
from scipy.stats import t as student_t

ZeroMethod = Literal["wilcox", "pratt", "zsplit"]

SMALL_N = 30
MANY_TIES = 0.5
FEW_DISCORDANT = 10


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test: binomial test of n10 against n10 + n01 at 1/2.

    ``statistic`` is min(n10, n01), as statsmodels' ``mcnemar(exact=True)`` reports it.
    """

    n10: int
    n01: int
    statistic: float
    pvalue: float


@dataclass(frozen=True)
class SignTestResult:
    """Sign test: binomial test of the positive differences among the non-zero ones."""

    n_pos: int
    n_neg: int
    n_zero: int
    pvalue: float


@dataclass(frozen=True)
class WilcoxonResult:
    """Wilcoxon signed-rank test.

    ``statistic`` is min(R+, R−) (scipy's two-sided convention); ``zero_method`` says how
    zero differences were handled ("wilcox" drops them; "pratt" ranks them and then drops
    their ranks; "zsplit" splits their ranks between R+ and R−). ``method`` is "exact"
    (no ties, no zeros, at most 50 non-zero differences) or "asymptotic" (normal
    approximation with the tie correction of the variance, no continuity correction).
    """

    statistic: float
    r_plus: float
    r_minus: float
    z: float
    pvalue: float
    n_used: int
    n_zero: int
    zero_method: str
    method: str


@dataclass(frozen=True)
class TTestResult:
    """Paired t-test of the mean difference, with its t confidence interval."""

    statistic: float
    df: int
    pvalue: float
    ci_low: float
    ci_high: float
    confidence: float


def _check_pair(x_a: ArrayLike, x_b: ArrayLike) -> NDArray[np.float64]:
    a = np.asarray(x_a, dtype=float)
    b = np.asarray(x_b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"`x_a` and `x_b` must be 1-D of equal length, got {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("`x_a` and `x_b` must share at least one item")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("`x_a` and `x_b` must not contain NaN or infinity")
    return a - b


def _binom_two_sided(k: int, n: int) -> float:
    # For p = 1/2 the null is symmetric, so "as or more extreme" doubles the smaller tail.
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(k, n - k), n, 0.5)))


def mcnemar_exact(n10: int, n01: int) -> McNemarResult:
    """Exact McNemar test on the discordant counts.

    Examples
    --------
    >>> r = mcnemar_exact(12, 3)
    >>> round(r.pvalue, 4)
    0.0352
    """
    if n10 < 0 or n01 < 0:
        raise ValueError(f"`n10` and `n01` must be non-negative, got {n10} and {n01}")
    return McNemarResult(int(n10), int(n01), float(min(n10, n01)),
                         _binom_two_sided(int(n10), int(n10 + n01)))


def sign_test(d: ArrayLike) -> SignTestResult:
    """Two-sided sign test on differences ``d`` (zeros are dropped).

    Examples
    --------
    >>> sign_test([1, 1, 1, 1, 1, 0, -1]).pvalue
    0.21875
    """
    arr = np.asarray(d, dtype=float)
    pos, neg = int(np.sum(arr > 0)), int(np.sum(arr < 0))
    return SignTestResult(pos, neg, int(arr.size - pos - neg), _binom_two_sided(pos, pos + neg))


def wilcoxon_signed_rank(d: ArrayLike, *, zero_method: ZeroMethod = "wilcox") -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test of differences ``d``.

    Examples
    --------
    >>> r = wilcoxon_signed_rank([0.3, 0.1, -0.2, 0.5, 0.4, 0.0, 0.25, -0.05])
    >>> r.statistic, r.method, r.n_zero
    (4.0, 'asymptotic', 1)
    """
    if zero_method not in ("wilcox", "pratt", "zsplit"):
        raise ValueError(f"`zero_method` must be 'wilcox', 'pratt' or 'zsplit', got {zero_method!r}")
    arr = np.asarray(d, dtype=float)
    zeros = arr == 0
    n_zero = int(zeros.sum())
    used = arr[~zeros] if zero_method == "wilcox" else arr
    n = used.size
    n_nonzero = int(np.sum(used != 0))
    if n_nonzero == 0:
        return WilcoxonResult(0.0, 0.0, 0.0, 0.0, 1.0, 0, n_zero, zero_method, "asymptotic")
    absd = np.abs(used)
    ranks = rankdata(absd)
    r_plus = float(ranks[used > 0].sum())
    r_minus = float(ranks[used < 0].sum())
    if zero_method == "zsplit":
        half = float(ranks[used == 0].sum()) / 2.0
        r_plus, r_minus = r_plus + half, r_minus + half
    mean = n * (n + 1) / 4.0
    var24 = n * (n + 1) * (2 * n + 1)
    _, ties = np.unique(absd, return_counts=True)
    if zero_method == "pratt" and n_zero:
        mean -= n_zero * (n_zero + 1) / 4.0
        var24 -= n_zero * (n_zero + 1) * (2 * n_zero + 1)
        ties = ties[np.unique(absd) != 0]
    var24 -= float(np.sum(ties.astype(float) ** 3 - ties)) / 2.0
    se = math.sqrt(var24 / 24.0)
    z = (r_plus - mean) / se if se > 0 else 0.0
    stat = min(r_plus, r_minus)
    if n_zero == 0 and np.all(ties == 1) and n <= 50:
        from scipy.stats import wilcoxon

        p = float(wilcoxon(used, method="exact").pvalue)
        return WilcoxonResult(stat, r_plus, r_minus, z, p, n_nonzero, n_zero, zero_method,
                              "exact")
    p = float(2.0 * norm.sf(abs(z)))
    return WilcoxonResult(stat, r_plus, r_minus, z, min(p, 1.0), n_nonzero, n_zero,
                          zero_method, "asymptotic")


def paired_t(d: ArrayLike, *, confidence: float = 0.95) -> TTestResult:
    """Paired t-test of mean(d) = 0 and the t interval for the mean difference.

    Examples
    --------
    >>> r = paired_t([0.5, 0.2, 0.4, 0.1, 0.3])
    >>> round(r.statistic, 4), r.df
    (4.2426, 4)
    """
    arr = np.asarray(d, dtype=float)
    n = arr.size
    if n < 2:
        raise ValueError(f"`d` needs at least 2 differences for a t-test, got {n}")
    mean = float(arr.mean())
    se = float(arr.std(ddof=1)) / math.sqrt(n)
    df = n - 1
    if se == 0:
        t = math.nan if mean == 0 else math.copysign(math.inf, mean)
        p = math.nan if mean == 0 else 0.0
    else:
        t = mean / se
        p = float(2.0 * student_t.sf(abs(t), df))
    half = float(student_t.ppf(0.5 + confidence / 2.0, df)) * se
    return TTestResult(t, df, p, mean - half, mean + half, confidence)


def rank_biserial(d: ArrayLike) -> float:
    """Matched-pairs rank-biserial correlation (R+ − R−) / (R+ + R−), zeros dropped (Kerby 2014).

    In [−1, 1]; for 0/1 scores it is (n10 − n01) / (n10 + n01). NaN when every d is 0.

    Examples
    --------
    >>> rank_biserial([1, 1, 1, -1, 0])
    0.5
    """
    arr = np.asarray(d, dtype=float)
    arr = arr[arr != 0]
    if arr.size == 0:
        return math.nan
    ranks = rankdata(np.abs(arr))
    rp, rm = float(ranks[arr > 0].sum()), float(ranks[arr < 0].sum())
    return (rp - rm) / (rp + rm)


@dataclass(frozen=True)
class PairedTests:
    """Every classical paired figure for one pair of models on their shared items."""

    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    median_diff: float
    wins: int
    losses: int
    ties: int
    binary: bool
    mcnemar: McNemarResult | None
    sign: SignTestResult
    wilcoxon: WilcoxonResult
    ttest: TTestResult | None
    rank_biserial: float
    warnings: tuple[str, ...]


def paired_tests(
    x_a: ArrayLike, x_b: ArrayLike, *, zero_method: ZeroMethod = "wilcox",
    confidence: float = 0.95,
) -> PairedTests:
    """Run all classical paired tests on scores ``x_a`` and ``x_b`` of the same items.

    Examples
    --------
    >>> r = paired_tests([1, 1, 0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 1, 0, 0, 1])
    >>> r.wins, r.losses, r.ties, r.mcnemar.pvalue
    (3, 0, 5, 0.25)
    """
    d = _check_pair(x_a, x_b)
    a = np.asarray(x_a, dtype=float)
    b = np.asarray(x_b, dtype=float)
    n = d.size
    binary = bool(np.all(np.isin(a, (0.0, 1.0))) and np.all(np.isin(b, (0.0, 1.0))))
    wins, losses = int(np.sum(d > 0)), int(np.sum(d < 0))
    ties = n - wins - losses
    mc = mcnemar_exact(wins, losses) if binary else None
    warn: list[str] = []
    if n < SMALL_N:
        warn.append(f"small sample: {n} paired items; the t-test and the asymptotic Wilcoxon "
                    "p-value rely on approximations that are poor this small — prefer the "
                    "exact McNemar/sign test")
    if ties / n >= MANY_TIES:
        warn.append(f"many ties: {ties} of {n} items ({ties / n:.0%}) have equal scores; the "
                    f"sign, McNemar and Wilcoxon ({zero_method!r} zero handling) tests rest on "
                    f"the {wins + losses} discordant items only")
    if wins + losses < FEW_DISCORDANT:
        warn.append(f"only {wins + losses} discordant items: no test can detect much here")
    if binary:
        warn.append("0/1 scores: every non-zero |D| is 1, so Wilcoxon reduces to a "
                    "normal-approximation sign test; McNemar exact is the reference test")
    return PairedTests(
        n=n, mean_a=float(a.mean()), mean_b=float(b.mean()), mean_diff=float(d.mean()),
        median_diff=float(np.median(d)), wins=wins, losses=losses, ties=ties, binary=binary,
        mcnemar=mc, sign=sign_test(d), wilcoxon=wilcoxon_signed_rank(d, zero_method=zero_method),
        ttest=paired_t(d, confidence=confidence) if n >= 2 else None,
        rank_biserial=rank_biserial(d), warnings=tuple(warn),
    )
