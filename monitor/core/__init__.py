"""The engine-agnostic state machine: pairing, pair state, verdicts and rankings (no I/O)."""

from __future__ import annotations

from monitor.core.board import BenchmarkState, PairTable
from monitor.core.config import CoreConfig
from monitor.core.monitor import ApplyResult, Counters, Monitor

__all__ = ["ApplyResult", "BenchmarkState", "CoreConfig", "Counters", "Monitor", "PairTable"]
