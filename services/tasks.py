"""Ending asyncio tasks for sure: :func:`cancel_and_wait`.

On CPython 3.11 a cancellation can be lost: ``asyncio.wait_for`` returns its operation's result
instead of raising when that operation ends in the same turn of the loop as the cancel
(gh-86296, fixed in 3.12), and redis-py sends every command through ``wait_for`` when a socket
timeout is set.  A task cancelled while it sends a command goes on as if nothing had happened,
and whoever awaits it may wait for ever.  ``docs/services.md`` ("Stopping a task").
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["RECANCEL_S", "RECANCEL_TURNS", "cancel_and_wait"]

RECANCEL_TURNS = 100
"""Turns of the event loop in which :func:`cancel_and_wait` cancels a task that goes on."""
RECANCEL_S = 0.05
"""How often it cancels the task again after those turns."""


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and return once it has ended, cancelling it again while it goes on.

    Cancelled again at every turn of the loop at first (as anyio delivers a cancellation until
    the task leaves its scope): a loop of Redis commands ends within a few turns, where a
    cancellation every 50 ms met a send, and was lost, up to 37 times in a row.  A task that
    ends with an exception other than its cancellation raises it here.
    """
    turns = 0
    while not task.done():
        task.cancel()
        if turns < RECANCEL_TURNS:
            turns += 1
            await asyncio.sleep(0)
        else:
            await asyncio.wait({task}, timeout=RECANCEL_S)
    if not task.cancelled():
        error = task.exception()
        if error is not None:
            raise error
