"""Default values shared by a light module and a heavy one: their one home.

``llm-monitor --help`` shows them, so they live here, where importing them costs nothing
(the modules that use them import numpy or scipy at their top).
"""

from __future__ import annotations

#: Seed of the rank sets' parametric draws (``report --rank-seed``).
RANK_SEED = 20240601
#: Perturbation kinds of ``llm-monitor stability``.
STABILITY_KINDS: tuple[str, ...] = ("paraphrase", "shuffle", "format", "noise")
#: Models a board is planned for (``--planned-models``): the first M₀(M₀ − 1)/2 pairs share
#: α/2 (monitor.stats.sequential). The guarantee holds for any M₀; only power moves with it.
#: 5 (ten pairs at α/20 each) has the smallest worst-case cost in items, against planning for
#: the board's own size, over boards of 3 to 64 models: at most 17 % (bench/
#: bench_planned_models.py; docs/anytime.md, "How many models to plan for").
PLANNED_MODELS = 5
