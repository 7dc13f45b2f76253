"""``send_packed`` on one Redis: replies in order, error replies in their place, and the calls
of a connection lost on the way sent again by redis-py's pipeline (the cluster's own cases are
in ``tests/services/test_cluster.py``)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, ResponseError

from services.store.client import connect
from services.store.packed import _buffered, key_of, send_packed

pytestmark = pytest.mark.redis


def test_a_script_is_routed_by_its_first_key() -> None:
    assert key_of(("EVALSHA", "abc", 2, "k1", "k2", "arg")) == "k1"
    assert key_of((b"evalsha_ro", "abc", 1, b"k", "arg")) == b"k"
    assert key_of(("XADD", "s", "*", "f", "v")) == "s"


async def test_replies_come_in_order_with_errors_in_place(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    key = f"{redis_ns}:k"
    replies = await send_packed(
        redis_client, [("SET", key, "v"), ("HGET", key, "f"), ("GET", key), ("INCR", key)]
    )
    assert replies[0] == b"OK" and replies[2] == b"v"
    assert isinstance(replies[1], ResponseError) and isinstance(replies[3], ResponseError)


async def test_many_replies_read_from_the_buffer_equal_those_read_one_by_one(
    redis_client: redis.asyncio.Redis, redis_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of replies, some larger than one read of the socket, errors among them: taken
    from the hiredis reader's buffer (``exchange``) they are those redis-py reads one by one."""
    big, small = f"{redis_ns}:big", f"{redis_ns}:small"
    await redis_client.set(big, "x" * 300_000)
    await redis_client.hset(small, mapping={"a": "1", "b": "2"})
    calls: list[tuple[Any, ...]] = []
    for i in range(3000):
        calls.append(("GET", big) if i % 500 == 0 else ("HGET", small, "ab"[i % 2]))
        if i % 700 == 0:
            calls.append(("INCR", small))  # WRONGTYPE, in its place
    calls.append(("HGETALL", small))
    connection = await redis_client.connection_pool.get_connection()
    try:  # the buffer is there to read from (hiredis: a dependency of the project)
        assert _buffered(connection)[0] is not None
    finally:
        await redis_client.connection_pool.release(connection)
    buffered = await send_packed(redis_client, calls)
    monkeypatch.setattr("services.store.packed._buffered", lambda connection: (None, None))
    one_by_one = await send_packed(redis_client, calls)
    assert len(buffered) == len(calls) == len(one_by_one)
    for got, expected in zip(buffered, one_by_one, strict=True):
        if isinstance(expected, ResponseError):
            assert type(got) is type(expected) and str(got) == str(expected)
        else:
            assert got == expected
    assert buffered[0] == b"x" * 300_000 and buffered[2] == b"2"


async def test_the_calls_of_a_lost_connection_go_again_by_the_pipeline(
    redis_client: redis.asyncio.Redis, redis_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"{redis_ns}:n"
    lost: list[int] = []

    async def connection_lost(connection: Any, calls: Any) -> list[Any]:
        lost.append(len(calls))
        await connection.disconnect()
        raise ConnectionError("Connection closed by server.")

    monkeypatch.setattr("services.store.packed.exchange", connection_lost)
    assert await send_packed(redis_client, [("INCR", key), ("GET", key), ("HGET", key, "f")]) == [
        1,
        b"1",
        ANY_ERROR,
    ]
    assert lost == [3]
    with pytest.raises(ConnectionError):  # what the pipeline cannot overcome is raised
        await send_packed(connect("redis://127.0.0.1:1/0", cluster=False), [("GET", key)])


class _AnyError:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResponseError)


ANY_ERROR = _AnyError()
