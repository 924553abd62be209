"""`llm-monitor calibrate`: JSON contract, resampling a real table, clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.cli import main

KEYS = {"p_a", "p_b", "rho", "n", "reps", "rejections", "power", "ci_low", "ci_high"}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["calibrate", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_simulate_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "--pa", "0.65", "--pb", "0.60", "--rho", "0.30",
                        "--reps", "500", "--seed", "4", "--json")
    fig = json.loads(out)
    assert rc == 0 and err == ""  # no progress bar with --json
    assert fig.keys() >= KEYS
    assert fig["n"] == fig["n_star"] == 1028 and fig["reps"] == 500
    assert fig["ci_low"] <= fig["power"] <= fig["ci_high"]
    assert fig["power"] == fig["rejections"] / 500


def test_explicit_n_and_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "--pa", "0.65", "--pb", "0.60", "--rho", "0.30", "--n", "300",
                      "--reps", "300", "--seed", "1", "--test", "mcnemar")
    assert rc == 0 and "Wilson" in out and "mcnemar" in out


def test_resample_real_table(capsys: pytest.CaptureFixture[str], shared_data: Path) -> None:
    table = str(shared_data / "mmlu_pro_item_correctness_wide.csv")
    rc, out, _ = _run(capsys, "--table", table, "--exclude", "src", "--exclude", "category",
                      "--a", "jamba-1.5-large", "--b", "Qwen1.5-72B-Chat",
                      "--reps", "400", "--seed", "2", "--json")
    fig = json.loads(out)
    assert rc == 0 and fig.keys() >= KEYS
    assert fig["items"] == 12032 and fig["n"] == fig["n_star"]
    # jamba-1.5-large's accuracy over the 12,032 MMLU-Pro items (NA counted wrong)
    assert fig["p_a"] == pytest.approx(0.4946, abs=1e-4)
    assert fig["ci_low"] <= 0.8 + 0.1 and fig["ci_high"] >= 0.8 - 0.1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pa", "0.9", "--pb", "0.2", "--rho", "0.8"),
         "`rho` must lie in [-0.667, 0.167] for p_A = 0.9, p_B = 0.2, got 0.8"),
        (("--pa", "0.6", "--pb", "0.6", "--rho", "0.2"), "N* is infinite"),
        (("--pa", "0.6"), "needs --pa, --pb and --rho"),
        (("--pa", "0.6", "--pb", "0.5", "--rho", "0.2", "--reps", "0"), "`reps`"),
        (("--table", "x.csv", "--a", "m"), "--a MODEL --b MODEL"),
        (("--table", "x.csv", "--pa", "0.5", "--a", "m", "--b", "n"), "do not combine"),
        (("--table", "/nonexistent/x.csv", "--a", "m", "--b", "n"), "x.csv"),
    ],
)
def test_bad_input_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    rc, _, err = _run(capsys, *args)
    assert rc == 2 and message in err and "Traceback" not in err
