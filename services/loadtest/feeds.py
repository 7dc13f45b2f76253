"""The shard feeds and the result hints, followed so that a table waiting for news wakes at once.

The engine worker appends a feed entry (``t`` table, ``f`` first and ``l`` last version) in the
same atomic call that appends a table's events and records the command's result and views
(``docs/services.md``): when the entry is read, the result and views are there to be read.  One
blocking ``XREAD`` of every shard's feed at a time on one Redis; on a cluster, one a shard (one
key: one slot), a task each; from the feeds' last entries when the run starts.  Rejections
append nothing: the engine workers' result hints (``<ns>:results``, one subscription) announce
them.  Whoever waits also polls, at growing intervals, for what was lost.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

import orjson
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError
from redis.typing import KeyT, StreamIdT

from services.store.keys import KeySpace, results_channel
from services.store.stream_watch import xread_on
from services.tasks import cancel_and_wait


class FeedReader(Protocol):
    """Told of every feed entry and result hint of the namespace."""

    def appended(self, table_id: str, last: int) -> None:
        """A feed entry: ``table_id`` appended events up to version ``last``."""

    def answered(self, table_id: str, command_id: str, seat: int | None) -> None:
        """A result hint: the command of ``seat`` (None: a create or join) was answered."""


class FeedWatch:
    """Follows every shard feed and the result hints, and tells a :class:`FeedReader`."""

    def __init__(
        self, client: Redis, keys: KeySpace, reader: FeedReader, *, block_ms: int = 1000
    ) -> None:
        self.client = client
        self.keys = keys
        self.reader = reader
        self.block_ms = block_ms
        self.entries = 0
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Find each feed's last entry and start following from there."""
        feeds: dict[KeyT, StreamIdT] = {}
        for shard in range(self.keys.shards):
            feed = self.keys.feed(shard)
            last: Any = await self.client.xrevrange(feed, "+", "-", count=1)
            feeds[feed] = last[0][0] if last else b"0-0"
        if isinstance(self.client, RedisCluster):  # a read's keys must share one slot
            for feed, start in feeds.items():
                self.tasks.append(asyncio.create_task(self._follow({feed: start})))
        else:
            self.tasks.append(asyncio.create_task(self._follow(feeds)))
        subscribed = asyncio.Event()
        self.tasks.append(asyncio.create_task(self._hints(subscribed)))
        await asyncio.wait_for(subscribed.wait(), 10)

    async def close(self) -> None:
        """Stop following."""
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            await cancel_and_wait(task)

    async def _follow(self, after: dict[KeyT, StreamIdT]) -> None:
        """Read the feeds of ``after`` (feed → last entry read) until cancelled; on a cluster,
        ``after`` is one feed, read on its master (:func:`xread_on`)."""
        cluster = isinstance(self.client, RedisCluster)
        while True:
            try:
                reply: Any
                if cluster:
                    ((feed, start),) = after.items()
                    reply = await xread_on(self.client, feed, start, 1000, self.block_ms)
                else:
                    reply = await self.client.xread(after, count=1000, block=self.block_ms)
            except (RedisError, OSError):
                await asyncio.sleep(0.5)  # what this gap hides, the polls find
                continue
            appended = self.reader.appended
            for feed, entries in reply or ():
                self.entries += len(entries)
                for _entry_id, fields in entries:
                    appended(fields[b"t"].decode(), int(fields[b"l"]))
                after[feed.decode()] = entries[-1][0]

    async def _hints(self, subscribed: asyncio.Event) -> None:
        """Tell of each result hint (a hint a line, JSON); resubscribe after a dropped
        subscription (what it missed, the polls find)."""
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(results_channel(self.keys.ns))
                subscribed.set()
                async for message in pubsub.listen():
                    if message.get("type") != "message":
                        continue
                    answered = self.reader.answered
                    for line in message["data"].split(b"\n"):
                        hint = orjson.loads(line)
                        table_id, command_id = hint.get("table_id"), hint.get("command_id")
                        if isinstance(table_id, str) and isinstance(command_id, str):
                            answered(table_id, command_id, hint.get("seat"))
            except (RedisError, OSError, orjson.JSONDecodeError):
                await asyncio.sleep(0.5)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
