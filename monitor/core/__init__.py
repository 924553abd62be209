"""The engine-agnostic state machine: pairing, pair state, verdicts and rankings (no I/O)."""

from __future__ import annotations

from monitor.core.board import BenchmarkState
from monitor.core.config import CoreConfig
from monitor.core.monitor import ApplyResult, Counters, Monitor
from monitor.core.table import PairTable

__all__ = ["ApplyResult", "BenchmarkState", "CoreConfig", "Counters", "Monitor", "PairTable"]
