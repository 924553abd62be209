"""The combined audit verdict: significance (compare), contamination (leakage) and
robustness (stability) mapped onto four scenarios, each with its evidence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

SCENARIOS = {
    "high-credibility": "high credibility",
    "not-significant": "gain not significant",
    "likely-overfit": "likely overfit to the test set",
    "partial-gain": "partial gain, weak generalisation",
}


@dataclass(frozen=True)
class Verdict:
    """One of the four scenarios, the evidence behind it and the three checks' outcomes."""

    scenario: str
    label: str
    significant: bool
    contaminated: bool
    unstable: bool
    evidence: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"scenario": self.scenario, "label": self.label,
                "checks": {"significant": self.significant, "contaminated": self.contaminated,
                           "unstable": self.unstable},
                "evidence": list(self.evidence)}


def _need(d: dict[str, Any], keys: tuple[str, ...], what: str) -> None:
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{what} is missing {missing}; pass the --json output of "
                         f"`llm-monitor {what}`")


def _rate(value: Any) -> float:
    """A share from a JSON report; null (no items to judge) is NaN, which never alarms."""
    return math.nan if value is None else float(value)


def decide(
    compare: dict[str, Any],
    leakage: dict[str, Any],
    stability: dict[str, Any],
    *,
    max_leak_share: float = 0.05,
    max_flip_rate: float = 0.10,
) -> Verdict:
    """Combine the JSON outputs of ``compare``, ``leakage`` and ``stability``.

    The gain of A over B is *significant* when the primary paired test rejects at the
    compare run's α and A is ahead; the test set is *contaminated* when the share of
    eval items with status leak exceeds ``max_leak_share``; the model is *unstable*
    when its flip rate exceeds ``max_flip_rate``. Not significant → "gain not
    significant"; significant and contaminated → "likely overfit to the test set";
    significant, clean and unstable → "partial gain, weak generalisation"; otherwise
    "high credibility".

    Examples
    --------
    >>> c = {"a": "A", "b": "B", "n": 900, "mean_diff": 0.04, "primary_test": "mcnemar_exact",
    ...      "primary_pvalue": 0.001, "significant": True, "resolution": {"q": 1.4, "alpha": 0.05}}
    >>> lk = {"leak_share": 0.0, "counts": {"leak": 0, "review": 2}, "n_items": 900, "n": 13}
    >>> st = {"model": "A", "flip_rate": 0.03, "flip_ci": [0.02, 0.05], "flip_base": 700}
    >>> decide(c, lk, st).label
    'high credibility'
    """
    for name, v in (("max_leak_share", max_leak_share), ("max_flip_rate", max_flip_rate)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"`{name}` must lie in [0, 1], got {v}")
    _need(compare, ("a", "b", "n", "mean_diff", "primary_test", "primary_pvalue",
                    "significant", "resolution"), "compare")
    _need(leakage, ("leak_share", "counts", "n_items"), "leakage")
    _need(stability, ("flip_rate", "flip_ci", "flip_base"), "stability")
    a, b = compare["a"], compare["b"]
    ev: list[str] = []
    p = math.nan if compare["primary_pvalue"] is None else float(compare["primary_pvalue"])
    ahead = compare["mean_diff"] > 0
    significant = bool(compare["significant"]) and ahead
    alpha = compare["resolution"].get("alpha", 0.05)
    ev.append(f"compare: {a} − {b} = {compare['mean_diff']:+.4f} on {compare['n']} items, "
              f"{compare['primary_test']} p = {p:.3g} (α = {alpha}), "
              f"q = {compare['resolution'].get('q', math.nan):.2f}")
    if compare["significant"] and not ahead:
        ev.append(f"the significant difference favours {b}, not {a}")
    boot = compare.get("bootstrap", {}).get("percentile")
    if boot is not None:
        ev.append(f"bootstrap CI of the mean difference [{boot['low']:+.4f}, {boot['high']:+.4f}]")
    clean = compare.get("clean_items")
    if clean is not None:
        ev.append(f"on the {clean['n']} items without leak status: difference "
                  f"{clean['mean_diff']:+.4f}, {clean['primary_test']} p = "
                  f"{clean['primary_pvalue']:.3g}")
    share = _rate(leakage["leak_share"])
    contaminated = bool(share > max_leak_share)
    counts = leakage["counts"]
    ev.append(f"leakage: {counts.get('leak', 0)} of {leakage['n_items']} eval items leaked "
              f"({share:.1%}; alarm above {max_leak_share:.0%}), {counts.get('review', 0)} to "
              f"review ({leakage.get('n', '?')}-gram containment)")
    rate = _rate(stability["flip_rate"])
    unstable = bool(rate > max_flip_rate)
    lo, hi = stability["flip_ci"]
    ev.append(f"stability{' of ' + stability['model'] if 'model' in stability else ''}: "
              f"flip rate {rate:.1%} [{(lo or 0):.1%}, {(hi or 0):.1%}] over "
              f"{stability['flip_base']} (item, perturbation) pairs; alarm above "
              f"{max_flip_rate:.0%}")
    if not significant:
        scenario = "not-significant"
    elif contaminated:
        scenario = "likely-overfit"
    elif unstable:
        scenario = "partial-gain"
    else:
        scenario = "high-credibility"
    return Verdict(scenario, SCENARIOS[scenario], significant, contaminated, unstable, tuple(ev))
