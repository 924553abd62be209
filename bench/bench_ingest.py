r"""Embedded ingest: the stage table of the ingest path, and a real ``llm-monitor run`` process.

1. Stages (the default): the same NDJSON lines — ``LINES`` MMLU-Pro results of 20 models,
   shuffled — through each stage of ingest on its own, beside a plain ``json.loads`` loop over
   the same lines in the same run (the reference every ratio is taken against):
   decode (parse each line to a dict), validate (the parsed dicts checked as ``ItemResult``\ s
   by the contract's pydantic models), decode + validate as the ingest decoder does it
   (:func:`monitor.decoder.decode_events` on NDJSON bodies of ``BATCH`` lines), fold
   (:meth:`monitor.core.Monitor.apply` of each batch), persist (the SQLite store's commit of
   each batch's accepted results, WAL, ``synchronous=FULL``), the embedded monitor end to end
   (a real ``llm-monitor run`` process pinned to one core, fed the NDJSON bodies over one
   loopback keep-alive connection, then over two at once; every ``202`` means committed),
   and the distributed worker (``bench.bench_worker``'s kafka-python worker on a local Tansu
   broker, the same lines as record values). In-process stages run on the other core.
2. ``--peer``: ours against the naive per-event embedded path, in-process (no HTTP) — validate
   each event on its own, INSERT it, pair it with every model that already has the item and
   update each pair's ``PairState`` (bench._pair_state), one commit per batch — on the
   results of the first ``PEER_ITEMS`` items; and a plain ``sqlite3`` executemany.
3. ``--budget``: what the 1.5× target leaves per result once the floors of the path are paid,
   as CPU time per result (waits such as an fsync or the client's round trip, which a server
   may overlap with other work, not counted), the median of ``BUDGET_ROUNDS`` rounds that
   each measure every row in turn on the same bodies: the json.loads loop (the reference; the
   budget is its time / 1.5); the cheapest typed decode a well-kept library offers (one
   msgspec call per body into a struct of the five fields, no constraints); the two lookups
   every result needs (its item's row, its model's column: ``dict.get`` on the decoded
   strings against dicts of the run's items and models, as the core's state holds them); the
   store's commit; and the HTTP transport alone (the CPU time of an aiohttp server, the
   monitor's framework, pinned to one core, whose handler reads the body and answers ``202``
   with a small JSON, fed the same bodies over one keep-alive connection). Beside them, the
   fold as it is (:meth:`monitor.core.Monitor.apply`) and the paired items the stream adds
   per result.
4. ``--pyarrow``: the decode floor's msgspec call against pyarrow's NDJSON reader (one
   thread, an explicit schema) on the same bodies, CPU per line, interleaved rounds; pyarrow
   is not a dependency (install it into the venv to run this).
5. ``--latency``: batches of 500 every 50 ms (10,000 results/s) to a fresh server, while a
   second connection scrapes ``/metrics`` back to back; for each batch, the time from the
   start of its POST until a scrape shows it counted; p50/p99/max.

Run: ``.venv/bin/python -m bench.bench_ingest [--no-kafka] [--models M] [--baseline-ref REF]
[--peer] [--budget] [--pyarrow] [--latency]``; ``--models M`` runs the stages on every cell of a
synthetic board of M models (``LINES`` results, shuffled) instead of MMLU-Pro's 20; ``--baseline-ref`` also times the in-process stages (in a process of their own)
and HTTP end to end with the ``monitor/`` of commit REF (``git archive``), in the same run.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import TypeAdapter

from bench._record import record

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MODELS = 20
BATCH = 10_000
LINES = 200_000
PEER_ITEMS = 3000
PEER_LABEL = f" [first {PEER_ITEMS} items]"
LAT_RATE = 10_000
LAT_BATCH = 500
LAT_SECONDS = 15.0
_LISTEN = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)")


def load_events(seed: int, models: int = MODELS) -> list[dict]:
    """The wide MMLU-Pro table as a shuffled list of result dicts (the 20 most complete models);
    with another number of ``models``, every cell of a synthetic board of that many models on
    ``LINES // models`` items (``bench.bench_report.synthetic_board``), shuffled: as many lines,
    each result pairing with up to ``models`` − 1 others."""
    if models != MODELS:
        from bench.bench_report import synthetic_board

        rng = np.random.default_rng(seed)
        x, groups = synthetic_board(rng=rng, n_items=max(LINES // models, 14), n_models=models)
        rows, cols = np.divmod(rng.permutation(x.size), models)
        return [{"benchmark": "mmlu_pro", "item_id": str(r), "model": f"model-{c:04d}",
                 "score": int(x[r, c]), "cluster": str(groups[r])}
                for r, c in zip(rows.tolist(), cols.tolist(), strict=True)]
    from monitor.io.tables import read_table

    t = read_table(DATA / "mmlu_pro_item_correctness_wide.csv", exclude=("src",),
                   cluster_col="category")
    present = ~np.isnan(t.scores)
    cols = np.argsort(-present.sum(axis=0), kind="stable")[:MODELS]
    assert t.groups is not None
    events = [
        {"benchmark": "mmlu_pro", "item_id": str(t.item_ids[i]), "model": t.models[j],
         "score": int(t.scores[i, j]), "cluster": str(t.groups[i])}
        for i in range(t.scores.shape[0]) for j in cols.tolist() if present[i, j]
    ]
    order = np.random.default_rng(seed).permutation(len(events))
    return [events[k] for k in order.tolist()]


class Server:
    def __init__(self, db: Path, *, cpu: int | None, cwd: Path = REPO) -> None:
        self.log = db.with_suffix(".log")
        out = self.log.open("wb")
        self.proc = subprocess.Popen(  # `-m` puts cwd first on the path: its monitor/ is run
            [sys.executable, "-m", "monitor.cli", "run", "--db", str(db), "--port", "0",
             "--no-view"], cwd=cwd, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.proc.pid, {cpu})
        deadline = time.monotonic() + 60
        while True:
            m = _LISTEN.search(self.log.read_bytes())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"server did not start:\n{self.log.read_text()}")
            time.sleep(0.05)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)

    def post(self, body: bytes, ctype: str = "application/json", *,
             conn: http.client.HTTPConnection | None = None) -> dict:
        conn = conn or self.conn
        conn.request("POST", "/v1/results", body=body, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 202:
            raise SystemExit(f"POST failed: {resp.status} {data[:300]!r}\n"
                             f"{self.log.read_text(errors='replace')[-3000:]}")
        return json.loads(data)

    def accepted(self) -> float:
        self.conn.request("GET", "/metrics")
        text = self.conn.getresponse().read().decode()
        m = re.search(r'^llm_monitor_events_total\{outcome="accepted"\} (\S+)$', text, re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self) -> None:
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(30)


def sustained(events: list[dict], tmp: Path, *, label: str = "") -> float:
    bodies = [json.dumps(events[lo:lo + BATCH]).encode() for lo in range(0, len(events), BATCH)]
    srv = Server(tmp / f"sustained{len(events)}.db", cpu=0)
    try:
        t0 = time.perf_counter()
        accepted = sum(srv.post(b)["accepted"] for b in bodies)
        elapsed = time.perf_counter() - t0
    finally:
        srv.stop()
    assert accepted == len(events), accepted
    rate = len(events) / elapsed
    print(f"ours{label} (llm-monitor run over HTTP, batches of {BATCH}, SQLite WAL FULL, "
          f"1 core): {elapsed:.2f} s  ({rate:,.0f} results/s)")
    return rate


def naive_peer(events: list[dict], tmp: Path) -> float:
    """Per event: validate, INSERT, pair with every partner via PairState; commit per batch."""
    from bench._pair_state import PairState
    from monitor.contracts import ItemResult
    from monitor.stats.eprocess import log_e_mcnemar

    from ._peer import pair_with_partners, results_db

    db = results_db(tmp / "peer.db")
    lines = [json.dumps(e) for e in events]
    scores: dict[str, dict[str, float]] = {}
    pairs: dict[tuple[str, str], PairState] = {}
    t0 = time.perf_counter()
    for lo in range(0, len(lines), BATCH):
        db.execute("BEGIN")
        touched: set[tuple[str, str]] = set()
        for line in lines[lo:lo + BATCH]:
            ev = ItemResult.model_validate_json(line)
            row = scores.setdefault(ev.item_id, {})
            if ev.model in row:
                continue
            db.execute("INSERT INTO results VALUES (?,?,?,?,?)",
                       (ev.benchmark, ev.item_id, ev.model, ev.score, ev.cluster))
            touched.update(pair_with_partners(pairs, row, ev.model, ev.score, ev.cluster))
            row[ev.model] = ev.score
        for key in touched:  # verdict inputs of every touched pair, once per batch
            st = pairs[key]
            log_e_mcnemar(st.n10, st.n01)
        db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    rate = len(lines) / elapsed
    print(f"peer{PEER_LABEL} (naive per-event path in-process: validate, INSERT, loop over "
          f"partner pairs with PairState.update): {elapsed:.2f} s  ({rate:,.0f} results/s)")
    return rate


def plain_sqlite(events: list[dict], tmp: Path) -> float:
    from ._peer import results_db

    db = results_db(tmp / "plain.db")
    rows = [(e["benchmark"], e["item_id"], e["model"], float(e["score"]), e["cluster"])
            for e in events]
    t0 = time.perf_counter()
    for lo in range(0, len(rows), BATCH):
        db.execute("BEGIN")
        db.executemany("INSERT INTO results VALUES (?,?,?,?,?)", rows[lo:lo + BATCH])
        db.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    db.close()
    rate = len(rows) / elapsed
    print(f"for scale: plain sqlite3 executemany of the same rows (storage only, no decoding "
          f"or statistics): {elapsed:.2f} s  ({rate:,.0f} results/s)")
    return rate


def latency(events: list[dict], tmp: Path) -> np.ndarray:
    """A sender posts on schedule; a scraper polls /metrics on its own connection."""
    n_batches = int(LAT_SECONDS * LAT_RATE / LAT_BATCH)
    bodies = [json.dumps(events[k * LAT_BATCH:(k + 1) * LAT_BATCH]).encode()
              for k in range(n_batches)]
    cum = np.cumsum([LAT_BATCH] * n_batches)
    srv = Server(tmp / "latency.db", cpu=0)
    scraper = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    posted = np.full(n_batches, np.nan)
    seen = np.full(n_batches, np.nan)
    done = threading.Event()
    scrapes = 0

    def scrape() -> None:
        nonlocal scrapes
        while not done.is_set() or np.isnan(seen).any():
            scraper.request("GET", "/metrics")
            text = scraper.getresponse().read().decode()
            t = time.perf_counter()
            scrapes += 1
            m = re.search(r'^llm_monitor_events_total\{outcome="accepted"\} (\S+)$', text, re.M)
            count = float(m.group(1)) if m else 0.0
            newly = (cum <= count) & np.isnan(seen) & ~np.isnan(posted)
            seen[newly] = t

    thread = threading.Thread(target=scrape, daemon=True)
    try:
        start = time.perf_counter() + 0.2
        thread.start()
        for k, body in enumerate(bodies):
            wait = start + k * LAT_BATCH / LAT_RATE - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            posted[k] = time.perf_counter()
            srv.post(body)
        achieved = int(cum[-1]) / (time.perf_counter() - start)
        done.set()
        thread.join(60)
    finally:
        scraper.close()
        srv.stop()
    out = seen - posted
    print(f"latency at {LAT_RATE:,} results/s offered ({achieved:,.0f}/s achieved, "
          f"{n_batches} batches of {LAT_BATCH}, {scrapes} scrapes of /metrics meanwhile), "
          f"POST start → counted in /metrics: p50 {np.percentile(out, 50) * 1e3:.1f} ms, "
          f"p99 {np.percentile(out, 99) * 1e3:.1f} ms, max {out.max() * 1e3:.1f} ms")
    return out


def _timed(fn: Any, clock: Any = time.perf_counter) -> float:
    """Seconds of ``fn()`` by ``clock`` (one call; the collector off)."""
    gc.collect()
    gc.disable()
    try:
        t0 = clock()
        fn()
        return float(clock() - t0)
    finally:
        gc.enable()


def _rate(fn: Any, n: int) -> float:
    """Lines per second of ``fn()`` over ``n`` lines (wall time)."""
    return n / _timed(fn)


def _json_loop(lines: list[bytes]) -> None:
    """The reference: a plain ``json.loads`` of each line."""
    loads = json.loads
    for ln in lines:
        loads(ln)


def _bodies(lines: list[bytes]) -> list[bytes]:
    """The NDJSON request bodies of ``BATCH`` lines each."""
    return [b"\n".join(lines[lo:lo + BATCH]) + b"\n" for lo in range(0, len(lines), BATCH)]


def stage_lines(events: list[dict]) -> list[bytes]:
    """The NDJSON lines every stage reads: the first ``LINES`` events, compact JSON."""
    return [json.dumps(e, separators=(",", ":")).encode() for e in events[:LINES]]


def inprocess_rows(lines: list[bytes], tmp: Path) -> list[tuple[str, float]]:
    """Lines/s of each in-process stage, beside a json.loads loop (same process). Written
    for the ``monitor/`` it imports, this one or an earlier commit's (``--baseline-ref``)."""
    import inspect

    import orjson

    from monitor.contracts import ItemResult
    from monitor.core import CoreConfig, Monitor
    from monitor.decoder import decode_events
    from monitor.runners.embedded.store import SqliteStore
    from monitor.runners.host import Sources

    n = len(lines)
    batches = [lines[lo:lo + BATCH] for lo in range(0, n, BATCH)]
    bodies = _bodies(lines)
    adapter: TypeAdapter[list[ItemResult]] = TypeAdapter(list[ItemResult])
    rows: list[tuple[str, float]] = []
    rows.append(("plain json.loads per line (reference)", _rate(lambda: _json_loop(lines), n)))

    def orjson_loop() -> None:
        loads = orjson.loads
        for ln in lines:
            loads(ln)

    rows.append(("decode: orjson.loads per line", _rate(orjson_loop, n)))
    parsed = [[orjson.loads(ln) for ln in b] for b in batches]
    rows.append(("validate: TypeAdapter(list[ItemResult]).validate_python per batch",
                 _rate(lambda: [adapter.validate_python(p) for p in parsed], n)))
    decoded: list[Any] = []

    def decode_all() -> None:
        decoded.clear()
        for body in bodies:
            d = decode_events(body, source="http", keep=100)
            # the batch as the service hands it on (earlier versions: a list of the events)
            batch = d.results if hasattr(d, "results") else [ev for _, ev in d.valid]
            assert len(batch) == len(body.splitlines()), d.invalid[:1]
            decoded.append(batch)

    rows.append((f"decode+validate: decode_events of NDJSON bodies of {BATCH:,} lines",
                 _rate(decode_all, n)))
    mon = Monitor(CoreConfig())

    def fold() -> None:
        for batch in decoded:
            mon.apply(batch, sources=Sources(len(batch), lambda k: f"http[{k}]"),
                      evaluate=False)

    rows.append(("fold: Monitor.apply per batch (verdicts not evaluated)", _rate(fold, n)))
    store = SqliteStore(tmp / "stage-store.db")
    whole = "text" in inspect.signature(store.commit).parameters  # stores a body as its text

    def persist() -> None:
        for batch, body, raw in zip(decoded, bodies, batches, strict=True):
            if whole:
                store.commit(results=batch, counts={"accepted": len(batch)}, text=body.strip())
            else:
                store.commit(results=batch, counts={"accepted": len(batch)}, raw=raw)

    rows.append(("persist: SqliteStore.commit per batch, as the service stores it (WAL, FULL)",
                 _rate(persist, n)))
    store.close()
    return rows


def _inprocess_child(tmp: str) -> None:
    """:func:`inprocess_rows` in a process whose ``monitor`` is another tree's (JSON out)."""
    print(json.dumps(inprocess_rows(stage_lines(load_events(seed=3)), Path(tmp))))


def _inprocess_of(tree: Path, tmp: Path) -> list[tuple[str, float]]:
    """:func:`inprocess_rows` with the ``monitor/`` of ``tree``, in a fresh process."""
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import monitor; "
            "assert monitor.__file__.startswith(sys.argv[1]), monitor.__file__; "
            "from bench.bench_ingest import _inprocess_child; _inprocess_child(sys.argv[3])")
    out = subprocess.run([sys.executable, "-c", code, str(tree), str(REPO), str(tmp)],
                         cwd=tmp, check=True, capture_output=True, text=True).stdout
    return [(label, rate) for label, rate in json.loads(out.strip().splitlines()[-1])]


def _table(rows: list[tuple[str, float]]) -> None:
    ref = rows[0][1]
    width = max(len(label) for label, _ in rows)
    print(f"{'stage':<{width}}  {'lines/s':>10}  ratio to json.loads")
    for label, rate in rows:
        print(f"{label:<{width}}  {rate:10,.0f}  {rate / ref:5.2f}x")


def stages(events: list[dict], tmp: Path, *, kafka: bool, baseline: str | None,
           models: int = MODELS) -> None:
    """Each stage of ingest on the same NDJSON lines, beside a json.loads loop (same run);
    with ``baseline``, the in-process stages and HTTP end to end of that commit too."""
    lines = stage_lines(events)
    bodies = _bodies(lines)
    tree = REPO
    if baseline is not None:  # the code of another commit, exported next to ours
        tree = tmp / "baseline"
        tree.mkdir()
        archive = subprocess.run(["git", "archive", baseline, "monitor"], cwd=REPO,
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        print(f"in-process stages, the code of {baseline} (its own process, same lines):")
        _table(_inprocess_of(tree, tmp))
        print("in-process stages and the runners, this code:")
    rows = inprocess_rows(lines, tmp)
    if baseline is not None:
        rows.append((f"HTTP end to end, the code of {baseline} (same bench, same run)",
                     _http(bodies, lines, tmp / "stage-http-baseline.db", tree)))
    rows.append((f"HTTP end to end: llm-monitor run, NDJSON POSTs of {BATCH:,} lines, 1 core",
                 _http(bodies, lines, tmp / "stage-http.db", REPO)))
    rows.append(("HTTP end to end, the same over two connections at once",
                 _http(bodies, lines, tmp / "stage-http-2.db", REPO, connections=2)))
    ref, http = rows[0][1], rows[-2][1]
    goal = 0.7 if models <= MODELS else 0.2
    board = "MMLU-Pro" if models == MODELS else f"synthetic {models} × {len(lines) // models:,}"
    record(f"HTTP ingest, {models} models ({board}, shuffled)",
           goal=f"≥ {goal}× a json.loads loop", figure=f"{http:,.0f} results/s",
           peer=f"{http / ref:.2f}× a json.loads loop over the same lines",
           met=http / ref >= goal,
           command=f"python -m bench.bench_ingest --no-kafka --models {models}")
    if kafka:
        for compression in ("zstd", "none"):
            rows.append((f"Kafka worker (kafka-python engine), Tansu, 3 partitions, "
                         f"{compression} batches", _kafka(lines, tmp / compression, compression)))
    _table(rows)


def _warm_up(srv: Server, lines: list[bytes]) -> None:
    """Results of another benchmark through ``srv`` and its pair figures read: the first
    figures import scipy.stats (≈ 1–2 s once per process), which is not a cost of the stream."""
    warm = [ln.replace(b'"mmlu_pro"', b'"warm-up"') for ln in lines[:1000]]
    srv.post(b"\n".join(warm), "application/x-ndjson")
    time.sleep(1.0)  # the idle tick evaluates it
    srv.conn.request("GET", "/v1/benchmarks/warm-up/pairs?limit=5")
    resp = srv.conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise SystemExit(f"warm-up pairs: {resp.status} {body[:300]!r}")


def _http(bodies: list[bytes], lines: list[bytes], db: Path, tree: Path, *,
          connections: int = 1) -> float:
    """Lines/s of ``llm-monitor run`` (the code in ``tree``) fed the NDJSON ``bodies``, over
    ``connections`` keep-alive connections (body i on connection i mod ``connections``, each
    from a thread of its own)."""
    srv = Server(db, cpu=0, cwd=tree)
    try:
        _warm_up(srv, lines)
        conns = [srv.conn] + [http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
                              for _ in range(connections - 1)]
        counts = [0] * connections

        def send(k: int) -> None:
            for body in bodies[k::connections]:
                counts[k] += srv.post(body, "application/x-ndjson", conn=conns[k])["accepted"]

        def post_all() -> None:
            threads = [threading.Thread(target=send, args=(k,)) for k in range(connections)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        rate = _rate(post_all, sum(len(b.splitlines()) for b in bodies))
        accepted = sum(counts)
        for c in conns[1:]:
            c.close()
        if accepted != sum(len(b.splitlines()) for b in bodies):
            raise SystemExit(f"the server accepted {accepted} of the lines sent")
        return rate
    finally:
        srv.stop()


def _kafka(lines: list[bytes], tmp: Path, compression: str) -> float:
    import pytest  # the broker harness fails loudly through pytest.fail

    from bench.bench_worker import _fill, _ours
    from tests.integration.kafka_harness import Broker

    tmp.mkdir(exist_ok=True)
    broker = Broker(tmp / "tansu.log")
    try:
        broker.start()
    except pytest.fail.Exception as exc:
        raise SystemExit(str(exc)) from None
    try:
        _fill(broker.bootstrap, [(b"mmlu_pro", ln) for ln in lines], compression)
        rate, counters = _ours(broker.bootstrap, len(lines))
    finally:
        broker.stop()
    assert counters["accepted"] == len(lines), counters
    return rate


_NULL_SERVER = """
import asyncio, sys, time
from aiohttp import web

async def results(request):
    body = await request.read()
    return web.json_response({"accepted": body.count(b"\\n") + 1}, status=202)

async def cpu(request):
    return web.json_response({"cpu": time.process_time()})

async def main():
    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/results", results)
    app.router.add_get("/cpu", cpu)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(runner.addresses[0][1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


class _NullHttp:
    """The HTTP transport alone: an aiohttp server (pinned to core 0) whose handler reads each
    body and answers 202 with a small JSON; :meth:`cpu_per_line` is the server's CPU time per
    line over a set of bodies sent over one keep-alive connection."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _NULL_SERVER],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(self.proc.pid, {0})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the port it bound, once listening
        if not line.strip().isdigit():
            self.stop()
            raise SystemExit(f"the aiohttp floor server did not start: {line!r}")
        self.conn = http.client.HTTPConnection("127.0.0.1", int(line), timeout=60)

    def _get_cpu(self) -> float:
        self.conn.request("GET", "/cpu")
        return float(json.loads(self.conn.getresponse().read())["cpu"])

    def cpu_per_line(self, bodies: list[bytes], n: int) -> float:
        before = self._get_cpu()
        got = 0
        for body in bodies:
            self.conn.request("POST", "/v1/results", body=body,
                              headers={"Content-Type": "application/x-ndjson"})
            resp = self.conn.getresponse()
            data = resp.read()
            if resp.status != 202:
                raise SystemExit(f"floor server answered {resp.status}: {data[:200]!r}")
            got += json.loads(data)["accepted"]
        if got != n:
            raise SystemExit(f"floor server counted {got} lines, sent {n}")
        return (self._get_cpu() - before) / n

    def stop(self) -> None:
        if hasattr(self, "conn"):
            self.conn.close()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _cpu_per_line(fn: Any, n: int) -> float:
    """CPU seconds of this process per line for ``fn()`` over ``n`` lines (waits such as a
    commit's fsync are not counted)."""
    return _timed(fn, time.process_time) / n


BUDGET_ROUNDS = 5


def _proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system) of process ``pid`` so far, from /proc (None without it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _monitor_cpu_per_line(srv: Server, bodies: list[bytes], n: int) -> float:
    """CPU seconds of the ``llm-monitor run`` process per line for ``bodies`` (wall seconds
    where /proc is missing), sent over its connection; every line must be accepted."""
    c0, t0 = _proc_cpu(srv.proc.pid), time.perf_counter()
    accepted = sum(srv.post(body, "application/x-ndjson")["accepted"] for body in bodies)
    c1, t1 = _proc_cpu(srv.proc.pid), time.perf_counter()
    if accepted != n:
        raise SystemExit(f"the monitor accepted {accepted} of {n} lines")
    return (t1 - t0 if c0 is None or c1 is None else c1 - c0) / n


def _floor_decoder() -> Any:
    """The floor of a typed decode: msgspec into a struct of the event's fields, nothing
    checked beyond their types, one call per body (a JSON array, see :func:`_json_arrays`)."""
    import msgspec

    class Floor(msgspec.Struct, gc=False):
        benchmark: str
        item_id: str
        model: str
        score: float
        cluster: str | None = None

    return msgspec.json.Decoder(list[Floor])


def _json_arrays(bodies: list[bytes]) -> list[bytes]:
    """NDJSON bodies as JSON arrays of the same lines, for :func:`_floor_decoder`."""
    return [b"[" + b.rstrip(b"\n").replace(b"\n", b",\n") + b"]" for b in bodies]


def budget(events: list[dict], tmp: Path) -> None:
    """The floors of the ingest path against the per-result budget of the 1.5× target: CPU
    time per result, the median of ``BUDGET_ROUNDS`` rounds that measure every row in turn."""
    from monitor.core import CoreConfig, Monitor
    from monitor.decoder import decode_events
    from monitor.runners.embedded.store import SqliteStore

    lines = stage_lines(events)
    n = len(lines)
    bodies = [b.rstrip(b"\n") for b in _bodies(lines)]  # as the service stores them
    arrays, decoder = _json_arrays(bodies), _floor_decoder()
    results = [decode_events(b, source="http").results for b in bodies]
    if sum(map(len, results)) != n:
        raise SystemExit("decode_events did not take every line")
    item_row = {e["item_id"]: r for r, e in enumerate(events)}
    model_col = {m: c for c, m in enumerate(dict.fromkeys(e["model"] for e in events))}
    decoded: list[Any] = []
    folded: list[Monitor] = []
    null_http = _NullHttp()
    srv = Server(tmp / "budget-monitor.db", cpu=0)

    def decode(_: int) -> float:
        def run() -> None:
            decoded[:] = [decoder.decode(a) for a in arrays]
        t = _cpu_per_line(run, n)
        if sum(map(len, decoded)) != n:
            raise SystemExit("msgspec did not decode every line")
        return t

    def lookups(_: int) -> float:
        def run() -> None:
            for batch in decoded:
                list(map(item_row.get, [ev.item_id for ev in batch]))
                list(map(model_col.get, [ev.model for ev in batch]))
        return _cpu_per_line(run, n)

    def persist(k: int) -> float:
        store = SqliteStore(tmp / f"budget-store-{k}.db")
        try:
            return _cpu_per_line(lambda: [
                store.commit(results=r, counts={"accepted": len(r)}, text=b)
                for r, b in zip(results, bodies, strict=True)], n)
        finally:
            store.close()

    def fold(_: int) -> float:
        mon = Monitor(CoreConfig())
        t = _cpu_per_line(lambda: [mon.apply(r, evaluate=False) for r in results], n)
        if mon.counters["accepted"] != n:
            raise SystemExit(f"the fold accepted {mon.counters}, not {n}")
        folded[:] = [mon]
        return t

    def monitor(k: int) -> float:
        # each round a benchmark of its own: every result is new to the monitor
        renamed = [b.replace(b'"mmlu_pro"', f'"mmlu_pro_{k}"'.encode()) for b in bodies]
        return _monitor_cpu_per_line(srv, renamed, n)

    reference = "plain json.loads per line (the reference)"
    floors = ["decode: msgspec, one call per body, a plain struct",
              "lookups: the fields read, the item row and model column got",
              "persist: SqliteStore.commit per batch (WAL, FULL)",
              "HTTP alone: aiohttp reads each body, answers 202 (its CPU)"]
    ours = ["fold as it is: Monitor.apply (lookups included)",
            "decode+validate as the monitor does: decode_events",
            "the monitor end to end: llm-monitor run's CPU"]
    measures: dict[str, Any] = {
        reference: lambda _: _cpu_per_line(lambda: _json_loop(lines), n),
        floors[0]: decode, floors[1]: lookups, floors[2]: persist,
        floors[3]: lambda _: null_http.cpu_per_line(bodies, n),
        ours[0]: fold,
        ours[1]: lambda _: _cpu_per_line(
            lambda: [decode_events(b, source="http") for b in bodies], n),
        ours[2]: monitor,
    }
    cpu: dict[str, list[float]] = {label: [] for label in measures}
    try:
        null_http.cpu_per_line(bodies, n)  # warm-up
        _warm_up(srv, lines)
        for k in range(BUDGET_ROUNDS):
            for label, measure in measures.items():
                cpu[label].append(measure(k))
    finally:
        null_http.stop()
        srv.stop()
    st = folded[0]._benches["mmlu_pro"]
    present = ~np.isnan(st.X[:len(st.item_ids), :st.k])
    per_item = present.sum(axis=1)
    paired = float((per_item * (per_item - 1) // 2).sum()) / n

    med = {label: 1e6 * float(np.median(v)) for label, v in cpu.items()}
    allowed = med[reference] / 1.5
    width = 62

    def row(label: str, share: bool = True) -> None:
        v = cpu[label]
        pct = f"{100 * med[label] / allowed:3.0f} %  " if share else ""
        print(f"{label:<{width}}  {med[label]:6.3f}  {pct}"
              f"({1e6 * min(v):.3f}–{1e6 * max(v):.3f})")

    print(f"CPU µs per result, median of {BUDGET_ROUNDS} rounds (min–max); share of the budget")
    row(reference, share=False)
    print(f"{'budget: the reference / 1.5':<{width}}  {allowed:6.3f}  100 %")
    for label in floors:
        row(label)
    spent = sum(med[label] for label in floors)
    print(f"{'floors together':<{width}}  {spent:6.3f}  {100 * spent / allowed:3.0f} %")
    print(f"{'left for pairing and the e-processes':<{width}}  {allowed - spent:6.3f}  "
          f"({paired:.1f} paired items added per result)")
    row(ours[0])
    print(f"{'the fold less the lookups':<{width}}  {med[ours[0]] - med[floors[1]]:6.3f}")
    row(ours[1])
    row(ours[2])
    stages = med[ours[1]] + med[ours[0]] + med[floors[2]] + med[floors[3]]
    print(f"{'  beyond decode_events, fold, commit and HTTP alone':<{width}}  "
          f"{med[ours[2]] - stages:6.3f}")


def ndjson_readers(events: list[dict]) -> None:
    """msgspec (one call per body) against pyarrow's NDJSON reader (one thread, an explicit
    schema) on the same bodies, interleaved ``BUDGET_ROUNDS`` times; pyarrow is not a
    dependency of the project (``pip install pyarrow`` into the venv first)."""
    import io

    try:
        import pyarrow as pa  # type: ignore[import-not-found, unused-ignore]
        import pyarrow.json as pj  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise SystemExit("--pyarrow needs pyarrow: .venv/bin/pip install pyarrow") from None

    lines = stage_lines(events)
    n = len(lines)
    bodies = _bodies(lines)
    arrays, decoder = _json_arrays(bodies), _floor_decoder()
    schema = pa.schema([("benchmark", pa.string()), ("item_id", pa.string()),
                        ("model", pa.string()), ("score", pa.float64()),
                        ("cluster", pa.string())])
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    read = pj.ReadOptions(use_threads=False, block_size=len(max(bodies, key=len)) + 1)

    def arrow() -> None:
        got = sum(pj.read_json(io.BytesIO(b), read_options=read, parse_options=parse).num_rows
                  for b in bodies)
        if got != n:
            raise SystemExit(f"pyarrow read {got} rows of {n}")

    times: dict[str, list[float]] = {"msgspec, one call per body": [],
                                     "pyarrow.json.read_json per body": []}
    for _ in range(BUDGET_ROUNDS):
        times["msgspec, one call per body"].append(
            _cpu_per_line(lambda: [decoder.decode(a) for a in arrays], n))
        times["pyarrow.json.read_json per body"].append(_cpu_per_line(arrow, n))
    print(f"CPU ns per line, {BUDGET_ROUNDS} interleaved rounds (median, min–max)")
    for label, v in times.items():
        print(f"{label:<36} {1e9 * float(np.median(v)):7.0f}  "
              f"({1e9 * min(v):.0f}–{1e9 * max(v):.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-kafka", action="store_true", help="leave the Kafka worker out")
    parser.add_argument("--baseline-ref", metavar="REF",
                        help="also time the in-process stages and HTTP end to end with the "
                             "monitor/ of this commit")
    parser.add_argument("--peer", action="store_true", help="ours against the naive peer")
    parser.add_argument("--budget", action="store_true",
                        help="the floors of the path against the 1.5x per-result budget")
    parser.add_argument("--pyarrow", action="store_true",
                        help="msgspec against pyarrow's NDJSON reader (needs pyarrow)")
    parser.add_argument("--latency", action="store_true", help="result → /metrics latency")
    parser.add_argument("--models", type=int, default=MODELS,
                        help=f"the stages on a synthetic board of this many models (default: "
                             f"MMLU-Pro's {MODELS})")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})  # the client stays off the server's core
    events = load_events(seed=3, models=args.models)
    source = "MMLU-Pro" if args.models == MODELS else "synthetic"
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{min(LINES, len(events)):,} of {len(events):,} {source} results, {args.models} "
          "models, shuffled")
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as d:
        tmp = Path(d)
        if args.pyarrow:
            ndjson_readers(events)
            return
        if args.budget:
            budget(events, tmp)
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return
        if not (args.peer or args.latency):
            stages(events, tmp, kafka=not args.no_kafka, baseline=args.baseline_ref,
                   models=args.models)
            print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
            return
        if args.peer:
            peer_section(events, tmp)
        if args.latency:
            latency(load_events(seed=4), tmp)


def peer_section(events: list[dict], tmp: Path) -> None:
    sustained(events, tmp)
    plain_sqlite(events, tmp)
    # The peer is slow: both run on the results of the first PEER_ITEMS items (all 20
    # models each, same shuffled order), which keeps the mix of partners per arriving
    # result the same as in the whole stream.
    items = sorted({e["item_id"] for e in events}, key=int)[:PEER_ITEMS]
    keep = set(items)
    subset = [e for e in events if e["item_id"] in keep]
    ours = sustained(subset, tmp, label=PEER_LABEL)
    peer = naive_peer(subset, tmp)
    print(f"ratio ours/peer throughput on the same {len(subset)} results: {ours / peer:.1f}x")


if __name__ == "__main__":
    main()
