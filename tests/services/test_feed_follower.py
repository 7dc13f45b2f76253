"""The feed follower of the bots runner and the clock: what it reads, when its checkpoints move,
and how long it pauses between reads (docs/services.md, ``services/feed_follower.py``)."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from services.feed_follower import FeedFollower
from services.settings import Settings
from services.store.keys import KeySpace


async def append(client: Redis, keys: KeySpace, table_id: str, version: int) -> str:
    """Add a feed entry as the append script writes one; return its position."""
    feed = keys.feed(keys.shard_of(table_id))
    entry_id = await client.xadd(feed, {"t": table_id, "f": version, "l": version})
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


async def checkpoint(client: Redis, follower: FeedFollower, table_id: str) -> str | None:
    raw = await client.get(follower.checkpoint_key(follower.keys.shard_of(table_id)))
    return None if raw is None else raw.decode()


async def test_read_tables_gives_the_tables_of_read_each_once(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    for table_id, version in [("ana", 1), ("bea", 1), ("ana", 2), ("cid", 1), ("ana", 3)]:
        await append(redis_client, keys, table_id, version)
    entries = await FeedFollower(redis_client, keys, "full").read(block_ms=0)
    lean = FeedFollower(redis_client, keys, "lean")
    tables = await lean.read_tables(block_ms=0)
    assert sorted(tables) == sorted({e.table_id for e in entries}) == ["ana", "bea", "cid"]
    assert [e.last_version for e in entries if e.table_id == "ana"] == [1, 2, 3]
    assert await lean.read_tables(block_ms=0) == []  # the positions moved past them
    position = await append(redis_client, keys, "bea", 2)
    assert await lean.read_tables(block_ms=0) == ["bea"]
    assert lean.positions[keys.shard_of("bea")] == position


async def test_checkpoints_move_every_checkpoint_ms_and_when_the_loop_ends(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    await append(redis_client, keys, "ana", 1)
    follower = FeedFollower(redis_client, keys, "paced", block_ms=10, checkpoint_ms=60_000)
    stop = asyncio.Event()
    seen: list[list[str]] = []
    async with asyncio.timeout(10):
        async for tables in follower.batches(stop):
            seen.append(tables)
            assert await checkpoint(redis_client, follower, "ana") is None  # not in a minute
            if len(seen) == 1:
                second = await append(redis_client, keys, "ana", 2)
            else:
                stop.set()
    assert seen == [["ana"], ["ana"]]
    assert await checkpoint(redis_client, follower, "ana") == second  # written at the end

    every = FeedFollower(redis_client, keys, "every", block_ms=10, checkpoint_ms=0)
    stop.clear()
    marks: list[str | None] = []
    async with asyncio.timeout(10):
        async for _ in every.batches(stop):  # the first batch: versions 1 and 2
            marks.append(await checkpoint(redis_client, every, "ana"))
            if len(marks) == 1:
                third = await append(redis_client, keys, "ana", 3)
            else:
                stop.set()
    assert marks == [None, second]  # each batch done is written before the next read
    assert await checkpoint(redis_client, every, "ana") == third


async def test_a_batch_whose_handling_failed_is_read_again(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    await append(redis_client, keys, "ana", 1)
    follower = FeedFollower(redis_client, keys, "fails", block_ms=10, checkpoint_ms=0)
    with pytest.raises(RuntimeError):
        async with asyncio.timeout(10):
            async for tables in follower.batches():
                if tables == ["ana"]:
                    await append(redis_client, keys, "bea", 1)
                    continue
                raise RuntimeError(f"could not handle {tables}")
    again = FeedFollower(redis_client, keys, "fails")
    assert await again.read_tables(block_ms=0) == ["bea"]  # "ana" was done, "bea" was not


async def test_the_pause_after_a_batch_depends_on_what_it_gave(
    settings: Settings, redis_client: Redis
) -> None:
    follower = FeedFollower(redis_client, settings.keys, "pauses", linger_ms=0, idle_linger_ms=300)

    async def timed(acted: bool) -> float:
        started = time.monotonic()
        await follower.linger(acted)
        return time.monotonic() - started

    assert await timed(acted=False) >= 0.3  # nothing was done: read again later
    assert await timed(acted=True) < 0.2  # a move was sent: its answer is awaited
    follower.full = True  # a feed had ``count`` entries: more are waiting
    assert await timed(acted=False) < 0.2
