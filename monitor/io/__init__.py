"""Readers: long and wide per-item score tables."""

from __future__ import annotations

from monitor.io.tables import ScoreTable, read_table

__all__ = ["ScoreTable", "read_table"]
