"""Shared fixtures: where the real per-item data lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _data_dir() -> Path:
    env = os.environ.get("LLM_MONITOR_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real MMLU-Pro and GSM8K tables (../shared/data); fail loudly when absent."""
    path = _data_dir()
    if not (path / "mmlu_pro_item_correctness_wide.csv").is_file():
        pytest.fail(f"real data not found at {path}; set LLM_MONITOR_DATA to ../shared/data")
    return path
