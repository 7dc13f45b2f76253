"""The engine and the contract stay ruff- and mypy --strict-clean (a repository rule)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    "argv",
    [
        [str(BIN / "ruff"), "check", "engine", "events"],
        [str(BIN / "mypy"), "--strict", "engine", "events"],
    ],
    ids=["ruff", "mypy-strict"],
)
def test_engine_and_events_pass_the_static_checks(argv: list[str]) -> None:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
