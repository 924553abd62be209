"""SIGKILL the embedded monitor at random points of a 52,000-result ingest of real MMLU-Pro data;
restart on the same database each time, resend what was not acknowledged, finish — and the
final state must equal ``llm-monitor report --order file`` on the acknowledged events."""

from __future__ import annotations

import http.client
import itertools
import json
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from monitor.io.tables import read_table
from monitor.runners.embedded.store import SqliteStore
from tests.integration.embedded_harness import Server, metric_value, offline_report

pytestmark = pytest.mark.integration

N_MODELS = 20
N_ITEMS = 2600
MIN_KILLS = 6


def _real_events(shared_data: Path, rng: np.random.Generator) -> tuple[list[dict], np.ndarray]:
    t = read_table(shared_data / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                   cluster_col="category")
    complete = ~np.isnan(t.scores)
    # 20 models that answered every item of a common set of at least N_ITEMS items.
    cols = [j for j in np.argsort(-complete.sum(axis=0), kind="stable")][:N_MODELS]
    rows = np.flatnonzero(complete[:, cols].all(axis=1))
    assert rows.size >= N_ITEMS
    rows = np.sort(rng.choice(rows, N_ITEMS, replace=False))
    models = [t.models[j] for j in cols]
    x = t.scores[np.ix_(rows, cols)]
    assert t.groups is not None
    cells = [(r, k) for r in range(N_ITEMS) for k in range(N_MODELS)]
    order = rng.permutation(len(cells))
    events = []
    for o in order.tolist():
        r, k = cells[o]
        events.append({"benchmark": "mmlu_pro", "item_id": str(t.item_ids[rows[r]]),
                       "model": models[k], "score": int(x[r, k]),
                       "cluster": str(t.groups[rows[r]])})
    return events, x


def _tiers(change: dict) -> list[set[str]]:
    """The tiers of a RankingChange event as sets of models, top first."""
    groups: dict[int, set[str]] = {}
    for model, tier in zip(change["models"], change["tiers"], strict=True):
        groups.setdefault(tier, set()).add(model)
    return [groups[t] for t in sorted(groups)]


def _tiers_now(ranking: dict) -> list[set[str]]:
    groups: dict[int, set[str]] = {}
    for m in ranking["models"]:
        groups.setdefault(m["tier"], set()).add(m["model"])
    return [groups[t] for t in sorted(groups)]


def _stored(db: Path) -> int:
    """Results committed to the monitor's database, read as a second SQLite connection."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT coalesce(sum(n), 0) FROM results").fetchone()[0])
    finally:
        con.close()



@pytest.mark.slow
def test_sigkill_at_random_points_loses_and_doubles_nothing(
    shared_data: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(20241017)
    events, x = _real_events(shared_data, rng)
    assert len(events) == N_MODELS * N_ITEMS >= 50_000

    ends = np.cumsum(rng.integers(400, 2500, size=200))
    cuts = [0, *[int(c) for c in ends if c < len(events)], len(events)]
    batches = [events[lo:hi] for lo, hi in itertools.pairwise(cuts)]
    chosen = rng.choice(len(batches), size=MIN_KILLS + 4, replace=False).tolist()
    kill_at = set(chosen[:MIN_KILLS + 2])
    # Two kills in the narrowest window: after the commit, before the reply is read.
    kill_after_commit = set(chosen[MIN_KILLS + 2:])

    srv = Server(tmp_path / "crash.db").start()
    kills = 0
    last_took = 0.05
    unacked = 0  # requests cut off by a kill (resent)
    resent_dupes = 0  # results stored before the kill but not acknowledged: duplicates on resend
    acknowledged: list[dict] = []
    accepted_in_acks = 0
    try:
        for b, batch in enumerate(batches):
            body = json.dumps(batch).encode()
            killer = None
            if b in kill_at:
                # The kill lands before, during or after processing of this request.
                pid_proc = srv.proc
                assert pid_proc is not None
                # Up to 1.3 request durations: before, during or after the commit.
                killer = threading.Timer(float(rng.uniform(0.0, 1.3 * last_took)), pid_proc.kill)
                killer.start()
            if b in kill_after_commit:
                before = _stored(srv.db)
                srv.send_only("POST", "/v1/results", body)
                deadline = time.monotonic() + 30
                while _stored(srv.db) == before and time.monotonic() < deadline:
                    time.sleep(0.001)
                assert _stored(srv.db) == before + len(batch)
                srv.kill()
                kills += 1
                unacked += 1
                srv.start()
            while True:
                try:
                    t0 = time.perf_counter()
                    status, data = srv.request("POST", "/v1/results", body, timeout=30)
                    last_took = time.perf_counter() - t0
                    reply = json.loads(data)
                    assert status == 202, reply
                    ok = True
                except (ConnectionError, http.client.HTTPException, OSError):
                    ok = False
                if killer is not None:
                    killer.join()
                    killer = None
                    # SIGKILL is delivered asynchronously: wait until the process is gone, or
                    # a kill landing just after a fast reply would be taken for no kill.
                    assert pid_proc is not None
                    pid_proc.wait(10)
                if not srv.alive():
                    kills += 1
                    srv.kill()
                    srv.start()  # same database; the state is rebuilt from it
                    if b > 0:
                        # A client unsure of its last acknowledged batch may send it again.
                        st, again = srv.post(json.dumps(batches[b - 1]).encode())
                        assert st == 202 and again["duplicate"] == len(batches[b - 1]), again
                    if ok:
                        break  # acknowledged before the kill
                    unacked += 1
                    continue  # not acknowledged: resend the same batch
                if ok:
                    break
            # Every event of an acknowledged batch is in, once: accepted now or already stored.
            assert reply["accepted"] + reply["duplicate"] == len(batch), reply
            assert reply["invalid"] == reply["conflict"] == 0, reply
            acknowledged.extend(batch)
            accepted_in_acks += reply["accepted"]
            resent_dupes += reply["duplicate"]

        print(f"\ncrash test: {len(events)} results in {len(batches)} batches, {kills} SIGKILLs, "
              f"{unacked} requests cut off and resent, {resent_dupes} results found already "
              f"stored on resend, {accepted_in_acks} accepted in acknowledged replies")
        assert kills >= 5, kills
        assert resent_dupes >= sum(len(batches[b]) for b in kill_after_commit)
        assert accepted_in_acks + resent_dupes == len(events)
        assert acknowledged == events

        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == len(events)
        assert metric_value(text, "llm_monitor_events_total", outcome="conflict") == 0
        status, ranking = srv.get_json("/v1/benchmarks/mmlu_pro/ranking")
        assert status == 200
        # The change log, read to its end, tells the final verdicts and ranking once the
        # evaluation cadence has passed; on a loaded machine that can take a while, so poll.
        deadline = time.monotonic() + 20
        while True:
            changes = srv.get_json("/v1/changes?since=0&limit=10000")[1]["changes"]
            logged = {}
            for c in changes:
                if c["kind"] == "resolution":
                    logged[frozenset((c["model_a"], c["model_b"]))] = c["verdict"]
            final = {frozenset((p["model_a"], p["model_b"])): p["verdict"]
                     for p in ranking["pairs"]}
            rankings = [c for c in changes if c["kind"] == "ranking"]
            in_step = (all(logged.get(k, "unresolved") == v for k, v in final.items())
                       and bool(rankings)
                       and _tiers(rankings[-1]) == _tiers_now(ranking))
            if in_step or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        ids = [c["change_id"] for c in changes]
        assert ids == list(range(1, len(ids) + 1))  # increasing, no gap, none repeated
        for k, v in final.items():
            assert logged.get(k, "unresolved") == v, (sorted(k), v)
        # A RankingChange is emitted when the tiers change (not for swaps inside a tier):
        # the last one has the current tiers.
        assert _tiers(rankings[-1]) == _tiers_now(ranking)
    finally:
        srv.kill()

    offline = offline_report(acknowledged, tmp_path / "acknowledged.csv")
    means = x.mean(axis=0)
    assert len(set(means.tolist())) == N_MODELS  # no ties, so the ranking order is unambiguous
    assert [(m["model"], m["n"]) for m in ranking["models"]] == [
        (m["model"], m["n"]) for m in offline["ranking"]]
    assert all(m["n"] == N_ITEMS for m in ranking["models"])
    for m, want in zip(ranking["models"], offline["ranking"], strict=True):
        assert m["mean"] == pytest.approx(want["mean"], rel=1e-12)
    got = {(p["model_a"], p["model_b"]): p for p in ranking["pairs"]}
    want_pairs = {(p["model_a"], p["model_b"]): p for p in offline["pairs"]}
    assert set(got) == set(want_pairs) and len(got) == N_MODELS - 1
    for key, want in want_pairs.items():
        p = got[key]
        assert p["n"] == want["n"] == N_ITEMS, key
        assert (p["n11"], p["n10"], p["n01"], p["n00"]) == (
            want["n11"], want["n10"], want["n01"], want["n00"]), key
        assert p["delta"] == pytest.approx(want["delta"], rel=1e-12, abs=1e-15), key
        assert p["e_value"] == pytest.approx(want["e_value"], rel=1e-9), key
        # The same decision at the same paired item: the replay follows each pair's items in
        # the order they were acknowledged, as the monitor did across its restarts.
        assert p["e_threshold"] == pytest.approx(want["e_threshold"], rel=1e-12), key
        assert p["verdict"] == want["verdict"], key
        assert (p["decided"] or {}).get("n") == (want["decided"] or {}).get("n"), key
    assert sum(w["decided"] is not None for w in want_pairs.values()) >= 1


@pytest.mark.slow
def test_sigkill_under_four_concurrent_clients(shared_data: Path, tmp_path: Path) -> None:
    """Four clients send disjoint shares of the results at once, each resending a batch until
    it is acknowledged, while the server is SIGKILLed and restarted: every result is stored
    exactly once and each reply accounts for its batch."""
    rng = np.random.default_rng(7)
    events, _ = _real_events(shared_data, rng)
    clients = 4
    shares = [events[k::clients] for k in range(clients)]
    srv = Server(tmp_path / "conc.db").start()
    lock = threading.Lock()  # srv.port changes on each restart
    acked = [0] * clients
    dupes = [0] * clients
    errors: list[str] = []

    def client(k: int) -> None:
        share = shares[k]
        sizes = np.random.default_rng(k).integers(20, 120, size=1000)  # many commits
        cuts = [0, *np.cumsum(sizes).tolist()]
        for lo, hi in itertools.pairwise(cuts):
            batch = share[lo:min(hi, len(share))]
            if not batch:
                break
            body = json.dumps(batch).encode()
            while True:
                with lock:
                    port = srv.port
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                try:
                    conn.request("POST", "/v1/results", body,
                                 {"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    reply = json.loads(resp.read())
                except (OSError, http.client.HTTPException, ValueError):
                    time.sleep(0.05)  # killed or restarting: send the same batch again
                    continue
                finally:
                    conn.close()
                if resp.status != 202:
                    errors.append(f"client {k}: {resp.status} {reply}")
                    return
                got = (reply["accepted"] + reply["duplicate"], reply["invalid"] + reply["conflict"])
                if got != (len(batch), 0) or reply["events"] != len(batch):
                    errors.append(f"client {k}: {len(batch)} sent, reply {reply}")
                acked[k] += reply["accepted"]
                dupes[k] += reply["duplicate"]
                break

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    kills = 0
    t0 = time.perf_counter()
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads) and kills < 6:
            time.sleep(float(rng.uniform(0.05, 0.3)))
            if not any(t.is_alive() for t in threads):
                break
            proc = srv.proc
            assert proc is not None
            proc.kill()
            proc.wait(10)
            kills += 1
            with lock:
                srv.start()  # same database; the state is rebuilt from it
        for t in threads:
            t.join(300)
        took = time.perf_counter() - t0
        figures = (f"{len(events)} results from {clients} clients in {took:.1f} s, {kills} "
                   f"SIGKILLs, {sum(dupes)} found already stored on resend")
        print(f"\nconcurrent crash test: {figures}")
        assert not errors, errors[:3]
        assert kills >= 4, figures
        assert sum(acked) + sum(dupes) == len(events) and sum(acked) <= len(events), figures
        text = srv.metrics()
        assert metric_value(text, "llm_monitor_events_total", outcome="accepted") == len(events)
        store = SqliteStore(srv.db)  # a second reader of the WAL database
        try:
            stored = [ev for batch in store.iter_results() for ev in batch]
        finally:
            store.close()
        keys = [(ev.item_id, ev.model) for ev in stored]
        assert len(keys) == len(set(keys)) == len(events), figures  # each once, none lost
        assert set(keys) == {(ev["item_id"], ev["model"]) for ev in events}
        status, ranking = srv.get_json("/v1/benchmarks/mmlu_pro/ranking")
        assert status == 200
    finally:
        srv.kill()
    # Order-free figures equal those of the events themselves.
    sums: dict[str, list[float]] = {}
    for ev in events:
        s = sums.setdefault(ev["model"], [0.0, 0.0])
        s[0] += ev["score"]
        s[1] += 1
    for m in ranking["models"]:
        assert m["n"] == sums[m["model"]][1]
        assert m["mean"] == pytest.approx(sums[m["model"]][0] / sums[m["model"]][1], rel=1e-12)
