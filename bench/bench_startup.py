"""Start-up of the CLI: wall time of ``llm-monitor --help`` and of a ``power --json`` plan.

Ours: the installed ``llm-monitor`` entry point, each run a fresh process (``subprocess``).
Peer: ``python -c pass`` with the same interpreter, the floor no Python CLI can go under.
The three commands are run in turn in each round, so load on the machine falls on all of
them alike; the median of the rounds is printed with the ratio to the floor.

Run: ``.venv/bin/python -m bench.bench_startup`` (``--runs N``, default 15).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_SECONDS = 0.5  # issue 10, "Fast start"
POWER_ARGS = ["power", "--pa", "0.65", "--pb", "0.60", "--rho", "0.30", "--json"]


def _entry_point() -> list[str]:
    """The console script next to this interpreter, else the module (same code, same imports)."""
    script = Path(sys.executable).with_name("llm-monitor")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "monitor.cli"]


def _wall(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
    return elapsed, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="rounds (the median is kept)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be positive, got {args.runs}")

    cli = _entry_point()
    commands = {
        "floor": [sys.executable, "-c", "pass"],
        "help": [*cli, "--help"],
        "power": [*cli, *POWER_ARGS],
    }
    # One untimed round: the first run after an edit pays for writing .pyc files.
    outputs = {name: _wall(cmd)[1] for name, cmd in commands.items()}
    n_star = json.loads(outputs["power"])["n_star"]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            times[name].append(_wall(cmd)[0])
    med = {name: statistics.median(ts) for name, ts in times.items()}

    print(f"interpreter: {sys.executable} (Python {sys.version.split()[0]}); "
          f"median of {args.runs} runs each, fresh process per run")
    print(f"peer  python -c pass: {med['floor']:.3f} s (the floor)")
    for name, label in (("help", "llm-monitor --help"),
                        ("power", "llm-monitor " + " ".join(POWER_ARGS))):
        verdict = "within" if med[name] <= TARGET_SECONDS else "OVER"
        extra = f"; N* = {n_star}" if name == "power" else ""
        print(f"ours  {label}: {med[name]:.3f} s (min {min(times[name]):.3f}, "
              f"max {max(times[name]):.3f}; {verdict} the {TARGET_SECONDS} s target{extra})")
        print(f"ratio ours/floor ({name}): {med[name] / med['floor']:.1f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
