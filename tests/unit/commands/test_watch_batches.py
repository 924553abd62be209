"""``watch`` and ``post`` read a samples file a batch at a time: the state records each
acknowledged batch (a failure later in the file resends nothing already acknowledged), memory
stays bounded by the batch, and ``post`` reads a finished file's last line even without its
newline, as ``report`` does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.client import ClientError, PostReport
from monitor.commands import post as post_cmd
from monitor.commands.watch import STATE_NAME, Options, WatchState, scan_once
from monitor.errors import InputError
from monitor.io.lmeval import SamplesFollower, read_lmeval_samples

URL = "http://127.0.0.1:1"


def _lines(n: int) -> list[str]:
    return [json.dumps({"doc_id": i, "doc": {}, "acc": i % 2}) + "\n" for i in range(n)]


def _samples(root: Path, lines: list[str]) -> Path:
    d = root / "org__m"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "samples_task_2024-01-01T00-00-00.jsonl"
    path.write_text("".join(lines))
    return path


class FakeClient:
    """Sends in requests of ``batch_size`` lines as MonitorClient does; the monitor
    acknowledges ``ok`` requests, then goes away (the client gives up)."""

    def __init__(self, batch_size: int, ok: int) -> None:
        self.batch_size = batch_size
        self.ok = ok
        self.sent: list[list[str]] = []

    def post_labelled(self, pairs: Iterable[tuple[dict[str, Any], str | None]]) -> PostReport:
        pairs = list(pairs)
        report = PostReport()
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs[start:start + self.batch_size]
            if len(self.sent) >= self.ok:
                raise ClientError("gave up after 6 attempts")
            self.sent.append([str(e["item_id"]) for e, _ in batch])
            report.add({"events": len(batch), "accepted": len(batch)}, offset=start,
                       sources=[label for _, label in batch], retries=0)
        return report


def test_each_acknowledged_batch_is_recorded_and_never_resent(tmp_path: Path) -> None:
    lines = _lines(7)
    path = _samples(tmp_path, lines)
    state = WatchState(tmp_path / STATE_NAME, URL)
    opts = Options(benchmark=None, model=None, metric=None, filter=None, scorer=None)
    failing = FakeClient(batch_size=3, ok=1)
    with pytest.raises(ClientError):
        scan_once(tmp_path, state, failing, opts, threading.Event())  # type: ignore[arg-type]
    assert failing.sent == [["0", "1", "2"]]
    saved = json.loads((tmp_path / STATE_NAME).read_text())["files"]
    entry = saved[str(path.relative_to(tmp_path))]
    assert (entry["offset"], entry["lineno"]) == (sum(len(x.encode()) for x in lines[:3]), 3)
    # A restarted watcher sends the rest once, in batches of at most batch_size lines.
    again = FakeClient(batch_size=3, ok=10)
    restarted = WatchState(tmp_path / STATE_NAME, URL)
    report = scan_once(tmp_path, restarted, again, opts, threading.Event())  # type: ignore[arg-type]
    assert again.sent == [["3", "4", "5"], ["6"]]
    assert report.accepted == 4


def test_a_follower_reads_at_most_max_lines_at_a_time(tmp_path: Path) -> None:
    lines = _lines(5)
    path = _samples(tmp_path, lines)
    whole = [e for e, _ in SamplesFollower(path, model="m").read_new()]
    f = SamplesFollower(path, model="m")
    chunks = []
    while True:
        before = f.offset
        chunk = f.read_new(max_lines=2)
        chunks.append([e for e, _ in chunk])
        if f.offset == before:
            break
    assert [len(c) for c in chunks] == [2, 2, 1, 0]
    assert [e for c in chunks for e in c] == whole
    assert (f.offset, f.lineno) == (path.stat().st_size, 5)


@pytest.mark.parametrize("read_lines", [2, 10_000])
def test_post_reads_the_last_line_without_its_newline(tmp_path: Path, read_lines: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _lines(5)
    lines[-1] = lines[-1].rstrip("\n")
    path = _samples(tmp_path, lines)
    monkeypatch.setattr(post_cmd, "READ_LINES", read_lines, raising=False)
    events = list(post_cmd.file_events(path, benchmark=None, model=None, metric=None,
                                       filter=None, scorer=None, exclude=(), cluster_col=None))
    offline = read_lmeval_samples(path)
    assert [e["item_id"] for e, _ in events] == offline.item_ids.tolist()
    assert [e["score"] for e, _ in events] == offline.scores.tolist()
    assert [label.rsplit(":", 1)[1] for _, label in events] == ["1", "2", "3", "4", "5"]
    # watch, by contrast, waits for the newline of a line still being written
    follower = SamplesFollower(path, model="m")
    assert len(follower.read_new()) == 4


def test_each_result_of_a_repeated_sample_table_has_its_own_label(tmp_path: Path) -> None:
    """A rejection names the sample too: item and model alone name K results."""
    table = tmp_path / "rep.csv"
    table.write_text("item_id,model,sample,score\nq0,a,0,1\nq0,a,1,0\nq0,a,2,1\nq1,a,0,0\n"
                     "q1,a,1,0\nq1,a,2,1\n")
    pairs = list(post_cmd.file_events(table, benchmark="b", model=None, metric=None,
                                      filter=None, scorer=None, exclude=(), cluster_col=None))
    labels = [label for _, label in pairs]
    assert len(set(labels)) == len(labels) == 6
    assert {(e["item_id"], e.get("sample", 0)) for e, _ in pairs} == {
        (f"q{i}", k) for i in range(2) for k in range(3)}
    assert f"{table}: item q0, model a, sample 2" in labels


def test_post_states_what_the_monitor_took_before_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The first file is acknowledged, the second has a bad line: the error names the line and
    the account of the first file is not lost with it."""
    from monitor.cli import main
    from monitor.client import MonitorClient

    def acknowledge(self: MonitorClient, method: str, path: str,
                    body: bytes | None = None) -> tuple[dict[str, int], int]:
        n = len((body or b"").splitlines())
        return {"events": n, "accepted": n}, 0

    monkeypatch.setattr(MonitorClient, "request", acknowledge)
    good = _samples(tmp_path / "good", _lines(3))
    bad = _samples(tmp_path / "bad", [*_lines(2), '{"doc_id": 9, "acc": 7}\n'])
    assert main(["post", str(good), str(bad), "--url", URL]) == 2
    err = capsys.readouterr().err
    assert f"{bad}, line 3, field 'acc'" in err
    assert ("before the error the monitor answered 3 results in 1 request(s): accepted 3, "
            "duplicate 0, conflict 0, invalid 0") in err


def test_post_of_a_directory_reads_a_group_as_report_does(tmp_path: Path) -> None:
    """Subtask files of a group without --benchmark: post sends the group report reads
    (benchmark mmlu, ids <task>/<doc_id>, the subtasks as clusters), not one board per subtask."""
    from monitor.io.sources import read_scores

    rng = np.random.default_rng(3)
    for model in ("org__a", "org__b"):
        for task in ("mmlu_anatomy", "mmlu_astronomy"):
            d = tmp_path / model
            d.mkdir(exist_ok=True)
            (d / f"samples_{task}_2024-01-01T00-00-00.jsonl").write_text("".join(
                json.dumps({"doc_id": i, "doc": {}, "acc": float(rng.uniform() < 0.6)}) + "\n"
                for i in range(4)))
    events = [e for e, _ in post_cmd.file_events(
        tmp_path, benchmark=None, model=None, metric=None, filter=None, scorer=None,
        exclude=(), cluster_col=None)]
    table = read_scores(tmp_path)
    assert table.benchmark == "mmlu" and {e["benchmark"] for e in events} == {"mmlu"}
    cells = {(str(e["item_id"]), str(e["model"])): (e["score"], e["cluster"]) for e in events}
    assert len(cells) == len(events) == 16
    groups = table.groups
    assert groups is not None
    want = {(i, m): (table.scores[r, c], groups[r]) for r, i in enumerate(table.item_ids.tolist())
            for c, m in enumerate(table.models)}
    assert cells == want


def _scan(root: Path, client: FakeClient, opts: Options) -> PostReport:
    """One scan by a watcher (re)started on ``root``'s state file."""
    state = WatchState(root / STATE_NAME, URL)
    return scan_once(root, state, client, opts, threading.Event())  # type: ignore[arg-type]


def test_a_restart_with_other_options_does_not_split_a_file(tmp_path: Path) -> None:
    """The rest of a file goes to the benchmark (and model, metric, filter) its first lines
    went to: a restart with another --benchmark is refused, naming the file."""
    from monitor.errors import ConfigError

    path = _samples(tmp_path, _lines(3))
    group = Options(benchmark="grp", model=None, metric=None, filter=None, scorer=None)
    first = FakeClient(batch_size=10, ok=10)
    _scan(tmp_path, first, group)
    assert first.sent == [["task/0", "task/1", "task/2"]]
    with path.open("a") as fh:
        fh.write(_lines(4)[3])
    plain = Options(benchmark=None, model=None, metric=None, filter=None, scorer=None)
    restarted = FakeClient(batch_size=10, ok=10)
    with pytest.raises(ConfigError, match=r"first 3 lines were posted with benchmark 'grp', "
                                          r"not 'task'"):
        _scan(tmp_path, restarted, plain)
    assert restarted.sent == []
    other_model = Options(benchmark="grp", model="org/x", metric=None, filter=None, scorer=None)
    with pytest.raises(ConfigError, match="model 'org/m', not 'org/x'"):
        _scan(tmp_path, restarted, other_model)
    _scan(tmp_path, restarted, group)
    assert restarted.sent == [["task/3"]]


def test_a_restarted_watch_of_an_inspect_log_keeps_its_options(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """inspect_ai logs too: samples added to a log after a restart with another --scorer or
    --model are refused rather than posted under other options."""
    from monitor.commands import watch as watch_cmd
    from monitor.errors import ConfigError
    from monitor.io import inspect as inspect_io

    log = tmp_path / "run.eval"
    log.write_bytes(b"1")
    n_samples = {"n": 2}

    def events(path: Path, *, benchmark: str | None, model: str | None, scorer: str | None
               ) -> Iterable[tuple[dict[str, Any], str]]:
        for i in range(n_samples["n"]):
            yield ({"benchmark": benchmark or "arith", "model": model or "mock/a",
                    "item_id": f"q{i}", "score": 1.0 if scorer != "other" else 0.0,
                    "sample": 0}, f"{path}: sample q{i}")

    monkeypatch.setattr(inspect_io, "inspect_events", events)
    monkeypatch.setattr(watch_cmd, "_candidates", lambda root, state: [(log, "inspect")])
    plain = Options(benchmark=None, model=None, metric=None, filter=None, scorer=None)
    first = FakeClient(batch_size=10, ok=10)
    _scan(tmp_path, first, plain)
    assert first.sent == [["q0", "q1"]]
    n_samples["n"] = 3
    log.write_bytes(b"12")  # the log grew
    other = Options(benchmark=None, model=None, metric=None, filter=None, scorer="other")
    again = FakeClient(batch_size=10, ok=10)
    with pytest.raises(ConfigError, match="first 2 samples were posted with scorer None, "
                                          "not 'other'"):
        _scan(tmp_path, again, other)
    renamed = Options(benchmark=None, model="mock/b", metric=None, filter=None, scorer=None)
    with pytest.raises(ConfigError, match="model 'mock/a', not 'mock/b'"):
        _scan(tmp_path, again, renamed)
    _scan(tmp_path, again, plain)
    assert again.sent == [["q2"]]


def test_a_filter_no_line_has_is_an_error_naming_the_files_filters(tmp_path: Path) -> None:
    """post (like report) of a samples file none of whose lines has the --filter asked for
    names the file and its filters; it posted 0 results and succeeded."""
    lines = [json.dumps({"doc_id": i, "doc": {}, "filter": f, "exact_match": 1.0}) + "\n"
             for f in ("strict-match", "flexible-extract") for i in range(3)]
    path = _samples(tmp_path, lines)
    message = (r"no line with filter 'flexible'; the file's filters are strict-match, "
               r"flexible-extract \(pass one with --filter\)")
    with pytest.raises(InputError, match=message) as err:
        list(post_cmd.file_events(path, benchmark=None, model=None, metric=None,
                                  filter="flexible", scorer=None, exclude=(), cluster_col=None))
    assert err.value.source == str(path)
    with pytest.raises(InputError, match=message):
        read_lmeval_samples(path, filter="flexible")
    chosen = list(post_cmd.file_events(path, benchmark=None, model=None, metric=None,
                                       filter="flexible-extract", scorer=None, exclude=(),
                                       cluster_col=None))
    assert [label.rsplit(":", 1)[1] for _, label in chosen] == ["4", "5", "6"]


def test_watch_says_when_no_line_has_the_filter_asked_for(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A live file may get its other filter's lines later, so watch goes on, but says which
    lines it passed over and which filters they had."""
    lines = [json.dumps({"doc_id": i, "doc": {}, "filter": "strict-match", "exact_match": 1.0})
             + "\n" for i in range(3)]
    _samples(tmp_path, lines)
    opts = Options(benchmark=None, model=None, metric=None, filter="flexible", scorer=None)
    client = FakeClient(batch_size=10, ok=10)
    _scan(tmp_path, client, opts)
    assert client.sent == []
    assert ("lines 1–3 have filters strict-match, none 'flexible' (--filter); they are "
            "passed over") in capsys.readouterr().err
