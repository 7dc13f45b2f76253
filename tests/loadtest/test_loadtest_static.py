"""The load tool stays ruff-clean, formatted and mypy --strict-clean, as engine and events do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PATHS = ["services/loadtest", "tests/loadtest"]


@pytest.mark.parametrize(
    "argv",
    [
        [str(BIN / "ruff"), "check", *PATHS],
        [str(BIN / "ruff"), "format", "--check", *PATHS],
        [str(BIN / "mypy"), "--strict", "services/loadtest"],
    ],
    ids=["ruff", "ruff-format", "mypy-strict"],
)
def test_the_load_tool_passes_the_static_checks(argv: list[str]) -> None:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
