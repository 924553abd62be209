"""PairState: every prefix agrees with batch computations (numpy, paired_summary, clusters)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench._pair_state import PairState
from monitor.stats import emultiplicity as em
from monitor.stats import eprocess as ep
from monitor.stats.anytime_size import n_star_anytime
from monitor.stats.clusters import design_effect
from monitor.stats.paired import paired_summary


def _binary_pair(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    a = (rng.random(n) < 0.7).astype(float)
    flip = rng.random(n) < 0.3
    b = np.where(flip, 1.0 - a, a)
    return a, b


@pytest.mark.parametrize("kind", ["binary", "bounded"])
def test_every_prefix_matches_batch(kind: str) -> None:
    rng = np.random.default_rng(3)
    n = 120
    if kind == "binary":
        a, b = _binary_pair(rng, n)
    else:
        a, b = rng.beta(2, 3, n), rng.beta(2, 2.5, n)
    groups = rng.choice(["law", "math", "physics", "other"], size=n)
    st = PairState()
    for i in range(n):
        st.update(a[i], b[i], groups[i])
        if i < 2:
            continue
        xa, xb, d = a[: i + 1], b[: i + 1], a[: i + 1] - b[: i + 1]
        ref = paired_summary(xa, xb)
        assert st.n == ref.n
        assert st.delta == pytest.approx(ref.delta, abs=1e-12)
        assert st.sigma_d2 == pytest.approx(float(np.var(d)), abs=1e-12)
        assert st.sigma_d2 == pytest.approx(ref.sigma_d2, abs=1e-12)
        if math.isnan(ref.rho):
            assert math.isnan(st.rho)
        else:
            assert st.rho == pytest.approx(ref.rho, abs=1e-9)
        assert st.binary == ref.binary
        if ref.binary:
            assert (st.n11, st.n10, st.n01, st.n00) == (ref.n11, ref.n10, ref.n01, ref.n00)
            assert ref.n10 is not None and ref.n01 is not None  # set for binary data
            assert st.log_e() == pytest.approx(float(ep.log_e_mcnemar(ref.n10, ref.n01)))
        else:
            assert st.log_e() == pytest.approx(
                float(ep.log_e_bounded(i + 1, d.sum(), (d * d).sum())), rel=1e-10
            )
        assert st.design_effect() == pytest.approx(design_effect(d, groups[: i + 1]).de, rel=1e-9)


def test_batch_equals_sequential_and_figures() -> None:
    rng = np.random.default_rng(4)
    a, b = _binary_pair(rng, 3000)
    g = rng.choice([f"c{k}" for k in range(14)], size=a.size)
    one, batch = PairState(), PairState()
    for x, y, c in zip(a, b, g, strict=True):
        one.update(x, y, c)
    batch.update_batch(a, b, g)
    assert one == batch
    fig = batch.figures(alpha=0.05)
    ref = paired_summary(a, b)
    assert fig.n_star == pytest.approx(ref.n_star())
    assert fig.q == pytest.approx(ref.q())
    assert fig.mde == pytest.approx(ref.mde())
    # 14 clusters: the cluster-robust variance × 14/13, never below the i.i.d. one
    assert fig.q_cluster == pytest.approx(
        fig.q / max(design_effect(a - b, g).de * 14 / 13, 1.0))
    d = a - b  # N*_AV from the sizing estimates (Agresti & Min pseudo-items)
    d_size, s2_size = d.sum() / 3002, ((d * d).sum() + 1) / 3002 - (d.sum() / 3002) ** 2
    n_av = fig.n_star_anytime
    # (a running state has no decision path: sized for E ≥ 1/α, the "mean" rule)
    assert n_av is not None and n_av == pytest.approx(
        float(n_star_anytime(d_size, s2_size, rule="mean")))
    assert fig.q_anytime == pytest.approx(3000 / n_av)
    assert fig.cs_low is not None and fig.cs_high is not None
    assert fig.cs_low < fig.delta < fig.cs_high
    assert fig.e_value == pytest.approx(math.exp(fig.log_e))


def test_serialisation_is_small_plain_json() -> None:
    rng = np.random.default_rng(5)
    cats = ["biology", "business", "chemistry", "computer science", "economics", "engineering",
            "health", "history", "law", "math", "other", "philosophy", "physics", "psychology"]
    a, b = _binary_pair(rng, 12032)
    st = PairState()
    st.update_batch(a, b, rng.choice(cats, size=a.size))
    text = json.dumps(st.to_dict())
    assert len(text.encode()) <= 1024, len(text)
    assert PairState.from_dict(json.loads(text)) == st
    x, y = rng.beta(2, 2, 500), rng.beta(2, 2, 500)
    bounded = PairState()
    bounded.update_batch(x, y)
    back = PairState.from_dict(json.loads(json.dumps(bounded.to_dict())))
    assert back == bounded and back.log_e() == bounded.log_e()


def test_invalid_input() -> None:
    st = PairState()
    with pytest.raises(ValueError, match="xa"):
        st.update(1.5, 0.0)
    with pytest.raises(ValueError, match="xb"):
        st.update_batch([0.0], [math.nan])
    st.update(1.0, 0.0, "law")
    with pytest.raises(ValueError, match="groups"):
        st.update(1.0, 0.0)
    with pytest.raises(ValueError, match="data"):
        PairState.from_dict({"n": 1})
    empty = PairState()
    assert math.isnan(empty.delta) and empty.log_e() == 0.0 and empty.cs() == (-1.0, 1.0)


def test_e_bh() -> None:
    e = np.array([400.0, 90.0, 45.0, 2.0, 0.5])
    # m = 5, α = 0.05: Bonferroni threshold m/α = 100.
    # e-BH thresholds m/(αk) = 100, 50, 33.3, 25, 20 for k = 1..5: k* = 3 (45 ≥ 33.3).
    assert em.e_bh(e, alpha=0.05).tolist() == [True, True, True, False, False]
    shuffled = e[[3, 0, 4, 2, 1]]
    assert em.e_bh(shuffled, alpha=0.05).tolist() == [False, True, False, True, True]
    # e-BH rejects a superset of e-Bonferroni, and nothing on an empty family.
    rng = np.random.default_rng(6)
    for _ in range(200):
        x = rng.lognormal(2, 2, size=rng.integers(1, 30))
        assert np.all(em.e_bh(x) >= (x >= x.size / 0.05))  # never fewer than e-Bonferroni
    assert em.e_bh([]).size == 0
    with pytest.raises(ValueError, match="alpha"):
        em.e_bh(e, alpha=0.0)
    with pytest.raises(ValueError, match="e"):
        em.e_bh([-1.0])
