"""``make run`` on a fresh clone as a user without root reaches the live view.

As root (CI), the test creates a throwaway user, clones the repository into its home with the
data at ``../shared/data`` and runs ``make run`` as that user on a pseudo-terminal; run by
anyone else, it does the same as the current user in a temporary directory. The user cannot
apt-get, so the install must need no system package: only Python >= 3.11 and PyPI. The test
passes once the live ranking view draws rows with verdicts, then stops the monitor and removes
the user.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.embedded_harness import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# A ranking row of the live view (ANSI codes removed): a rank, a model, and further on a pair
# verdict ("resolved", which a narrow table may cut to "res…"); with or without box lines.
_VIEW_ROW = re.compile(r"(?m)^[│\s]*\d+\s*│?\s+\S.*\bres(?:olved|…)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def fresh_clone(tmp_path: Path, shared_data: Path) -> Iterator[tuple[Path, list[str]]]:
    """(clone directory, command prefix that runs as the non-root user)."""
    if os.geteuid() != 0:
        home = tmp_path
        prefix: list[str] = []
        user = None
    else:
        user = f"lmtest{uuid.uuid4().hex[:8]}"
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
        home = Path(f"/home/{user}")
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        prefix = [runuser, "-u", user, "--", "env", f"HOME={home}",
                  "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"]
    try:
        clone = home / "llm-monitor"
        subprocess.run(["git", "-c", "safe.directory=*", "clone", "-q", "--no-hardlinks",
                        str(REPO), str(clone)], check=True)
        shutil.copytree(shared_data, home / "shared" / "data")
        if user is not None:
            subprocess.run(["chown", "-R", f"{user}:{user}", str(home)], check=True)
        yield clone, prefix
    finally:
        if user is not None:
            subprocess.run(["userdel", "--remove", "--force", user], capture_output=True)
            shutil.rmtree(home, ignore_errors=True)


def _run_on_pty(cmd: list[str], *, cwd: Path, until: re.Pattern[str], timeout: float
                ) -> tuple[bool, str]:
    """Run ``cmd`` on a 40×160 pseudo-terminal until its output matches ``until``."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
           "TERM": "xterm-256color", "LANG": "C.UTF-8"}
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    out = bytearray()
    found = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not found:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the command ended
                    break
                out.extend(chunk)
                found = until.search(_ANSI.sub("", out.decode("utf-8", "replace"))) is not None
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        os.close(master)
    return found, out.decode("utf-8", "replace")


def test_make_run_as_a_user_without_root_reaches_the_live_view(
        fresh_clone: tuple[Path, list[str]]) -> None:
    clone, prefix = fresh_clone
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    cmd = [*prefix, "make", "run", "RUN_ARGS=--port 0 --rate 20000"]
    found, out = _run_on_pty(cmd, cwd=clone, until=_VIEW_ROW, timeout=420)
    text = _ANSI.sub("", out)
    assert found, f"no live view within the time limit; output:\n{text[-4000:]}"
    assert "need root" not in text and "apt-get" not in text
    assert "llm-monitor: listening on http://127.0.0.1:" in text
    # The runtime install took the package and what --config FILE.yaml reads with, without
    # the Kafka runner or the test tools.
    venv = clone / ".venv" / "bin" / "python"
    probe = subprocess.run(
        [*prefix, str(venv), "-c",
         "import importlib.util as u; print([m for m in ('monitor', 'yaml', 'faust', 'kafka', "
         "'pytest') if u.find_spec(m)])"], capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "['monitor', 'yaml']", probe.stdout + probe.stderr
