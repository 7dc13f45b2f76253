"""A short ``conquian chaos`` run, as ``make test`` holds it: every kind of process SIGKILLed at
least once under load (engine workers, projector, bots runner, turn clock, gateway, Redis), and
then no accepted command lost or doubled, every table audited clean, every view equal to a
rebuild.  ``make chaos`` is the same for minutes (``docs/chaos.md``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.chaos.checks import ROOT
from services.chaos.targets import KINDS

pytestmark = pytest.mark.redis


def test_a_short_chaos_run_kills_every_kind_and_loses_nothing(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    argv = [sys.executable, "-m", "services.cli", "chaos", "--duration", "16", "--interval",
            "1.0", "--tables", "6", "--seed", "7", "--folder", str(tmp_path / "run"),
            "--report", str(report_path)]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert report_path.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert report["problems"] == [], done.stdout
    kills = report["kills"]
    assert sorted(kills) == sorted(KINDS)
    assert all(kills[kind]["count"] >= 1 and kills[kind]["not_back"] == 0 for kind in KINDS)
    commands = report["commands"]
    assert (
        commands["accepted"] > 0 and commands["accepted"] == report["load"]["commands"]["accepted"]
    )
    assert commands["lost"] == commands["doubled"] == commands["doubled_anywhere"] == 0
    assert commands["version_mismatch"] == 0
    assert report["audit"]["ok"] is True and report["audit"]["tables"] > 0
    assert report["views"]["compared"] == 3 * report["audit"]["tables"]
    assert report["views"]["differing"] == 0
    assert report["load"]["errors"] == {}
    assert report["ok"] is True and done.returncode == 0
    assert "lost 0  doubled 0" in done.stdout
