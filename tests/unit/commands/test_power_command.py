"""`llm-monitor power`: the shortcut figures and validation of p, ρ and δ = 0."""

from __future__ import annotations

import json

import pytest

from monitor.cli import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["power", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_worked_example_shortcut(capsys: pytest.CaptureFixture[str]) -> None:
    # Worked example of docs/contract.md#statistics: N* = 1028 and the shortcut 515, "about half".
    rc, out, _ = _run(capsys, "--pa", "0.65", "--pb", "0.60", "--rho", "0.30", "--json")
    fig = json.loads(out)
    assert rc == 0
    assert fig["n_star"] == 1028 and fig["n_shortcut"] == 515
    assert fig["shortcut_ratio"] == pytest.approx(0.50072, abs=1e-5)
    # Lemma 1 at p = 0.625, ρ = 0.3, δ = 0.05: 1/2 + C δ² agrees with the ratio to O(δ⁴).
    assert fig["shortcut_ratio"] == pytest.approx(0.5 + fig["lemma1_c"] * 0.05**2, abs=0.05**4)
    for key in ("n_star_exact", "sigma_d2", "lemma1_c", "n_shortcut"):
        assert key in fig


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pa", "0", "--pb", "0.6"), "`p_a` must lie in (0, 1), got 0.0"),
        (("--pa", "0.5", "--pb", "1"), "`p_b` must lie in (0, 1), got 1.0"),
        (("--pa", "1", "--pb", "0.5"), "`p_a` must lie in (0, 1), got 1.0"),
    ],
)
def test_degenerate_probability_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    rc, out, err = _run(capsys, *args, "--rho", "0.3")
    assert rc == 2 and out == ""
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("rho", ["-1.2", "1.0001", "nan"])
def test_rho_outside_range_is_a_clean_error(capsys: pytest.CaptureFixture[str], rho: str) -> None:
    rc, _, err = _run(capsys, "--pa", "0.6", "--pb", "0.5", "--rho", rho)
    assert rc == 2
    assert "`rho` must lie in [-1, 1]" in err


@pytest.mark.parametrize("rho", ["1.0", "-0.9"])
def test_infeasible_rho_names_the_frechet_range(capsys: pytest.CaptureFixture[str],
                                                rho: str) -> None:
    rc, out, err = _run(capsys, "--pa", "0.65", "--pb", "0.60", "--rho", rho)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.strip() == ("llm-monitor: error: `rho` must lie in [-0.599, 0.899] for "
                           f"p_A = 0.65, p_B = 0.6, got {float(rho)}")


def test_zero_gap_reports_infinite_size(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--pa", "0.6", "--pb", "0.6", "--rho", "0.3", "--n", "500", "--json")
    fig = json.loads(out)
    assert rc == 0
    assert fig["n_star"] == "inf" and fig["n_star_exact"] == "inf"
    assert fig["n_shortcut"] == "inf" and fig["shortcut_ratio"] is None
    assert fig["q"] == 0.0 and fig["resolved"] is False


def test_zero_gap_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--pa", "0.6", "--pb", "0.6", "--rho", "0.3")
    assert rc == 0 and "inf" in out
