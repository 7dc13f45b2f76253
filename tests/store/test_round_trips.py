"""``RoundTrips``: tasks asking at the same moment share one pipeline and get their own replies."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, ResponseError

from services.store.client import connect
from services.store.round_trips import RoundTrips


async def test_concurrent_tasks_share_one_round_trip_and_get_their_own_replies(
    redis_url: str, redis_ns: str
) -> None:
    client = connect(redis_url)
    try:
        trips = RoundTrips(client)

        async def task(i: int) -> list[object]:
            key = f"{redis_ns}:n{i}"
            return await trips.run([("SET", key, i), ("INCRBY", key, 10 * i), ("GET", key)])

        replies = await asyncio.gather(*(task(i) for i in range(20)))
        assert replies == [[True, 11 * i, str(11 * i).encode()] for i in range(20)]
        assert trips.round_trips == 1
        later = await trips.run([("GET", f"{redis_ns}:n3")])
        assert later == [b"33"] and trips.round_trips == 2
        assert await trips.run([]) == [] and trips.round_trips == 2
    finally:
        await client.aclose()


async def test_an_error_reply_is_returned_to_its_task_only(redis_url: str, redis_ns: str) -> None:
    client = connect(redis_url)
    try:
        trips = RoundTrips(client)
        key = f"{redis_ns}:text"
        bad, good = await asyncio.gather(
            trips.run([("SET", key, "x"), ("INCR", key)]),
            trips.run([("PING",)]),
        )
        assert bad[0] is True and isinstance(bad[1], ResponseError)
        assert good == [True]
    finally:
        await client.aclose()


async def test_a_failed_round_trip_fails_every_task_in_it() -> None:
    client = redis.asyncio.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    try:
        trips = RoundTrips(client)
        outcomes = await asyncio.gather(
            trips.run([("PING",)]), trips.run([("PING",)]), return_exceptions=True
        )
        assert all(isinstance(o, ConnectionError) for o in outcomes)
        with pytest.raises(ConnectionError):  # and the next one tries again
            await trips.run([("PING",)])
    finally:
        await client.aclose()


async def test_a_cancelled_task_does_not_disturb_the_others(redis_url: str, redis_ns: str) -> None:
    client = connect(redis_url)
    try:
        trips = RoundTrips(client)
        gone = asyncio.create_task(trips.run([("SET", f"{redis_ns}:a", 1)]))
        kept = asyncio.create_task(
            trips.run([("SET", f"{redis_ns}:b", 2), ("GET", f"{redis_ns}:b")])
        )
        await asyncio.sleep(0)
        gone.cancel()
        assert await kept == [True, b"2"]
        assert gone.cancelled()
    finally:
        await client.aclose()
