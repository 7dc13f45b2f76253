"""All production code stays ruff- and mypy --strict-clean (a repository rule; ``make lint``,
which ``make test`` runs first, is the same gate), and module docstrings stay short."""

from __future__ import annotations

import ast
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


MAX_MODULE_DOCSTRING_LINES = 12


def module_docstring_lines(path: Path) -> int:
    """The number of source lines the module docstring of ``path`` spans (0 without one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if ast.get_docstring(tree, clean=False) is None:
        return 0
    node = tree.body[0]
    assert node.end_lineno is not None
    return node.end_lineno - node.lineno + 1


def test_module_docstring_lines_counts_the_docstring_only(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""One line.\n\nTwo more.\n"""\n\nX = 1\n', encoding="utf-8")
    assert module_docstring_lines(sample) == 4
    sample.write_text("X = 1\n", encoding="utf-8")
    assert module_docstring_lines(sample) == 0


def test_module_docstrings_are_short() -> None:
    """Module docstrings say what a module holds and point to docs/; the reasoning lives there."""
    long = {
        str(path.relative_to(ROOT)): lines
        for package in ("engine", "events", "services")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := module_docstring_lines(path)) > MAX_MODULE_DOCSTRING_LINES
    }
    assert not long, f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines: {long}"
