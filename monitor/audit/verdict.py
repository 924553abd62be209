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
    "holds-on-clean-items": "gain holds on the items without leak status; the test set is "
                            "contaminated",
    "partial-gain": "partial gain, weak generalisation",
    "significant-unchecked": "gain significant",
    "incomplete": "significance not checked",
}
CHECKS = ("compare", "leakage", "stability")


@dataclass(frozen=True)
class Verdict:
    """A scenario, the evidence behind it, the checks' outcomes (None: not checked) and the
    checks that were not given."""

    scenario: str
    label: str
    significant: bool | None
    contaminated: bool | None
    unstable: bool | None
    evidence: tuple[str, ...]
    missing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"scenario": self.scenario, "label": self.label,
                "checks": {"significant": self.significant, "contaminated": self.contaminated,
                           "unstable": self.unstable},
                "missing": list(self.missing),
                "evidence": list(self.evidence)}


#: The keys of each check's ``--json`` output that the verdict reads.
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "compare": ("a", "b", "n", "mean_diff", "primary_test", "primary_pvalue", "significant",
                "resolution"),
    "leakage": ("leak_share", "counts", "n_items"),
    "stability": ("flip_rate", "flip_ci", "flip_base"),
}


def missing_keys(d: dict[str, Any], what: str) -> list[str]:
    """The keys the verdict reads that the ``what`` report (compare, leakage, stability) lacks."""
    return [k for k in REQUIRED_KEYS[what] if k not in d]


def _need(d: dict[str, Any], what: str) -> None:
    missing = missing_keys(d, what)
    if missing:
        raise ValueError(f"{what} is missing {missing}; pass the --json output of "
                         f"`llm-monitor {what}`")


def _rate(value: Any) -> float:
    """A share from a JSON report; null (no items to judge) is NaN, which never alarms."""
    return math.nan if value is None else float(value)


def _same_model(compare: dict[str, Any] | None, stability: dict[str, Any] | None) -> None:
    """The stability report must be about the model the comparison says is better."""
    if compare is None or stability is None or stability.get("model") is None:
        return
    if stability["model"] != compare["a"]:
        raise ValueError(f"the stability report is about model {stability['model']!r} but the "
                         f"comparison is about {compare['a']!r} (A) against {compare['b']!r}: "
                         f"give evidence about the same model (stability --model "
                         f"{compare['a']})")


def _leakage_evidence(compare: dict[str, Any] | None, leakage: dict[str, Any],
                      max_leak_share: float, ev: list[str]) -> bool:
    """Whether the compared items are contaminated; the evidence lines it rests on.

    The share that matters is over the items the comparison used: when the comparison says
    how many of them are leak suspects (``suspect_items``), that share decides; otherwise the
    share over the scanned eval items does, and the evidence says so.
    """
    counts = leakage["counts"]
    scanned = _rate(leakage["leak_share"])
    overall = (f"{counts.get('leak', 0)} of {leakage['n_items']} scanned eval items leaked "
               f"({scanned:.1%}), {counts.get('review', 0)} to review "
               f"({leakage.get('n', '?')}-gram containment)")
    suspects = (compare or {}).get("suspect_items")
    if compare is not None and suspects is not None and compare.get("n"):
        share = suspects["compared"] / compare["n"]
        ev.append(f"leakage: {suspects['compared']} of the {compare['n']} compared items are "
                  f"leak suspects ({share:.1%}; alarm above {max_leak_share:.0%}); {overall}")
        if suspects["compared"] == 0 and suspects["given"] > 0:
            ev.append(f"none of the {suspects['given']} leak suspects is among the compared "
                      "items: check that the eval file and the table name items alike")
        return bool(share > max_leak_share)
    where = ("" if compare is None else "; how many of them are among the compared items is "
             "not known (run compare and leakage in one verdict to know)")
    ev.append(f"leakage: {overall}; alarm above {max_leak_share:.0%} of them{where}")
    return bool(scanned > max_leak_share)


def decide(
    compare: dict[str, Any] | None,
    leakage: dict[str, Any] | None,
    stability: dict[str, Any] | None,
    *,
    max_leak_share: float = 0.05,
    max_flip_rate: float = 0.10,
) -> Verdict:
    """Combine the JSON outputs of ``compare``, ``leakage`` and ``stability`` (any of them).

    The gain of A over B is *significant* when the primary paired test rejects at the
    compare run's α and A is ahead; the compared items are *contaminated* when the share of
    leak suspects among them (else among the scanned eval items) exceeds ``max_leak_share``;
    the model is *unstable* when its flip rate exceeds ``max_flip_rate``.

    Not significant → "gain not significant"; significant and contaminated → "likely overfit
    to the test set", unless the same test on the items without leak status still finds A
    ahead ("gain holds on the items without leak status"); significant, clean and unstable →
    "partial gain"; significant, clean and stable → "high credibility" when every check was
    given, else "gain significant" with the checks not made. Without a comparison the label
    says significance was not checked and what the other checks found. A stability report
    about another model than A is refused.

    Examples
    --------
    >>> c = {"a": "A", "b": "B", "n": 900, "mean_diff": 0.04, "primary_test": "mcnemar_exact",
    ...      "primary_pvalue": 0.001, "significant": True, "resolution": {"q": 1.4, "alpha": 0.05}}
    >>> lk = {"leak_share": 0.0, "counts": {"leak": 0, "review": 2}, "n_items": 900, "n": 13}
    >>> st = {"model": "A", "flip_rate": 0.03, "flip_ci": [0.02, 0.05], "flip_base": 700}
    >>> decide(c, lk, st).label
    'high credibility'
    >>> decide(c, None, st).label
    'gain significant (not checked: leakage)'
    """
    for name, v in (("max_leak_share", max_leak_share), ("max_flip_rate", max_flip_rate)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"`{name}` must lie in [0, 1], got {v}")
    given = dict(zip(CHECKS, (compare, leakage, stability), strict=True))
    if all(v is None for v in given.values()):
        raise ValueError("give at least one of compare, leakage and stability")
    missing = tuple(k for k, v in given.items() if v is None)
    for name, report in given.items():
        if report is not None:
            _need(report, name)
    _same_model(compare, stability)
    ev: list[str] = []
    significant: bool | None = None
    holds_on_clean = False
    if compare is not None:
        a, b = compare["a"], compare["b"]
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
            ev.append(f"bootstrap CI of the mean difference [{boot['low']:+.4f}, "
                      f"{boot['high']:+.4f}]")
        clean = compare.get("clean_items")
        if clean is not None:
            holds_on_clean = bool(clean["significant"]) and clean["mean_diff"] > 0
            ev.append(f"on the {clean['n']} items without leak status: difference "
                      f"{clean['mean_diff']:+.4f}, {clean['primary_test']} p = "
                      f"{clean['primary_pvalue']:.3g} — "
                      + ("still significant" if holds_on_clean else "not significant"))
    contaminated = (None if leakage is None
                    else _leakage_evidence(compare, leakage, max_leak_share, ev))
    unstable: bool | None = None
    if stability is not None:
        rate = _rate(stability["flip_rate"])
        unstable = bool(rate > max_flip_rate)
        lo, hi = stability["flip_ci"]
        ev.append(f"stability{' of ' + stability['model'] if 'model' in stability else ''}: "
                  f"flip rate {rate:.1%} [{(lo or 0):.1%}, {(hi or 0):.1%}] over "
                  f"{stability['flip_base']} (item, perturbation) pairs; alarm above "
                  f"{max_flip_rate:.0%}")
    for check in missing:
        ev.append(f"{check}: not checked")
    if significant is None:
        scenario = "incomplete"
        found = [what for what, bad in (("test set contaminated", contaminated),
                                        ("unstable under perturbation", unstable)) if bad]
        label = SCENARIOS[scenario] + ("; " + ", ".join(found) if found else
                                       "; no problem found in " + ", ".join(
                                           k for k in CHECKS if k not in missing))
        return Verdict(scenario, label, None, contaminated, unstable, tuple(ev), missing)
    if not significant:
        scenario = "not-significant"
    elif contaminated:
        scenario = "holds-on-clean-items" if holds_on_clean else "likely-overfit"
    elif unstable:
        scenario = "partial-gain"
    elif missing:
        scenario = "significant-unchecked"
    else:
        scenario = "high-credibility"
    label = SCENARIOS[scenario]
    unchecked = [k for k in missing if k != "compare"]
    if unchecked and scenario != "not-significant":
        label += f" (not checked: {', '.join(unchecked)})"
    return Verdict(scenario, label, significant, contaminated, unstable, tuple(ev), missing)
