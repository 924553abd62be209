"""``llm-monitor watch``'s state file: it belongs to one monitor, and a file rewritten below
what was posted is an error, not a silent re-read (no monitor is needed to refuse either)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.commands.watch import STATE_NAME, FileState, WatchState


def _samples(root: Path, n: int) -> Path:
    d = root / "org__m"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "samples_task_2024-01-01T00-00-00.jsonl"
    path.write_text("".join(json.dumps({"doc_id": i, "acc": 1}) + "\n" for i in range(n)))
    return path


def test_the_state_file_belongs_to_one_monitor(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    ws = WatchState(tmp_path / STATE_NAME, "http://127.0.0.1:1")
    ws.files["x"] = FileState(kind="lmeval", offset=10, lineno=2)
    ws.save()
    again = WatchState(tmp_path / STATE_NAME, "http://127.0.0.1:1")
    assert again.files == ws.files
    assert main(["watch", str(tmp_path), "--url", "http://127.0.0.1:2", "--once"]) == 2
    err = capsys.readouterr().err
    assert "records what was posted to http://127.0.0.1:1, not http://127.0.0.1:2" in err


def test_a_file_that_shrank_below_its_offset_is_named(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _samples(tmp_path, 2)
    ws = WatchState(tmp_path / STATE_NAME, "http://127.0.0.1:1")
    ws.files[str(path.relative_to(tmp_path))] = FileState(kind="lmeval", offset=10_000,
                                                          lineno=400)
    ws.save()
    assert main(["watch", str(tmp_path), "--url", "http://127.0.0.1:1", "--once"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "shrank below the 10000 bytes already posted" in err


def test_a_broken_state_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / STATE_NAME).write_text("{not json")
    assert main(["watch", str(tmp_path), "--url", "http://127.0.0.1:1", "--once"]) == 2
    assert "not a watch state file" in capsys.readouterr().err
