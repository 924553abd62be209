"""The runnable Examples in the audit modules' docstrings are part of the contract."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["monitor.audit.tokenize", "monitor.audit.leakage",
                                  "monitor.audit.stability", "monitor.audit.verdict"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
