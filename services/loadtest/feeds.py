"""The shard feeds, followed so that a table waiting for its command's result wakes at once.

The engine worker appends a feed entry (``t`` table, ``f`` first and ``l`` last version) in the
same atomic call that appends a table's events and records the command's result and views
(``docs/services.md``): when the entry is read, the result and views are there to be read.  One
blocking ``XREAD`` of one shard's feed at a time (one key: one cluster slot), one task a shard,
from the feed's last entry when the run starts.  Rejections append nothing: the engine
workers' result hints (``<ns>:results``, one subscription) wake their tables, and whoever waits
also polls, at growing intervals, for a hint that was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from services.store.keys import KeySpace, results_channel

Wake = Callable[[str, int], None]
"""Told of each feed entry: the table and the number of appends (one an entry)."""


class FeedWatch:
    """Follows every shard feed and calls ``wake`` for the tables it is asked to watch."""

    def __init__(self, client: Redis, keys: KeySpace, *, block_ms: int = 1000) -> None:
        self.client = client
        self.keys = keys
        self.block_ms = block_ms
        self.watching: dict[str, Wake] = {}
        self.entries = 0
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Find each feed's last entry and start following from there."""
        for shard in range(self.keys.shards):
            feed = self.keys.feed(shard)
            last: Any = await self.client.xrevrange(feed, "+", "-", count=1)
            start: bytes = last[0][0] if last else b"0-0"
            self.tasks.append(asyncio.create_task(self._follow(feed, start)))
        subscribed = asyncio.Event()
        self.tasks.append(asyncio.create_task(self._hints(subscribed)))
        await asyncio.wait_for(subscribed.wait(), 10)

    async def close(self) -> None:
        """Stop following."""
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def watch(self, table_id: str, wake: Wake) -> None:
        """Call ``wake`` on each new entry of ``table_id``."""
        self.watching[table_id] = wake

    def forget(self, table_id: str) -> None:
        """Stop watching ``table_id``."""
        self.watching.pop(table_id, None)

    async def _follow(self, feed: str, after: bytes) -> None:
        while True:
            reply: Any = await self.client.xread({feed: after}, count=1000, block=self.block_ms)
            for _, entries in reply or ():
                for entry_id, fields in entries:
                    after = entry_id
                    self.entries += 1
                    table_id = fields[b"t"].decode()
                    wake = self.watching.get(table_id)
                    if wake is not None:
                        wake(table_id, 1)

    async def _hints(self, subscribed: asyncio.Event) -> None:
        """Wake the watched tables named by result hints (a hint a line, JSON); resubscribe
        after a dropped subscription (what it missed, the polls find)."""
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(results_channel(self.keys.ns))
                subscribed.set()
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    for line in message["data"].split(b"\n"):
                        table_id = orjson.loads(line).get("table_id")
                        wake = self.watching.get(table_id)
                        if wake is not None:
                            wake(table_id, 0)  # an answer, no append
            except (RedisError, OSError, orjson.JSONDecodeError):
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
