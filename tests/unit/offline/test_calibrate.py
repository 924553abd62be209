"""The fixed-N calibration driver: sizes, reproducibility, progress and the command's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from monitor.cli import main
from monitor.contracts import jsonable
from monitor.errors import ConfigError
from monitor.offline.calibrate import calibrate_resampled, calibrate_simulated
from monitor.offline.progress import Tick


class Recorder:
    """A StartTask that records each task as [label, total, units finished]."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, int, int]] = []

    def __call__(self, label: str, total: int) -> Tick:
        i = len(self.tasks)
        self.tasks.append((label, total, 0))

        def tick(k: int) -> None:
            name, tot, done = self.tasks[i]
            self.tasks[i] = (name, tot, done + k)

        return tick


def test_simulated_power_at_n_star_is_the_target() -> None:
    rec = Recorder()
    c = calibrate_simulated(0.65, 0.60, 0.30, reps=2000, seed=11, progress=rec)
    assert c.n_star == c.result.n == 1028  # docs/contract.md#statistics worked example
    assert c.power == c.result.rejections / 2000
    # N* is sized for power 0.8: the rejection count must be consistent with it.
    assert binomtest(c.result.rejections, 2000, 0.8).pvalue > 1e-3
    low, high = c.ci()
    assert low <= c.power <= high
    assert rec.tasks == [("simulating", 2000, 2000)]


def test_explicit_n_and_seed() -> None:
    one = calibrate_simulated(0.65, 0.60, 0.30, n=200, reps=300, seed=3, test="mcnemar")
    two = calibrate_simulated(0.65, 0.60, 0.30, n=200, reps=300, seed=3, test="mcnemar")
    assert one == two and one.result.n == 200 and one.n_star == 1028
    assert one.result.test == "mcnemar"
    # 200 items is far below N*: the power is well under the target.
    assert one.power < 0.5


def test_zero_gap_has_no_planned_size() -> None:
    with pytest.raises(ConfigError, match="N\\* is infinite"):
        calibrate_simulated(0.6, 0.6, 0.2, reps=100, seed=0)


def test_resampled_pair_uses_its_own_figures(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    a = (rng.uniform(size=800) < 0.75).astype(int)
    b = np.where(rng.uniform(size=800) < 0.2, 1 - a, a)
    path = tmp_path / "t.csv"
    path.write_text("item_id,A,B,meta\n" + "".join(
        f"i{i},{x},{y},z\n" for i, (x, y) in enumerate(zip(a, b, strict=True))))
    rec = Recorder()
    c = calibrate_resampled(path, "A", "B", exclude=("meta",), reps=400, seed=2, progress=rec)
    d = c.to_dict()
    assert d["mode"] == "resample" and d["items"] == 800 and d["table"] == str(path)
    assert d["p_a"] == pytest.approx(a.mean()) and d["p_b"] == pytest.approx(b.mean())
    assert d["delta"] == pytest.approx(a.mean() - b.mean())
    assert d["sigma_d2"] == pytest.approx(np.var(a - b))
    assert c.result.n == c.n_star and rec.tasks == [("resampling A vs B", 400, 400)]


def test_to_dict_is_the_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["calibrate", "--pa", "0.7", "--pb", "0.6", "--rho", "0.4", "--reps", "300",
               "--seed", "9", "--json"])
    assert rc == 0
    expected = jsonable(calibrate_simulated(0.7, 0.6, 0.4, reps=300, seed=9).to_dict())
    assert json.loads(capsys.readouterr().out) == expected
