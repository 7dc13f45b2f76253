"""The load tool raises its open-file limit to what its tables need (two sockets a table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from services.loadtest.cli import files_needed
from services.loadtest.options import Options

ROOT = Path(__file__).resolve().parents[2]

RAISE = """
import resource
from services.loadtest.cli import raise_open_files
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
print(raise_open_files(200), raise_open_files(1000), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_the_limit_is_raised_to_what_is_needed_and_never_lowered() -> None:
    done = subprocess.run(  # in a process of its own: the limit is the process's
        [sys.executable, "-c", RAISE], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["256", "1000", "1000"]


def test_a_gateway_run_needs_two_sockets_a_table() -> None:
    gateway = files_needed(Options(via="gateway", tables=10_000, http_connections=100))
    assert gateway >= 20_100
    assert files_needed(Options(via="streams", tables=10_000, shards=16)) < 1000
