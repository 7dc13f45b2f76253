"""The trim of consumed command entries (``services.engine_worker.consumed``) on a real Redis.

Entries are added with explicit ids far in the past (``<n>-0``: the epoch's first seconds), so
that a retention of zero or of a minute covers them, and with ``*`` (now) where the retention
must keep them.  The exact trim (entry by entry) makes the bounds visible; the worker trims
whole nodes (``tests/services/test_engine_worker.py``).
"""

from __future__ import annotations

import asyncio

import redis.asyncio

from services.engine_worker.consumed import ConsumedTrim, Trimmed

GROUP = "engine"


def trimmer(client: redis.asyncio.Redis) -> ConsumedTrim:
    return ConsumedTrim(client, GROUP)


async def stream_of(client: redis.asyncio.Redis, key: str, n: int) -> list[bytes]:
    """``n`` entries with ids ``1-0`` … ``n-0``, and the group ``engine`` at the start."""
    async with client.pipeline(transaction=False) as pipe:
        for i in range(1, n + 1):
            pipe.xadd(key, {"c": f"command {i}"}, id=f"{i}-0")
        await pipe.execute()
    await client.xgroup_create(key, GROUP, id="0")
    return [f"{i}-0".encode() for i in range(1, n + 1)]


async def deliver(client: redis.asyncio.Redis, key: str, count: int, group: str = GROUP) -> None:
    await client.xreadgroup(group, "c1", {key: ">"}, count=count)


async def ids_in(client: redis.asyncio.Redis, key: str) -> list[bytes]:
    return [entry_id for entry_id, _ in await client.xrange(key)]


async def test_entries_acknowledged_by_the_group_go_and_the_rest_stay(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    key = f"{redis_ns}:{{s00}}:cmd"
    ids = await stream_of(redis_client, key, 10)
    await deliver(redis_client, key, 6)  # 1–6 delivered, 7–10 not yet
    await redis_client.xack(key, GROUP, *ids[:3], *ids[4:6])  # 4 still pending
    trim = trimmer(redis_client)
    # deleted 1-3; the backlog is the pending entry 4 and the four not delivered
    assert await trim(key, 0, exact=True) == Trimmed(3, 5)
    assert await ids_in(redis_client, key) == ids[3:]  # from the oldest pending entry on

    await redis_client.xack(key, GROUP, ids[3])  # nothing pending: up to the last delivered
    assert await trim(key, 0, exact=True) == Trimmed(2, 4)
    assert await ids_in(redis_client, key) == ids[5:]
    assert await trim(key, 0, exact=True) == Trimmed(0, 4)  # the undelivered ones stay
    (group,) = await redis_client.xinfo_groups(key)
    assert group["pending"] == 0 and group["last-delivered-id"] == ids[5]


async def test_the_group_furthest_behind_sets_the_bound(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    key = f"{redis_ns}:{{s01}}:cmd"
    ids = await stream_of(redis_client, key, 10)
    await redis_client.xgroup_create(key, "audit", id="0")
    await deliver(redis_client, key, 8)
    await redis_client.xack(key, GROUP, *ids[:8])
    await deliver(redis_client, key, 2, group="audit")  # 1–2 delivered to the other group
    await redis_client.xack(key, "audit", ids[0])  # its entry 2 pending
    assert await trimmer(redis_client)(key, 0, exact=True) == Trimmed(1, 2)  # engine: 9, 10
    assert await ids_in(redis_client, key) == ids[1:]
    assert (await ConsumedTrim(redis_client, "audit")(key, 0)).backlog == 9  # 2 pending, 3–10


async def test_entries_younger_than_the_retention_stay(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    key = f"{redis_ns}:{{s02}}:cmd"
    old = await stream_of(redis_client, key, 3)
    recent = [await redis_client.xadd(key, {"c": f"new {i}"}) for i in range(3)]
    await deliver(redis_client, key, 6)
    await redis_client.xack(key, GROUP, *old, *recent)
    trim = trimmer(redis_client)
    assert await trim(key, 60_000, exact=True) == Trimmed(3, 0)  # the old ones only
    assert await ids_in(redis_client, key) == recent
    await asyncio.sleep(0.01)  # ids are the server's milliseconds: let "now" pass them
    assert await trim(key, 0, exact=True) == Trimmed(2, 0)  # all but the last delivered
    assert await ids_in(redis_client, key) == recent[-1:]


async def test_a_stream_nobody_consumes_is_left_alone(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    key = f"{redis_ns}:{{s03}}:cmd"
    trim = trimmer(redis_client)
    assert await trim(key, 0) == Trimmed(0, None)  # no stream
    await redis_client.xadd(key, {"c": "x"}, id="1-0")
    assert await trim(key, 0, exact=True) == Trimmed(0, None)  # no group
    assert await ids_in(redis_client, key) == [b"1-0"]
