"""Snapshots of the embedded monitor under SIGKILL: a kill while a snapshot is being written
leaves the previous one or the new one, whole; a monitor killed around its snapshots restarts
from the latest one plus the results after it, and ends where a full replay ends."""

from __future__ import annotations

import http.client
import itertools
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.io.tables import read_table
from tests.integration.embedded_harness import REPO, Server, offline_report

pytestmark = pytest.mark.integration

_WRITER = r"""
import sys
import numpy as np
from monitor.contracts import ItemResult
from monitor.runners.embedded.store import SqliteStore

def blob(i, name):
    # 24 MB that the parent can recompute from (i, name) to check a row is whole.
    head = f"{i}:{name}:".encode()
    return head + np.random.default_rng([i, len(name)]).bytes(24_000_000)

store = SqliteStore(sys.argv[1])
i = int(sys.argv[2])
while True:
    store.commit(results=[ItemResult(benchmark="b", item_id=str(i), model="m", score=1.0)])
    states = {"b": blob(i, "b"), "cc": blob(i, "cc")}
    print(f"begin {i}", flush=True)
    store.write_snapshots(states, results_seq=store.last_seq(), change_id=0,
                          positions={"b": 0, "cc": 1}, config="k")
    print(f"done {i}", flush=True)
    i += 1
"""


def _expected(i: int, name: str) -> bytes:
    return f"{i}:{name}:".encode() + np.random.default_rng([i, len(name)]).bytes(24_000_000)


def test_sigkill_while_writing_snapshots_leaves_a_whole_one(tmp_path: Path) -> None:
    db = tmp_path / "snap.db"
    rng = np.random.default_rng(3)
    start, mid_write, durable = 1, 0, 0
    out_path = tmp_path / "writer.out"
    for kill in range(6):
        with out_path.open("w") as out:
            proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(db), str(start)],
                                    cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while b"begin" not in out_path.read_bytes() and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.002)
        if kill % 2 == 0:  # at a random moment: a few rounds of about 0.3 s each
            time.sleep(float(rng.uniform(0.0, 1.5)))
        # else at once: the first write of 48 MB has begun and lasts longer than the poll
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        err = out_path.read_text()
        lines = err.split()
        begun = [int(n) for w, n in zip(lines[::2], lines[1::2], strict=False) if w == "begin"]
        done = [int(n) for w, n in zip(lines[::2], lines[1::2], strict=False) if w == "done"]
        assert begun, err
        mid_write += begun[-1] not in done

        con = sqlite3.connect(db)  # WAL recovery, as the next start of the monitor does
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = con.execute("SELECT benchmark, results_seq, state FROM snapshots"
                           " ORDER BY benchmark").fetchall()
        last_seq = con.execute("SELECT max(seq) FROM results").fetchone()[0]
        con.close()
        if not rows:
            assert not done and not durable
        else:
            # One round: both rows from the same transaction, whole, covering stored results.
            (b, seq_b, state_b), (c, seq_c, state_c) = rows
            assert (b, c) == ("b", "cc") and seq_b == seq_c <= last_seq
            i = int(state_b.split(b":", 1)[0])
            assert state_b == _expected(i, "b") and state_c == _expected(i, "cc")
            # Durable once done was printed; at most the one being written beyond it.
            durable = done[-1] if done else durable
            assert i in {durable, begun[-1]}, (i, durable, begun, done)
            durable = i
        start = begun[-1] + 1
    print(f"\n{mid_write} of 6 kills landed between the start and the end of a snapshot write")
    assert mid_write >= 1


# -- the real server ------------------------------------------------------------------------
N_MODELS = 12
N_ITEMS = 1500
_ROUND = re.compile(r"snapshot at results row (\d+)")
_RESTORED = re.compile(r"restored (\d+) results .*: (\d+) benchmark snapshot\(s\) in [\d.]+ s, "
                       r"(\d+) results replayed")


def _events(shared_data: Path, rng: np.random.Generator) -> list[dict[str, Any]]:
    t = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                   cluster_col="category")
    complete = ~np.isnan(t.scores)
    cols = np.argsort(-complete.sum(axis=0), kind="stable")[:N_MODELS]
    rows = np.flatnonzero(complete[:, cols].all(axis=1))
    rows = np.sort(rng.choice(rows, N_ITEMS, replace=False))
    assert t.groups is not None
    cells = [(r, k) for r in rows.tolist() for k in cols.tolist()]
    return [{"benchmark": "mmlu_pro", "item_id": str(t.item_ids[r]), "model": t.models[k],
             "score": int(t.scores[r, k]), "cluster": str(t.groups[r])}
            for r, k in (cells[o] for o in rng.permutation(len(cells)).tolist())]


def _without_decision_times(ranking: dict[str, Any]) -> dict[str, Any]:
    out = dict(ranking)
    out["pairs"] = [{**p, "decided": p["decided"] and {k: v for k, v in p["decided"].items()
                                                          if k != "ts"}}
                    for p in ranking["pairs"]]
    return out



@pytest.mark.slow
def test_sigkill_around_snapshots_restarts_from_them_and_ends_as_a_full_replay(
    shared_data: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(20250101)
    events = _events(shared_data, rng)
    ends = np.cumsum(rng.integers(300, 1200, size=100))
    cuts = [0, *[int(c) for c in ends if c < len(events)], len(events)]
    batches = [events[lo:hi] for lo, hi in itertools.pairwise(cuts)]
    random_kills = set(rng.choice(len(batches), size=4, replace=False).tolist())
    args = ("--snapshot-every", "1500", "--eval-interval", "0.05")
    srv = Server(tmp_path / "snap.db", *args).start()
    rounds_seen = 0
    kills_after_round = 0
    restored: list[tuple[int, int, int]] = []
    acknowledged: list[dict[str, Any]] = []
    last_took = 0.05

    pending = 0  # results the running process holds beyond its last snapshot round

    def restart() -> None:
        nonlocal rounds_seen, pending
        srv.kill()
        srv.start()
        rounds_seen = 0  # the log is the new process's
        m = _RESTORED.search(srv.log.read_text())
        assert m, srv.log.read_text()
        restored.append((int(m[1]), int(m[2]), int(m[3])))
        pending = int(m[3])  # the replayed results count towards the next round

    def rounds_in_log(wait: float) -> int:
        """Rounds the running process logged; waits up to ``wait`` s for one beyond those
        seen. A due round is written after an evaluation tick, and no sooner than
        SNAPSHOT_SPACING times the last round's duration after it."""
        deadline = time.monotonic() + wait
        while True:
            rounds = len(_ROUND.findall(srv.log.read_text()))
            if rounds > rounds_seen or time.monotonic() >= deadline:
                return rounds
            time.sleep(0.02)

    try:
        for b, batch in enumerate(batches):
            body = json.dumps(batch).encode()
            killer = None
            replayed_it = False
            if b in random_kills:  # before, during or after the request (and its snapshot)
                assert srv.proc is not None
                killer = threading.Timer(float(rng.uniform(0.0, 1.5 * last_took)), srv.proc.kill)
                killer.start()
            while True:
                try:
                    t0 = time.perf_counter()
                    status, data = srv.request("POST", "/v1/results", body, timeout=30)
                    last_took = time.perf_counter() - t0
                    assert status == 202, data
                    reply = json.loads(data)
                    ok = True
                except (ConnectionError, http.client.HTTPException, OSError):
                    ok = False
                if killer is not None:
                    killer.join()
                    killer = None
                    assert srv.proc is not None
                    srv.proc.wait(10)  # killed: reap it before asking whether it is alive
                if srv.alive():
                    break
                restart()
                if ok:  # killed after its reply: the restart replayed what it accepted
                    replayed_it = True
                    break
            assert reply["accepted"] + reply["duplicate"] == len(batch), reply
            acknowledged.extend(batch)
            pending += 0 if replayed_it else reply["accepted"]
            # Right after a snapshot round shows in the log: kill, so the restart starts from
            # a snapshot with an empty or short tail. Once a round is due, wait for it.
            due = kills_after_round < 3 and pending >= 1500
            rounds = rounds_in_log(30.0 if due else 0.0)
            assert not due or rounds > rounds_seen, srv.log.read_text()
            if rounds > rounds_seen:
                rounds_seen = rounds
                pending = 0
                if kills_after_round < 3:
                    kills_after_round += 1
                    restart()
        print(f"\nsnapshot test: {len(events)} results, {len(restored)} restarts as (held, "
              f"snapshots loaded, replayed): {restored}")
        assert kills_after_round >= 2
        from_snapshots = [r for r in restored if r[1] == 1]
        assert len(from_snapshots) >= 2
        assert all(replayed < held for held, _, replayed in from_snapshots)
        ranking = srv.ranking("mmlu_pro")
        assert srv.stop() == 0  # SIGTERM: a last round is stored on the way out
    finally:
        srv.kill()

    # A restart after the clean stop replays nothing and shows the same ranking.
    srv.start()
    try:
        m = _RESTORED.search(srv.log.read_text())
        assert m and (int(m[1]), int(m[2]), int(m[3])) == (len(events), 1, 0)
        assert srv.ranking("mmlu_pro") == ranking
    finally:
        srv.kill()

    # A full replay of the same database (its snapshots removed) ends in the same state.
    full_db = tmp_path / "full.db"
    shutil.copy(srv.db, full_db)
    for suffix in ("-wal", "-shm"):
        if Path(f"{srv.db}{suffix}").exists():
            shutil.copy(f"{srv.db}{suffix}", f"{full_db}{suffix}")
    con = sqlite3.connect(full_db)
    con.execute("DELETE FROM snapshots")
    con.commit()
    con.close()
    full = Server(full_db, *args).start()
    try:
        assert "0 benchmark snapshot(s)" in full.log.read_text()
        full_ranking = full.ranking("mmlu_pro")
    finally:
        full.kill()
    assert _without_decision_times(full_ranking) == _without_decision_times(ranking)

    # And both equal the offline replay of the acknowledged events.
    offline = offline_report(acknowledged, tmp_path / "acknowledged.csv")
    assert [m["model"] for m in ranking["models"]] == [m["model"] for m in offline["ranking"]]
    want = {(p["model_a"], p["model_b"]): p for p in offline["pairs"]}
    for p in ranking["pairs"]:
        w = want[(p["model_a"], p["model_b"])]
        assert (p["n"], p["n11"], p["n10"], p["n01"], p["n00"]) == (
            w["n"], w["n11"], w["n10"], w["n01"], w["n00"])
        assert p["e_value"] == pytest.approx(w["e_value"], rel=1e-9)
        assert p["verdict"] == w["verdict"]
        assert (p["decided"] or {}).get("n") == (w["decided"] or {}).get("n")
