"""Simulated evals with repeated samples: K answers per (item, model), 0/1 each.

Item i has a latent difficulty z_i ~ N(0, 1) shared by every model; model m answers it right
with probability p_mi = expit(offset_m + spread · z_i + noise · u_mi), u_mi ~ N(0, 1), and each
of its K samples is an independent Bernoulli(p_mi). Models with equal offsets are equal in
expectation (δ = 0) while differing item by item and sample by sample.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit


def item_probabilities(rng: np.random.Generator, *, items: int, offsets: list[float],
                       spread: float = 1.0, noise: float = 0.7) -> NDArray[np.float64]:
    """p_mi for ``items`` items (rows) and one model per offset (columns)."""
    z = rng.standard_normal((items, 1))
    u = rng.standard_normal((items, len(offsets)))
    return np.asarray(expit(np.asarray(offsets)[None, :] + spread * z + noise * u))


def draw_samples(rng: np.random.Generator, p: NDArray[np.float64], samples: int
                 ) -> NDArray[np.float64]:
    """(items × models × K) 0/1 answers, sample k of cell (i, m) ~ Bernoulli(p_mi)."""
    return (rng.random((*p.shape, samples)) < p[..., None]).astype(np.float64)
