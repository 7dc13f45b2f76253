"""All production code stays ruff- and mypy --strict-clean (a repository rule; ``make lint``,
which ``make test`` runs first, is the same gate)."""

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
        [str(BIN / "ruff"), "check", "engine", "events", "services", "bench", "tests"],
        [str(BIN / "mypy"), "--strict", "engine", "events", "services"],
    ],
    ids=["ruff", "mypy-strict"],
)
def test_the_code_passes_the_static_checks(argv: list[str]) -> None:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
