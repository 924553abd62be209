"""Change events built in one place, from the figures the core hands out."""

from __future__ import annotations

from datetime import datetime

from monitor.contracts import ResolutionChange
from monitor.core.table import PairView


def resolution_change(view: PairView, *, change_id: int, benchmark: str, previous: str,
                      ts: datetime) -> ResolutionChange:
    """The event for ``view``'s pair whose verdict was ``previous``.

    Figures go as they are: the event's number fields follow the wire rule of
    :func:`monitor.contracts.wire_float` (an e-value beyond float range is ``"inf"``).
    """
    f = view.figures
    return ResolutionChange(
        change_id=change_id, benchmark=benchmark, model_a=view.model_a, model_b=view.model_b,
        previous=previous, verdict=view.verdict, n=f.n, delta=f.delta, cs_low=f.cs_low,
        cs_high=f.cs_high, e_value=f.e_value, q=f.q, q_cluster=f.q_grouped,
        q_anytime=f.q_anytime, mde=f.mde, ts=ts,
    )
