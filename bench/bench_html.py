"""The HTML report: wall time of ``llm-monitor report FILE --html OUT`` on the real tables.

Ours: ``report --html`` (the report, its decisions and the page with five matplotlib
plots as inline SVG) of MMLU-Pro (32 models × 12,032 items, its categories as fixed strata:
the README's command) and GSM8K (42 × 1,319), each run a fresh process. Peer, in the same
rounds: ``report --json`` of the same table — the same figures and decisions without the
page — so the ratio is the page's cost.
The median wall time over the rounds is printed beside the median CPU time (user + system),
which other load on the machine moves less. Target: < 10 s for MMLU-Pro (issue 12).

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


def _run(args: list[str]) -> tuple[float, float]:
    cpu0, t0 = _cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "monitor.cli", "report", *args],
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"report {' '.join(args)} failed:\n{proc.stderr}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as tmp:
        for name, (file, *opts) in TABLES.items():
            src = [str(DATA / file), *opts]
            out = Path(tmp) / f"{name}.html"
            ours, peer = [], []
            for _ in range(runs):
                ours.append(_run([*src, "--html", str(out)]))
                peer.append(_run([*src, "--json"]))
            wall = statistics.median(w for w, _ in ours)
            cpu = statistics.median(c for _, c in ours)
            pwall = statistics.median(w for w, _ in peer)
            pcpu = statistics.median(c for _, c in peer)
            size = out.stat().st_size
            verdict = "" if name != "MMLU-Pro" else (
                f"  target < {TARGET_SECONDS:g} s: {'met' if wall < TARGET_SECONDS else 'MISSED'}")
            if name == "MMLU-Pro":
                record("report --html of MMLU-Pro", goal=f"< {TARGET_SECONDS:g} s",
                       figure=f"{wall:.2f} s, {size / 1e6:.2f} MB page",
                       peer=f"{wall / pwall:.2f}× report --json of the same table",
                       met=wall < TARGET_SECONDS, command="python -m bench.bench_html")
            print(f"{name:9s} report --html: {wall:6.2f} s wall, {cpu:6.2f} s CPU, page "
                  f"{size / 1e6:.2f} MB | report --json: {pwall:6.2f} s wall, "
                  f"{pcpu:6.2f} s CPU | page costs {wall / pwall:.2f}× the figures{verdict}",
                  flush=True)


if __name__ == "__main__":
    main()
