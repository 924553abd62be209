"""Embedded restart: process start → first 200 on ``/healthz``, full replay against snapshot + tail.

Board: a synthetic correlated 0/1 board (``bench.bench_report.synthetic_board``, seeded) of 250
models × 12,000 items in 14 clusters, 3,000,000 cells, as one stream in a seeded random order.
Two databases are built in-process through :class:`EmbeddedService` (the code path of
``llm-monitor run``, batches of 10,000, verdicts evaluated every 100,000 results): one holding
the first 1,000,000 results of the stream, one holding all 3,000,000. Both are the same board
— the same models, items and clusters, so the monitor's arrays (scores, pair sums, sequential
state) have the same shapes — with a third or all of its cells filled: that is "the same state
size, three times the history". In each, a snapshot covers all but the last ``TAIL`` results
(half the default ``snapshot_every``: a restart at a random moment finds on average that many
after the last snapshot).

Ours: ``llm-monitor run`` on the database: the snapshot loaded, the tail replayed. Peer, in the
same run: the same database with its snapshots removed — the full replay of every stored
result (what every restart did before snapshots). Timed from ``Popen`` to the first ``200`` on
``/healthz`` (the server listens only once the state is rebuilt), each start on a fresh copy of
the database, ``--snapshot-every 0 --snapshot-interval 0``. Also printed: the floor (an empty
database: interpreter and imports), the server's own split of the rebuild, its peak RSS, the
rebuild alone in-process with the imports warm (the part that depends on the database), the
decoding cost of stored rows by four methods, and a profile of the 3 M snapshot rebuild.

Run: ``.venv/bin/python -m bench.bench_restart`` (``--workdir DIR`` keeps the built databases
for another run; ``--repeat N`` starts of the floor and of each snapshot database, in turn,
medians shown).
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import json
import os
import pstats
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench._record import record
from bench.bench_report import synthetic_board

REPO = Path(__file__).resolve().parents[1]
N_MODELS = 250
N_ITEMS = 12_000
SIZES = (1_000_000, 3_000_000)
TAIL = 50_000
BATCH = 10_000
EVAL_EVERY = 100_000
SEED = 20250301
TARGET_SECONDS = 5.0  # issue 10: restart with 3 M stored results, /healthz within 5 s
_RESTORED = re.compile(r"restored (\d+) results .*: (\d+) benchmark snapshot\(s\) in ([\d.]+) s, "
                       r"(\d+) results replayed in ([\d.]+) s, evaluated and reconciled in "
                       r"([\d.]+) s")


# -- building the databases -----------------------------------------------------------------
def _stream() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The board's cells in the stream order: (items, models, scores, cluster of each item)."""
    scores, groups = synthetic_board(rng=np.random.default_rng(SEED), n_items=N_ITEMS,
                                     n_models=N_MODELS)
    order = np.random.default_rng(SEED + 1).permutation(N_ITEMS * N_MODELS)
    items, models = np.divmod(order, N_MODELS)
    return items, models, scores[items, models], groups


def _backup(src: Path, dst: Path, *, drop_snapshots: bool = False) -> None:
    """A consistent copy of a live database (SQLite's online backup), optionally without its
    snapshots."""
    dst.unlink(missing_ok=True)
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
        if drop_snapshots:
            b.execute("DELETE FROM snapshots")
            b.commit()
    finally:
        b.close()
        a.close()


def build(workdir: Path) -> dict[tuple[str, int], Path]:
    """The four databases (snapshot/full × sizes), built once per ``workdir``."""
    from prometheus_client import CollectorRegistry

    from monitor.contracts import ItemResult
    from monitor.runners.embedded.service import EmbeddedService
    from monitor.runners.settings import Settings

    paths = {(kind, n): workdir / f"{kind}-{n // 1_000_000}M.db"
             for kind in ("snapshot", "full") for n in SIZES}
    stamp = workdir / "built.json"
    params = {"models": N_MODELS, "items": N_ITEMS, "sizes": SIZES, "tail": TAIL,
              "batch": BATCH, "eval_every": EVAL_EVERY, "seed": SEED}
    if stamp.exists() and json.loads(stamp.read_text()) == json.loads(json.dumps(params)) \
            and all(p.exists() for p in paths.values()):
        print(f"databases: reused from {workdir}")
        return paths

    items, models, scores, groups = _stream()
    names = [f"model-{j:04d}" for j in range(N_MODELS)]
    live = workdir / "live.db"
    for p in workdir.glob("live.db*"):
        p.unlink()
    svc = EmbeddedService(
        Settings(db=live, eval_interval=60.0, snapshot_every=0, snapshot_interval=0.0,
                 sqlite_synchronous="NORMAL", view=False),
        registry=CollectorRegistry(), log=lambda _: None)
    t0 = time.perf_counter()
    done = 0

    def ingest(upto: int) -> None:
        nonlocal done
        while done < upto:
            hi = min(done + BATCH, upto)
            batch = [ItemResult(benchmark="synthetic", item_id=f"item-{i:05d}", model=names[m],
                                score=float(s), cluster=str(groups[i]))
                     for i, m, s in zip(items[done:hi].tolist(), models[done:hi].tolist(),
                                        scores[done:hi].tolist(), strict=True)]
            report = svc.ingest(list(enumerate(batch)), source="bench")
            assert report.accepted == len(batch), report.as_dict()
            if hi // EVAL_EVERY > done // EVAL_EVERY:
                svc.evaluate_pending(force=True)
            done = hi

    for n in SIZES:
        ingest(n - TAIL)
        svc.evaluate_pending(force=True)
        t1 = time.perf_counter()
        size = svc.snapshot()
        print(f"snapshot round at {n - TAIL:,} stored results: {size:,} bytes in "
              f"{time.perf_counter() - t1:.3f} s (dump + one SQLite transaction)", flush=True)
        ingest(n)
        svc.evaluate_pending(force=True)
        _backup(live, paths[("snapshot", n)])
        _backup(live, paths[("full", n)], drop_snapshots=True)
        print(f"databases: {n:,} results stored ({time.perf_counter() - t0:.0f} s)", flush=True)
    svc.close()
    for p in workdir.glob("live.db*"):
        p.unlink()
    stamp.write_text(json.dumps(params))
    return paths


# -- timing a start -------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def start_once(db: Path, scratch: Path) -> tuple[float, float, str]:
    """Seconds from Popen to the first 200 on /healthz, peak RSS in MB, the server's log."""
    work = scratch / "start.db"
    for p in scratch.glob("start.db*"):
        p.unlink()
    shutil.copy(db, work)
    log = scratch / "start.log"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_MONITOR_")}
    with log.open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "run", "--db", str(work), "--port", str(port),
             "--no-view", "--snapshot-every", "0", "--snapshot-interval", "0"],
            cwd=REPO, stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env)
    try:
        while not _healthy(port):
            if proc.poll() is not None or time.perf_counter() - t0 > 1800:
                raise SystemExit(f"server did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.01)
        took = time.perf_counter() - t0
        rss = 0.0
        for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024
    finally:
        proc.kill()
        proc.wait(30)
    return took, rss, log.read_text()


def _split(log: str) -> str:
    m = _RESTORED.search(log)
    if not m:
        return "nothing restored"
    return (f"snapshots {m[2]} loaded in {float(m[3]):.2f} s, {int(m[4]):,} results replayed in "
            f"{float(m[5]):.2f} s, evaluate + reconcile {float(m[6]):.2f} s")


def _median_run(runs: list[tuple[float, float, str]]) -> tuple[float, float, str]:
    return sorted(runs, key=lambda r: r[0])[len(runs) // 2]


def _listed(runs: list[tuple[float, float, str]]) -> str:
    return ", ".join(f"{r[0]:.2f}" for r in runs)


def rebuild_warm(db: Path, scratch: Path, repeat: int) -> str:
    """The state rebuild alone, in this process, after the imports it needs are done: what a
    restart costs beyond starting Python (the median run, with the server's own split)."""
    import scipy.stats  # noqa: F401  (a first change event's figures import it: warm here)
    from prometheus_client import CollectorRegistry

    from monitor.runners.embedded.service import EmbeddedService
    from monitor.runners.settings import Settings

    runs = []
    for _ in range(repeat):
        work = scratch / "warm.db"
        for p in scratch.glob("warm.db*"):
            p.unlink()
        shutil.copy(db, work)
        lines: list[str] = []
        t0 = time.perf_counter()
        svc = EmbeddedService(Settings(db=work, snapshot_every=0, snapshot_interval=0.0,
                                       view=False),
                              registry=CollectorRegistry(), log=lines.append)
        took = time.perf_counter() - t0
        svc.close()
        runs.append((took, 0.0, "\n".join(lines)))
    took, _, log = _median_run(runs)
    return f"{took:.2f} s ({_listed(runs)}; {_split(log)})"


def profile_snapshot_start(db: Path, scratch: Path) -> None:
    """cProfile of the rebuild (EmbeddedService construction) on a copy of ``db``."""
    from prometheus_client import CollectorRegistry

    from monitor.runners.embedded.service import EmbeddedService
    from monitor.runners.settings import Settings

    work = scratch / "profile.db"
    shutil.copy(db, work)
    settings = Settings(db=work, snapshot_every=0, snapshot_interval=0.0, view=False)
    prof = cProfile.Profile()
    prof.enable()
    svc = EmbeddedService(settings, registry=CollectorRegistry(), log=lambda _: None)
    prof.disable()
    svc.close()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(18)
    keep = [ln for ln in out.getvalue().splitlines()
            if ln.strip() and not ln.startswith(("   Ordered", "   List reduced"))]
    print("\n".join(keep[1:]))


def decode_costs(db: Path) -> None:
    """Decoding the tail's stored rows, per result: what the restart does (the store's reader:
    zstd, then msgspec over the whole row, the garbage collector paused), pydantic-core's
    validation of the same JSON (as before), and a plain json.loads of it."""
    import gc

    import zstandard

    from monitor.runners.embedded.store import _EVENTS, _unpack

    con = sqlite3.connect(db)
    rows = [bytes(b) for (b,) in con.execute(
        "SELECT events FROM results ORDER BY seq DESC LIMIT ?", (TAIL // BATCH,))]
    con.close()
    texts = [zstandard.ZstdDecompressor().decompress(b) if b[:4] == b"\x28\xb5\x2f\xfd" else b
             for b in rows]
    arrays = [t if t[:1] == b"[" else b"[" + t.replace(b"\n", b",\n") + b"]" for t in texts]
    n = sum(len(_unpack(b)) for b in rows)
    ways = (
        ("the store's reader (zstd + msgspec per row), collector paused (now)", rows, _unpack),
        ("pydantic validate_json per row, collector paused (before)", arrays,
         _EVENTS.validate_json),
        ("json.loads per row (no validation), collector paused", arrays, json.loads),
    )
    gc.disable()
    try:
        for label, data, fn in ways:
            best = min(_timed(lambda fn=fn, data=data: [fn(b) for b in data]) for _ in range(3))
            print(f"  decode {n:,} stored results, {label}: {best / n * 1e6:.2f} µs/result")
    finally:
        gc.enable()


def _timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keep the built databases here (reused when the parameters match)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="starts per snapshot database (and of the floor), in turn")
    ap.add_argument("--no-profile", action="store_true", help="skip the in-process profile")
    args = ap.parse_args(argv)
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="bench-restart-")
        workdir = Path(tmp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    scratch = workdir / "scratch"
    scratch.mkdir(exist_ok=True)
    try:
        print(f"board: {N_MODELS} models × {N_ITEMS:,} items, 14 clusters, 0/1, seed {SEED}; "
              f"snapshot {TAIL:,} results before the end; load average "
              f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        paths = build(workdir)
        empty = scratch / "empty.db"
        empty.unlink(missing_ok=True)
        sqlite3.connect(empty).close()
        results: dict[tuple[str, int], float] = {}
        for n in SIZES:
            took, rss, log = start_once(paths[("full", n)], scratch)
            results[("full", n)] = took
            print(f"peer {n // 1_000_000} M stored (full replay, no snapshot): start → /healthz "
                  f"{took:.2f} s (peak RSS {rss:.0f} MB; {_split(log)})", flush=True)
        # The floor and the snapshot starts in turn, so that load falls on all alike.
        runs: dict[str, list[tuple[float, float, str]]] = {"floor": []}
        for _ in range(args.repeat):
            runs["floor"].append(start_once(empty, scratch))
            for n in SIZES:
                runs.setdefault(f"snapshot {n}", []).append(
                    start_once(paths[("snapshot", n)], scratch))
        floor, rss, _ = _median_run(runs["floor"])
        print(f"floor: empty database, start → /healthz {floor:.2f} s median of "
              f"{args.repeat} ({_listed(runs['floor'])}; peak RSS {rss:.0f} MB)")
        for n in SIZES:
            took, rss, log = _median_run(runs[f"snapshot {n}"])
            results[("snapshot", n)] = took
            print(f"ours {n // 1_000_000} M stored (snapshot + {TAIL:,}-result tail): start → "
                  f"/healthz {took:.2f} s median of {args.repeat} "
                  f"({_listed(runs[f'snapshot {n}'])}; peak RSS {rss:.0f} MB; {_split(log)})",
                  flush=True)
        for n in SIZES:
            print(f"ratio at {n // 1_000_000} M: full replay / snapshot + tail = "
                  f"{results[('full', n)] / results[('snapshot', n)]:.1f}x")
        lo, hi = SIZES
        print(f"growth 1 M → 3 M stored, same board: full replay "
              f"{results[('full', hi)] / results[('full', lo)]:.2f}x, snapshot + tail "
              f"{results[('snapshot', hi)] / results[('snapshot', lo)]:.2f}x")
        ok = results[("snapshot", hi)] <= TARGET_SECONDS
        print(f"target: 3 M stored, /healthz within {TARGET_SECONDS:.0f} s: "
              f"{'met' if ok else 'NOT met'} ({results[('snapshot', hi)]:.2f} s)")
        record("restart with 3 M stored results, start → /healthz",
               goal=f"≤ {TARGET_SECONDS:.0f} s, not growing with history",
               figure=f"{results[('snapshot', hi)]:.2f} s",
               peer=f"full replay {results[('full', hi)] / results[('snapshot', hi)]:.1f}× "
                    f"longer; 1 M → 3 M {results[('snapshot', hi)] / results[('snapshot', lo)]:.2f}×",
               met=ok, command="python -m bench.bench_restart")
        print("rebuild in-process with the imports warm (EmbeddedService construction, "
              f"median of {args.repeat}):")
        for n in SIZES:
            print(f"  {n // 1_000_000} M stored, snapshot + tail: "
                  f"{rebuild_warm(paths[('snapshot', n)], scratch, args.repeat)}", flush=True)
        decode_costs(paths[("snapshot", hi)])
        if not args.no_profile:
            print(f"profile: the {hi // 1_000_000} M snapshot restart in-process "
                  "(EmbeddedService construction), by cumulative time:")
            profile_snapshot_start(paths[("snapshot", hi)], scratch)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
