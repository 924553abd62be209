"""The verdict driver: saved reports and in-process results lead to the same verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.audit.synthetic import planted_corpus
from monitor.contracts import jsonable
from monitor.errors import InputError
from monitor.offline.compare import compare_pair
from monitor.offline.leakage import scan_files
from monitor.offline.stability import stability_file
from monitor.offline.verdict import judge, leak_suspects, load_report


def _round_trip(d: dict[str, Any]) -> dict[str, Any]:
    """What a `--json` report saved to a file and loaded again holds."""
    out: dict[str, Any] = json.loads(json.dumps(jsonable(d), allow_nan=False))
    return out


def test_in_process_results_and_saved_reports_agree(tmp_path: Path) -> None:
    pc = planted_corpus(n_items=40, n_docs=200, n_planted=4, rng=np.random.default_rng(1))
    ev, co = tmp_path / "e.jsonl", tmp_path / "c.jsonl"
    ev.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in pc.items))
    co.write_text("".join(json.dumps({"id": d, "text": t}) + "\n" for d, t in pc.corpus))
    lk = scan_files(ev, co, n=8)
    items = tmp_path / "i.jsonl"
    items.write_text("".join(json.dumps({"id": f"q{i}", "question": f"{i}?",
                                         "options": ["a", "b"], "answer": 0}) + "\n"
                             for i in range(30)))
    st = stability_file(items, adapter="local", model="A", local_flip=0.0)
    rng = np.random.default_rng(2)
    xa = (rng.uniform(size=900) < 0.8).astype(float)
    xb = np.where(rng.uniform(size=900) < 0.15, 0.0, xa)
    cmp = compare_pair(xa, xb, a="A", b="B", n_resamples=200)
    v = judge(cmp, lk, st)
    saved = judge(_round_trip(cmp.to_dict()), _round_trip(lk.to_dict(items=False)),
                  _round_trip(st.to_dict()))
    assert v == saved
    # 4 of 40 items leaked (10 % > 5 %) on a significant gain: likely overfit.
    assert leak_suspects(lk) == leak_suspects(_round_trip(lk.to_dict())) == set(pc.planted)
    assert (v.significant, v.contaminated, v.unstable) == (True, True, False)
    assert v.scenario == "likely-overfit"
    assert judge(cmp, lk, st, max_leak_share=0.2).scenario == "high-credibility"


def test_load_report(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_cmp_dict()))
    assert load_report(good, "compare") == _cmp_dict()
    # Another check's report (or any other JSON object) is named by its file, with what it lacks.
    other = tmp_path / "leak.json"
    other.write_text(json.dumps(LEAK_FREE))
    with pytest.raises(InputError) as err:
        load_report(other, "compare")
    assert err.value.source == str(other)
    assert "not the JSON output of `llm-monitor compare --json`: no a, b, mean_diff" in str(
        err.value)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(InputError, match="not the JSON output of `llm-monitor leakage --json`"):
        load_report(bad, "leakage")
    broken = tmp_path / "broken.json"
    broken.write_text('{"n": ')
    with pytest.raises(InputError, match="not the JSON output"):
        load_report(broken, "stability")
    with pytest.raises(InputError, match="no such file"):
        load_report(tmp_path / "missing.json", "compare")


# -- any subset of evidence, one model, leak shares over the compared items, the headline ---
def _cmp_dict(sig: bool = True) -> dict[str, Any]:
    return {"a": "A", "b": "B", "n": 1000, "mean_diff": 0.05 if sig else 0.01,
            "primary_test": "mcnemar_exact", "primary_pvalue": 0.001 if sig else 0.4,
            "significant": sig, "resolution": {"q": 1.5, "alpha": 0.05}}


LEAK_FREE = {"leak_share": 0.0, "counts": {"leak": 0, "review": 0}, "n_items": 1000, "n": 13}
STABLE = {"model": "A", "flip_rate": 0.02, "flip_ci": [0.01, 0.04], "flip_base": 800}


def test_any_subset_of_evidence_says_what_is_missing() -> None:
    v = judge(_cmp_dict(), None, None)
    assert (v.scenario, v.missing) == ("significant-unchecked", ("leakage", "stability"))
    assert v.label == "gain significant (not checked: leakage, stability)"
    assert (v.significant, v.contaminated, v.unstable) == (True, None, None)
    assert "leakage: not checked" in v.evidence
    assert judge(_cmp_dict(), LEAK_FREE, STABLE).scenario == "high-credibility"
    assert judge(_cmp_dict(False), None, None).label == "gain not significant"
    only_leak = judge(None, {**LEAK_FREE, "leak_share": 0.3, "counts": {"leak": 300}}, None)
    assert only_leak.scenario == "incomplete" and only_leak.significant is None
    assert only_leak.label == "significance not checked; test set contaminated"
    assert judge(None, None, STABLE).label == ("significance not checked; no problem found "
                                               "in stability")
    with pytest.raises(ValueError, match="at least one"):
        judge(None, None, None)


def test_evidence_about_another_model_is_refused() -> None:
    with pytest.raises(ValueError, match="stability report is about model 'X'"):
        judge(_cmp_dict(), LEAK_FREE, {**STABLE, "model": "X"})


def _table(tmp_path: Path, *, clean_gap: float, rng: np.random.Generator) -> tuple[Path, list[str]]:
    """A wide table of A and B on 2,000 items; on 300 leaked items A is always right, on the
    others A is right with probability 0.6 + clean_gap against B's 0.6."""
    path = tmp_path / f"t{clean_gap}.csv"
    leaked = [f"q{i}" for i in range(300)]
    with path.open("w") as fh:
        fh.write("item_id,A,B\n")
        for i in range(2000):
            pa = 1.0 if i < 300 else 0.6 + clean_gap
            fh.write(f"q{i},{int(rng.random() < pa)},{int(rng.random() < 0.6)}\n")
    return path, leaked


@pytest.mark.parametrize(("clean_gap", "scenario"), [(0.12, "holds-on-clean-items"),
                                                     (0.0, "likely-overfit")])
def test_the_headline_follows_the_clean_items(tmp_path: Path, clean_gap: float,
                                              scenario: str) -> None:
    from monitor.offline.compare import compare_table

    path, leaked = _table(tmp_path, clean_gap=clean_gap, rng=np.random.default_rng(9))
    # 500 suspects from the scan, of which the 300 leaked ones are in the table.
    suspects = [*leaked, *(f"elsewhere-{k}" for k in range(200))]
    leakage = {"leak_share": 500 / 5000, "counts": {"leak": 500, "review": 0},
               "n_items": 5000, "n": 13, "leak_suspects": suspects}
    cmp = compare_table(path, a="A", b="B", n_resamples=200, suspect_items=suspects)
    assert (cmp.suspects_given, cmp.suspects_compared) == (500, 300)
    assert cmp.clean_items is not None and cmp.clean_items.n == 1700
    v = judge(cmp, leakage, STABLE)
    assert v.contaminated and v.scenario == scenario
    # The share is stated over the 2,000 compared items, not the 5,000 scanned.
    assert any("300 of the 2000 compared items are leak suspects (15.0%" in e
               for e in v.evidence)
    holds = cmp.clean_items.significant and cmp.clean_items.summary.delta > 0
    assert holds == (scenario == "holds-on-clean-items")
