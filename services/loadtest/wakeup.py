"""A flag that one waiter awaits with a timeout, without a task per wait.

``asyncio.wait_for`` wraps the awaited coroutine in a task of its own on Python 3.11: with ten
thousand tables each waiting on every move, that was the load tool's largest cost.  A table
has one waiter at a time, so a future and a timer handle do.
"""

from __future__ import annotations

import asyncio


class Wakeup:
    """Set by whoever has news; awaited by one waiter at a time."""

    def __init__(self) -> None:
        self.flag = False
        self._waiter: asyncio.Future[bool] | None = None

    def set(self) -> None:
        """Raise the flag and wake the waiter."""
        self.flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def clear(self) -> None:
        """Lower the flag."""
        self.flag = False

    async def wait(self, timeout: float) -> bool:
        """Return True once the flag is up (at once if it is), False after ``timeout`` seconds.

        Raises RuntimeError when another waiter is already waiting.
        """
        if self.flag:
            return True
        if self._waiter is not None:
            raise RuntimeError("a Wakeup has one waiter at a time")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(max(0.0, timeout), _expire, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)
