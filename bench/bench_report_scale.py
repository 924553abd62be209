"""The resolution report at scale: ``llm-monitor report --family all --json`` of 1,000 models.

Board: the seeded synthetic correlated 0/1 board of ``bench.bench_report`` at 1,000 models ×
12,000 items with 14 clusters, written as a wide CSV (item_id, subject, one column per model).

- **ours**: the real CLI in a subprocess, ``llm-monitor report FILE --cluster-col subject
  --family all --json`` (all 499,500 pairs, Holm, rank sets; the JSON written to a file), and
  the human table of 300 models (``--family all``, the default ``--limit``). Wall time and
  peak RSS of each process (``os.wait4``).
- **peer**: reading the same CSV and nothing else — stdlib ``csv`` rows to a numpy float
  matrix, in a subprocess of the same interpreter: the floor of any tool that reads this table.
- ``--baseline-ref REF`` also runs the CLI of a git ref (exported with ``git archive``) on the
  same files, for before/after figures in one run (minutes and GBs for refs before the
  streaming report).

Targets (issue 10): ≤ 10 s and ≤ 1 GB peak RSS for 1,000 models. BLAS threads are left as the
CLI runs them.

``--stages`` also times the report's stages (reading, the fixed-N report and rank sets, the
decisions and anytime figures, the JSON) in one process: where the time goes, not a target.

Run: ``.venv/bin/python -m bench.bench_report_scale [--stages]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench._record import record
from bench.bench_report import synthetic_board

N_ITEMS = 12_000
N_CLUSTERS = 14

PEER = """
import csv, sys
import numpy as np
with open(sys.argv[1], newline="") as fh:
    rows = csv.reader(fh)
    header = next(rows)
    x = np.array([[float(c) for c in r[2:]] for r in rows])
print(x.shape[0], x.shape[1])
"""


def write_board(path: Path, *, n_models: int, seed: int) -> None:
    """The seeded synthetic board as a wide CSV."""
    scores, groups = synthetic_board(rng=np.random.default_rng(seed), n_items=N_ITEMS,
                                     n_models=n_models, n_clusters=N_CLUSTERS)
    cells = np.where(scores == 1.0, "1", "0")
    with path.open("w") as fh:
        fh.write("item_id,subject," + ",".join(f"model-{j:04d}" for j in range(n_models)) + "\n")
        for i in range(N_ITEMS):
            fh.write(f"item-{i},{groups[i]}," + ",".join(cells[i].tolist()) + "\n")


# Runs the command as its own child and reports its wall time and peak RSS. A process keeps
# the largest RSS it had across exec, and a child started straight from this process (vfork)
# would start with ours (the board, the JSON read back): the small wrapper is its parent.
WRAPPER = """
import os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{time.perf_counter() - t0} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def measure(cmd: list[str], *, out: Path, env: dict[str, str] | None = None
            ) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one process, its stdout written to ``out``; run in
    ``out``'s directory, so that ``python -m`` imports the package on PYTHONPATH."""
    stats = out.with_suffix(".stats")
    with out.open("wb") as fh:
        proc = subprocess.run([sys.executable, "-c", WRAPPER, str(stats), *cmd], stdout=fh,
                              stderr=subprocess.PIPE, env=env, cwd=out.parent, check=False)
    wall, rss_kb, code = stats.read_text().split()
    if proc.returncode != 0 or int(code) != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}: {proc.stderr.decode()[-2000:]}")
    return float(wall), int(rss_kb) / 1024.0


def cli(root: Path | None) -> tuple[list[str], dict[str, str]]:
    """The command prefix of the CLI and its environment: this checkout's package, or an
    exported ref's."""
    here = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(here if root is None else root))
    return [sys.executable, "-m", "monitor.cli"], env


STAGES = """
import os, sys, time
from pathlib import Path
t0 = time.perf_counter()
from monitor.commands._jsonstream import write_report
from monitor.io.sources import read_scores
from monitor.offline.replay import with_anytime
from monitor.offline.report import build_report
marks = [("importing the CLI's modules", time.perf_counter() - t0)]

def stage(label, fn):
    t = time.perf_counter()
    out = fn()
    marks.append((label, time.perf_counter() - t))
    return out

table = stage("reading the table", lambda: read_scores(Path(sys.argv[1]), cluster_col="subject"))
report = stage("the fixed-N report and rank sets", lambda: build_report(
    table, family="all", rank_method="simultaneous", rank_seed=20240601,
    selection={"complete_only": False, "top": None}))
report = stage("the decisions and the pairs' anytime figures", lambda: with_anytime(report, table))
with open(os.devnull, "w") as out:
    stage("writing the JSON", lambda: write_report(out, report))
for label, dt in marks:
    print(f"  {label:<46} {dt:6.2f} s")
print(f"  {'in all':<46} {time.perf_counter() - t0:6.2f} s")
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--human-models", type=int, default=300)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--stages", action="store_true",
                        help="also time the report's stages in one process (the same calls "
                             "as the CLI, the JSON to /dev/null)")
    parser.add_argument("--baseline-ref", default=None,
                        help="also run the CLI of this git ref (e.g. a commit before the change)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-report-scale-") as tmp:
        tmpdir = Path(tmp)
        big, small = tmpdir / f"board{args.models}.csv", tmpdir / f"board{args.human_models}.csv"
        write_board(big, n_models=args.models, seed=args.seed)
        write_board(small, n_models=args.human_models, seed=args.seed)
        n_pairs = args.models * (args.models - 1) // 2

        peer_wall, peer_rss = measure([sys.executable, "-c", PEER, str(big)],
                                      out=tmpdir / "peer.txt")
        runs: list[tuple[str, Path | None]] = [("ours", None)]
        if args.baseline_ref:
            base = tmpdir / "baseline"
            base.mkdir()
            archive = subprocess.run(["git", "archive", args.baseline_ref, "monitor"],
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
            runs.append((f"baseline {args.baseline_ref}", base))

        print(f"board: {args.models} models × {N_ITEMS:,} items, {N_CLUSTERS} clusters, 0/1 "
              f"scores ({big.stat().st_size / 1e6:.1f} MB CSV), {n_pairs:,} pairs; "
              f"{os.cpu_count()} CPUs, BLAS threads as the CLI runs them")
        print(f"peer  read the CSV (stdlib csv → numpy float matrix): {peer_wall:.2f} s, "
              f"{peer_rss:.0f} MB peak RSS")
        digests: list[str] = []
        for label, root in runs:
            prefix, env = cli(root)
            js = tmpdir / f"{label.split()[0]}.json"
            wall, rss = measure([*prefix, "report", str(big), "--cluster-col", "subject",
                                 "--family", "all", "--json"], out=js, env=env)
            data = js.read_bytes()
            js.unlink()
            pairs = data.count(b'"model_a": ')
            if pairs != n_pairs or not data.rstrip().endswith(b"}"):
                raise RuntimeError(f"{label}: {pairs:,} pairs in the JSON, expected {n_pairs:,}")
            size = len(data)
            digests.append(hashlib.sha256(data).hexdigest())
            del data
            h_wall, h_rss = measure([*prefix, "report", str(small), "--cluster-col", "subject",
                                     "--family", "all"], out=tmpdir / f"{label.split()[0]}.txt",
                                    env=env)
            verdict = (f"{'within' if wall <= 10.0 else 'OVER'} 10 s, "
                       f"{'within' if rss <= 1024.0 else 'OVER'} 1 GB")
            if label == "ours":
                record(f"report --family all --json, {args.models} models × {N_ITEMS:,} items",
                       goal="≤ 10 s, ≤ 1 GB, ≤ 3× a CSV read", figure=f"{wall:.2f} s, {rss:.0f} MB",
                       peer=f"{wall / peer_wall:.1f}× reading the CSV",
                       met=wall <= 10.0 and rss <= 1024.0 and wall / peer_wall <= 3.0,
                       command="python -m bench.bench_report_scale")
            print(f"{label:<5} report --family all --json, {args.models} models: {wall:.2f} s, "
                  f"{rss:.0f} MB peak RSS ({size / 1e6:.0f} MB of JSON, {pairs:,} pairs; "
                  f"{verdict}); ratio to the peer {wall / peer_wall:.1f}×")
            print(f"{label:<5} report --family all (human table), {args.human_models} models: "
                  f"{h_wall:.2f} s, {h_rss:.0f} MB peak RSS")
            if root is not None:
                same = "the same JSON bytes as" if digests[-1] == digests[0] else "JSON differs from"
                print(f"{label}: {same} ours")
        if args.stages:
            _, env = cli(None)
            print(f"stages of ours, {args.models} models (one process, not the figure above):")
            stages = subprocess.run([sys.executable, "-c", STAGES, str(big)], env=env,
                                    cwd=tmpdir, check=True, capture_output=True, text=True)
            print(stages.stdout, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
