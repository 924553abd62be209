"""Start-up of the CLI: wall time of ``llm-monitor --help`` and of every form of ``power``.

Ours: the installed ``llm-monitor`` entry point, each run a fresh process (``subprocess``):
``--help`` and ``power`` with and without ``--n``, each as a table and as ``--json``.
Peers, run with the same interpreter in the same rounds:

* ``python -c pass``, the floor no Python CLI can go under;
* ``python -c "import numpy, scipy.special"``, the statistics ``power`` cannot do without
  (its normal quantiles and the e-process behind N*_AV): the floor of a plan;
* ``python -c "import scipy.stats"``, the import a scipy-based planning command usually
  starts with (``power`` did, until it took the normal quantile from ``scipy.special``).

All commands run in turn in each round, so load on the machine falls on all of them alike;
the median wall time of the rounds is printed with the ratios to the peers, and the median
CPU time (user + system) of the process beside it, a figure less moved by other load.
Every process reads bytecode from a cache the untimed first round writes (a temporary
``PYTHONPYCACHEPREFIX``), as an installed package does, even where the environment sets
``PYTHONDONTWRITEBYTECODE``.

Run: ``.venv/bin/python -m bench.bench_startup`` (``--runs N``, default 15).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._record import record

TARGET_SECONDS = 0.5  # issue 10, "Fast start"
PLAN = ["--pa", "0.65", "--pb", "0.60", "--rho", "0.30"]
OURS: dict[str, list[str]] = {
    "--help": ["--help"],
    "power --json": ["power", *PLAN, "--json"],
    "power": ["power", *PLAN],
    "power --n --json": ["power", *PLAN, "--n", "1200", "--json"],
    "power --n": ["power", *PLAN, "--n", "1200"],
}


def _entry_point() -> list[str]:
    """The console script next to this interpreter, else the module (same code, same imports)."""
    script = Path(sys.executable).with_name("llm-monitor")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "monitor.cli"]


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall time, CPU time (user + system) and stdout of one fresh process."""
    cpu0 = _child_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    cpu = _child_cpu() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
    return wall, cpu, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (the median is kept)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be positive, got {args.runs}")

    cli = _entry_point()
    peers = {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import numpy, scipy.special"':
            [sys.executable, "-c", "import numpy, scipy.special"],
        'python -c "import scipy.stats"': [sys.executable, "-c", "import scipy.stats"],
    }
    commands = {**peers, **{name: [*cli, *tail] for name, tail in OURS.items()}}
    with tempfile.TemporaryDirectory(prefix="bench-startup-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        # One untimed round: it compiles every module into the cache.
        outputs = {name: _run(cmd, env)[2] for name, cmd in commands.items()}
        wall: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                w, c, _ = _run(cmd, env)
                wall[name].append(w)
                cpu[name].append(c)
    plan = json.loads(outputs["power --json"])
    if "n_star" not in outputs["power"] or "Usage" not in outputs["--help"]:
        raise RuntimeError("unexpected output from llm-monitor: " + repr(outputs)[:300])
    med = {name: statistics.median(ts) for name, ts in wall.items()}
    med_cpu = {name: statistics.median(ts) for name, ts in cpu.items()}
    floor, plan_floor, stats_peer = (med[name] for name in peers)

    print(f"interpreter: {sys.executable} (Python {sys.version.split()[0]}); median of "
          f"{args.runs} runs each, fresh process per run, bytecode cached")
    for name in peers:
        print(f"peer  {name}: {med[name]:.3f} s (cpu {med_cpu[name]:.3f} s)")
    for name, tail in OURS.items():
        verdict = "within" if med[name] <= TARGET_SECONDS else "OVER"
        print(f"ours  llm-monitor {' '.join(tail)}: {med[name]:.3f} s "
              f"(min {min(wall[name]):.3f}, max {max(wall[name]):.3f}; cpu "
              f"{med_cpu[name]:.3f} s; {verdict} the {TARGET_SECONDS} s target)")
        print(f"ratio ours/pass {med[name] / floor:.1f}×, "
              f"ours/import-numpy-scipy.special {med[name] / plan_floor:.2f}×, "
              f"ours/import-scipy.stats {med[name] / stats_peer:.2f}×")
    print(f"plan: N* = {plan['n_star']}, N*_AV = {plan['n_star_anytime']}")
    for name, tail in OURS.items():
        record(f"start-up: llm-monitor {' '.join(tail)}", goal=f"≤ {TARGET_SECONDS} s",
               figure=f"{med[name]:.3f} s", peer=f"{med[name] / floor:.1f}× `python -c pass`",
               met=med[name] <= TARGET_SECONDS, command="python -m bench.bench_startup")
    return 0


if __name__ == "__main__":
    sys.exit(main())
