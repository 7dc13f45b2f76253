"""The supervisor behind ``conquian serve``: restarts a service process or private Redis that dies.

``docs/deploy.md`` ("conquian serve") has the rules; ``docs/performance.md`` ("Recovery") the
measured times.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.redis_server import LocalRedis, RedisLauncherError

__all__ = [
    "FIRST_PAUSE_S",
    "HEALTHY_S",
    "MAX_PAUSE_S",
    "POLL_S",
    "STOP_TIMEOUT_S",
    "Child",
    "Supervisor",
]

POLL_S = 0.1
"""How often the supervisor looks at its processes."""
FIRST_PAUSE_S = 0.1
"""The pause before the first restart of a process that died."""
MAX_PAUSE_S = 5.0
"""The longest pause between two restarts of a process that keeps dying."""
HEALTHY_S = 10.0
"""A process that ran this long before dying is restarted after the first pause again."""
STOP_TIMEOUT_S = 15.0
"""How long :meth:`Supervisor.stop` waits after SIGTERM before it sends SIGKILL."""


@dataclass
class Child:
    """One supervised service process: its command line, its own environment variables on top
    of the supervisor's, its process and restart bookkeeping."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    next_start: float = 0.0
    started: float = 0.0

    def start(self, env: Mapping[str, str]) -> None:
        """Start the process (stdout and stderr go to ours: JSON log lines)."""
        self.process = subprocess.Popen(self.argv, env={**env, **self.env})
        self.started = time.monotonic()

    @property
    def pid(self) -> int | None:
        """The pid of the current process (None before the first start)."""
        return None if self.process is None else self.process.pid

    def poll_died(self) -> int | None:
        """Return the exit status if the process has ended (reaping it), else None."""
        return None if self.process is None else self.process.poll()


class Supervisor:
    """Starts ``children`` with ``env``, restarts those that die and the private ``redis``
    (None: a Redis of ``REDIS_URL``, not ours to restart), and stops them all."""

    def __init__(
        self,
        children: Sequence[Child],
        env: Mapping[str, str],
        log: Any,
        redis: LocalRedis | None = None,
    ) -> None:
        self.children = list(children)
        self.env = dict(env)
        self.log = log
        self.redis = redis
        self.redis_restarts = 0
        self._redis_down = False
        self._redis_next = 0.0
        self._redis_pause = FIRST_PAUSE_S

    def pids(self) -> dict[str, int | None]:
        """The pid of every process now: each child by name, and ``redis`` if it is ours."""
        out: dict[str, int | None] = {child.name: child.pid for child in self.children}
        if self.redis is not None:
            out["redis"] = self.redis.pid
        return out

    def start(self) -> None:
        """Start every child."""
        for child in self.children:
            self._start(child)

    def run(self, stopping: Sequence[object]) -> None:
        """Restart what dies until ``stopping`` is non-empty (a signal handler appends)."""
        while not stopping:
            self.check(time.monotonic())
            time.sleep(POLL_S)

    def check(self, now: float) -> None:
        """One look at every process: restart Redis first, then the children due."""
        self._check_redis(now)
        for child in self.children:
            self._check_child(child, now)

    def stop(self) -> None:
        """Send SIGTERM to every child, wait, then SIGKILL what is left; reap them all."""
        for child in self.children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for child in self.children:
            if child.process is None:
                continue
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log.warning("service did not stop; killing it", service=child.name)
                child.process.kill()
                child.process.wait()

    # -- the children -------------------------------------------------------------------------
    def _start(self, child: Child) -> None:
        child.start(self.env)
        self.log.info("service_started", service=child.name, pid=child.pid, restarts=child.restarts)

    def _check_child(self, child: Child, now: float) -> None:
        status = child.poll_died()
        if status is None:
            return
        if child.next_start == 0.0:  # just found dead
            if now - child.started >= HEALTHY_S:
                child.restarts = 0
            pause = min(MAX_PAUSE_S, FIRST_PAUSE_S * 2**child.restarts)
            child.next_start = now + pause
            self.log.warning(
                "service_died",
                service=child.name,
                pid=child.pid,
                status=status,
                restart_in_s=pause,
            )
        elif now >= child.next_start:
            child.restarts += 1
            child.next_start = 0.0
            self._start(child)

    # -- the private Redis ----------------------------------------------------------------------
    def _check_redis(self, now: float) -> None:
        redis = self.redis
        if redis is None:
            return
        if not self._redis_down:
            status = redis.exited()
            if status is None:
                return
            self._redis_down = True
            self.log.warning("redis_died", pid=redis.pid, status=status, port=redis.port)
        if now < self._redis_next:
            return
        try:
            redis.restart()
        except RedisLauncherError as error:
            self._redis_next = now + self._redis_pause
            self.log.error(
                "redis_restart_failed", error=str(error)[:500], retry_in_s=self._redis_pause
            )
            self._redis_pause = min(self._redis_pause * 2, MAX_PAUSE_S)
            return
        self._redis_down = False
        self.redis_restarts += 1
        self._redis_pause = FIRST_PAUSE_S
