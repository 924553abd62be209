"""Change events built in one place, from the figures the core hands out."""

from __future__ import annotations

from datetime import datetime

from monitor.contracts import RankingChange, ResolutionChange
from monitor.core.table import PairTable, PairView
from monitor.stats.figures import e_of


def resolution_change(view: PairView, *, change_id: int, benchmark: str, previous: str,
                      ts: datetime) -> ResolutionChange:
    """The event for ``view``'s pair whose verdict was ``previous``.

    Figures go as they are: the event's number fields follow the wire rule of
    :func:`monitor.contracts.wire_float` (an e-value beyond float range is ``"inf"``). ``n``,
    the e-value and the intervals are those at the evaluation that emits the event; the
    ``decided_*`` fields say where the decision itself was taken.
    """
    f = view.figures
    decided = f.verdict_code != 0
    log_e = f.headline_decided_log_e
    return ResolutionChange(
        change_id=change_id, benchmark=benchmark, model_a=view.model_a, model_b=view.model_b,
        previous=previous, verdict=view.verdict, n=f.n, delta=f.delta, cs_low=f.cs_low,
        cs_high=f.cs_high, e_value=f.e_value, q=f.q, q_cluster=f.q_grouped,
        q_anytime=f.q_anytime, mde=f.mde,
        decided_n=f.headline_decided_n if decided else None,
        decided_e_value=e_of(log_e) if decided and log_e is not None else None,
        e_threshold=1.0 / f.e_alpha,
        decided_ts=None if view.decided_ts is None else datetime.fromisoformat(view.decided_ts),
        ts=ts,
    )


def ranking_change(table: PairTable, *, change_id: int, benchmark: str, ts: datetime
                   ) -> RankingChange:
    """The event of ``table``'s ranking: the models best first, their tiers, the resolved
    flags. Built here only: the core emits it, and a restarted runner builds the one the
    change log misses with it."""
    _, _, tiers = table.rank_sets()
    return RankingChange(
        change_id=change_id, benchmark=benchmark, resolved=table.resolved(),
        models=[table.models[i] for i in table.order],
        unresolved_pairs=table.unresolved_pairs(), tiers=list(tiers),
        top_resolved=table.top_resolved(), ts=ts)
