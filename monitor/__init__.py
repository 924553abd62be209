"""llm-monitor: is the gap between two language models resolved, offline and live."""

from __future__ import annotations

__version__ = "0.1.0"
