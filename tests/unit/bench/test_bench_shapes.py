"""The shape grid runs end to end on a small grid and prints its table and exponents."""

from __future__ import annotations

import math

import pytest

from bench.bench_shapes import Cell, exponents, main


def test_a_small_grid_prints_rates_ratios_and_the_exponent(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--models", "20,40", "--items", "300", "--orders", "shuffled,by-item",
                 "--batches", "1000", "--cap", "5000"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.split()[:1] in (["20"], ["40"])]
    assert len(rows) == 4
    for row in rows:
        assert float(row[5].replace(",", "")) > 0  # results/s
        assert row[6].endswith("×")  # the ratio to the json.loads loop
    assert "growth exponent" in out and "worst exponent" in out


def test_the_exponent_is_that_of_the_cost_per_result_in_m() -> None:
    cells = [Cell(m, 100, "shuffled", 1000, 100 * m, 1000, 1e-6 * m ** 1.5 * 1000, 1e6, 1.0)
             for m in (10, 40)]
    ((a, b, e),) = exponents(cells)[(100, "shuffled", 1000)]
    assert (a, b) == (10, 40) and math.isclose(e, 1.5)
