"""Run every benchmark in turn (``make bench``); each prints its figures and peer ratio.

Each runs in its own interpreter because some pin BLAS threads before numpy is imported.
``python -m bench report eprocess`` runs a subset by name.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
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
    for name in chosen:
        print(f"\n=== bench.bench_{name} ===", flush=True)
        if subprocess.run([sys.executable, "-m", f"bench.bench_{name}"]).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
