"""A design effect estimated from fewer clusters than MIN_CLUSTERS comes with a warning, in
``report``'s human output and in its ``--json`` (``warnings``, and each pair's ``n_clusters``).

With 2 clusters the report printed design effects such as 0.51 and 0.04 as if they were
figures to act on: the cluster-robust variance then has one degree of freedom.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.stats.clusters import MIN_CLUSTERS


def _table(path: Path, *, n_clusters: int, n: int = 600, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "subject", "a", "b", "c"])
        for i in range(n):
            w.writerow([f"q{i}", f"s{i % n_clusters}",
                        *(int(rng.random() < p) for p in (0.75, 0.6, 0.58))])
    return path


def _report(path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["report", str(path), *args]) == 0
    return capsys.readouterr().out


def test_two_clusters_warn_in_the_human_report_and_the_json(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path / "two.csv", n_clusters=2)
    doc = json.loads(_report(table, capsys, "--cluster-col", "subject", "--json"))
    (warning,) = doc["warnings"]
    assert (warning["kind"], warning["n_clusters"], warning["min_clusters"],
            warning["pairs"]) == ("few-clusters", 2, MIN_CLUSTERS, 2)
    assert "2 clusters" in warning["message"] and "indicative" in warning["message"]
    assert [p["fixed_n"]["n_clusters"] for p in doc["pairs"]] == [2, 2]
    human = _report(table, capsys, "--cluster-col", "subject")
    assert f"WARNING: the design effect of 2 of 2 pairs comes from 2 clusters, fewer " \
           f"than {MIN_CLUSTERS}" in " ".join(human.split())
    page = tmp_path / "two.html"
    _report(table, capsys, "--cluster-col", "subject", "--html", str(page))
    assert "<b>warning:</b> the design effect of 2 of 2 pairs comes from 2 clusters" \
        in page.read_text()


def test_enough_clusters_or_strata_give_no_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    many = _table(tmp_path / "many.csv", n_clusters=MIN_CLUSTERS)
    doc = json.loads(_report(many, capsys, "--cluster-col", "subject", "--json"))
    assert doc["warnings"] == []
    assert {p["fixed_n"]["n_clusters"] for p in doc["pairs"]} == {MIN_CLUSTERS}
    assert "WARNING" not in _report(many, capsys, "--cluster-col", "subject")
    # Strata: the stratified variance is a within-stratum one, fine with two strata.
    two = _table(tmp_path / "two.csv", n_clusters=2)
    doc = json.loads(_report(two, capsys, "--strata-col", "subject", "--json"))
    assert doc["warnings"] == [] and {p["fixed_n"]["n_clusters"] for p in doc["pairs"]} == {None}
    assert "WARNING" not in _report(two, capsys, "--strata-col", "subject")
    doc = json.loads(_report(two, capsys, "--exclude", "subject", "--json"))
    assert doc["warnings"] == []
