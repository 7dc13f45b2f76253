"""Commands that concurrent tasks send at the same moment travel to Redis in one pipeline.

An engine worker runs one task per owned shard.  Under a steady stream of commands each shard's
batch is small (a few commands), and each batch costs its own round trips: the appends, then
the acknowledgement.  On the benchmark machine a redis-py round trip costs some 80 µs of client
CPU before any command in it counts (the event loop, the socket calls, redis-py's layers), so
small batches spent most of the worker's time on round trips.  :class:`RoundTrips` lets the
tasks keep their own logic and order: each awaits :meth:`RoundTrips.run` with its commands, and
the commands of every task that asks in the same turn of the event loop are sent as one
non-transactional pipeline; each task gets exactly its own replies, in order.

Nothing changes in meaning: a non-transactional pipeline is the commands one after the other, as
the tasks' separate pipelines were, and each task's commands stay in its order.  A reply that is
an error is returned as the exception (as ``execute(raise_on_error=False)`` does); a failure of
the round trip itself (Redis unreachable) is raised in every task whose commands were in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

__all__ = ["RoundTrips"]

Command = tuple[Any, ...]
"""A Redis command and its arguments, as for ``execute_command``."""


class RoundTrips:
    """Merges the commands of tasks that ask at the same moment into one pipeline."""

    def __init__(self, client: Redis) -> None:
        self.client = client
        self._waiting: list[tuple[Sequence[Command], asyncio.Future[list[Any]]]] = []
        self._flush: asyncio.Task[None] | None = None
        self.round_trips = 0
        """Pipelines sent so far (for tests and metrics)."""

    async def run(self, commands: Sequence[Command]) -> list[Any]:
        """Send ``commands`` (with whatever other tasks send now); return their replies."""
        if not commands:
            return []
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._waiting.append((commands, future))
        if self._flush is None:
            self._flush = asyncio.create_task(self._send())
        return await future

    async def _send(self) -> None:
        await asyncio.sleep(0)  # one turn of the loop: tasks woken with this one add theirs
        batch, self._waiting, self._flush = self._waiting, [], None
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for commands, _ in batch:
                    for command in commands:
                        pipe.execute_command(*command)
                replies = await pipe.execute(raise_on_error=False)
        except BaseException as exc:  # the round trip failed: every task in it hears of it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.round_trips += 1
        at = 0
        for commands, future in batch:
            if not future.done():  # a task that was cancelled meanwhile gets nothing
                future.set_result(list(replies[at : at + len(commands)]))
            at += len(commands)
