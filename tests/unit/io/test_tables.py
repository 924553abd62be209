"""Long and wide table readers: good layouts, every rejection with file/line/field, the real files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from monitor.errors import InputError
from monitor.io import read_table


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


WIDE = """question_id,category,src,m1,m2,m3
q1,math,x,1,0,NA
q2,math,x,0,,1
q3,law,y,1,1,0
"""


def test_wide_na_blank_groups(tmp_path: Path) -> None:
    t = read_table(_write(tmp_path, "w.csv", WIDE), exclude=("src",), cluster_col="category")
    assert t.models == ("m1", "m2", "m3")
    assert t.item_ids.tolist() == ["q1", "q2", "q3"]
    np.testing.assert_array_equal(t.scores, [[1, 0, 0], [0, np.nan, 1], [1, 1, 0]])
    assert t.groups is not None and t.groups.tolist() == ["math", "math", "law"]
    assert t.group_kind == "cluster" and t.is_binary()
    xa, xb, g = t.pair("m1", "m2")  # q2 is absent for m2
    assert xa.tolist() == [1, 1] and xb.tolist() == [0, 1]
    assert g is not None and g.tolist() == ["math", "law"]


def test_wide_na_as_absent_and_strata(tmp_path: Path) -> None:
    t = read_table(_write(tmp_path, "w.csv", WIDE), exclude=("src",), strata_col="category",
                   na_as_wrong=False)
    assert np.isnan(t.column("m3")[0])
    assert t.group_kind == "strata"
    assert t.n_items().tolist() == [3, 2, 2]


def test_wide_id_fallback_first_column_and_id_col(tmp_path: Path) -> None:
    p = _write(tmp_path, "w.csv", "key,a,b\nk1,0.5,1\nk2,0.25,0\n")
    t = read_table(p)
    assert t.item_ids.tolist() == ["k1", "k2"] and t.models == ("a", "b")
    assert not t.is_binary()
    t2 = read_table(_write(tmp_path, "v.csv", "a,item,b\n1,i1,0\n"), id_col="item")
    assert t2.models == ("a", "b") and t2.item_ids.tolist() == ["i1"]


def test_wide_duplicate_rows_merge(tmp_path: Path) -> None:
    # The same score twice is a harmless duplicate; a blank cell is filled by the other row.
    p = _write(tmp_path, "w.csv", "item_id,a,b\ni1,1,\ni2,0,1\ni1,1,0\n")
    t = read_table(p)
    np.testing.assert_array_equal(t.scores, [[1, 0], [0, 1]])


def test_long_csv_gz_and_jsonl_agree(tmp_path: Path) -> None:
    rows = [("i1", "a", 1), ("i1", "b", 0), ("i2", "a", 0), ("i2", "b", 1), ("i3", "a", 1),
            ("i1", "a", 1)]  # the last row repeats a result with the same score
    csv_text = "model,item_id,cat,score\n" + "".join(
        f"{m},{i},{'c' + i[-1]},{s}\n" for i, m, s in rows)
    jsonl = "".join(json.dumps({"item_id": i, "model": m, "score": s, "cat": "c" + i[-1]}) + "\n"
                    for i, m, s in rows)
    a = read_table(_write(tmp_path, "l.csv.gz", csv_text), cluster_col="cat")
    b = read_table(_write(tmp_path, "l.jsonl", jsonl), cluster_col="cat")
    for t in (a, b):
        assert t.models == ("a", "b")
        assert t.item_ids.tolist() == ["i1", "i2", "i3"]
        np.testing.assert_array_equal(t.scores, [[1, 0], [0, 1], [1, np.nan]])
        assert t.groups is not None and t.groups.tolist() == ["c1", "c2", "c3"]


def test_long_benchmark_filter(tmp_path: Path) -> None:
    text = ("benchmark,item_id,model,correct\nx,1,a,1\nx,1,b,0\ny,1,a,0\ny,1,b,1\n")
    p = _write(tmp_path, "l.csv", text)
    t = read_table(p, benchmark="y")
    assert t.benchmark == "y"
    np.testing.assert_array_equal(t.scores, [[0, 1]])
    with pytest.raises(InputError, match="several benchmarks"):
        read_table(p)


@pytest.mark.parametrize(
    ("name", "text", "kwargs", "line", "field", "needle"),
    [
        ("empty.csv", "", {}, None, None, "empty file"),
        ("header.csv", "item_id,a,b\n", {}, None, None, "no data rows"),
        ("ragged.csv", "item_id,a,b\ni1,1,0\ni2,1\n", {}, 3, None, "expected 3 fields"),
        ("text.csv", "item_id,a,b\ni1,1,0\ni2,yes,0\n", {}, 3, "a", "not a number"),
        ("range.csv", "item_id,a,b\ni1,1,0\ni2,1,1.5\n", {}, 3, "b", "outside [0, 1]"),
        # two bad columns: the first model column in header order is named, then its first row
        ("order.csv", "item_id,a,b\ni1,1,x\ni2,y,0\ni3,z,0\n", {}, 3, "a", "not a number"),
        ("nan.csv", "item_id,a,b\ni1,nan,0\n", {}, 2, "a", "outside [0, 1]"),
        ("inf.csv", "item_id,a,b\ni1,1,0\ni2,inf,0\n", {}, 3, "a", "outside [0, 1]"),
        ("negative.csv", "item_id,a,b\ni1,-0.1,0\n", {}, 2, "a", "outside [0, 1]"),
        ("column.csv", "item_id,cat,a\ni1,x,1\n", {}, 2, "cat", "--exclude"),
        ("dupwide.csv", "item_id,a,b\ni1,1,0\ni2,0,0\ni1,0,0\n", {}, 4, "a", "different score"),
        ("nomodel.csv", "item_id,src\ni1,x\n", {"exclude": ("src",)}, 1, None, "no model"),
        ("excl.csv", "item_id,a\ni1,1\n", {"exclude": ("src",)}, 1, "src", "missing column"),
        ("idcol.csv", "item_id,a\ni1,1\n", {"id_col": "qid"}, 1, "qid", "missing id column"),
        ("clus.csv", "item_id,a\ni1,1\n", {"cluster_col": "cat"}, 1, "cat", "missing column"),
        ("dupcol.csv", "item_id,a,a\ni1,1,0\n", {}, 1, "a", "appears twice"),
        ("emptycol.csv", "item_id,a,b\ni1,1,\ni2,0,\n", {}, None, "b", "no scores"),
        ("noid.csv", "model,score\na,1\n", {}, 1, "item_id", "missing id column"),
        ("noscore.csv", "item_id,model,result\ni1,a,1\n", {}, 1, "score",
         "missing score column"),
        ("duplong.csv", "item_id,model,score\ni1,a,1\ni1,b,0\ni1,a,0\n", {}, 4, "score",
         "two different scores"),
        ("longrange.csv", "item_id,model,score\ni1,a,1\ni1,b,2\n", {}, 3, "score", "outside"),
        ("longgroup.csv", "item_id,model,score,c\ni1,a,1,x\ni1,b,0,y\n",
         {"cluster_col": "c"}, 3, "c", "two different"),
        ("blankmodel.csv", "item_id,model,score\ni1,,1\n", {}, 2, "model", "empty value"),
        # Without an id column the first column stands in; a model's 0/1 column repeats, so
        # it is refused rather than rows merged (silently, when their scores agree).
        ("noid.csv", "a,b\n1,0\n1,1\n0,1\n", {}, 3, "a", "no item id column"),
        ("noidsame.csv", "a,b,c\n1,0,1\n1,0,1\n", {}, 3, "a", "repeats line 2"),
        ("bad.jsonl", '{"item_id": "i1", "model": "a", "score": 1}\n{oops\n', {}, 2, None,
         "not valid JSON"),
        ("range.jsonl", '{"item_id": "i1", "model": "a", "score": 1}\n'
         '{"item_id": "i2", "model": "a", "score": 7}\n', {}, 2, "score", "outside"),
    ],
)
def test_bad_input_names_file_line_field(
    tmp_path: Path, name: str, text: str, kwargs: dict[str, object], line: int | None,
    field: str | None, needle: str,
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(InputError) as info:
        read_table(path, **kwargs)  # type: ignore[arg-type]
    err = info.value
    assert str(path) in str(err)
    assert needle in str(err)
    assert err.line == line
    assert err.field == field
    if line is not None:
        assert f"line {line}" in str(err)
    if field is not None:
        assert f"field {field!r}" in str(err)


def test_missing_file_and_both_group_kinds(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_table(tmp_path / "absent.csv")
    p = _write(tmp_path, "w.csv", WIDE)
    with pytest.raises(InputError, match="not both"):
        read_table(p, cluster_col="category", strata_col="category")


def test_pair_without_shared_items(tmp_path: Path) -> None:
    t = read_table(_write(tmp_path, "w.csv", "item_id,a,b\ni1,1,\ni2,,0\n"))
    with pytest.raises(InputError, match="share no item"):
        t.pair("a", "b")


def test_quoted_multiline_field_keeps_line_numbers(tmp_path: Path) -> None:
    p = _write(tmp_path, "q.csv", 'item_id,note,a\ni1,"two\nlines",1\ni2,x,2\n')
    with pytest.raises(InputError) as info:
        read_table(p, exclude=("note",))
    assert info.value.line == 4 and info.value.field == "a"


# --------------------------------------------------------------------------- the real files


def test_real_mmlu_wide_complete(shared_data: Path) -> None:
    path = shared_data / "mmlu_pro_item_correctness_wide.csv"
    t = read_table(path, exclude=("src",), cluster_col="category")
    assert t.scores.shape == (12_032, 32)
    assert t.groups is not None and len(set(t.groups.tolist())) == 14
    # Item counts from the data README: DeepSeek-Coder-V2 10,351, gemini-1.5-flash-002 12,012,
    # deepseek(2024-05) 11,864; 27 models have all 12,032 items.
    counts = dict(zip(t.models, t.n_items().tolist(), strict=True))
    assert counts["DeepSeek-Coder-V2"] == 10_351
    assert counts["gemini-1.5-flash-002"] == 12_012
    assert counts["deepseek(2024-05, per-category upload)"] == 11_864
    assert sum(c == 12_032 for c in counts.values()) == 27
    # Without --exclude src the first unexplained text column is named.
    with pytest.raises(InputError, match="field 'category'"):
        read_table(path, exclude=("src",))


def test_real_long_tables_match_wide(shared_data: Path) -> None:
    wide = read_table(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv", exclude=("gold",))
    long = read_table(shared_data / "zeroeval_gsm8k_item_correctness_long.csv.gz")
    assert set(wide.models) == set(long.models) and len(wide.models) == 42
    cols = [long.models.index(m) for m in wide.models]
    rows = {k: i for i, k in enumerate(long.item_ids.tolist())}
    aligned = long.scores[[rows[k] for k in wide.item_ids.tolist()]][:, cols]
    np.testing.assert_array_equal(aligned, wide.scores)
    with pytest.raises(InputError, match="field 'gold'"):
        read_table(shared_data / "zeroeval_gsm8k_item_correctness_wide.csv")


@pytest.mark.slow
def test_real_mmlu_long_matches_wide(shared_data: Path) -> None:
    wide = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv",
                      exclude=("src", "category"))
    long = read_table(shared_data / "mmlu_pro_item_correctness_long.csv.gz",
                      cluster_col="category")
    assert long.scores.shape == (12_032, 32)
    cols = [long.models.index(m) for m in wide.models]
    rows = {k: i for i, k in enumerate(long.item_ids.tolist())}
    aligned = long.scores[[rows[k] for k in wide.item_ids.tolist()]][:, cols]
    # The long file scores a missing prediction 0, as NA counts by default in the wide file.
    np.testing.assert_array_equal(aligned, wide.scores)
