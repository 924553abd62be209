"""Regenerate the pictures of docs/showcase.md from the real tables (MMLU-Pro and GSM8K).

For each table: ``llm-monitor report --html`` (two sections of the page screenshotted), a
monitor replaying the table (its web board screenshotted once the replay is done), and for
MMLU-Pro the demo's terminal view in an 80 × 24 tmux pane (kept as text). Needs Debian's
``chromium`` and ``tmux``; writes docs/showcase/*.png and *.txt.

Run: ``.venv/bin/python scripts/showcase.py [--data ../shared/data]``
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "showcase"
# Both boards planned for 32 models (MMLU-Pro's size; GSM8K's 42 outgrow it).
TABLES = {
    "mmlu-pro": ("mmlu_pro_item_correctness_wide.csv", "mmlu_pro",
                 ["--exclude", "src", "--cluster-col", "category", "--planned-models", "32"]),
    "gsm8k": ("zeroeval_gsm8k_item_correctness_wide.csv", "gsm8k",
              ["--exclude", "gold", "--planned-models", "32"]),
}
CHROMIUM = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
            "--hide-scrollbars"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shot(url: str, out: Path, *, size: str = "1280,1300", wait_ms: int = 4000) -> None:
    """A PNG of ``url`` in headless Chromium, reduced to 64 grey levels (small files)."""
    from PIL import Image

    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([shutil.which("chromium") or "/usr/bin/chromium", *CHROMIUM,
                        f"--user-data-dir={profile}", f"--window-size={size}",
                        f"--virtual-time-budget={wait_ms}", f"--screenshot={out}", url],
                       check=True, capture_output=True, timeout=120)
    Image.open(out).convert("L").quantize(64).save(out, optimize=True)
    print(f"wrote {out.relative_to(REPO)} ({out.stat().st_size / 1e3:.0f} kB)")


def report_pictures(name: str, data: Path, tmp: Path) -> None:
    file, _, opts = TABLES[name]
    page = tmp / f"{name}.html"
    # Shuffled: the anytime verdicts need an order independent of the outcomes, and the
    # MMLU-Pro file lists its items category by category.
    subprocess.run([sys.executable, "-m", "monitor.cli", "report", str(data / file), *opts,
                    "--order", "shuffle", "--seed", "0", "--html", str(page)], check=True,
                   capture_output=True, timeout=300)
    shot(page.as_uri(), OUT / f"{name}-report.png", size="1280,1500")
    # The e-value section alone: the page's head with that section as its body.
    text = page.read_text(encoding="utf-8")
    head = text[:text.index("<body>") + len("<body>")]
    section = re.search(r'<section id="evalues">.*?</section>', text, re.S)
    assert section is not None
    part = tmp / f"{name}-evalues.html"
    part.write_text(head + section.group(0) + "</body></html>", encoding="utf-8")
    shot(part.as_uri(), OUT / f"{name}-report-evalues.png", size="1280,1100")


def board_picture(name: str, data: Path, tmp: Path) -> None:
    file, bench, opts = TABLES[name]
    port = _free_port()
    log = (tmp / f"{name}-monitor.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--db",
                             str(tmp / f"{name}.db"), "--host", "127.0.0.1", "--port", str(port),
                             "--no-view", "--replay", str(data / file), "--benchmark", bench,
                             *opts, "--shuffle", "--seed", "0"], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 600
        while "replay finished" not in (tmp / f"{name}-monitor.log").read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit((tmp / f"{name}-monitor.log").read_text(errors="replace"))
            time.sleep(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/benchmarks/{bench}/ranking") as r:
            models = len(json.loads(r.read())["models"])
        print(f"{name}: replay done, {models} models on the board")
        shot(f"http://127.0.0.1:{port}/#b={bench}", OUT / f"{name}-board.png", size="1280,1500")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def terminal_view(data: Path) -> None:
    port = _free_port()
    session = f"showcase-{port}"
    cmd = (f"cd {REPO} && {sys.executable} -m monitor.cli demo --data {data} --port {port} "
           "--rate 60000; sleep 600")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd],
                   check=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], check=True,
                                    capture_output=True, text=True).stdout
            if "next: board" in screen or time.monotonic() > deadline:
                break
            time.sleep(1)
        lines = screen.rstrip("\n").split("\n")
        # From the view's first line on (log lines printed before it may linger above).
        start = next((i for i, x in enumerate(lines) if x.startswith("board http")), 0)
        text = ("\n".join(lines[start:]).replace(str(port), "8000")
                .replace(str(data), "../shared/data"))
        (OUT / "terminal-80x24.txt").write_text(text + "\n", encoding="utf-8")
        print("wrote docs/showcase/terminal-80x24.txt")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in TABLES:
            report_pictures(name, args.data.resolve(), Path(tmp))
            board_picture(name, args.data.resolve(), Path(tmp))
    terminal_view(args.data.resolve())


if __name__ == "__main__":
    main()
