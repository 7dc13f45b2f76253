"""Pacing: commands at a fixed rate shared by every table, or flat out.

Each command takes the next free slot of a schedule one ``1/rate`` apart and sleeps until it;
a slot in the past is never handed out, so a pause of the tables (nobody ready to act) is not
made up for by a burst afterwards.  ``rate`` None: no waiting at all.  A table acts only once
its previous command has its result, so the rate reached is at most what the tables can play:
the report gives the rate asked and the rate sent.
"""

from __future__ import annotations

import asyncio
import time


class Pacer:
    """Hands out send slots at ``rate`` per second (None: flat out)."""

    def __init__(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"the rate must be positive, got {rate}")
        self.rate = rate
        self._step = 0.0 if rate is None else 1.0 / rate
        self._next = 0.0

    def slot(self, now: float) -> float:
        """Return the time of the next slot at or after ``now``, and take it.

        >>> pacer = Pacer(10)
        >>> pacer.slot(5.0), pacer.slot(5.0), pacer.slot(7.0)
        (5.0, 5.1, 7.0)
        """
        at = max(now, self._next)
        self._next = at + self._step
        return at

    async def wait(self) -> None:
        """Sleep until this caller's slot (at once when flat out)."""
        if self.rate is None:
            return
        now = time.perf_counter()
        delay = self.slot(now) - now
        if delay > 0:
            await asyncio.sleep(delay)
