"""The HTML report: wall time of ``llm-monitor report FILE --html OUT`` on the real tables.

Ours: ``report --html`` (the report, its decisions and the page with five matplotlib
plots as inline SVG) of MMLU-Pro (32 models × 12,032 items, its categories as fixed strata:
the README's command) and GSM8K (42 × 1,319), each run a fresh process. Peer, in the same
rounds: ``report --json`` of the same table — the same figures and decisions without the
page — so the ratio is the page's cost.
The median wall time over the rounds is printed beside the median CPU time (user + system),
which other load on the machine moves less. Target: < 10 s for MMLU-Pro (issue 12).

Memory: the peak RSS of each ``report --json`` process (its own, from ``wait4``) beside that of
a process that imports the modules the report computes with and reads the same table
(``monitor.io.sources.read_scores`` with the same options, the report's first step), and
nothing else: the report's decisions and figures should cost a bounded multiple of that
floor, whatever the replay's size. Target: ≤ 1.5× it for MMLU-Pro.

Run: ``.venv/bin/python -m bench.bench_html`` (``--runs N``, default 3; ``LLM_MONITOR_DATA``
points at the tables, default ../shared/data).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._record import record

TARGET_SECONDS = 10.0
MEMORY_RATIO = 1.5
DATA = Path(os.environ.get("LLM_MONITOR_DATA", Path(__file__).resolve().parents[1].parent
                           / "shared" / "data"))
TABLES = {
    "MMLU-Pro": ["mmlu_pro_item_correctness_wide.csv", "--exclude", "src", "--strata-col",
                 "category"],
    "GSM8K": ["zeroeval_gsm8k_item_correctness_wide.csv", "--exclude", "gold"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _child(argv: list[str]) -> tuple[float, float, float]:
    """Run ``argv`` to its end: (wall s, CPU s, peak RSS MB) of that process alone."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed:\n{err.read().decode()}")
    wall = time.perf_counter() - t0
    rss_mb = usage.ru_maxrss / (1e6 if sys.platform == "darwin" else 1e3)  # bytes on macOS
    return wall, usage.ru_utime + usage.ru_stime, rss_mb


def _run(args: list[str]) -> tuple[float, float, float]:
    return _child([sys.executable, "-m", "monitor.cli", "report", *args])


_READ = """
import sys
from pathlib import Path
from monitor.io.sources import read_scores
import monitor.offline.replay, monitor.offline.report, scipy.stats  # what report computes with
opts = dict(zip(sys.argv[2::2], sys.argv[3::2]))
read_scores(Path(sys.argv[1]), exclude=tuple(opts.get("--exclude", "").split(",")) if "--exclude" in opts else (),
            strata_col=opts.get("--strata-col"))
"""


def _read_only(file: str, opts: list[str]) -> float:
    """Peak RSS (MB) of a process that imports what ``report`` computes with and reads the
    table as it does, and stops."""
    return _child([sys.executable, "-c", _READ, file, *opts])[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        for name, (file, *opts) in TABLES.items():
            src = [str(DATA / file), *opts]
            out = Path(tmp) / f"{name}.html"
            ours, peer, read = [], [], []
            for _ in range(runs):
                ours.append(_run([*src, "--html", str(out)]))
                peer.append(_run([*src, "--json"]))
                read.append(_read_only(src[0], opts))
            wall = statistics.median(w for w, _, _ in ours)
            cpu = statistics.median(c for _, c, _ in ours)
            pwall = statistics.median(w for w, _, _ in peer)
            pcpu = statistics.median(c for _, c, _ in peer)
            rss = statistics.median(r for _, _, r in peer)
            rss_read = statistics.median(read)
            size = out.stat().st_size
            verdict = "" if name != "MMLU-Pro" else (
                f"  target < {TARGET_SECONDS:g} s: {'met' if wall < TARGET_SECONDS else 'MISSED'}")
            if name == "MMLU-Pro":
                record("report --html of MMLU-Pro", goal=f"< {TARGET_SECONDS:g} s",
                       figure=f"{wall:.2f} s, {size / 1e6:.2f} MB page",
                       peer=f"{wall / pwall:.2f}× report --json of the same table",
                       met=wall < TARGET_SECONDS, command="python -m bench.bench_html")
                record("report --json of MMLU-Pro: peak memory",
                       goal=f"≤ {MEMORY_RATIO:g}× the peak RSS of reading the table",
                       figure=f"{rss:.0f} MB peak RSS", peer=(
                           f"{rss / rss_read:.2f}× a process that imports the report's modules and reads the table "
                           f"({rss_read:.0f} MB)"),
                       met=rss <= MEMORY_RATIO * rss_read, command="python -m bench.bench_html")
            print(f"{name:9s} report --html: {wall:6.2f} s wall, {cpu:6.2f} s CPU, page "
                  f"{size / 1e6:.2f} MB | report --json: {pwall:6.2f} s wall, "
                  f"{pcpu:6.2f} s CPU, {rss:.0f} MB peak RSS (its modules and the table alone: "
                  f"{rss_read:.0f} MB) | page costs {wall / pwall:.2f}× the figures{verdict}",
                  flush=True)


if __name__ == "__main__":
    main()
