"""Option defaults that ``--help`` shows, copied here so that building the CLI imports no numpy.

Each is a copy of the value in its home module (named beside it), which imports numpy or scipy
at its top; change both together.
"""

from __future__ import annotations

RANK_SEED = 20240601  # monitor.offline.report.DEFAULT_RANK_SEED
STABILITY_KINDS: tuple[str, ...] = ("paraphrase", "shuffle", "format", "noise")  # monitor.audit.variants.KINDS
