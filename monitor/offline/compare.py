"""Comparing two models on their shared items: classical paired tests, bootstrap CIs and the
resolution figures (N*, q, MDE), as one frozen result."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from monitor.errors import InputError
from monitor.io.tables import ScoreTable, read_table
from monitor.stats import paired_tests as pt
from monitor.stats.bootstrap import BootstrapResult, bootstrap_mean_ci
from monitor.stats.paired import PairedSummary, paired_summary

MEANING = (
    "These figures say whether {a} and {b} differ on average over these {n} shared items "
    "(p-values, intervals) and whether {n} items suffice to resolve a gap this size (N*, q); "
    "they say nothing about test-set contamination, robustness to rewording or other "
    "benchmarks, and several comparisons read together need a multiplicity correction."
)

ZEROS = {
    "wilcox": "dropped before ranking",
    "pratt": "ranked, then their ranks dropped (Pratt)",
    "zsplit": "ranks split between R+ and R− (zsplit)",
}


@dataclass(frozen=True)
class CompareResult:
    """Every figure of model ``a`` against model ``b`` on their shared items.

    Attributes
    ----------
    a, b : str
        Model names (differences are A − B).
    tests : PairedTests
        McNemar (0/1 data), sign, Wilcoxon and paired t tests, rank-biserial r, warnings.
    summary : PairedSummary
        δ̂, σ̂_D², ρ̂ behind N*, q and MDE.
    percentile, bca : BootstrapResult
        Bootstrap CIs of the mean difference, both from ``seed``.
    n_resamples, seed : int
    alpha, power : float
        Two-sided level (the CIs have confidence 1 − α) and the target power of N*.
    zero_method : {"wilcox", "pratt", "zsplit"}
        Wilcoxon's handling of zero differences.
    source : str or None
        The table the pair was read from.
    clean_items : CompareResult or None
        The same comparison on the shared items outside a suspect set (e.g. leaked items).
    suspects_given, suspects_compared : int or None
        With a suspect set: its size, and how many of the shared items are in it.
    """

    a: str
    b: str
    tests: pt.PairedTests
    summary: PairedSummary
    percentile: BootstrapResult
    bca: BootstrapResult
    n_resamples: int
    seed: int
    alpha: float
    power: float
    zero_method: pt.ZeroMethod
    source: str | None = None
    clean_items: CompareResult | None = None
    suspects_given: int | None = None
    suspects_compared: int | None = None

    @property
    def n(self) -> int:
        """Shared items."""
        return self.tests.n

    @property
    def primary_test(self) -> str:
        """McNemar exact for 0/1 scores, else the paired t-test."""
        return "mcnemar_exact" if self.tests.binary else "paired_t"

    @property
    def primary_pvalue(self) -> float:
        """p-value of the primary test (NaN when it could not run)."""
        r = self.tests
        res = r.mcnemar if r.binary else r.ttest
        return float("nan") if res is None else res.pvalue

    @property
    def significant(self) -> bool:
        """The primary test rejects at α."""
        return bool(self.primary_pvalue < self.alpha)

    @property
    def bootstrap_excludes_zero(self) -> bool:
        """The percentile CI lies on one side of 0."""
        return bool(self.percentile.low > 0 or self.percentile.high < 0)

    def n_star(self) -> float:
        """N* rounded up (``inf`` when δ̂ = 0)."""
        n_star = self.summary.n_star(alpha=self.alpha, power=self.power)
        return float(np.ceil(n_star)) if np.isfinite(n_star) else n_star

    def q(self) -> float:
        """Resolution ratio q = N / N*."""
        return self.summary.q(alpha=self.alpha, power=self.power)

    def mde(self) -> float:
        """Minimum detectable effect at these N items."""
        return self.summary.mde(alpha=self.alpha, power=self.power)

    @property
    def resolved(self) -> bool:
        """Resolved at fixed N: q ≥ 1."""
        return bool(self.q() >= 1.0)

    @property
    def meaning(self) -> str:
        """One paragraph on what these figures do and do not say."""
        return MEANING.format(a=self.a, b=self.b, n=self.n)

    def to_dict(self) -> dict[str, Any]:
        """The figures under the keys ``llm-monitor compare --json`` prints."""
        r = self.tests
        tests: dict[str, Any] = {
            "mcnemar_exact": None if r.mcnemar is None else {
                "n10": r.mcnemar.n10, "n01": r.mcnemar.n01, "statistic": r.mcnemar.statistic,
                "pvalue": r.mcnemar.pvalue},
            "sign": {"n_pos": r.sign.n_pos, "n_neg": r.sign.n_neg, "n_zero": r.sign.n_zero,
                     "pvalue": r.sign.pvalue},
            "wilcoxon": {"statistic": r.wilcoxon.statistic, "z": r.wilcoxon.z,
                         "pvalue": r.wilcoxon.pvalue, "zero_method": r.wilcoxon.zero_method,
                         "zeros": ZEROS[self.zero_method], "n_used": r.wilcoxon.n_used,
                         "method": r.wilcoxon.method},
            "paired_t": None if r.ttest is None else {
                "statistic": r.ttest.statistic, "df": r.ttest.df, "pvalue": r.ttest.pvalue,
                "ci_low": r.ttest.ci_low, "ci_high": r.ttest.ci_high},
        }
        boot = {m: {"low": res.low, "high": res.high, "standard_error": res.standard_error,
                    "strategy": res.strategy}
                for m, res in (("percentile", self.percentile), ("bca", self.bca))}
        s = self.summary
        out: dict[str, Any] = {} if self.source is None else {"file": self.source}
        out.update({
            "a": self.a, "b": self.b, "n": r.n, "binary": r.binary, "mean_a": r.mean_a,
            "mean_b": r.mean_b, "mean_diff": r.mean_diff, "median_diff": r.median_diff,
            "wins": r.wins, "losses": r.losses, "ties": r.ties, "tests": tests,
            "bootstrap": {"n_resamples": self.n_resamples, "seed": self.seed,
                          "confidence": 1 - self.alpha, **boot},
            "rank_biserial": r.rank_biserial,
            "resolution": {"alpha": self.alpha, "power": self.power, "sigma_d2": s.sigma_d2,
                           "rho": s.rho, "n_star": self.n_star(), "q": self.q(),
                           "mde": self.mde(), "resolved": self.resolved},
            "primary_test": self.primary_test, "primary_pvalue": self.primary_pvalue,
            "significant": self.significant,
            "bootstrap_excludes_zero": self.bootstrap_excludes_zero,
            "warnings": list(r.warnings),
            "meaning": self.meaning,
        })
        if self.suspects_given is not None:
            out["suspect_items"] = {"given": self.suspects_given,
                                    "compared": self.suspects_compared}
        if self.clean_items is not None:
            out["clean_items"] = self.clean_items.to_dict()
        return out


def compare_pair(
    x_a: ArrayLike, x_b: ArrayLike, *, a: str, b: str, n_resamples: int = 10_000,
    seed: int = 0, alpha: float = 0.05, power: float = 0.8,
    zero_method: pt.ZeroMethod = "wilcox",
) -> CompareResult:
    """Compare the scores ``x_a`` and ``x_b`` of the same items.

    Both bootstrap CIs draw their resamples from ``np.random.default_rng(seed)``, so the
    percentile and BCa intervals rest on the same resamples.

    Examples
    --------
    >>> r = compare_pair([1, 1, 0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 1, 0, 0, 1], a="A", b="B",
    ...                  n_resamples=200)
    >>> r.primary_test, r.primary_pvalue, r.significant
    ('mcnemar_exact', 0.25, False)
    """
    tests = pt.paired_tests(x_a, x_b, zero_method=zero_method, confidence=1 - alpha)
    d = np.asarray(x_a, dtype=float) - np.asarray(x_b, dtype=float)
    percentile, bca = (bootstrap_mean_ci(d, n_resamples=n_resamples, confidence=1 - alpha,
                                         method=method, rng=np.random.default_rng(seed))
                       for method in ("percentile", "bca"))
    return CompareResult(a=a, b=b, tests=tests, summary=paired_summary(x_a, x_b),
                         percentile=percentile, bca=bca, n_resamples=n_resamples, seed=seed,
                         alpha=alpha, power=power, zero_method=zero_method)


def _table_header(path: Path) -> list[str]:
    """The column names of a CSV table (its first line) or a JSONL table (every key of its
    records, in order of appearance, as read_table takes them: a record may leave out a model)."""
    import csv
    import json

    from monitor.io.tables import _is_jsonl, _open_text

    try:
        with _open_text(path) as fh:
            if _is_jsonl(path):
                keys: dict[str, None] = {}
                for line in fh:
                    if line.strip():
                        rec = json.loads(line)
                        if not isinstance(rec, dict):
                            return []
                        keys.update(dict.fromkeys(map(str, rec)))
                return list(keys)
            return next(csv.reader(fh), [])
    except (OSError, ValueError, csv.Error):
        return []  # read_table names the trouble, with file and line


def columns_not_compared(path: Path, *, a: str, b: str, id_col: str | None) -> tuple[str, ...]:
    """Wide tables: every column but the item id and the two models, so that a column the
    comparison does not need (gold answers, sources, other models) is never parsed.

    A model that is not a column of the wide table is an InputError listing its columns (only
    the two compared columns are read, so the table's models are known from its header)."""
    header = _table_header(path)
    if not header or ("model" in header and ("score" in header or "correct" in header)):
        return ()  # long tables read only their model and score columns
    ident = id_col or next((c for c in ("item_id", "question_id") if c in header), header[0])
    others = [c for c in header if c != ident]
    for m in (a, b):
        if m not in others:
            shown = ", ".join(others[:40]) + (" …" if len(others) > 40 else "")
            raise InputError(f"model {m!r} is not a column of this wide table; its columns "
                             f"(besides the id {ident!r}) are {shown}", source=str(path),
                             line=1, field=m)
    return tuple(c for c in header if c not in (ident, a, b))


def read_compared(
    path: str | Path, *, a: str, b: str, exclude: tuple[str, ...] = (),
    id_col: str | None = None, benchmark: str | None = None, metric: str | None = None,
    filter: str | None = None, scorer: str | None = None,
) -> ScoreTable:
    """The table of a comparison: harness output (lm-eval samples, inspect_ai logs) or a
    table read with only the columns of ``a`` and ``b`` as models."""
    from monitor.io.sources import is_harness_source, read_scores

    path = Path(path)
    if is_harness_source(path):
        return read_scores(path, benchmark=benchmark, metric=metric, filter=filter,
                           scorer=scorer)
    unused = columns_not_compared(path, a=a, b=b, id_col=id_col)
    return read_table(path, id_col=id_col, exclude=tuple(dict.fromkeys((*exclude, *unused))),
                      benchmark=benchmark)


def compare_table(
    path: str | Path, *, a: str, b: str, exclude: tuple[str, ...] = (),
    id_col: str | None = None, benchmark: str | None = None, n_resamples: int = 10_000,
    seed: int = 0, alpha: float = 0.05, power: float = 0.8,
    zero_method: pt.ZeroMethod = "wilcox", suspect_items: Collection[str] = (),
    metric: str | None = None, filter: str | None = None, scorer: str | None = None,
) -> CompareResult:
    """Read a score table and compare models ``a`` and ``b`` on the items both have.

    ``path`` may also be lm-eval samples or inspect_ai logs (a file or a directory); of a
    table only the id column and the columns of ``a`` and ``b`` are read.

    With ``suspect_items`` (e.g. the ids a leakage scan flagged), the result also carries
    ``clean_items``: the same comparison on the shared items outside that set, when at least
    two remain and at least one was removed.
    """
    if a == b:
        raise ValueError("--a and --b must name two different models")
    if n_resamples < 100:
        raise ValueError(f"--B must be at least 100, got {n_resamples}")
    table = read_compared(path, a=a, b=b, exclude=exclude, id_col=id_col, benchmark=benchmark,
                          metric=metric, filter=filter, scorer=scorer)
    for m in (a, b):
        if m not in table.models:
            shown = ", ".join(table.models[:12]) + (" …" if len(table.models) > 12 else "")
            raise ValueError(f"{path}: model {m!r} not found; models are {shown}")
    xa, xb, _ = table.pair(a, b)
    opts: dict[str, Any] = {"a": a, "b": b, "n_resamples": n_resamples, "seed": seed,
                            "alpha": alpha, "power": power, "zero_method": zero_method}
    clean = None
    compared = None
    if suspect_items:
        suspect = np.isin(table.item_ids.astype(str), sorted(suspect_items))
        shared = ~np.isnan(table.column(a)) & ~np.isnan(table.column(b))
        compared = int((suspect & shared).sum())
        ca, cb = table.column(a)[~suspect], table.column(b)[~suspect]
        both = ~np.isnan(ca) & ~np.isnan(cb)
        if 2 <= both.sum() < xa.size:
            clean = compare_pair(ca[both], cb[both], **opts)
    res = compare_pair(xa, xb, **opts)
    return replace(res, source=str(path), clean_items=clean,
                   suspects_given=len(suspect_items) if suspect_items else None,
                   suspects_compared=compared)
