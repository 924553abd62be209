"""``watch`` knows a file by its content: a rotation, a copy written beside the original before
either was seen, a rewritten first line, a state file of the first version, an inspect_ai log
whose posted scores changed, and the lines of another lm-eval filter in the account.

The end-to-end case (a real monitor, a copy, a rename, a rewrite, restarts) is
tests/integration/test_watch_identity.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from monitor.client import PostReport
from monitor.commands.watch import STATE_NAME, Options, Rewritten, WatchState, scan_once
from tests.unit.commands.test_watch_batches import URL, FakeClient

PLAIN = Options(benchmark=None, model=None, metric=None, filter=None, scorer=None)
GROUP = Options(benchmark="grp", model=None, metric=None, filter=None, scorer=None)


def _lines(start: int, stop: int, score: int = 1) -> str:
    return "".join(json.dumps({"doc_id": i, "doc": {"q": i}, "acc": (i + score) % 2}) + "\n"
                   for i in range(start, stop))


def _scan(root: Path, opts: Options = GROUP) -> tuple[FakeClient, PostReport]:
    client = FakeClient(batch_size=4, ok=100)
    state = WatchState(root / STATE_NAME, URL)
    report = scan_once(root, state, client, opts, threading.Event())  # type: ignore[arg-type]
    return client, report


def _sent(client: FakeClient) -> list[str]:
    return [i for batch in client.sent for i in batch]


def test_a_rotated_file_goes_on_under_its_new_name_and_the_new_one_is_read(
        tmp_path: Path) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    live = d / "samples_task.jsonl"
    live.write_text(_lines(0, 5))
    client, _ = _scan(tmp_path)
    assert _sent(client) == [f"task/{i}" for i in range(5)]
    # logrotate: the file moves to .1 and gets two more lines; a new file starts under the
    # old name with other items.
    rotated = d / "samples_task.1.jsonl"
    live.rename(rotated)
    with rotated.open("a") as fh:
        fh.write(_lines(5, 7))
    live.write_text(_lines(100, 102))
    client, report = _scan(tmp_path)
    # The rotated file's new lines are the same task's items, not items of a task "task.1".
    assert sorted(_sent(client)) == ["task/100", "task/101", "task/5", "task/6"]
    assert report.passed_over == {}
    state = json.loads((tmp_path / STATE_NAME).read_text())["files"]
    assert state["org__m/samples_task.1.jsonl"]["lineno"] == 7
    assert state["org__m/samples_task.jsonl"]["lineno"] == 2


def test_a_copy_seen_with_its_original_in_one_scan_is_posted_once(tmp_path: Path) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    (d / "samples_task.jsonl").write_text(_lines(0, 6))
    (d / "samples_task.jsonl.bak.jsonl").write_text(_lines(0, 6))
    client, report = _scan(tmp_path)
    assert _sent(client) == [f"task/{i}" for i in range(6)]
    assert report.passed_over == {"copy of org__m/samples_task.jsonl": 6}
    # Another model's file with the same bytes is no copy: its lines are that model's.
    other = tmp_path / "org__n"
    other.mkdir()
    (other / "samples_task.jsonl").write_text(_lines(0, 6))
    client, report = _scan(tmp_path)
    assert len(_sent(client)) == 6 and report.passed_over == {}


def test_a_file_with_the_same_first_line_but_other_lines_is_no_copy(tmp_path: Path) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    (d / "samples_task_a.jsonl").write_text(_lines(0, 4))
    _scan(tmp_path, PLAIN)
    rerun = _lines(0, 1) + _lines(1, 4, score=0)  # a rerun: doc 0 alike, the rest not
    (d / "samples_task_b.jsonl").write_text(rerun)
    client, report = _scan(tmp_path, PLAIN)
    assert _sent(client) == ["0", "1", "2", "3"] and report.passed_over == {}


def test_a_rewritten_first_line_is_an_error_naming_the_file(tmp_path: Path) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    path = d / "samples_task.jsonl"
    path.write_text(_lines(0, 4))
    _scan(tmp_path)
    path.write_text(_lines(0, 4, score=0))  # the same size, every score the other
    with pytest.raises(Rewritten, match=r"its first 4 lines .*, already posted, changed") as err:
        _scan(tmp_path)
    assert err.value.source == str(path)


def test_a_state_of_the_first_version_is_followed_on(tmp_path: Path) -> None:
    """A state written before the fingerprints: the file is taken as it is, and followed on."""
    d = tmp_path / "org__m"
    d.mkdir()
    path = d / "samples_task.jsonl"
    path.write_text(_lines(0, 3))
    (tmp_path / STATE_NAME).write_text(json.dumps({"version": 1, "url": URL, "files": {
        "org__m/samples_task.jsonl": {
            "kind": "lmeval", "offset": path.stat().st_size, "lineno": 3, "metric": "acc",
            "filter": None, "model": "org/m", "benchmark": "grp", "posted": [], "size": -1,
            "mtime_ns": -1}}}))
    with path.open("a") as fh:
        fh.write(_lines(3, 5))
    client, _ = _scan(tmp_path)
    assert _sent(client) == ["task/3", "task/4"]
    fs = json.loads((tmp_path / STATE_NAME).read_text())["files"]["org__m/samples_task.jsonl"]
    assert fs["head"] and fs["digest"] and fs["task"] == "task"


def test_other_filters_lines_are_in_the_watch_account(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "org__m"
    d.mkdir()
    (d / "samples_gsm.jsonl").write_text("".join(
        json.dumps({"doc_id": i, "doc": {}, "filter": f, "exact_match": float(i % 2)}) + "\n"
        for i in range(5) for f in ("strict-match", "flexible-extract")))
    client, report = _scan(tmp_path, PLAIN)
    assert _sent(client) == ["0", "1", "2", "3", "4"]
    assert report.passed_over == {"lm-eval filter 'flexible-extract'": 5}
    assert report.events + sum(report.passed_over.values()) == 10  # every line accounted
    err = capsys.readouterr().err
    assert "passed over 1 line (1 lm-eval filter 'flexible-extract')" in err


def test_an_inspect_log_whose_posted_score_changed_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.commands import watch as watch_cmd
    from monitor.io import inspect as inspect_io

    log = tmp_path / "run.eval"
    log.write_bytes(b"1")
    scores = {"q0": 1.0, "q1": 0.0}

    def events(path: Path, *, benchmark: str | None, model: str | None, scorer: str | None
               ) -> Iterable[tuple[dict[str, Any], str]]:
        for item, score in scores.items():
            yield ({"benchmark": "arith", "model": "mock/a", "item_id": item, "score": score,
                    "sample": 0}, f"{path}: sample {item}")

    monkeypatch.setattr(inspect_io, "inspect_events", events)
    monkeypatch.setattr(watch_cmd, "_candidates", lambda root, state: [(log, "inspect")])
    client, _ = _scan(tmp_path, PLAIN)
    assert _sent(client) == ["q0", "q1"]
    scores["q2"] = 1.0
    log.write_bytes(b"12")
    client, _ = _scan(tmp_path, PLAIN)
    assert _sent(client) == ["q2"]
    scores["q1"] = 1.0  # inspect_ai rewrote the log with another score for a posted sample
    log.write_bytes(b"123")
    with pytest.raises(Rewritten, match=r"sample 'q1' .* was posted with score 0\.0 and "
                                        r"now has 1\.0") as err:
        _scan(tmp_path, PLAIN)
    assert err.value.source == str(log)
