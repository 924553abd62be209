"""Unit tests of the monitor core: pairing, idempotency, verdict and ranking changes."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pytest

from monitor.contracts import ItemResult, RankingChange, ResolutionChange
from monitor.core import CoreConfig, Monitor
from monitor.stats.clusters import design_effect


def ev(item: str, model: str, score: float, *, bench: str = "b", **kw: object) -> ItemResult:
    return ItemResult(benchmark=bench, item_id=item, model=model, score=score, **kw)  # type: ignore[arg-type]


def pair(mon: Monitor, a: str, b: str, bench: str = "b") -> dict[str, object]:
    for p in [p.as_dict() for p in mon.pairs(bench, "all")]:
        if (p["model_a"], p["model_b"]) in ((a, b), (b, a)):
            return p
    raise AssertionError(f"pair {a}/{b} not found")


def test_pairing_uses_only_shared_items() -> None:
    mon = Monitor()
    events = [ev("1", "x", 1), ev("1", "y", 0), ev("2", "x", 1), ev("2", "y", 1),
              ev("3", "x", 0), ev("3", "z", 1), ev("4", "y", 1), ev("4", "z", 0)]
    mon.apply(events)
    xy = pair(mon, "x", "y")
    assert xy["n"] == 2
    # x is ranked above y (mean 2/3 vs 2/3 → tie broken by name), delta = x − y on items 1, 2
    assert (xy["model_a"], xy["model_b"]) == ("x", "y")
    assert xy["delta"] == pytest.approx(0.5)
    assert pair(mon, "x", "z")["n"] == 1
    assert pair(mon, "y", "z")["n"] == 1
    models = mon.ranking("b").to_json()["models"]
    assert [m["model"] for m in models] == ["x", "y", "z"]
    assert [m["n"] for m in models] == [3, 3, 2]


def test_duplicate_and_conflict_leave_state_untouched() -> None:
    mon = Monitor()
    mon.apply([ev("1", "x", 1), ev("1", "y", 0)])
    before = pair(mon, "x", "y")
    res = mon.apply([ev("1", "x", 1, run_id="other-run"), ev("1", "y", 1), ev("2", "x", 0),
                     ev("2", "x", 0), ev("2", "x", 1)], sources=["http[0]", "http[1]",
                                                                 "http[2]", "http[3]", "http[4]"])
    assert res.outcomes == ["duplicate", "conflict", "accepted", "duplicate", "conflict"]
    assert [d.reason for d in res.dead_letters] == ["conflict", "conflict"]
    assert res.dead_letters[0].source == "http[1]"
    assert res.dead_letters[0].index == 1
    assert "already has score 0.0" in res.dead_letters[0].detail
    after = pair(mon, "x", "y")
    assert after["n"] == before["n"] == 1
    assert after["delta"] == before["delta"] == 1.0
    assert mon.counters == {"accepted": 3, "duplicate": 2, "conflict": 2}


def test_perturbed_results_do_not_pair_and_count_flips() -> None:
    mon = Monitor()
    mon.apply([ev("1", "x", 1), ev("1", "y", 1),
               ev("1", "x", 0, variant="perturbed:paraphrase"),
               ev("2", "x", 1, variant="perturbed:paraphrase")])
    assert pair(mon, "x", "y")["n"] == 1
    # item 2's original arrives later: the flip count must see the earlier perturbed result
    res = mon.apply([ev("2", "x", 0), ev("1", "y", 0.0, variant="perturbed:paraphrase"),
                     ev("1", "y", 1.0, variant="perturbed:typo"),
                     ev("1", "x", 0, variant="perturbed:paraphrase")])
    assert res.outcomes == ["accepted", "accepted", "accepted", "duplicate"]
    assert {m: {k: c.to_json() for k, c in kinds.items()}
            for m, kinds in mon.stability("b").items()} == {
        "x": {"paraphrase": {"pairs": 2, "flips": 1, "right_on_original": 1}},
        "y": {"paraphrase": {"pairs": 1, "flips": 1, "right_on_original": 1},
              "typo": {"pairs": 1, "flips": 0, "right_on_original": 1}},
    }
    res = mon.apply([ev("1", "x", 1, variant="perturbed:paraphrase")])
    assert res.outcomes == ["conflict"]


def _stream(n: int, rng: np.random.Generator) -> list[ItemResult]:
    out = []
    for i in range(n):
        out.append(ev(str(i), "strong", float(rng.random() < 0.9)))
        out.append(ev(str(i), "weak", float(rng.random() < 0.3)))
    return out


def test_resolution_change_emitted_exactly_when_verdict_changes() -> None:
    rng = np.random.default_rng(7)
    events = _stream(400, rng)
    mon = Monitor()
    seen: list[str] = []
    emitted: list[ResolutionChange] = []
    for j in range(0, len(events), 10):
        res = mon.apply(events[j:j + 10])
        emitted.extend(c for c in res.changes if isinstance(c, ResolutionChange))
        t = mon.table("b")
        assert t is not None
        seen.append(t.verdict(t.models.index("strong"), t.models.index("weak")))
    transitions = [(a, b) for a, b in zip(["unresolved", *seen], seen, strict=False) if a != b]
    assert transitions, "the strong model must get resolved in 400 items"
    assert [(c.previous, c.verdict) for c in emitted] == transitions
    assert emitted[0].verdict == "resolved:strong"
    first = emitted[0]
    assert (first.model_a, first.model_b) == ("strong", "weak")
    # at the crossing E_n ≥ m/α = 20 (two models: m = 1)
    assert first.e_value is not None and first.e_value >= 20.0
    assert first.cs_low is not None and first.cs_high is not None and first.delta is not None
    assert first.cs_low < first.delta < first.cs_high
    ids = [c.change_id for c in emitted]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_ranking_change_on_tiers_and_resolution() -> None:
    mon = Monitor(CoreConfig(planned_models=2))
    res = mon.apply([ev("0", "a", 1), ev("0", "b", 0)])
    rc = [c for c in res.changes if isinstance(c, RankingChange)]
    assert len(rc) == 1 and rc[0].models == ["a", "b"] and not rc[0].resolved
    assert rc[0].unresolved_pairs == 1
    # a further item that keeps the order and the verdict changes nothing
    res = mon.apply([ev("1", "a", 1), ev("1", "b", 1)])
    assert [c for c in res.changes if isinstance(c, RankingChange)] == []
    # b overtakes a while the two are not separated: the order changes inside one tier, which
    # is noise, not a ranking change (the route shows the new order)
    res = mon.apply([ev(str(i), m, s) for i in range(2, 6) for m, s in (("a", 0), ("b", 1))])
    assert [c for c in res.changes if isinstance(c, RankingChange)] == []
    assert [m["model"] for m in mon.ranking("b").to_json()["models"]] == ["b", "a"]
    # a long run of b-only wins resolves the ranking: two tiers, an event
    res = mon.apply([ev(str(i), m, s) for i in range(6, 60) for m, s in (("a", 0), ("b", 1))])
    rc = [c for c in res.changes if isinstance(c, RankingChange)]
    assert len(rc) == 1 and rc[0].resolved and rc[0].unresolved_pairs == 0
    assert rc[0].models == ["b", "a"] and rc[0].tiers == [1, 2] and rc[0].top_resolved
    assert mon.ranking("b").to_json()["resolved"] is True


def test_fixed_n_family_and_the_anytime_shares() -> None:
    mon = Monitor(CoreConfig(family="all"))
    mon.apply([ev(str(i), m, 1.0) for i in range(3) for m in "abcd"])
    rk = mon.ranking("b").to_json()
    assert rk["fixed_n"]["m"] == 6 and rk["fixed_n"]["snapshot"] is True
    assert rk["fixed_n"]["alpha"] == pytest.approx(0.05 / 6)
    adj = Monitor(CoreConfig(family="adjacent"))
    adj.apply([ev(str(i), m, 1.0) for i in range(3) for m in "abcd"])
    assert adj.ranking("b").to_json()["fixed_n"]["m"] == 3
    # The anytime threshold of a pair does not depend on the family: its share of α is
    # fixed by its birth order (a, b, c, d arrive in that order; the default planned size,
    # M₀ ≥ 4, puts all six pairs in the first block).
    assert rk["anytime"]["procedure"] == "online-bonferroni"
    m0 = mon.config.planned_models
    assert m0 >= 4 and rk["anytime"]["planned_models"] == m0
    gamma = 0.05 / (m0 * (m0 - 1))  # the planned board's M₀(M₀ − 1)/2 pairs share α/2
    for p in rk["pairs"]:
        assert p["e_threshold"] == pytest.approx(1 / gamma)
    assert [p["e_threshold"] for p in adj.ranking("b").to_json()["pairs"]] == [
        p["e_threshold"] for p in rk["pairs"]]


def test_flagged_items_are_excluded_and_queryable() -> None:
    base = [ev(str(i), m, float((i + j) % 2)) for i in range(6) for j, m in enumerate("xy")]
    flagged = ev("2", "x", 1.0, variant="perturbed:leak", flags=["leak-suspect"])
    on = Monitor()
    on.apply([*base, flagged])
    assert on.excluded("b") == {"2"}
    assert on.flagged("b", "leak-suspect") == {"2"}
    assert pair(on, "x", "y")["n"] == 5
    off = Monitor(CoreConfig(exclude_flags=()))
    off.apply([*base, flagged])
    assert off.excluded("b") == set()
    assert off.flagged("b", "leak-suspect") == {"2"}
    assert pair(off, "x", "y")["n"] == 6
    # exclusion arriving in a later batch gives the same statistics as in the same batch; the
    # e-process keeps the evidence it saw before the flag (frozen in an earlier segment)
    late = Monitor()
    late.apply(base)
    late.apply([flagged])
    p_late, p_on = pair(late, "x", "y"), pair(on, "x", "y")
    for key in ("e_value", "log_e"):
        p_late.pop(key)
        p_on.pop(key)
    assert p_late == p_on


def test_cluster_design_effect_matches_stats_and_first_cluster_wins() -> None:
    rng = np.random.default_rng(3)
    n = 60
    xa = (rng.random(n) < 0.7).astype(float)
    xb = (rng.random(n) < 0.5).astype(float)
    groups = [f"c{i % 4}" if i % 5 else None for i in range(n)]
    events = []
    for i in range(n):
        events.append(ev(str(i), "a", xa[i], cluster=groups[i]))
        events.append(ev(str(i), "b", xb[i], cluster="ignored-later"))
    mon = Monitor()
    mon.apply(events)
    p = pair(mon, "a", "b")
    labels = [g if g is not None else f"single-{i}" for i, g in enumerate(groups)]
    ref = design_effect(xa - xb, labels)  # monitor.stats.clusters, the offline reference
    fixed: dict[str, Any] = p["fixed_n"]  # type: ignore[assignment]
    assert fixed["design_effect"] == pytest.approx(ref.de, rel=1e-12)
    sign = 1.0 if p["model_a"] == "a" else -1.0
    assert p["delta"] == pytest.approx(sign * float(np.mean(xa - xb)))
    # q_cluster: the cluster-robust variance with its small-sample factor G/(G − 1), G the
    # clusters (4 named + 12 unclustered items, each its own), and never above q
    g_count = len(set(labels))
    assert g_count == 16
    assert fixed["q_cluster"] == pytest.approx(
        fixed["q"] / max(ref.de * g_count / (g_count - 1), 1.0))
    assert fixed["q_cluster"] <= fixed["q"]


def test_bounded_scores_use_the_bounded_e_process() -> None:
    mon = Monitor(CoreConfig(planned_models=2))  # one pair planned: it spends α/2
    mon.apply([ev(str(i), "a", 0.75) for i in range(100)] + [ev(str(i), "b", 0.25)
                                                             for i in range(100)])
    rk = mon.ranking("b").to_json()
    assert rk["binary"] is False
    p = rk["pairs"][0]
    assert p["verdict"] == "resolved:a"
    assert math.isfinite(p["cs_low"]) and p["cs_low"] > 0
    assert "n10" not in p


def test_unknown_benchmark_and_bad_options() -> None:
    mon = Monitor()
    with pytest.raises(KeyError):
        mon.ranking("nope").to_json()
    mon.apply([ev("1", "a", 1)])
    with pytest.raises(ValueError, match="which"):
        [p.as_dict() for p in mon.pairs("b", "some")]
    with pytest.raises(ValueError, match="alpha"):
        CoreConfig(alpha=1.5)
    with pytest.raises(ValueError, match="correction"):
        CoreConfig(correction="sidak")


def test_deferred_evaluation_emits_against_the_last_emitted_verdicts() -> None:
    rng = np.random.default_rng(11)
    events = _stream(300, rng)
    eager = Monitor()
    eager.apply(events)
    lazy = Monitor()
    for j in range(0, len(events), 50):
        assert lazy.apply(events[j:j + 50], evaluate=False).changes == []
    assert lazy.dirty
    # queries see the current state without emitting anything
    assert lazy.ranking("b").to_json()["pairs"][0]["verdict"] == "resolved:strong"
    changes = lazy.evaluate()
    assert not lazy.dirty
    res = [c for c in changes if isinstance(c, ResolutionChange)]
    assert [(c.previous, c.verdict) for c in res] == [("unresolved", "resolved:strong")]
    assert lazy.evaluate() == []
    # the same figures and the same decision, taken at the same paired item; only the clock
    # time of the decision differs (each monitor notes its own)
    p_lazy, p_eager = pair(lazy, "strong", "weak"), pair(eager, "strong", "weak")
    assert p_lazy["decided"]["n"] == p_eager["decided"]["n"]
    p_lazy.pop("decided")
    p_eager.pop("decided")
    assert p_lazy == p_eager


def test_snapshot_round_trip_continues_identically() -> None:
    rng = np.random.default_rng(5)
    events = [ev(str(i), m, float(rng.integers(0, 2)), cluster=f"c{i % 3}" if i % 4 else None)
              for i in range(80) for m in ("a", "b", "c")]
    events += [ev("3", "a", 1.0, variant="perturbed:p", flags=["leak-suspect"]),
               ev("5", "b", 0.5, variant="perturbed:q")]
    first, rest = events[:150], events[150:]
    whole = Monitor()
    whole.apply(first)
    restored = Monitor.load_snapshot(whole.dump_snapshot())
    a = whole.apply(rest)
    b = restored.apply(rest)
    assert a.outcomes == b.outcomes
    assert [c.model_dump(exclude={"ts"}) for c in a.changes] == [
        c.model_dump(exclude={"ts"}) for c in b.changes]
    ta, tb = whole.table("b"), restored.table("b")
    assert ta is not None and tb is not None
    for name in ("n", "s", "v", "log_e", "de", "code"):
        np.testing.assert_array_equal(getattr(ta, name), getattr(tb, name))
    assert whole.counters == restored.counters
    assert whole.stability("b") == restored.stability("b")
    assert whole.excluded("b") == restored.excluded("b") == {"3"}


@pytest.mark.slow
def test_numeric_state_stays_within_16_bytes_per_stored_score() -> None:
    # docs/contract.md#targets: ≤ 16 bytes per stored (item, model) score.
    mon = Monitor()
    n_items, models = 5000, [f"m{j:02d}" for j in range(20)]
    mon.apply([ev(str(i), m, float((i * 7 + j) % 3 == 0), cluster=f"c{i % 14}")
               for i in range(n_items) for j, m in enumerate(models)], evaluate=False)
    st = mon._benches["b"]
    assert st.nbytes() / (n_items * len(models)) <= 16.0


def test_changes_follow_the_family_and_other_decisions_stay_queryable() -> None:
    # Three models far apart: (top, bottom) is decided but never adjacent in the ranking,
    # so it emits no ResolutionChange under family="adjacent" and one under family="all".
    rng = np.random.default_rng(3)
    p = {"top": 0.9, "mid": 0.5, "bottom": 0.1}
    events = [ev(str(i), m, float(rng.random() < q)) for i in range(300) for m, q in p.items()]

    def run(family: Literal["adjacent", "all"]) -> tuple[Monitor, set[tuple[str, str]]]:
        mon = Monitor(CoreConfig(family=family))
        pairs: set[tuple[str, str]] = set()
        for j in range(0, len(events), 30):
            for c in mon.apply(events[j:j + 30]).changes:
                if isinstance(c, ResolutionChange):
                    pairs.add((c.model_a, c.model_b))
        return mon, pairs

    adjacent, emitted = run("adjacent")
    assert emitted == {("top", "mid"), ("mid", "bottom")}
    assert pair(adjacent, "top", "bottom")["verdict"] == "resolved:top"
    _, emitted_all = run("all")
    assert emitted_all == {("top", "mid"), ("mid", "bottom"), ("top", "bottom")}


def test_snapshot_bytes_are_deterministic_and_bad_bytes_are_refused() -> None:
    mon = Monitor()
    mon.apply([ev(str(i), m, float((i + j) % 3 == 0), cluster=f"c{i % 4}")
               for i in range(50) for j, m in enumerate("xyz")])
    data = mon.dump_snapshot()
    assert Monitor.load_snapshot(data).dump_snapshot() == data == mon.dump_snapshot()
    with pytest.raises(ValueError, match="bad magic"):
        Monitor.load_snapshot(b"{}")
    with pytest.raises(ValueError, match="corrupt"):
        Monitor.load_snapshot(data[:40])


def test_adopting_a_decision_taken_again_keeps_the_logged_time() -> None:
    from datetime import UTC, datetime

    rng = np.random.default_rng(3)
    mon = Monitor()
    mon.apply([ev(str(i), m, float(rng.random() < q)) for i in range(200)
               for m, q in (("top", 0.9), ("low", 0.1))])
    view = mon.pairs("b")[0]
    assert view.verdict == "resolved:top" and view.decided_ts is not None
    logged = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert not mon.adopt_decision("b", "top", "low", "resolved:top", n=1, log_e=1.0, ts=logged)
    assert mon.pairs("b")[0].decided_ts == logged.isoformat()


def test_pair_pages_cover_every_pair_once_in_ranking_order() -> None:
    # Pages of any size concatenate to the whole all-pairs list; a model's pairs and a single
    # pair are the same records; unknown models are refused.
    rng = np.random.default_rng(11)
    models = [f"m{j}" for j in range(9)]
    events = [ev(str(i), m, float(rng.random() < 0.2 + 0.07 * j))
              for i in range(200) for j, m in enumerate(models)]
    mon = Monitor(CoreConfig(family="all"))
    mon.apply(events)
    every = [p.as_dict() for p in mon.pairs("b", "all")]
    assert len(every) == 36
    for size in (1, 5, 7, 36, 100):
        pages = [mon.pair_page("b", offset=o, limit=size).to_json() for o in range(0, 40, size)]
        assert all(p["total"] == 36 for p in pages)
        assert [q for p in pages for q in p["pairs"]] == every
    ranked = [m["model"] for m in mon.ranking("b").to_json()["models"]]
    third = ranked[2]
    own = mon.pair_page("b", model=third, limit=100).to_json()
    assert own["total"] == 8
    assert own["pairs"] == [p for p in every if third in (p["model_a"], p["model_b"])]
    one = mon.pair_page("b", model=ranked[5], other=ranked[1]).to_json()
    assert one["total"] == 1 and one["pairs"] == [
        p for p in every if (p["model_a"], p["model_b"]) == (ranked[1], ranked[5])]
    with pytest.raises(KeyError, match="nobody"):
        mon.pair_page("b", model="nobody").to_json()
    with pytest.raises(ValueError, match="offset"):
        mon.pair_page("b", offset=-1).to_json()


def test_consistent_order_is_the_topological_order_of_the_decisions() -> None:
    # Random decision graphs over a mean order: those running down the list (the shortcut)
    # and those with decisions against it; the order must put every decided winner first,
    # break ties by mean order, and fall back to the mean order on a cycle.
    import heapq

    from monitor.stats.ranks import consistent_order

    def kahn(by_mean: list[int], above: np.ndarray) -> tuple[int, ...]:
        sub = above[np.ix_(by_mean, by_mean)]
        indeg = sub.sum(axis=0).tolist()
        ready = [r for r in range(len(by_mean)) if indeg[r] == 0]
        heapq.heapify(ready)
        out = []
        while ready:
            r = heapq.heappop(ready)
            out.append(by_mean[r])
            for c in np.flatnonzero(sub[r]).tolist():
                indeg[c] -= 1
                if indeg[c] == 0:
                    heapq.heappush(ready, c)
        return tuple(out) if len(out) == len(by_mean) else tuple(by_mean)

    rng = np.random.default_rng(5)
    against = 0
    for trial in range(200):
        k = int(rng.integers(2, 30))
        by_mean = [int(j) for j in rng.permutation(k)]
        pos = np.empty(k, dtype=np.int64)
        pos[by_mean] = np.arange(k)
        above = np.zeros((k, k), dtype=bool)
        down = np.triu(rng.random((k, k)) < 0.4, 1)  # by position: earlier above later
        above[np.ix_(by_mean, by_mean)] = down
        if trial % 2:
            a, b = rng.integers(0, k, 2)
            if a != b and not above[b, a]:
                above[a, b] = True  # may go against the mean order, or close a cycle
        against += bool(np.tril(above[np.ix_(by_mean, by_mean)]).any())
        assert consistent_order(by_mean, above) == kahn(by_mean, above)
    assert 20 < against < 100  # both branches were taken


def test_a_table_held_across_a_batch_refuses_to_mix_two_moments() -> None:
    """A PairTable is the board at one evaluation: after another batch its figures would mix
    the old order and means with the new sums, so reading them raises instead."""
    from monitor.core.table import StaleTable

    mon = Monitor()
    mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, score=float(s))
               for i in range(20) for m, s in (("x", 1), ("y", i % 2))])
    held = mon.table("b")
    assert held is not None
    mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, score=0.0)
               for i in range(20, 60) for m in ("x", "y")])
    with pytest.raises(StaleTable, match="ask the monitor for the current one"):
        held.views(held.adjacent())
    fresh = mon.table("b")
    assert fresh is not None and fresh.views(fresh.adjacent())[0].figures.n == 60


def test_a_batch_does_not_change_once_built() -> None:
    from monitor.decoder import Results

    batch = Results([ItemResult(benchmark="a", item_id="1", model="m", score=1.0)])
    assert batch.benchmarks == {"a"}
    other = ItemResult(benchmark="b", item_id="1", model="m", score=1.0)
    for change in (lambda: batch.__iadd__([other]), lambda: batch.insert(0, other),
                   lambda: batch.pop(), lambda: batch.append(other),
                   lambda: batch.__setitem__(0, other)):
        with pytest.raises(TypeError, match="does not change once built"):
            change()
    assert batch.benchmarks == {"a"} and len(batch) == 1
