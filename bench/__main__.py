"""Run every benchmark in turn (``make bench``); each prints its figures and peer ratio.

Each runs in its own interpreter because some pin BLAS threads before numpy is imported.
``python -m bench report eprocess`` runs a subset by name; ``--table`` also collects each
bench's targets (bench._record) and rewrites the table that opens BENCHMARKS.md with them
(a subset updates its rows and keeps the others).
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench._record import ENV, write_table


def main(argv: list[str]) -> int:
    table = "--table" in argv
    argv = [a for a in argv if a != "--table"]
    here = Path(__file__).parent
    names = sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules([str(here)])
        if m.name.startswith("bench_")
    )
    chosen = argv or names
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {names}", file=sys.stderr)
        return 2
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "records.jsonl"
        env = dict(os.environ, **({ENV: str(run)} if table else {}))
        for name in chosen:
            print(f"\n=== bench.bench_{name} ===", flush=True)
            if subprocess.run([sys.executable, "-m", f"bench.bench_{name}"],
                              env=env).returncode != 0:
                failed.append(name)
        if table:
            rows = write_table(run, markdown=here.parent / "BENCHMARKS.md")
            print(f"\nBENCHMARKS.md: the table has {rows} targets", flush=True)
    if failed:
        print(f"\nfailed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
