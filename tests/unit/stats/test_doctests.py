"""The runnable Examples in the stats-core docstrings are part of the contract."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "monitor.stats.power",
    "monitor.stats.paired",
    "monitor.stats.clusters",
    "monitor.stats.multiplicity",
    "monitor.stats.shortcut",
    "monitor.stats.calibration",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
