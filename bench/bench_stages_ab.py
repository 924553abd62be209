"""The in-process ingest stages of this tree and of an earlier commit, in turn, on the same lines.

Each stage as ``bench.bench_ingest`` times it (decode: ``decode_events`` of NDJSON bodies of
10,000 lines; fold: ``Monitor.apply`` of the decoded batches, verdicts not evaluated;
persist: ``SqliteStore.commit`` of each batch with its lines as received), beside a plain
``json.loads`` loop over the same lines in the same process (every ratio is to that loop).
The earlier commit's ``monitor/`` is exported with ``git archive`` and each tree runs in a
fresh process, the two alternating ``--rounds`` times, so both meet the machine's load alike.

Run: ``.venv/bin/python -m bench.bench_stages_ab --baseline-ref 000bf7b [--rounds 2]``
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_STAGES = r'''
import gc, json, sys, tempfile, time
from pathlib import Path
tree = sys.argv[1]
sys.path.insert(0, tree)
import monitor
assert monitor.__file__.startswith(tree), monitor.__file__
sys.path.insert(1, sys.argv[2])
import scipy.stats  # noqa: F401  (imported outside the clock, as a running server has)
from bench.bench_ingest import BATCH, LINES, load_events
from monitor.contracts import decode_events
from monitor.core import CoreConfig, Monitor
from monitor.runners.store import SqliteStore

lines = [json.dumps(e, separators=(",", ":")).encode() for e in load_events(seed=3)[:LINES]]
batches = [lines[i:i + BATCH] for i in range(0, len(lines), BATCH)]
bodies = [b"\n".join(b) + b"\n" for b in batches]

def rate(fn):
    gc.collect(); gc.disable()
    try:
        t0 = time.perf_counter(); fn(); return len(lines) / (time.perf_counter() - t0)
    finally:
        gc.enable()

out = {"json.loads": rate(lambda: [json.loads(x) for x in lines])}
dec = []
def decode():
    dec.clear()
    for body in bodies:
        d = decode_events(body, source="http", keep=100)
        dec.append(d.results if hasattr(d, "results") else [ev for _, ev in d.valid])
out["decode"] = rate(decode)
mon = Monitor(CoreConfig())
out["fold"] = rate(lambda: [mon.apply(b, evaluate=False) for b in dec])
store = SqliteStore(Path(tempfile.mkdtemp()) / "stages.db")
out["persist"] = rate(lambda: [store.commit(results=r, counts={"accepted": len(r)}, raw=raw)
                               for r, raw in zip(dec, batches)])
print(out)
'''


def _run(tree: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", _STAGES, str(tree), str(REPO)],
                          capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-ref", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-stages-") as d:
        base = Path(d)
        archive = subprocess.run(["git", "archive", args.baseline_ref, "monitor"], cwd=REPO,
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        for _ in range(args.rounds):
            for label, tree in ((args.baseline_ref, base), ("ours", REPO)):
                got = _run(tree)
                ref = got["json.loads"]
                cells = "  ".join(f"{k} {v:,.0f}/s ({v / ref:.2f}x)" for k, v in got.items())
                print(f"{label:>8}: {cells}", flush=True)


if __name__ == "__main__":
    main()
