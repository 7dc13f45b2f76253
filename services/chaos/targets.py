"""The processes a chaos run kills: the services ``conquian serve`` supervises, and its Redis.

A service is found by its command line among the processes of serve's process group (serve
runs in a session of its own and starts every child in its group), so a replacement started
by serve is found the same way.  Serve's private Redis runs in a session of its own; it is
found among serve's children by its ``--port``.  Serve restarts each of them
(``services.serve.supervisor``); Redis comes back on the same port and data folder, from its AOF
(``docs/chaos.md``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import urllib.request
from pathlib import Path

import redis

SERVICES: dict[str, str] = {
    "engine-worker": "services.engine_worker",
    "projector": "services.projector",
    "bots": "services.followers.bots_runner",
    "clock": "services.followers.turn_clock",
    "gateway": "services.gateway.app:create_app",
}
"""Each kind of service, and what its command line holds (``services.serve.cli.children``)."""

REDIS = "redis"
KINDS: tuple[str, ...] = (*SERVICES, REDIS)


def processes(proc: Path = Path("/proc")) -> dict[int, tuple[int, int, list[str]]]:
    """Return pid → (parent pid, process group, arguments) of every live process (zombies,
    whose command line is empty, are left out)."""
    found: dict[int, tuple[int, int, list[str]]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp
        if cmdline:
            argv = cmdline.rstrip(b"\0").decode(errors="replace").split("\0")
            found[int(entry.name)] = (int(fields[1]), int(fields[2]), argv)
    return found


def group_processes(group: int) -> dict[int, list[str]]:
    """Return pid → arguments of the live processes of a process group."""
    return {pid: argv for pid, (_, pgrp, argv) in processes().items() if pgrp == group}


def redis_pid(parent: int, port: int) -> int | None:
    """Return the pid of the Redis server that ``parent`` started on ``port``, None if none.

    Redis rewrites its command line to ``redis-server 127.0.0.1:<port>``; before it does (and
    for a server that does not) ``--port <port>`` names it."""
    title = f"127.0.0.1:{port}"
    for pid, (ppid, _, argv) in processes().items():
        if ppid != parent:
            continue
        if _option(argv, "--port") == str(port) or title in " ".join(argv).split():
            return pid
    return None


def _option(argv: list[str], name: str) -> str | None:
    """Return the value after ``name`` in ``argv``, None if it is not there."""
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def service_pids(group: int) -> dict[str, list[int]]:
    """Return each service kind's live pids in serve's process group, sorted."""
    out: dict[str, list[int]] = {kind: [] for kind in SERVICES}
    for pid, argv in sorted(group_processes(group).items()):
        for kind, marker in SERVICES.items():
            if marker in argv:
                out[kind].append(pid)
    return out


class Targets:
    """Kill a process of a kind, and wait until serve has replaced it."""

    def __init__(self, serve_pid: int, redis_port: int, gateway_url: str, workers: int) -> None:
        self.serve = serve_pid  # also the process group of the services (a session of its own)
        self.redis_port = redis_port
        self.gateway_url = gateway_url
        self.expected = {kind: workers if kind == "engine-worker" else 1 for kind in SERVICES}

    def kill(self, kind: str, pick: int) -> int:
        """SIGKILL a process of ``kind`` (the ``pick``-th modulo how many run); return its pid.

        Raises LookupError when no process of that kind runs.
        """
        if kind == REDIS:
            pid = redis_pid(self.serve, self.redis_port)
            if pid is None:
                raise LookupError("serve's redis is not running")
        else:
            pids = service_pids(self.serve)[kind]
            if not pids:
                raise LookupError(f"no {kind} process runs")
            pid = pids[pick % len(pids)]
        os.kill(pid, signal.SIGKILL)
        return pid

    def replace(self, kind: str, killed: int, timeout: float) -> float | None:
        """Wait until ``kind`` runs again without ``killed`` (Redis: and answers PING; the
        gateway: and its ``/readyz`` answers 200); return the seconds since the call, None when
        it did not within ``timeout``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self._back(kind, killed):
                return time.monotonic() - started
            time.sleep(0.02)
        return None

    def _back(self, kind: str, killed: int) -> bool:
        if kind == REDIS:
            pid = redis_pid(self.serve, self.redis_port)
            return pid not in (None, killed) and answers_ping(self.redis_port)
        pids = service_pids(self.serve)[kind]
        started = killed not in pids and len(pids) >= self.expected[kind]
        return started and (kind != "gateway" or ready(self.gateway_url))

    def all_up(self) -> bool:
        """Say whether Redis and every service run, as many of each as serve starts."""
        pids = service_pids(self.serve)
        up = all(len(pids[kind]) >= n for kind, n in self.expected.items())
        return up and answers_ping(self.redis_port)


def answers_ping(port: int) -> bool:
    """Say whether the Redis on 127.0.0.1:``port`` answers PING (not while loading its AOF)."""
    client = redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5)
    with contextlib.closing(client):
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False


def ready(url: str) -> bool:
    """Say whether the gateway at ``url`` answers ``/readyz`` with 200."""
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=0.5) as response:
            return bool(response.status == 200)
    except OSError:  # refused, reset, timed out, or an HTTP error status
        return False
