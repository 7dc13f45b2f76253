"""The examples in the load tool's docstrings hold (make test runs no doctests by itself)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "services.loadtest.play",
        "services.loadtest.pacing",
        "services.loadtest.stats",
        "services.loadtest.display",
        "services.loadtest.links",
    ],
)
def test_the_examples_in_the_docstrings_hold(module: str) -> None:
    failed, tried = doctest.testmod(importlib.import_module(module))
    assert tried > 0 and failed == 0
