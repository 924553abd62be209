"""Planning a paired comparison: N*, the Cohen's-h shortcut, N*_AV and, at a given N, q and MDE.

N*_AV is sized for the live monitor's rule — the pair decided when one of its one-sided
e-processes reaches 2/γ_p, γ_p its share of α on a board planned for M₀ models
(:mod:`monitor.stats.sequential`) — with the single-pair figure (E ≥ 1/α) beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from monitor.defaults import PLANNED_MODELS
from monitor.stats import power as pw
from monitor.stats import shortcut
from monitor.stats.anytime_size import n_star_anytime
from monitor.stats.sequential import block_share, pair_block, planned_pairs


@dataclass(frozen=True)
class PowerPlan:
    """The sizes a planned comparison (p_A, p_B, ρ) needs, and what N items would give.

    Attributes
    ----------
    p_a, p_b, rho : float
        Planned accuracies and phi correlation.
    alpha, power : float
        Two-sided level and target power.
    n : int or None
        Paired items available, when known.
    sigma_d2 : float
        σ_D² of the planned pair.
    n_star_exact, n_star_anytime_exact : float
        Unrounded N* and N*_AV (``inf`` when δ = 0). N*_AV is the live rule's: one side
        reaching 2/γ_p, γ_p = ``level``.
    n_star_anytime_single_exact : float
        Unrounded N*_AV of a single pair watched alone: E ≥ 1/α.
    planned_models, block : int
        The board's planned size M₀ and the pair's block b in it.
    pair : int or None
        The pair's birth number, when the block was derived from it.
    level : float
        γ_p = α / (P · 2^(2b+1)), P = M₀(M₀ − 1)/2: the pair's share of α.
    shortcut : ShortcutResult
        The Cohen's-h shortcut's size for the same plan.
    lemma1_c : float
        C(p, ρ) of Lemma 1 at the midpoint p = (p_A + p_B)/2.
    samples : SamplesPlan or None
        With repeated samples per item: the sizes at K samples and what resolves cheaper.
    """

    p_a: float
    p_b: float
    rho: float
    alpha: float
    power: float
    n: int | None
    sigma_d2: float
    n_star_exact: float
    n_star_anytime_exact: float
    n_star_anytime_single_exact: float
    planned_models: int
    block: int
    pair: int | None
    level: float
    shortcut: shortcut.ShortcutResult
    lemma1_c: float
    samples: SamplesPlan | None = None

    @property
    def delta(self) -> float:
        """δ = p_A − p_B."""
        return self.p_a - self.p_b

    @property
    def n_star(self) -> float:
        """N* rounded up (an ``int`` when finite, ``inf`` when δ = 0)."""
        return _ceil(self.n_star_exact)

    @property
    def n_star_anytime(self) -> float:
        """N*_AV of the live rule rounded up (an ``int`` when finite)."""
        return _ceil(self.n_star_anytime_exact)

    @property
    def n_star_anytime_single(self) -> float:
        """N*_AV of a single pair (E ≥ 1/α) rounded up (an ``int`` when finite)."""
        return _ceil(self.n_star_anytime_single_exact)

    @property
    def shortcut_ratio(self) -> float:
        """n_h / N*; NaN when both are infinite (p_A = p_B), where the ratio is undefined."""
        if not math.isfinite(self.n_star_exact):
            return math.nan
        return float(self.shortcut.n_exact) / self.n_star_exact

    def q(self) -> float | None:
        """q = N / N* at the available N (None without N)."""
        return None if self.n is None else float(pw.resolution_ratio(self.n, self.n_star_exact))

    def q_anytime(self) -> float | None:
        """q_AV = N / N*_AV (the live rule's) at the available N (None without N)."""
        if self.n is None:
            return None
        return float(pw.resolution_ratio(self.n, self.n_star_anytime_exact))

    def q_anytime_single(self) -> float | None:
        """N / N*_AV of a single pair (E ≥ 1/α) at the available N (None without N)."""
        if self.n is None:
            return None
        return float(pw.resolution_ratio(self.n, self.n_star_anytime_single_exact))

    def mde(self) -> float | None:
        """Minimum detectable effect at the available N (None without N)."""
        if self.n is None:
            return None
        return float(pw.mde(self.sigma_d2, self.n, alpha=self.alpha, power=self.power))

    def to_dict(self) -> dict[str, Any]:
        """The figures under the keys ``llm-monitor power --json`` prints."""
        out: dict[str, Any] = {
            "p_a": self.p_a, "p_b": self.p_b, "rho": self.rho, "alpha": self.alpha,
            "power": self.power, "delta": self.delta, "sigma_d2": self.sigma_d2,
            "n_star_exact": self.n_star_exact, "n_star": self.n_star,
            "cohens_h": self.shortcut.h, "n_shortcut_exact": self.shortcut.n_exact,
            "n_shortcut": self.shortcut.n, "shortcut_ratio": self.shortcut_ratio,
            "lemma1_c": self.lemma1_c, "n_star_anytime": self.n_star_anytime,
            "planned_models": self.planned_models, "block": self.block,
            "pair_level": self.level, "e_threshold": 1.0 / self.level,
            "n_star_anytime_single_pair": self.n_star_anytime_single,
        }
        if self.pair is not None:
            out["pair"] = self.pair
        q = self.q()
        if q is not None:
            out.update({"n": self.n, "q": q, "mde": self.mde(), "resolved": bool(q >= 1.0),
                        "q_anytime": self.q_anytime(),
                        "q_anytime_single_pair": self.q_anytime_single()})
        if self.samples is not None:
            out.update(self.samples.to_dict())
        return out


@dataclass(frozen=True)
class SamplesPlan:
    """Repeated samples: σ_D²(K) = σ_D² (1 − w + w/K) with w the within-item share at one
    sample (Miller 2024, "Adding error bars to evals"), the sizes it gives, and whether more
    items or more samples per item resolve the gap with fewer answers per model."""

    samples: int
    within_share: float
    sigma_d2: float  # at K samples
    n_star_exact: float  # items needed at K samples
    n_star_anytime_exact: float
    n_star_one_exact: float  # items needed at one sample
    n: int | None
    samples_needed_exact: float | None  # with n items: the fewest samples that resolve

    def answers(self) -> float:
        """Answers per model to resolve at K samples: ⌈N*(K)⌉ whole items · K (as the more
        answers of :meth:`cheaper` count them)."""
        return _ceil(self.n_star_exact) * self.samples

    def cheaper(self) -> tuple[str, str]:
        """("items" | "samples" | "resolved" | "neither", why)."""
        k = self.samples
        if self.n is None or not math.isfinite(self.n_star_exact):
            if not math.isfinite(self.n_star_exact):
                return "neither", "no gap (δ = 0): no number of items or samples resolves it"
            return "items", (
                f"{_ceil(self.answers())} answers per model at K = {k} against "
                f"{_ceil(self.n_star_one_exact)} at K = 1: an answer to a new item removes "
                "the between-item and the within-item variance, another sample of a scored "
                "item only the within-item part; more samples pay when items run out")
        n = self.n
        if n >= self.n_star_exact:
            return "resolved", f"{n} items at K = {k} already reach N*(K) = {_ceil(self.n_star_exact)}"
        more_items = (math.ceil(self.n_star_exact) - n) * k
        need = self.samples_needed_exact
        assert need is not None
        if not math.isfinite(need):
            return "items", (f"{more_items} more answers per model on new items; the between-item "
                             f"variance alone exceeds what {n} items can resolve, whatever K")
        more_samples = n * (math.ceil(need) - k)
        if more_items <= more_samples:
            return "items", (f"{more_items} more answers per model on new items against "
                             f"{more_samples} for K = {math.ceil(need)} samples of the {n} items "
                             "(the way to resolve it where the benchmark has no more items)")
        return "samples", (f"{more_samples} more answers per model for K = {math.ceil(need)} "
                           f"samples of the {n} items against {more_items} on new items")

    def to_dict(self) -> dict[str, Any]:
        """The keys ``llm-monitor power --samples`` adds."""
        which, why = self.cheaper()
        out: dict[str, Any] = {
            "samples": self.samples, "within_share": self.within_share,
            "sigma_d2_samples": self.sigma_d2, "n_star_samples": _ceil(self.n_star_exact),
            "n_star_anytime_samples": _ceil(self.n_star_anytime_exact),
            "answers_per_model": _ceil(self.answers()),
        }
        if self.n is not None:
            out["q_samples"] = float(pw.resolution_ratio(self.n, self.n_star_exact))
            need = self.samples_needed_exact
            out["samples_needed"] = (math.inf if need is None or not math.isfinite(need)
                                     else max(1, math.ceil(need)))
        out.update(cheaper=which, cheaper_why=why)
        return out


def _ceil(x: float) -> float:
    return math.ceil(x) if math.isfinite(x) else math.inf


def live_level(*, alpha: float = 0.05, planned_models: int = PLANNED_MODELS,
               pair: int | None = None, block: int | None = None) -> tuple[float, int]:
    """(γ_p, b): the share of α and the block of a pair on a board planned for
    ``planned_models`` models — given by its birth number ``pair`` (1-based) or its ``block``
    directly; a pair of the first block by default.

    Examples
    --------
    >>> live_level(planned_models=32)
    (5.040322580645161e-05, 0)
    >>> live_level(planned_models=4, pair=7)  # P = 6: pairs 7–18 form block 1
    (0.0010416666666666667, 1)
    """
    if not (isinstance(planned_models, int) and planned_models >= 2):
        raise ValueError(f"`planned_models` must be an integer ≥ 2, got {planned_models!r}")
    if pair is not None and block is not None:
        raise ValueError("give the pair's birth number `pair` or its `block`, not both")
    if pair is not None and not (isinstance(pair, int) and pair >= 1):
        raise ValueError(f"`pair` must be an integer ≥ 1, got {pair!r}")
    if block is not None and not (isinstance(block, int) and 0 <= block <= 60):
        raise ValueError(f"`block` must be an integer in [0, 60], got {block!r}")
    big_p = planned_pairs(planned_models)
    b = (int(pair_block(pair, planned=big_p)) if pair is not None
         else 0 if block is None else block)
    return float(block_share(b, alpha=alpha, planned=big_p)), b


def plan_power(
    p_a: float, p_b: float, rho: float, *, n: int | None = None, alpha: float = 0.05,
    power: float = 0.8, samples: int | None = None, within_share: float | None = None,
    planned_models: int = PLANNED_MODELS, pair: int | None = None, block: int | None = None,
) -> PowerPlan:
    """Plan a paired comparison of accuracies ``p_a`` and ``p_b`` with phi correlation ``rho``.

    N*_AV is the live monitor's for this pair: on a board planned for ``planned_models``
    models, the pair born ``pair``-th (or in ``block``; the first block by default) is decided
    when one side reaches 2/γ_p (:func:`live_level`); the single-pair N*_AV (E ≥ 1/α) is
    beside it. ``samples`` (K answers per item, averaged) with ``within_share`` (the share of
    σ_D² at one sample that is within-item sampling noise) adds the :class:`SamplesPlan`.

    Examples
    --------
    >>> plan = plan_power(0.65, 0.60, 0.30, n=1200)
    >>> plan.n_star, plan.shortcut.n, round(plan.q(), 3)
    (1028, 515, 1.168)
    >>> plan.n_star_anytime_single < plan.n_star_anytime  # one pair's share γ_p of α < α
    True
    >>> plan = plan_power(0.65, 0.60, 0.30, n=600, samples=4, within_share=0.8)
    >>> plan.samples.to_dict()["n_star_samples"], plan.samples.cheaper()[0]
    (412, 'resolved')
    """
    pw.check_feasible_rho(p_a, p_b, rho)  # validates p_a, p_b and rho (Fréchet bounds) first
    level, b = live_level(alpha=alpha, planned_models=planned_models, pair=pair, block=block)
    s2 = float(pw.sigma_d2(p_a, p_b, rho))
    delta = p_a - p_b
    plan_k = None
    if samples is not None or within_share is not None:
        if within_share is None:
            raise ValueError("`samples` needs `within_share`: the share of σ_D² that is "
                             "within-item sampling noise at one sample (a report of a "
                             "repeated-sample table prints it as within_share_1)")
        k = 1 if samples is None else samples
        if not (isinstance(k, int) and k >= 1):
            raise ValueError(f"`samples` must be an integer ≥ 1, got {k!r}")
        s2k = float(pw.sigma_d2_samples(s2, within_share, k))
        plan_k = SamplesPlan(
            samples=k, within_share=float(within_share), sigma_d2=s2k,
            n_star_exact=float(pw.n_star(delta, s2k, alpha=alpha, power=power)),
            n_star_anytime_exact=float(n_star_anytime(delta, s2k, alpha=level, power=power)),
            n_star_one_exact=float(pw.n_star(delta, s2, alpha=alpha, power=power)), n=n,
            samples_needed_exact=None if n is None else float(pw.samples_needed(
                delta, s2, within_share, n, alpha=alpha, power=power)))
    return PowerPlan(
        p_a=p_a, p_b=p_b, rho=rho, alpha=alpha, power=power, n=n, sigma_d2=s2,
        n_star_exact=float(pw.n_star(delta, s2, alpha=alpha, power=power)),
        n_star_anytime_exact=float(n_star_anytime(delta, s2, alpha=level, power=power)),
        n_star_anytime_single_exact=float(n_star_anytime(delta, s2, alpha=alpha, power=power,
                                                         rule="mean")),
        planned_models=planned_models, block=b, pair=pair, level=level,
        shortcut=shortcut.shortcut_size(p_a, p_b, rho, alpha=alpha, power=power),
        lemma1_c=float(shortcut.lemma1_c((p_a + p_b) / 2.0, rho)), samples=plan_k,
    )
