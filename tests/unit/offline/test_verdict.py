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
    good.write_text('{"n": 3}')
    assert load_report(good, "compare") == {"n": 3}
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
