"""Planning a paired comparison: N*, the Cohen's-h shortcut, N*_AV and, at a given N, q and MDE."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from monitor.stats import power as pw
from monitor.stats import shortcut
from monitor.stats.anytime_size import n_star_anytime


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
        Unrounded N* and N*_AV (``inf`` when δ = 0).
    shortcut : ShortcutResult
        The Cohen's-h shortcut's size for the same plan.
    lemma1_c : float
        C(p, ρ) of Lemma 1 at the midpoint p = (p_A + p_B)/2.
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
    shortcut: shortcut.ShortcutResult
    lemma1_c: float

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
        """N*_AV rounded up (an ``int`` when finite)."""
        return _ceil(self.n_star_anytime_exact)

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
        """q_AV = N / N*_AV at the available N (None without N)."""
        if self.n is None:
            return None
        return float(pw.resolution_ratio(self.n, self.n_star_anytime_exact))

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
        }
        q = self.q()
        if q is not None:
            out.update({"n": self.n, "q": q, "mde": self.mde(), "resolved": bool(q >= 1.0),
                        "q_anytime": self.q_anytime()})
        return out


def _ceil(x: float) -> float:
    return math.ceil(x) if math.isfinite(x) else math.inf


def plan_power(
    p_a: float, p_b: float, rho: float, *, n: int | None = None, alpha: float = 0.05,
    power: float = 0.8,
) -> PowerPlan:
    """Plan a paired comparison of accuracies ``p_a`` and ``p_b`` with phi correlation ``rho``.

    Examples
    --------
    >>> plan = plan_power(0.65, 0.60, 0.30, n=1200)
    >>> plan.n_star, plan.shortcut.n, round(plan.q(), 3)
    (1028, 515, 1.168)
    """
    pw.check_feasible_rho(p_a, p_b, rho)  # validates p_a, p_b and rho (Fréchet bounds) first
    s2 = float(pw.sigma_d2(p_a, p_b, rho))
    delta = p_a - p_b
    return PowerPlan(
        p_a=p_a, p_b=p_b, rho=rho, alpha=alpha, power=power, n=n, sigma_d2=s2,
        n_star_exact=float(pw.n_star(delta, s2, alpha=alpha, power=power)),
        n_star_anytime_exact=float(n_star_anytime(delta, s2, alpha=alpha, power=power)),
        shortcut=shortcut.shortcut_size(p_a, p_b, rho, alpha=alpha, power=power),
        lemma1_c=float(shortcut.lemma1_c((p_a + p_b) / 2.0, rho)),
    )
