"""report --json streamed in chunks of pairs equals the whole document dumped at once; the
human table of a large family shows --limit rows and says what it leaves out."""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from monitor.cli import main
from monitor.commands._jsonstream import render_objects, write_report
from monitor.contracts import jsonable
from monitor.io.tables import ScoreTable
from monitor.offline.replay import with_anytime
from monitor.offline.report import PairColumn, ResolutionReport, build_report, pair_objects


def _table(seed: int, *, k: int = 9, n: int = 700, graded: bool = False, missing: float = 0.0,
           kind: str | None = "cluster") -> ScoreTable:
    rng = np.random.default_rng(seed)
    ability = np.linspace(1.0, -0.6, k)
    p = 1 / (1 + np.exp(-(ability[None, :] - rng.normal(0, 1.2, (n, 1)))))
    x = np.asarray(np.round(np.clip(p + rng.normal(0, 0.15, p.shape), 0, 1), 2) if graded
                   else (rng.random(p.shape) < p), dtype=np.float64)
    x[:, 3] = x[:, 2]  # identical models: δ̂ = 0, N* = ∞, ρ̂ = 1
    if missing:
        x[rng.random(x.shape) < missing] = np.nan
    groups = rng.choice(np.array([f"c{j}" for j in range(8)]), size=n)
    return ScoreTable(source="t.csv", benchmark="b", item_ids=np.arange(n).astype(str),
                      models=tuple(f"m{j}é\"" for j in range(k)), scores=x,
                      groups=None if kind is None else groups,
                      group_kind=kind, group_col=None if kind is None else "g")  # type: ignore[arg-type]


def _reports() -> list[ResolutionReport]:
    out = [
        build_report(_table(0), family="all", rank_method="simultaneous"),
        build_report(_table(1, graded=True, missing=0.05, kind="strata"), family="all",
                     correction="bh", rank_method="simultaneous"),
        build_report(_table(2, missing=0.05, kind=None), family="adjacent"),
    ]
    # With the decisions: the verdict keys, the nested decided and fixed_n objects, and under
    # sampled clusters (8 of them: too few to decide) the clusters block and the reasons.
    t = _table(3)
    out.append(with_anytime(build_report(t, family="all"), t, order="shuffle", seed=1))
    t = _table(6, graded=True, missing=0.05, kind="strata")
    out.append(with_anytime(build_report(t, family="adjacent", rank_method="simultaneous"), t))
    t = _table(7, kind=None)
    out.append(with_anytime(build_report(t, family="all"), t, order="file"))
    return out


@pytest.mark.slow
def test_the_reports_hold_every_kind_of_key() -> None:
    # The documents compared above hold objects, nested objects, keys only some pairs have
    # and every verdict the decisions give here; else the equality would prove less.
    docs = [r.as_dict() for r in _reports()]
    keys = {k for d in docs for p in d["pairs"] for k in p}
    assert {"verdict", "decided", "fixed_n", "clusters", "undecidable", "n11"} <= keys
    verdicts = {p["verdict"].split(":")[0] for d in docs for p in d["pairs"] if "verdict" in p}
    assert verdicts == {"resolved", "unresolved", "undecidable"}
    assert any(p.get("decided") is not None for d in docs for p in d["pairs"])


def test_the_verdict_counts_are_the_pairs_verdicts() -> None:
    for report in _reports():
        doc = report.as_dict()
        counts = {"pairs": len(doc["pairs"])}
        if report.anytime is not None:
            counts |= {"resolved": 0, "equivalent": 0, "unresolved": 0, "undecidable": 0}
            counts |= Counter(p["verdict"].split(":")[0] for p in doc["pairs"])
        assert doc["verdicts"] == counts

@pytest.mark.parametrize("chunk", [1, 5, 1 << 14])
def test_streamed_json_equals_the_whole_document(chunk: int) -> None:
    for report in _reports():
        whole = json.dumps(jsonable(report.as_dict()), indent=2, allow_nan=False) + "\n"
        out = io.StringIO()
        write_report(out, report, chunk_pairs=chunk)
        assert out.getvalue() == whole
        assert json.loads(whole)["pairs"]  # a document with pairs, not an empty list


def test_json_edge_values_and_keys_only_some_objects_have() -> None:
    # Non-finite numbers by the wire rule, whole numbers beyond int64, strings needing escapes,
    # keys present in some objects only, objects with no key at all.
    present = np.array([True, False, True, False])
    columns = [
        PairColumn("first", "float", np.array([0.5, -0.0, math.inf, math.nan]), present),
        PairColumn("count", "count", np.array([3.0, 1e30, math.inf, -math.inf])),
        PairColumn("name", "str", ["a", "é\"\n", "a", "b"], ~present),
        PairColumn("flag", "bool", np.array([True, False, True, True]), present),
        PairColumn("none", "null", [None] * 4, np.zeros(4, dtype=bool)),
        PairColumn("any", "any", [None, 3, "x", 2.5]),
    ]
    objects = pair_objects(columns)
    assert objects[0] == {"first": 0.5, "count": 3, "flag": True, "any": None}
    assert objects[1] == {"count": 10**30 + 19884624838656, "name": "é\"\n", "any": 3}
    whole = json.dumps(jsonable({"pairs": objects}), indent=2, allow_nan=False)
    text = render_objects(columns, indent=4)
    assert whole == '{\n  "pairs": [\n' + text + "\n  ]\n}"
    empty = [PairColumn("k", "int", np.array([1, 2]), np.zeros(2, dtype=bool))]
    assert (json.dumps({"pairs": [{}, {}]}, indent=2)
            == '{\n  "pairs": [\n' + render_objects(empty, indent=4) + "\n  ]\n}")


def test_a_column_of_floats_is_written_as_json_writes_each() -> None:
    # Every magnitude from subnormal to the largest double, both signs, the layout switches of
    # repr (1e-4, 1e16), the magnitudes whose exponent orjson writes otherwise (1e-9 … 1e-4),
    # non-finite values, and a column long enough for the distinct-value path.
    rng = np.random.default_rng(7)
    x = np.concatenate([
        rng.random(50_000) * 10.0 ** rng.integers(-320, 300, 50_000),
        -rng.random(5_000) * 10.0 ** rng.integers(-30, 30, 5_000),
        np.nextafter(1e-4, [0.0, 1.0]), np.nextafter(1e16, [0.0, np.inf]),
        np.nextafter(1e-9, [0.0, 1.0]), np.nextafter(1e-10, [0.0, 1.0]), [9e-10, 1e-9, 1e-10],
        rng.random(5_000) * 10.0 ** rng.integers(-12, -3, 5_000),
        [0.0, -0.0, 1e-4, -1e-4, 1e16, 5e-324, 1.7976931348623157e308, 0.1, math.nan,
         math.inf, -math.inf],
    ])
    for column in (x, np.repeat(x[:600], 3)):
        text = render_objects([PairColumn("v", "float", column)], indent=4)
        whole = json.dumps({"pairs": [{"v": jsonable(v)} for v in column.tolist()]}, indent=2,
                           allow_nan=False)
        assert '{\n  "pairs": [\n' + text + "\n  ]\n}" == whole


def _every_kind(n: int, seed: int) -> list[PairColumn]:
    """A run of ``n`` objects with every kind of key: several float columns side by side with
    non-finite, huge and 1e-9 … 1e-4 values at random places, whole numbers beyond int64,
    columns that are the same in every object, keys only some objects have (a nested object
    among them, with keys of its own only some have), a key no object has, non-ASCII keys
    and strings, and plain values of every type."""
    rng = np.random.default_rng(seed)

    def floats() -> np.ndarray:
        x = rng.normal(0.0, 1.0, n) * 10.0 ** rng.integers(-12, 20, n)
        x[rng.random(n) < 0.2] = rng.choice([math.nan, math.inf, -math.inf, -0.0, 5e-324,
                                             1e-5, 3e-7, 1e-4, 9e-10], size=1)[0]
        return x

    def mask(p: float) -> np.ndarray:
        return rng.random(n) < p

    words = ["a", "é\"\n", "γ = 0.0025", "%s {}", "\x00"]
    nested = [
        PairColumn("f", "float", floats()),
        PairColumn("same", "float", np.full(n, 0.1)),
        PairColumn("c", "count", np.where(mask(0.1), math.inf, rng.integers(0, 9, n) * 1e19)),
        PairColumn("some", "int", rng.integers(-5, 5, n), mask(0.5)),
        PairColumn("never", "bool", np.ones(n, dtype=bool), np.zeros(n, dtype=bool)),
    ]
    return [
        PairColumn("name", "str", [words[i] for i in rng.integers(0, len(words), n)]),
        PairColumn("one name", "str", ["ü"] * n),
        PairColumn("x1", "float", floats()),
        PairColumn("x2", "float", floats(), mask(0.7)),
        PairColumn("x3", "float", floats()),
        PairColumn("k", "count", rng.integers(0, 10**6, n).astype(np.float64)),
        PairColumn("k2", "count", np.where(mask(0.3), -math.inf, 7.0), mask(0.6)),
        PairColumn("rank", "int", rng.integers(-2**62, 2**62, n)),
        PairColumn("ok", "bool", mask(0.5)),
        PairColumn("nothing", "null", [None] * n),
        PairColumn("any", "any", [[None, 3, "é", 2.5e-6, {"x": [math.inf]}, True][i]
                                  for i in rng.integers(0, 6, n)]),
        PairColumn("ñested", "object", nested, mask(0.8)),
        PairColumn("last", "float", floats(), mask(0.2)),
    ]


@pytest.mark.parametrize("n", [1, 7, 3000])
def test_a_run_with_every_kind_of_key_is_written_as_json_writes_it(n: int) -> None:
    for seed in range(3):
        columns = _every_kind(n, seed)
        whole = json.dumps(jsonable({"pairs": pair_objects(columns)}), indent=2,
                           allow_nan=False)
        assert '{\n  "pairs": [\n' + render_objects(columns, indent=4) + "\n  ]\n}" == whole


def _csv(path: Path, report_table: ScoreTable) -> Path:
    x = report_table.scores
    lines = ["item_id,grp," + ",".join(f"m{j}" for j in range(x.shape[1]))]
    assert report_table.groups is not None
    for i in range(x.shape[0]):
        lines.append(f"i{i},{report_table.groups[i]}," + ",".join(f"{v:g}" for v in x[i]))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_json_is_the_whole_document(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path / "t.csv", _table(4, k=12))
    assert main(["report", str(path), "--cluster-col", "grp", "--family", "all", "--json"]) == 0
    out = capsys.readouterr().out
    from monitor.io.tables import read_table

    table = read_table(path, cluster_col="grp")
    rep = with_anytime(build_report(table, family="all",
                                    selection={"complete_only": False, "top": None},
                                    rank_method="simultaneous"), table)
    assert out == json.dumps(jsonable(rep.as_dict()), indent=2, allow_nan=False) + "\n"
    assert len(json.loads(out)["pairs"]) == 66


@pytest.mark.slow
def test_human_table_of_a_large_family_is_limited_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _csv(tmp_path / "t.csv", _table(5, k=12))
    assert main(["report", str(path), "--cluster-col", "grp", "--family", "all",
                 "--limit", "5"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.strip()[:1].isdigit() and " m" in line]
    pair_rows = [r for r in rows if r.count(". m") == 2]
    # the five shown are the adjacent pairs of the ranking, in rank order
    assert [r.split()[0] + r.split()[2] for r in pair_rows] == ["1.2.", "2.3.", "3.4.", "4.5.",
                                                                "5.6."]
    assert "5 of 66 pairs shown, the adjacent pairs of the ranking first" in out
    assert "top 5 of 12 models shown" in out
    assert "of 66 pairs resolved (decided, final)" in out
    # --limit 0: every pair, in family order, and no note
    assert main(["report", str(path), "--cluster-col", "grp", "--family", "all",
                 "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert sum(line.count(". m") == 2 for line in out.splitlines()) == 66
    assert "shown" not in out
    # the adjacent family: one row per model, the first --limit models
    assert main(["report", str(path), "--cluster-col", "grp", "--limit", "4"]) == 0
    out = capsys.readouterr().out
    assert "top 4 of 12 models shown" in out and "of 11 adjacent pairs resolved" in out
