"""Redis calls of many tables sent together: one pipeline per batch, a few batches in flight.

Ten thousand tables each waiting for its own round trip would need ten thousand connections;
here a table queues its call and awaits a future, and a flusher sends whatever is queued as one
non-transactional pipeline (at most ``batch`` calls), with up to ``in_flight`` pipelines at
once.  Calls queued while pipelines are out go in the next one, so the batches grow with the
load by themselves.  Only calls on one key (or keys of one slot) are queued, and pipelines run
with ``transaction=False``: on Redis Cluster the client splits a pipeline by node.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from redis.asyncio import Redis

Call = tuple[str, tuple[Any, ...]]


class Batcher:
    """Queues Redis calls and sends them in pipelines (see the module docstring)."""

    def __init__(self, client: Redis, *, batch: int = 500, in_flight: int = 8) -> None:
        self.client = client
        self.batch = batch
        self.queue: list[tuple[Call, asyncio.Future[Any]]] = []
        self.ready = asyncio.Event()
        self.slots = asyncio.Semaphore(in_flight)
        self.pipelines = 0
        self.task: asyncio.Task[None] | None = None
        self.running: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start the flusher."""
        self.task = asyncio.create_task(self._flush_forever())

    async def close(self) -> None:
        """Stop the flusher and wait for the pipelines out."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await asyncio.gather(*self.running, return_exceptions=True)

    def call(self, name: str, *args: Any) -> asyncio.Future[Any]:
        """Queue ``name(*args)`` (a redis-py command method); the future gets its reply."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.queue.append(((name, args), future))
        self.ready.set()
        return future

    async def _flush_forever(self) -> None:
        while True:
            await self.ready.wait()
            self.ready.clear()
            while self.queue:
                await self.slots.acquire()
                calls, self.queue = self.queue[: self.batch], self.queue[self.batch :]
                task = asyncio.create_task(self._send(calls))
                self.running.add(task)
                task.add_done_callback(self.running.discard)

    async def _send(self, calls: list[tuple[Call, asyncio.Future[Any]]]) -> None:
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for (name, args), _ in calls:
                    getattr(pipe, name)(*args)
                replies = await pipe.execute(raise_on_error=False)
            self.pipelines += 1
        except Exception as error:  # the connection failed: every call of the batch fails
            replies = [error] * len(calls)
        finally:
            self.slots.release()
        for (_, future), reply in zip(calls, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, Exception):
                future.set_exception(reply)
            else:
                future.set_result(reply)
