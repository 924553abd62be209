"""``llm-monitor watch`` knows a samples file by its content, not its name.

Against a real ``llm-monitor run``, each scan a new ``watch --once`` process (a restart): a
copy of a file already posted (``samples_toy_<ts>.1.jsonl``) is recognised and its lines are
passed over, not posted again as another task's items (the model's n doubled); a renamed file
goes on where it stopped; a file whose posted lines were rewritten at the same size with other
scores is an error naming it (it was silently ignored).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.integration.embedded_harness import Server, cli

pytestmark = pytest.mark.integration

TS = "2024-06-01T00-00-00.123456"


def _lines(start: int, stop: int, *, seed: int = 3) -> str:
    rng = np.random.default_rng(seed)
    acc = rng.random(stop) < 0.6
    return "".join(json.dumps({"doc_id": i, "doc": {"q": f"question {i}"}, "filter": "none",
                               "metrics": ["acc"], "acc": float(acc[i])}) + "\n"
                   for i in range(start, stop))


def _watch(root: Path, url: str) -> tuple[int, str]:
    res = cli("watch", str(root), "--url", url, "--benchmark", "toy", "--once",
              "--batch-size", "100")
    return res.returncode, res.stderr


def _n(srv: Server, model: str) -> int:
    status, ranking = srv.get_json("/v1/benchmarks/toy/ranking")
    assert status == 200, ranking
    return {m["model"]: m["n"] for m in ranking["models"]}[model]


def test_a_copy_is_passed_over_a_rename_followed_and_a_rewrite_refused(tmp_path: Path) -> None:
    root = tmp_path / "out"
    (root / "org__a").mkdir(parents=True)
    (root / "org__b").mkdir()
    original = root / "org__a" / f"samples_toy_{TS}.jsonl"
    original.write_text(_lines(0, 250))
    # A second model, so that the board has a pair; its file is written in two parts.
    growing = root / "org__b" / f"samples_toy_{TS}.jsonl"
    growing.write_text(_lines(0, 150, seed=4))
    srv = Server(tmp_path / "m.db", "--eval-interval", "0").start()
    try:
        url = f"http://127.0.0.1:{srv.port}"
        rc, err = _watch(root, url)
        assert rc == 0, err
        assert "accepted 400, duplicate 0, conflict 0, invalid 0" in err
        assert (_n(srv, "org/a"), _n(srv, "org/b")) == (250, 150)

        # A copy (as a rotation or `cp` leaves it): recognised by its content, passed over.
        copy = original.with_name(f"samples_toy_{TS}.1.jsonl")
        shutil.copy(original, copy)
        rc, err = _watch(root, url)
        assert rc == 0, err
        assert f"{copy}: a copy of {original.relative_to(root)}" in err, err
        assert ("accepted 0, duplicate 0, conflict 0, invalid 0; passed over 250 lines "
                f"(250 copy of {original.relative_to(root)})") in err, err
        assert _n(srv, "org/a") == 250
        rc, err = _watch(root, url)  # and not again at the next start
        assert rc == 0 and "watch stopped: 0 results posted: accepted 0, duplicate 0, " \
            "conflict 0, invalid 0\n" in err, err

        # A rename while the harness still appends: the rest is posted once, as the same
        # task's items (not as items of a task named after the new file).
        renamed = growing.with_name(f"samples_toy_{TS}.renamed.jsonl")
        growing.rename(renamed)
        with renamed.open("a") as fh:
            fh.write(_lines(150, 250, seed=4))
        rc, err = _watch(root, url)
        assert rc == 0, err
        assert f"{renamed}: {growing.relative_to(root)} renamed" in err, err
        assert "accepted 100, duplicate 0, conflict 0, invalid 0" in err, err
        assert _n(srv, "org/b") == 250
        _, ranking = srv.get_json("/v1/benchmarks/toy/ranking")
        assert ranking["pairs"][0]["n"] == 250  # the same 250 items for both models

        # A rewrite of posted lines at the same size, other scores: an error naming the file.
        text = renamed.read_text()
        flipped = text.replace('"acc": 1.0', '"acc": 9.9').replace('"acc": 0.0', '"acc": 1.0') \
            .replace('"acc": 9.9', '"acc": 0.0')
        assert len(flipped) == len(text) and flipped != text
        renamed.write_text(flipped)
        rc, err = _watch(root, url)
        assert rc == 2, err
        assert str(renamed) in err and "already posted, changed" in err, err
        assert (_n(srv, "org/a"), _n(srv, "org/b")) == (250, 250)
    finally:
        srv.stop()
