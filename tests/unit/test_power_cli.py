"""The power command's contract on the paper's worked example, through a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_worked_example_json() -> None:
    # Worked example in docs/contract.md#statistics: (p_A, p_B, ρ) = (0.65, 0.60, 0.30) → N* = 1028.
    out = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "power", "--pa", "0.65", "--pb", "0.60",
         "--rho", "0.30", "--n", "1200", "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    fig = json.loads(out)
    assert fig["n_star"] == 1028
    assert fig["resolved"] is True
    assert 1.16 < fig["q"] < 1.17


def test_bad_rho_is_a_clean_error() -> None:
    res = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "power", "--pa", "0.65", "--pb", "0.60",
         "--rho", "1.3"],
        capture_output=True, text=True,
    )
    assert res.returncode == 2
    assert "`rho` must lie in [-1, 1], got 1.3" in res.stderr
    assert "Traceback" not in res.stderr
