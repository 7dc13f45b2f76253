"""The processes a chaos run kills: the services ``conquian serve`` supervises, and Redis.

A service is found by its command line among the processes of serve's process group (serve
runs in a session of its own and starts every child in its group), so a replacement started
by serve is found the same way.  Redis is the run's own ``LocalRedis``: SIGKILLed, then started
again on the same port and data folder, from its AOF (``docs/chaos.md``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from services.redis_server import LocalRedis

SERVICES: dict[str, str] = {
    "engine-worker": "services.engine_worker",
    "projector": "services.projector",
    "bots": "services.bots_runner",
    "clock": "services.turn_clock",
    "gateway": "services.gateway.app:create_app",
}
"""Each kind of service, and what its command line holds (``services.serve.children``)."""

REDIS = "redis"
KINDS: tuple[str, ...] = (*SERVICES, REDIS)


def group_processes(group: int, proc: Path = Path("/proc")) -> dict[int, str]:
    """Return pid → command line (arguments joined by spaces) of the live processes of a
    process group (zombies, whose command line is empty, are left out)."""
    found: dict[int, str] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        if int(fields[2]) == group and cmdline:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def service_pids(group: int) -> dict[str, list[int]]:
    """Return each service kind's live pids in serve's process group, sorted."""
    out: dict[str, list[int]] = {kind: [] for kind in SERVICES}
    for pid, cmdline in sorted(group_processes(group).items()):
        for kind, marker in SERVICES.items():
            if marker in cmdline.split():
                out[kind].append(pid)
    return out


class Targets:
    """Kill a process of a kind, and wait until it has been replaced."""

    def __init__(self, serve_group: int, redis: LocalRedis, workers: int) -> None:
        self.group = serve_group
        self.redis = redis
        self.expected = {kind: workers if kind == "engine-worker" else 1 for kind in SERVICES}

    def kill(self, kind: str, pick: int) -> int:
        """SIGKILL a process of ``kind`` (the ``pick``-th modulo how many run); return its pid.

        Raises LookupError when no process of that kind runs.
        """
        if kind == REDIS:
            pid = self.redis.pid
            if pid is None or not self.redis.running:
                raise LookupError("redis is not running")
            os.kill(pid, signal.SIGKILL)
            return pid
        pids = service_pids(self.group)[kind]
        if not pids:
            raise LookupError(f"no {kind} process runs")
        pid = pids[pick % len(pids)]
        os.kill(pid, signal.SIGKILL)
        return pid

    def replace(self, kind: str, killed: int, timeout: float) -> float | None:
        """Wait until ``kind`` runs again without ``killed``; return the seconds it took since
        the call, None when it did not within ``timeout``.  Redis is started again here."""
        started = time.monotonic()
        if kind == REDIS:
            self.redis.stop()  # reaps the killed server and lets go of its data folder
            self.redis.start()  # same port, same folder: it loads its AOF
            return time.monotonic() - started
        while time.monotonic() - started < timeout:
            pids = service_pids(self.group)[kind]
            if killed not in pids and len(pids) >= self.expected[kind]:
                return time.monotonic() - started
            time.sleep(0.05)
        return None

    def all_up(self) -> bool:
        """Say whether Redis and every service run, as many of each as serve starts."""
        pids = service_pids(self.group)
        up = all(len(pids[kind]) >= n for kind, n in self.expected.items())
        return up and self.redis.running
