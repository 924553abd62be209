"""Configuration of the engine-agnostic monitor core (one frozen value, validated once)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from monitor.defaults import PLANNED_MODELS
from monitor.stats.cluster_sequential import CLUSTER_ITEMS
from monitor.stats.figures import DESIGNS, Design
from monitor.stats.multiplicity import METHODS

Family = Literal["adjacent", "all"]

#: The default equivalence margin Δ: one point of accuracy (docs/anytime.md, "Equivalence").
MARGIN = 0.01


@dataclass(frozen=True)
class BenchmarkSpec:
    """What one benchmark declares once, fixed when its first result arrives.

    Parameters
    ----------
    samples
        K, the samples every model answers each item with (``ItemResult.sample`` 0 … K − 1).
        An (item, model) enters the pair statistics once, with the mean of its K samples, when
        its K-th sample arrives (docs/live-core.md, "Repeated samples"); 1 is one answer per
        item, the 0/1 fast path. Declared by the settings (``benchmarks.<name>.samples``), by
        the benchmark's first result (its ``k`` field), or else the monitor's default
        (``--samples``).
    design
        How the benchmark's items were drawn, which decides a pair's verdict
        (docs/clusters-vs-strata.md): ``"items"`` (exchangeable items, the default) and
        ``"strata"`` (the ``cluster`` labels are fixed strata, e.g. MMLU-Pro's 14 subjects) take
        the item-level decision; ``"clusters"`` (the labels are sampled clusters, e.g.
        passages) takes the sampled-clusters decision
        (:mod:`monitor.stats.cluster_sequential`). Declared by the settings only.
    cluster_items
        Under ``"clusters"``: r, the items of a cluster that form its one observation.
    margin
        Δ, the equivalence margin: a pair whose confidence sequence at its share lies inside
        (−Δ, Δ) is declared ``equivalent`` (:mod:`monitor.stats.sequential`); None: no
        equivalence decisions. On the score scale (0.01 = one point).
    """

    samples: int = 1
    design: Design = "items"
    cluster_items: int = CLUSTER_ITEMS
    margin: float | None = MARGIN

    def __post_init__(self) -> None:
        if not (isinstance(self.samples, int) and 1 <= self.samples <= 1024):
            raise ValueError(f"`samples` must be an integer in [1, 1024], got {self.samples!r}")
        if self.design not in DESIGNS:
            raise ValueError(f"`design` must be one of {', '.join(DESIGNS)}, got {self.design!r}")
        if not (isinstance(self.cluster_items, int) and 1 <= self.cluster_items <= 10_000):
            raise ValueError("`cluster_items` must be an integer in [1, 10000], got "
                             f"{self.cluster_items!r}")
        if self.margin is not None and not (0.0 < self.margin < 0.5):
            raise ValueError(f"`margin` must lie in (0, 0.5) or be None, got {self.margin!r}")


@dataclass(frozen=True)
class CoreConfig:
    """Options of :class:`monitor.core.Monitor`.

    Parameters
    ----------
    alpha
        Level (two-sided) of the board's one guarantee: with probability ≥ 1 − α no pair is
        ever declared resolved while its models are equal or in the wrong direction. Each pair
        gets a fixed share γ_p of α when it first exists and is resolved, for good, at the
        first item where one of its one-sided e-processes reaches 2/γ_p
        (:mod:`monitor.stats.sequential`).
    power
        Target power 1 − β for N*, N*_AV and the MDE.
    planned_models
        M₀, the board size the shares are planned for: the first M₀(M₀ − 1)/2 pairs share
        α/2, and each later block of pairs, twice as large as the one before, half as much.
        Any M₀ keeps the guarantee; it moves power (docs/anytime.md, "How many models to plan
        for").
    family
        The pairs the fixed-N snapshot figures (q, q_cluster, MDE) are corrected for:
        ``"adjacent"`` (m = k − 1 adjacent pairs of the ranking of k models) or ``"all"``
        (m = k(k − 1)/2).
    correction
        Multiplicity correction of the fixed-N figures q, q_cluster and MDE:
        ``monitor.stats.multiplicity.family_alpha`` (α/m for ``bonferroni`` and ``holm``).
    per_pair_series
        Which pairs get per-pair Prometheus series: ``"adjacent"`` (default, bounded
        cardinality) or ``"all"``.
    pair_series_limit
        At most this many pairs per benchmark get per-pair series, from the top of the
        ranking (a board of thousands of models would otherwise export tens of thousands of
        series per scrape); every pair stays readable over the HTTP API.
    exclude_flags
        Items carrying any of these flags are excluded from resolution (empty: off).
    samples
        K of a new benchmark that declares none (:class:`BenchmarkSpec`): neither in
        ``benchmarks`` nor by its first result's ``k``.
    design, cluster_items, margin
        The design, items per cluster observation and equivalence margin of a benchmark not
        in ``benchmarks``.
    benchmarks
        Specs declared for named benchmarks (the settings' ``benchmarks`` table); a result
        whose ``k`` differs from its benchmark's K is a conflict.
    """

    alpha: float = 0.05
    power: float = 0.8
    planned_models: int = PLANNED_MODELS
    family: Family = "adjacent"
    correction: str = "bonferroni"
    per_pair_series: Family = "adjacent"
    pair_series_limit: int = 1000
    exclude_flags: tuple[str, ...] = ("leak-suspect",)
    samples: int = 1
    design: Design = "items"
    cluster_items: int = CLUSTER_ITEMS
    margin: float | None = MARGIN
    benchmarks: Mapping[str, BenchmarkSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (0.0 < self.alpha < 1.0):
            raise ValueError(f"`alpha` must lie in (0, 1), got {self.alpha}")
        if not (0.0 < self.power < 1.0):
            raise ValueError(f"`power` must lie in (0, 1), got {self.power}")
        if not (isinstance(self.planned_models, int) and self.planned_models >= 2):
            raise ValueError(f"`planned_models` must be an integer ≥ 2, got {self.planned_models!r}")
        if self.family not in ("adjacent", "all"):
            raise ValueError(f"`family` must be 'adjacent' or 'all', got {self.family!r}")
        if self.per_pair_series not in ("adjacent", "all"):
            raise ValueError(
                f"`per_pair_series` must be 'adjacent' or 'all', got {self.per_pair_series!r}"
            )
        if not (isinstance(self.pair_series_limit, int) and self.pair_series_limit >= 0):
            raise ValueError("`pair_series_limit` must be an integer ≥ 0, got "
                             f"{self.pair_series_limit!r}")
        if not (isinstance(self.samples, int) and 1 <= self.samples <= 1024):
            raise ValueError(f"`samples` must be an integer in [1, 1024], got {self.samples!r}")
        if self.correction not in METHODS:
            raise ValueError(
                f"`correction` must be one of {', '.join(METHODS)}, got {self.correction!r}"
            )
        object.__setattr__(self, "exclude_flags", tuple(self.exclude_flags))
        BenchmarkSpec(design=self.design, cluster_items=self.cluster_items,
                      margin=self.margin)  # validates them
        for name, spec in self.benchmarks.items():
            if not isinstance(spec, BenchmarkSpec):
                raise ValueError(f"`benchmarks[{name!r}]` must be a BenchmarkSpec, got {spec!r}")
        object.__setattr__(self, "benchmarks", dict(self.benchmarks))

    def spec(self, benchmark: str, *, k: int | None = None) -> BenchmarkSpec:
        """The spec a new ``benchmark`` takes: declared in ``benchmarks``, else by its first
        result (``k``, its K), else the default."""
        declared = self.benchmarks.get(benchmark)
        if declared is not None:
            return declared
        return BenchmarkSpec(samples=self.samples if k is None else k, design=self.design,
                             cluster_items=self.cluster_items, margin=self.margin)

    def declared(self, benchmark: str) -> bool:
        """True when the settings declare ``benchmark``'s spec."""
        return benchmark in self.benchmarks
