"""The monitor's pair statistics equal an offline numpy computation, whatever the batching."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.stats import eprocess as ep

MODELS = ["m0", "m1", "m2", "m3"]
BINARY = [0.0, 1.0]
DYADIC = [0.0, 0.25, 0.5, 0.75, 1.0]  # exact in binary floating point: sums are exact too


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[ItemResult], list[int], list[int]]:
    scores = draw(st.sampled_from([BINARY, DYADIC]))
    event = st.builds(
        lambda b, i, m, s, c, v, f: ItemResult(benchmark=b, item_id=str(i), model=m, score=s,
                                               cluster=c, variant=v, flags=f),
        st.sampled_from(["b1", "b2"]),
        st.integers(0, 9),
        st.sampled_from(MODELS),
        st.sampled_from(scores),
        st.sampled_from([None, "c1", "c2"]),
        st.sampled_from(["original"] * 6 + ["perturbed:p"]),
        st.sampled_from([[]] * 8 + [["leak-suspect"]]),
    )
    events = draw(st.lists(event, min_size=1, max_size=70))
    cuts_a = sorted(draw(st.sets(st.integers(1, max(len(events) - 1, 1)), max_size=8)))
    cuts_b = sorted(draw(st.sets(st.integers(1, max(len(events) - 1, 1)), max_size=8)))
    return events, cuts_a, cuts_b


def run(events: list[ItemResult], cuts: list[int]) -> tuple[Monitor, list[str]]:
    mon = Monitor(CoreConfig())
    outcomes: list[str] = []
    bounds = [0, *cuts, len(events)]
    for lo, hi in itertools.pairwise(bounds):
        if hi > lo:
            outcomes.extend(mon.apply(events[lo:hi]).outcomes)
    return mon, outcomes


@dataclass
class PairRef:
    """Offline statistics of one ordered model pair; ``de`` and the counts only when ``n > 0``."""

    n: int
    s: float
    v: float
    de: float = 1.0
    kind: str = ""  # the e-process: "mcnemar", "bounded" or "switched" (McNemar, then bounded)
    n10: int = 0
    n01: int = 0


@dataclass
class OfflineRef:
    cells: dict[tuple[str, str], float]
    pairs: dict[tuple[str, str], PairRef] = field(default_factory=dict)


def offline(events: list[ItemResult], bench: str) -> OfflineRef:
    """First result per cell wins; flags of accepted results exclude items; plain numpy."""
    cells: dict[tuple[str, str], float] = {}
    perturbed: set[tuple[str, str, str]] = set()
    cluster: dict[str, str | None] = {}
    excluded: set[str] = set()
    for e in events:
        if e.benchmark != bench:
            continue
        if e.variant == "original":
            accepted = (e.item_id, e.model) not in cells
            if accepted:
                cells[(e.item_id, e.model)] = e.score
                cluster.setdefault(e.item_id, e.cluster)
        else:
            accepted = (e.variant, e.item_id, e.model) not in perturbed
            perturbed.add((e.variant, e.item_id, e.model))
        if accepted and "leak-suspect" in e.flags:
            excluded.add(e.item_id)
    items = sorted({i for i, _ in cells} - excluded)
    # Paired items of each pair in stream order (the order their second score arrived).
    arrival = {cell: k for k, cell in enumerate(cells)}  # dicts keep insertion order
    out = OfflineRef(cells)
    for a in MODELS:
        for b in MODELS:
            both = [i for i in items if (i, a) in cells and (i, b) in cells]
            d = np.array([cells[(i, a)] - cells[(i, b)] for i in both])
            n = d.size
            stats = PairRef(n=n, s=float(d.sum()), v=float((d * d).sum()))
            if n:
                labels = [c if (c := cluster[i]) is not None else f"single:{i}" for i in both]
                dbar = d.mean()
                groups = sorted(set(labels))
                sums = np.array([sum(d[j] - dbar for j in range(n) if labels[j] == g)
                                 for g in groups])
                var_cr = float(np.sum(sums**2)) / n**2
                var_iid = float(np.var(d)) / n
                stats.de = var_cr / var_iid if var_iid > 0 else 1.0
                stats.n10 = int(np.sum(d > 0))
                stats.n01 = int(np.sum(d < 0))
                seq = sorted(both, key=lambda i: max(arrival[(i, a)], arrival[(i, b)]))
                nonbinary = [cells[(i, a)] not in (0.0, 1.0) or cells[(i, b)] not in (0.0, 1.0)
                             for i in seq]
                stats.kind = ("bounded" if nonbinary[0] else
                              "switched" if any(nonbinary) else "mcnemar")
            out.pairs[(a, b)] = stats
    return out


@settings(max_examples=120, deadline=None)
@given(streams())
def test_final_statistics_match_offline_and_any_batching(
    data: tuple[list[ItemResult], list[int], list[int]],
) -> None:
    events, cuts_a, cuts_b = data
    mon_a, outcomes_a = run(events, cuts_a)
    mon_b, outcomes_b = run(events, cuts_b)
    one, outcomes_one = run(events, [])
    assert outcomes_a == outcomes_b == outcomes_one
    assert mon_a.counters == mon_b.counters == one.counters
    for bench in one.benchmarks():
        ta, tb, t1 = mon_a.table(bench), mon_b.table(bench), one.table(bench)
        assert ta is not None and tb is not None and t1 is not None
        # Identical, not merely close, for any batching of the same sequence. A pair's
        # e-process kind and decisions follow its items in stream order, and a flag excludes
        # its item from the end of the batch that carries it: with flags in the stream, those
        # depend on where the batch boundaries fall, the sums do not.
        flagged = any(e.flags and e.benchmark == bench for e in events)
        names = ("n", "s", "v", "de", "q", "q_cluster", "mde", "means")
        for name in names if flagged else (*names, "log_e", "code"):
            np.testing.assert_array_equal(getattr(ta, name), getattr(t1, name), err_msg=name)
            np.testing.assert_array_equal(getattr(tb, name), getattr(t1, name), err_msg=name)
        assert ta.order == tb.order == t1.order
        ref = offline(events, bench)
        idx = {m: j for j, m in enumerate(t1.models)}
        # A pair is binary (McNemar e-process) when both models' accepted scores are all 0/1.
        binary_model = {m: all(s in (0.0, 1.0) for (_, mm), s in ref.cells.items() if mm == m)
                        for m in t1.models}
        for a in t1.models:
            for b in t1.models:
                r = ref.pairs[(a, b)]
                i, j = idx[a], idx[b]
                binary = binary_model[a] and binary_model[b]
                assert t1.binary[i, j] == binary
                assert t1.n[i, j] == r.n
                assert t1.s[i, j] == r.s
                assert t1.v[i, j] == r.v
                if r.n == 0:
                    assert t1.log_e[i, j] == 0.0 and t1.code[i, j] == 0
                    continue
                np.testing.assert_allclose(t1.de[i, j], r.de, rtol=1e-9, atol=1e-12)
                if binary:
                    assert (t1.n10[i, j], t1.n01[i, j]) == (r.n10, r.n01)
                if flagged or r.kind == "switched":
                    continue  # the switched product is checked in test_sequential
                if r.kind == "mcnemar":
                    expect = float(ep.log_e_mcnemar(r.n10, r.n01))
                else:
                    expect = float(ep.log_e_bounded(r.n, r.s, r.v))
                np.testing.assert_allclose(t1.log_e[i, j], expect, rtol=1e-12, atol=1e-12)
