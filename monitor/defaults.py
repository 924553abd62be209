"""Default values shared by a light module and a heavy one: their one home.

``llm-monitor --help`` shows them, so they live here, where importing them costs nothing
(the modules that use them import numpy or scipy at their top).
"""

from __future__ import annotations

#: Seed of the rank sets' parametric draws (``report --rank-seed``).
RANK_SEED = 20240601
#: Perturbation kinds of ``llm-monitor stability``.
STABILITY_KINDS: tuple[str, ...] = ("paraphrase", "shuffle", "format", "noise")
#: Seed of the shuffled replay order (``report --seed``, ``demo --seed``): the same table
#: gives the same decisions on every run, and ``demo`` takes those of ``report`` by default.
REPLAY_SEED = 0
