"""The load tool watching itself: its CPU and how late its event loop runs.

A load generator that is itself saturated measures its own queueing, not the service's.  A
probe sleeps ``period`` seconds again and again and records how much later than asked it
wakes (the loop's lag: every callback that ran in between); with the process's CPU time per
interval, the report and the live series say whether the tool kept up.  A lag of tens of ms or
a CPU share near 1.0 means: fewer tables per process, or more processes (Locust workers).
"""

from __future__ import annotations

import asyncio
import time
from array import array

from services.tasks import cancel_and_wait

PERIOD = 0.05
"""Seconds between the probe's wake-ups."""


class SelfWatch:
    """Samples the event loop's lag and the process's CPU time."""

    def __init__(self, period: float = PERIOD) -> None:
        self.period = period
        self.lags: array[float] = array("d")
        self.interval_lags: list[float] = []
        self.task: asyncio.Task[None] | None = None
        self._cpu_at_cut = time.process_time()
        self._cpu_at_start = self._cpu_at_cut

    def start(self) -> None:
        """Start probing."""
        self._cpu_at_start = self._cpu_at_cut = time.process_time()
        self.task = asyncio.create_task(self._probe())

    async def stop(self) -> None:
        """Stop probing."""
        if self.task is not None:
            await cancel_and_wait(self.task)

    async def _probe(self) -> None:
        while True:
            asked = time.perf_counter() + self.period
            await asyncio.sleep(self.period)
            lag = max(0.0, time.perf_counter() - asked)
            self.lags.append(lag)
            self.interval_lags.append(lag)

    def cut(self) -> tuple[list[float], float]:
        """Return the interval's lags (seconds) and CPU seconds, and start the next interval."""
        now = time.process_time()
        lags, self.interval_lags = self.interval_lags, []
        cpu, self._cpu_at_cut = now - self._cpu_at_cut, now
        return lags, cpu

    def cpu_seconds(self) -> float:
        """Return the CPU seconds used since :meth:`start`."""
        return time.process_time() - self._cpu_at_start
