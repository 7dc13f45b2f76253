"""The feed follower of the bots runner and the clock: what it reads, when its checkpoints move,
and how long it pauses between reads (docs/services.md, ``services/followers/feed.py``)."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from engine.legal import legal_actions
from events.commands import CreateTable, Join
from events.mapping import to_wire_command
from services.followers.feed import SETUP_EVENTS, FeedFollower, Setup, table_setups
from services.settings import Settings
from services.store.keys import KeySpace
from services.store.redis_store import RedisEventStore
from services.tables.service import TableService


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


async def test_a_setup_comes_from_the_events_of_the_creation_alone(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    service = TableService(RedisEventStore(redis_client, keys))
    created = {
        "plain": CreateTable(command_id="create-0001", table_id="plain"),
        "timed": CreateTable(command_id="create-0002", table_id="timed", turn_seconds=30),
        "one-bot": CreateTable(command_id="create-0003", table_id="one-bot", bots={1: "greedy"}),
        "two-bots": CreateTable(
            command_id="create-0004", table_id="two-bots", bots={0: "random", 1: "greedy"}
        ),
    }
    for command in created.values():
        assert (await service.execute(command, None)).ok
    for name in ("Ana", "Bea"):  # the deal starts: the table is read long after its creation
        join = Join(command_id=f"join-{name}-01", table_id="timed", name=name)
        assert (await service.execute(join, None)).ok
    table = await service.load("timed")
    while table.version <= SETUP_EVENTS and table.match and table.match.to_act is not None:
        action = legal_actions(table.match)[0]
        move = to_wire_command(action, "timed", f"move-{table.version:04d}", table.version)
        assert (await service.execute(move, table.match.to_act)).ok
        table = await service.load("timed")
    assert table.version > SETUP_EVENTS
    join = Join(command_id="join-cid-01", table_id="one-bot", name="Cid")
    assert (await service.execute(join, None)).ok
    setups = await table_setups(service.store, [*created, "archived-or-unknown"])
    assert setups == {
        "plain": Setup(bots=False, turn_seconds=None),
        "timed": Setup(bots=False, turn_seconds=30),
        "one-bot": Setup(bots=True, turn_seconds=None),
        "two-bots": Setup(bots=True, turn_seconds=None),
    }  # a table with no event in Redis is left out: the follower loads it
