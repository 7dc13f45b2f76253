"""The parts of ``conquian chaos`` that need no running service: finding serve's services
among a process group, the kill schedule, the ledger file, the report's verdict, and the
static checks the load tool also passes."""

from __future__ import annotations

import doctest
import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from services.chaos import report as chaos_report
from services.chaos.checks import ROOT
from services.chaos.targets import KINDS, group_processes, service_pids
from services.loadtest.ledger import Ledger, read_ledger


@pytest.mark.parametrize(
    "module", ["services.chaos.checks", "services.chaos.killer", "services.chaos.harness"]
)
def test_the_examples_in_the_docstrings_hold(module: str) -> None:
    failed, tried = doctest.testmod(importlib.import_module(module))
    assert tried > 0 and failed == 0


def test_services_are_found_by_kind_in_their_process_group_only() -> None:
    # a stand-in for serve: a new session whose children carry the services' command lines
    script = (
        "import subprocess, sys, time\n"
        "py = sys.executable\n"
        "for m in ('services.engine_worker', 'services.engine_worker', 'services.projector'):\n"
        "    subprocess.Popen([py, '-c', 'import time; time.sleep(60)', '-m', m])\n"
        "time.sleep(60)\n"
    )
    group = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    outsider = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "-m", "services.projector"]
    )
    try:
        deadline = time.monotonic() + 30
        while len(group_processes(group.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = service_pids(group.pid)
        assert len(found["engine-worker"]) == 2 and len(found["projector"]) == 1
        assert found["gateway"] == found["bots"] == found["clock"] == []
        assert outsider.pid not in found["projector"]
        assert group.pid in group_processes(group.pid)
    finally:
        os.killpg(group.pid, signal.SIGKILL)
        outsider.kill()
        group.wait()
        outsider.wait()


def test_a_ledger_keeps_each_line_and_skips_a_half_written_last_one(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.accepted("t-1", "t-1-00001", 0, 4)
    ledger.accepted("t-1", "t-1-00002", 1, 6)
    ledger.close()
    with path.open("a") as file:
        file.write('{"table_id": "t-1", "comm')  # the run was killed while writing
    entries = read_ledger(path)
    assert [(e.command_id, e.seat, e.version) for e in entries] == [
        ("t-1-00001", 0, 4),
        ("t-1-00002", 1, 6),
    ]
    path.write_text('{"oops"\n' + path.read_text())
    with pytest.raises(ValueError, match="not JSON"):
        read_ledger(path)


def _report(**changes: Any) -> dict[str, Any]:
    kills = {kind: {"count": 1, "not_back": 0} for kind in KINDS}
    report: dict[str, Any] = {
        "kills": kills,
        "commands": {"accepted": 10, "lost": 0, "doubled": 0, "version_mismatch": 0,
                     "doubled_anywhere": 0},
        "audit": {"ok": True, "tables_failed": 0},
        "views": {"differing": 0},
        "load": {"errors": {}},
        "all_up_at_end": True,
    }  # fmt: skip
    for key, value in changes.items():
        report[key] = value
    return report


def test_the_report_passes_only_a_run_where_everything_held() -> None:
    assert chaos_report.problems(_report()) == []
    lost = _report(commands={**_report()["commands"], "lost": 2, "doubled": 1})
    assert chaos_report.problems(lost) == ["lost: 2", "doubled: 1"]
    spared = _report(kills={**_report()["kills"], "redis": {"count": 0, "not_back": 0}})
    assert chaos_report.problems(spared) == ["redis was never killed"]
    assert chaos_report.problems(_report(audit={"ok": False, "tables_failed": 3})) == [
        "the audit failed on 3 table(s)"
    ]
    assert chaos_report.problems(_report(views={"differing": 1})) == [
        "1 view(s) differ from a rebuild"
    ]
    gave_up = _report(load={"errors": {"ws/connect_failed": 1}})
    assert chaos_report.problems(gave_up) == [
        "the load tool gave up 1 table(s): {'ws/connect_failed': 1}"
    ]


def test_bad_arguments_exit_with_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "chaos", "--kinds", "gateway,nothing"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "nothing" in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["ruff", "check", "services/chaos", "tests/chaos"],
        ["ruff", "format", "--check", "services/chaos", "tests/chaos"],
        ["mypy", "--strict", "services/chaos"],
    ],
    ids=["ruff", "ruff-format", "mypy-strict"],
)
def test_the_chaos_package_passes_the_static_checks(argv: list[str]) -> None:
    tool = str(Path(sys.executable).parent / argv[0])
    done = subprocess.run([tool, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
