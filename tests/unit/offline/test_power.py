"""The power planner against the closed forms of docs/contract.md#statistics and the command's JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from monitor.cli import main
from monitor.contracts import jsonable
from monitor.offline.power import plan_power
from monitor.stats import power as pw


def _closed_form(pa: float, pb: float, rho: float, *, alpha: float = 0.05,
                 power: float = 0.8) -> tuple[float, float, float]:
    """(σ_D², N*, shortcut n_h) written out from the formulas, independently of monitor.stats."""
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    va, vb = pa * (1 - pa), pb * (1 - pb)
    s2 = va + vb - 2 * rho * math.sqrt(va * vb)
    h = 2 * math.asin(math.sqrt(pa)) - 2 * math.asin(math.sqrt(pb))
    return s2, z * z * s2 / (pa - pb) ** 2, z * z / h**2 * (1 - rho)


def test_worked_example() -> None:
    # docs/contract.md#statistics: (0.65, 0.60, 0.30) → N* = 1028, the shortcut 515.
    plan = plan_power(0.65, 0.60, 0.30, n=1200)
    s2, n_star, n_h = _closed_form(0.65, 0.60, 0.30)
    assert plan.sigma_d2 == pytest.approx(s2, rel=1e-12)
    assert plan.n_star_exact == pytest.approx(n_star, rel=1e-12)
    assert plan.n_star == 1028 and plan.shortcut.n == 515
    assert plan.shortcut_ratio == pytest.approx(n_h / n_star, rel=1e-12)
    assert plan.q() == pytest.approx(1200 / n_star, rel=1e-12)
    z = norm.ppf(0.975) + norm.ppf(0.8)
    assert plan.mde() == pytest.approx(z * math.sqrt(s2 / 1200), rel=1e-12)
    # The anytime-valid size is larger: a peeking-proof test pays for the peeks.
    q, q_av = plan.q(), plan.q_anytime()
    assert q is not None and q_av is not None
    assert plan.n_star_anytime > plan.n_star and q_av < q


def test_alpha_and_power_reach_every_size() -> None:
    plan = plan_power(0.7, 0.62, -0.1, alpha=0.01, power=0.9)
    _, n_star, n_h = _closed_form(0.7, 0.62, -0.1, alpha=0.01, power=0.9)
    assert plan.n_star_exact == pytest.approx(n_star, rel=1e-12)
    assert plan.shortcut.n_exact == pytest.approx(n_h, rel=1e-12)
    assert plan.n_star_anytime_exact > plan_power(0.7, 0.62, -0.1).n_star_anytime_exact


def test_without_n_there_is_no_q() -> None:
    plan = plan_power(0.65, 0.60, 0.30)
    assert plan.q() is None and plan.mde() is None and plan.q_anytime() is None
    assert not {"n", "q", "mde", "resolved", "q_anytime"} & plan.to_dict().keys()


def test_zero_gap() -> None:
    plan = plan_power(0.6, 0.6, 0.3, n=500)
    assert plan.n_star == math.inf and plan.n_star_anytime == math.inf
    assert math.isnan(plan.shortcut_ratio)
    assert plan.q() == 0.0 and plan.to_dict()["resolved"] is False


def test_invalid_plan_is_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"`rho` must lie in \[-1, 1\], got 1.3"):
        plan_power(0.65, 0.60, 1.3)


@pytest.mark.parametrize("rho", [1.0, -0.9, 0.9])
def test_rho_outside_the_frechet_bounds_is_rejected(rho: float) -> None:
    # p_A = 0.65, p_B = 0.60: p11 ∈ [0.25, 0.60] (Fréchet), so
    # ρ ∈ [(0.25 − 0.39)/0.23367, (0.60 − 0.39)/0.23367] = [−0.5991, 0.8987].
    with pytest.raises(ValueError, match=r"`rho` must lie in \[-0.599, 0.899\] for "
                                         r"p_A = 0.65, p_B = 0.6, got "):
        plan_power(0.65, 0.60, rho)


def test_frechet_bounds_are_the_attainable_extremes() -> None:
    # At each bound one joint cell is 0 and the plan is accepted. Upper: p01 = 0, D = +1 with
    # probability 0.05, σ_D² = 0.05 · 0.95. Lower: p00 = 0, D = +1 w.p. 0.40 and −1 w.p. 0.35,
    # σ_D² = 0.75 − 0.05².
    lo, hi = pw.rho_bounds(0.65, 0.60)
    assert lo == pytest.approx(-0.14 / math.sqrt(0.65 * 0.35 * 0.6 * 0.4), rel=1e-12)
    assert plan_power(0.65, 0.60, hi).sigma_d2 == pytest.approx(0.05 * 0.95, rel=1e-9)
    assert plan_power(0.65, 0.60, lo).sigma_d2 == pytest.approx(0.75 - 0.05**2, rel=1e-9)
    assert pw.rho_bounds(0.5, 0.5) == pytest.approx((-1.0, 1.0))


@pytest.mark.parametrize("n", [None, 1200])
def test_to_dict_is_the_command_json(capsys: pytest.CaptureFixture[str], n: int | None) -> None:
    args = ["power", "--pa", "0.65", "--pb", "0.6", "--rho", "0.3", "--alpha", "0.1", "--json"]
    rc = main(args + ([] if n is None else ["--n", str(n)]))
    assert rc == 0
    expected = jsonable(plan_power(0.65, 0.6, 0.3, n=n, alpha=0.1).to_dict())
    assert json.loads(capsys.readouterr().out) == expected


def test_samples_plan_follows_the_within_item_formula(capsys: pytest.CaptureFixture[str]) -> None:
    # σ_D²(K) = σ_D² (1 − w + w/K) (Miller 2024): written out, with the closed-form σ_D².
    s2, n_star_one, _ = _closed_form(0.65, 0.60, 0.30)
    z = norm.ppf(0.975) + norm.ppf(0.8)
    w, k = 0.8, 4
    s2k = s2 * (1 - w + w / k)
    plan = plan_power(0.65, 0.60, 0.30, n=700, samples=k, within_share=w)
    assert plan.samples is not None
    fig = plan.samples.to_dict()
    assert fig["sigma_d2_samples"] == pytest.approx(s2k, rel=1e-12)
    assert fig["n_star_samples"] == math.ceil(z * z * s2k / 0.05**2) == 412
    # whole items, each answered K times (not ⌈N*(K) · K⌉, which would split an item)
    assert fig["answers_per_model"] == fig["n_star_samples"] * k == 412 * 4
    # K needed at 700 items: the smallest K with z² σ_D²(K)/δ² ≤ 700, by brute force
    brute = next(kk for kk in range(1, 100) if z * z * s2 * (1 - w + w / kk) / 0.05**2 <= 700)
    assert fig["samples_needed"] == brute == 2
    assert fig["cheaper"] == "resolved" and fig["q_samples"] > 1
    # 300 items are too few at K = 4; an answer on a new item beats another sample.
    few = plan_power(0.65, 0.60, 0.30, n=300, samples=4, within_share=w).samples
    assert few is not None and few.cheaper()[0] == "items"
    assert few.to_dict()["samples_needed"] == next(
        kk for kk in range(1, 100) if z * z * s2 * (1 - w + w / kk) / 0.05**2 <= 300)
    # the between-item term alone is more than 100 items resolve: no K is enough
    none = plan_power(0.65, 0.60, 0.30, n=100, samples=4, within_share=w).samples
    assert none is not None and none.to_dict()["samples_needed"] == math.inf
    # without n: at K samples the answers per model exceed N* at one sample
    alone = plan_power(0.65, 0.60, 0.30, samples=k, within_share=w).samples
    assert alone is not None and alone.answers() > n_star_one and alone.cheaper()[0] == "items"
    assert main(["power", "--pa", "0.65", "--pb", "0.60", "--rho", "0.30", "--n", "300",
                 "--samples", "4", "--within-share", "0.8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_star_samples"] == 412 and out["cheaper"] == "items"
    with pytest.raises(ValueError, match="needs `within_share`"):
        plan_power(0.65, 0.60, 0.30, samples=4)
    with pytest.raises(ValueError, match="within_share"):
        plan_power(0.65, 0.60, 0.30, samples=4, within_share=1.5)


def test_the_live_pair_view_and_power_give_one_n_star_anytime(
        capsys: pytest.CaptureFixture[str]) -> None:
    # One number, one implementation: every pair of a live board shows the N*_AV that
    # `power` (library and --json) computes for the same gap, variance, planned board and pair.
    # A board planned for 2 models: pair 1 (x, y) is block 0 (α/2), pairs 2 and 3 block 1 (α/8).
    from monitor.contracts import ItemResult
    from monitor.core import CoreConfig, Monitor
    from monitor.stats.figures import sizing_estimates
    from monitor.stats.sequential import pair_number

    rng = np.random.default_rng(22)
    common = rng.random(400)
    scores = {m: ((0.7 * common + 0.3 * rng.random(400)) < p).astype(float)
              for m, p in (("x", 0.72), ("y", 0.62), ("z", 0.50))}
    mon = Monitor(CoreConfig(alpha=0.05, power=0.8, planned_models=2))
    mon.apply([ItemResult(benchmark="b", item_id=str(i), model=m, score=float(scores[m][i]))
               for i in range(400) for m in ("x", "y", "z")])  # born x, y, z
    born = {"x": 0, "y": 1, "z": 2}
    pair_views = mon.pairs("b", "all")
    assert len(pair_views) == 3
    seen_blocks = set()
    for pv in pair_views:
        view = pv.as_dict()
        exact = pv.figures.n_star_anytime  # the unrounded figure (the JSON rounds it up)
        assert exact is not None
        lo, hi = sorted((born[view["model_a"]], born[view["model_b"]]))
        number = int(pair_number(lo, hi))
        # the view's sizing gap and variance as a plan (p_A, p_B, ρ) around 1/2
        d, s2 = (float(x[0]) for x in sizing_estimates(view["n"], view["s"], view["v"]))
        pa, pb = 0.5 + d / 2, 0.5 - d / 2
        w = pa * (1 - pa)
        rho = (2 * w - s2) / (2 * w)
        plan = plan_power(pa, pb, rho, planned_models=2, pair=number)
        seen_blocks.add(plan.block)
        assert plan.level == pytest.approx(1.0 / view["e_threshold"], rel=1e-12)
        assert plan.n_star_anytime_exact == pytest.approx(exact, rel=1e-9)
        assert plan.n_star_anytime == view["n_star_anytime"] == math.ceil(exact)
        assert main(["power", "--pa", repr(pa), "--pb", repr(pb), "--rho", repr(rho),
                     "--planned-models", "2", "--pair", str(number), "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["n_star_anytime"] == view["n_star_anytime"]
        assert out["pair"] == number and out["e_threshold"] == pytest.approx(view["e_threshold"])
    assert seen_blocks == {0, 1}


def test_power_sizes_the_live_rule_beside_the_single_pair_one() -> None:
    # docs/anytime.md: (0.65, 0.60, 0.30) on a board planned for 32 models (γ_p = α/992) needs
    # far more items than one pair alone at α; later blocks and bigger boards need more.
    first = plan_power(0.65, 0.60, 0.30, planned_models=32)
    assert first.level == pytest.approx(0.05 / 992, rel=1e-12) and first.block == 0
    assert 3.8 < first.n_star_anytime / first.n_star < 4.1
    assert 1.6 < first.n_star_anytime_single / first.n_star < 1.7
    later = plan_power(0.65, 0.60, 0.30, planned_models=32, pair=497)  # block 1: α/(496·8)
    assert later.block == 1 and later.level == pytest.approx(0.05 / (496 * 8), rel=1e-12)
    assert later.n_star_anytime > first.n_star_anytime
    by_block = plan_power(0.65, 0.60, 0.30, planned_models=32, block=1)
    assert (by_block.level, by_block.n_star_anytime_exact) == (later.level,
                                                               later.n_star_anytime_exact)
    small = plan_power(0.65, 0.60, 0.30, planned_models=3)
    assert first.n_star_anytime_single < small.n_star_anytime < first.n_star_anytime
    d = first.to_dict()
    assert d["n_star_anytime_single_pair"] == first.n_star_anytime_single
    assert d["e_threshold"] == pytest.approx(992 / 0.05) and d["planned_models"] == 32


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"planned_models": 1}, "planned_models"), ({"pair": 0}, "pair"), ({"block": -1}, "block"),
    ({"pair": 3, "block": 1}, "not both"),
])
def test_invalid_board_options(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_power(0.65, 0.60, 0.30, **kwargs)
