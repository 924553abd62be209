"""Repeated samples per item: item means, and the between-item / within-item split of σ_D².

A model answering item i K times (avg@k, pass@k at temperature > 0) gives scores
x_i1 … x_iK in [0, 1] around its item mean μ_i; the item's score is their mean x̄_i. For a pair
of models answering independently given the item, D̄_i = x̄_Ai − x̄_Bi has, by the law of total
variance (Miller 2024, "Adding error bars to evals", arXiv:2411.00640, §resampling),

    Var(D̄_i) = σ_b² + σ_w²/K,   σ_b² = Var(μ_Ai − μ_Bi),   σ_w² = E[σ_Ai² + σ_Bi²],

with σ_Ai² the variance of model A's answers to item i. Resampling shrinks only the
within-item term: N*(K) = z² (σ_b² + σ_w²/K) / δ². The within term is estimated, per cell, by
the unbiased s²/K of the cell's own samples (ddof 1); the between term is σ̂_D² minus it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def cell_means(samples: ArrayLike) -> FloatArray:
    """Mean over the last axis of the present (non-NaN) samples; NaN where none is present.

    Live and offline both call this, on (cells × K) rows, so an item's mean is the same
    float on both sides.

    Example
    -------
    >>> cell_means([[1.0, 0.0, 1.0, 1.0], [np.nan, np.nan, np.nan, np.nan]]).tolist()
    [0.75, nan]
    """
    y = np.asarray(samples, dtype=np.float64)
    present = ~np.isnan(y)
    count = present.sum(axis=-1)
    total = np.where(present, y, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def mean_variance(samples: ArrayLike) -> FloatArray:
    """Estimated sampling variance of each cell's mean: s²/K over its K present samples
    (ddof 1, unbiased for σ²/K); NaN where fewer than two samples are present.

    Example
    -------
    >>> mean_variance([[1.0, 0.0, 1.0, 1.0], [1.0, np.nan, np.nan, np.nan]]).tolist()
    [0.0625, nan]
    """
    y = np.asarray(samples, dtype=np.float64)
    present = ~np.isnan(y)
    count = present.sum(axis=-1)
    mean = cell_means(y)
    dev = np.where(present, y - mean[..., None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count >= 2, (dev * dev).sum(axis=-1) / ((count - 1) * count), np.nan)


def pair_within(scores: ArrayLike, mean_var: ArrayLike, a: ArrayLike, b: ArrayLike, *,
                keep: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
    """Σ (w_a + w_b) over the items models a[i] and b[i] both have, and the number of those
    items where both cells' w is known (``scores``, ``mean_var``: items × models; ``keep``:
    items that count, default all)."""
    x = np.asarray(scores, dtype=np.float64)
    w = np.asarray(mean_var, dtype=np.float64)
    a = np.atleast_1d(np.asarray(a, dtype=np.int64))
    b = np.atleast_1d(np.asarray(b, dtype=np.int64))
    both = ~np.isnan(x[:, a]) & ~np.isnan(x[:, b])
    if keep is not None:
        both &= np.asarray(keep, dtype=bool)[:, None]
    ww = w[:, a] + w[:, b]
    known = both & ~np.isnan(ww)
    return np.where(known, ww, 0.0).sum(axis=0), known.sum(axis=0).astype(np.float64)


@dataclass(frozen=True, eq=False)
class VarianceSplit:
    """σ̂_D² of item-mean differences split into the between-item term and the within-item
    (sampling) term at the samples taken (one entry per pair)."""

    sigma_d2: FloatArray
    within: FloatArray
    samples: float

    @property
    def between(self) -> FloatArray:
        """σ̂_b², the part resampling cannot shrink (floored at 0)."""
        return np.maximum(self.sigma_d2 - self.within, 0.0)

    @property
    def within_share(self) -> FloatArray:
        """Share of σ̂_D² that is within-item sampling noise at K samples, in [0, 1]."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.sigma_d2 > 0, np.clip(self.within / self.sigma_d2, 0.0, 1.0),
                            np.nan)

    @property
    def within_share_one(self) -> FloatArray:
        """The within-item share at one sample per item, K σ̂_w²/K / (σ̂_b² + K σ̂_w²/K): the
        ``--within-share`` of ``llm-monitor power``."""
        one = self.sigma_d2_at(1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(one > 0, np.clip(self.within * self.samples / one, 0.0, 1.0),
                            np.nan)

    def sigma_d2_at(self, samples: float) -> FloatArray:
        """σ_D² of item means with ``samples`` samples per cell: σ̂_b² + σ̂_w²/samples."""
        return self.between + self.within * self.samples / samples

    def record(self, k: int) -> dict[str, Any]:
        """Pair ``k``'s keys of the report and the HTTP API."""
        share, one = float(self.within_share[k]), float(self.within_share_one[k])
        return {"samples": self.samples, "sigma_between2": float(self.between[k]),
                "sigma_within2": float(self.within[k]),
                "within_share": None if np.isnan(share) else share,
                "within_share_1": None if np.isnan(one) else one}


def variance_split(sigma_d2: ArrayLike, within_sum: ArrayLike, within_count: ArrayLike, *,
                   samples: float) -> VarianceSplit:
    """The split of the plug-in ``sigma_d2`` given :func:`pair_within`'s sums (the within term
    is their mean; NaN where no item has two samples of both models)."""
    s = np.atleast_1d(np.asarray(sigma_d2, dtype=np.float64))
    total = np.atleast_1d(np.asarray(within_sum, dtype=np.float64))
    count = np.atleast_1d(np.asarray(within_count, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        within = np.where(count > 0, total / np.maximum(count, 1.0), np.nan)
    return VarianceSplit(sigma_d2=s, within=within, samples=float(samples))
