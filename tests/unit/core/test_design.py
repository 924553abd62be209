"""The declared design of a benchmark: it decides the verdict, it is kept by snapshots and
restarts, and another declaration for a stored benchmark is refused."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from monitor.contracts import ItemResult
from monitor.core import CoreConfig, Monitor
from monitor.core.config import BenchmarkSpec
from monitor.runners.settings import Settings


def _events(seed: int, *, clusters: int = 120, per: int = 5) -> list[ItemResult]:
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(clusters), per)
    ability = np.array([1.5, 0.0, -1.5])
    logit = ability[None, :] + rng.normal(0.0, 0.5, size=(clusters, 3))[g]
    x = (rng.random(logit.shape) < 1 / (1 + np.exp(-logit))).astype(float)
    order = rng.permutation(g.size)
    return [ItemResult(benchmark="b", item_id=f"q{i}", model=f"m{j}", score=float(x[i, j]),
                       cluster=f"c{g[i]}") for i in order for j in range(3)]


def test_a_clustered_board_survives_a_snapshot_exactly() -> None:
    events = _events(1)
    config = CoreConfig(design="clusters", family="all")

    def now() -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC)

    whole = Monitor(config, now=now)
    whole.apply(events)
    half = Monitor(config, now=now)
    half.apply(events[:700])
    data = half.dump_snapshot()
    resumed = Monitor.load_snapshot(data, config, now=now)
    assert resumed.dump_snapshot() == data
    resumed.apply(events[700:])
    a, b = resumed._benches["b"].cpaths, whole._benches["b"].cpaths
    assert a is not None and b is not None
    for name in a.__dataclass_fields__:  # the clustered state, cell by cell
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert [p.as_dict() for p in resumed.pairs("b", "all")] == [p.as_dict() for p in whole.pairs("b", "all")]
    assert any(p["verdict"].startswith("resolved:") for p in [p.as_dict() for p in whole.pairs("b", "all")])


def test_the_design_decides_the_verdict() -> None:
    """The same stream under each design: items and strata take the item-level decision,
    sampled clusters the clustered one (a different, later decision)."""
    events = _events(2)
    verdicts = {}
    for design in ("items", "strata", "clusters"):
        mon = Monitor(CoreConfig(design=design, family="all"))
        mon.apply(events)
        pairs = {(p["model_a"], p["model_b"]): p for p in [p.as_dict() for p in mon.pairs("b", "all")]}
        verdicts[design] = pairs
        assert all(p["design"] == design for p in pairs.values())
        assert mon.ranking("b").to_json()["anytime"]["design"] == design
    top = ("m0", "m2")
    assert verdicts["items"][top]["decided"]["n"] == verdicts["strata"][top]["decided"]["n"]
    assert verdicts["clusters"][top]["decided"]["n"] > verdicts["items"][top]["decided"]["n"]
    fixed = verdicts["strata"][top]["fixed_n"]
    assert fixed["q_strata"] is not None and fixed["q_cluster"] is None


def test_another_design_for_a_stored_benchmark_is_refused() -> None:
    mon = Monitor(CoreConfig(benchmarks={"b": BenchmarkSpec(design="clusters")}))
    mon.apply(_events(3)[:300])
    data = mon.dump_snapshot()
    with pytest.raises(ValueError, match=r"design 'clusters'.*now say 'strata'"):
        Monitor.load_snapshot(data, CoreConfig(benchmarks={"b": BenchmarkSpec(
            design="strata")}))
    assert Monitor.load_snapshot(data, CoreConfig(benchmarks={"b": BenchmarkSpec(
        design="clusters")})).dump_snapshot() == data


def test_settings_declare_a_benchmark_s_design(tmp_path: object) -> None:
    from pathlib import Path

    cfg = Path(str(tmp_path)) / "s.toml"
    cfg.write_text('design = "strata"\n[benchmarks.passages]\ndesign = "clusters"\n'
                   "cluster_items = 3\n")
    core = Settings.build(config=cfg, serve_http=False).core_config()
    assert core.spec("passages") == BenchmarkSpec(design="clusters", cluster_items=3)
    assert core.spec("mmlu_pro").design == "strata"


def test_the_guarantee_names_the_assumption_of_each_design() -> None:
    """The ranking states its guarantee with what the declared design assumes: exchangeable
    items in an order independent of their outcomes, fixed strata, or sampled clusters — a
    different assumption for each design, each naming its own and not another's."""
    events = _events(4, clusters=30)
    rules = {}
    for design in ("items", "strata", "clusters"):
        mon = Monitor(CoreConfig(design=design, family="all"))
        mon.apply(events)
        rules[design] = mon.ranking("b").to_json()["anytime"]
    said = {design: rule["assumption"].lower() for design, rule in rules.items()}
    assert "exchangeable" in said["items"], said
    assert "order independent of their outcomes" in said["items"], said
    assert "strat" not in said["items"] and "cluster" not in said["items"], said
    assert "fixed strata" in said["strata"] and "sampled" not in said["strata"], said
    assert "sampled" in said["clusters"] and "strat" not in said["clusters"], said
    assert len(set(said.values())) == 3, said
    for design, rule in rules.items():
        assert rule["design"] == design
        # The guarantee itself is the board's one statement, whatever the design.
        assert "1 − α" in rule["statement"] and "final" in rule["statement"], rule
