"""The supervisor of ``conquian serve`` (``services.serve.supervisor``) on tiny child processes."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from services.redis_server import LocalRedis
from services.serve.supervisor import FIRST_PAUSE_S, MAX_PAUSE_S, Child, Supervisor
from tests.services.serve_run import zombie


class Lines:
    """A logger that keeps its lines."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    warning = error = info

    def events(self, name: str) -> list[dict[str, Any]]:
        return [fields for event, fields in self.lines if event == name]


def settle(supervisor: Supervisor, seconds: float) -> None:
    """Run the supervisor's checks for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        supervisor.check(time.monotonic())
        time.sleep(0.01)


def test_a_child_that_keeps_dying_is_restarted_with_a_growing_pause_and_reaped() -> None:
    log = Lines()
    quick = Child("quick", [sys.executable, "-c", "import sys; sys.exit(3)"], env={"X": "1"})
    steady = Child("steady", [sys.executable, "-c", "import time; time.sleep(60)"])
    supervisor = Supervisor([quick, steady], dict(os.environ), log)
    supervisor.start()
    try:
        settle(supervisor, 4.0)
        died = log.events("service_died")
        assert died and {d["service"] for d in died} == {"quick"}
        assert all(d["status"] == 3 for d in died)
        pauses = [d["restart_in_s"] for d in died]
        assert pauses[0] == FIRST_PAUSE_S
        assert pauses == sorted(pauses) and max(pauses) <= MAX_PAUSE_S
        started = [s["pid"] for s in log.events("service_started") if s["service"] == "quick"]
        assert len(started) >= len(died) >= 3 and len(set(started)) == len(started)
        assert steady.process is not None and steady.process.poll() is None  # left alone
        assert not any(zombie(pid) for pid in started[:-1])  # every dead one reaped
    finally:
        supervisor.stop()
    assert steady.process.poll() is not None


def test_its_private_redis_is_restarted_on_the_same_port_and_data(tmp_path: Path) -> None:
    log = Lines()
    server = LocalRedis(tmp_path / "redis", stop_timeout=10)
    server.start()
    try:
        port, first = server.port, server.pid
        assert first is not None
        supervisor = Supervisor([], dict(os.environ), log, server)
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while supervisor.redis_restarts == 0 and time.monotonic() < deadline:
            supervisor.check(time.monotonic())
            time.sleep(0.01)
        assert supervisor.redis_restarts == 1
        assert server.running and server.port == port and server.pid != first
        assert log.events("redis_died")[0]["status"] == -signal.SIGKILL
        assert not zombie(first)
    finally:
        server.stop()
