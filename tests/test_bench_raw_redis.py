"""bench/raw_redis.py: the pipeline benchmark's hand-written RESP client writes what redis-py
writes, counts every reply (errors too) and follows the database of its URL."""

from __future__ import annotations

import doctest

import pytest
import redis

import bench.raw_redis as raw_redis
from bench.raw_redis import RawSender, count_replies, encode_command


def test_the_doctests_pass() -> None:
    assert doctest.testmod(raw_redis).failed == 0


def test_a_request_is_what_redis_py_packs() -> None:
    packed = b"".join(redis.Connection().pack_command("XADD", "k", "*", "c", '{"é":1}'))
    assert encode_command("XADD", "k", "*", "c", '{"é":1}') == packed


def test_partial_replies_wait_for_the_rest() -> None:
    assert count_replies(b"$5\r\n17-0", 0) == (0, 0, None)
    assert count_replies(b"$-1\r\n$4\r\n17-0\r\n", 0) == (2, 15, None)
    with pytest.raises(ValueError, match="unexpected reply"):
        count_replies(b"+OK\r\n", 0)


async def test_the_sender_adds_every_entry_in_its_database(
    redis_url: str, redis_ns: str, redis_sync: redis.Redis
) -> None:
    sender = RawSender()
    await sender.start(redis_url)
    try:
        stream = f"{redis_ns}:cmd"
        requests = [encode_command("XADD", stream, "*", "c", f"n{i}") for i in range(2500)]
        for i in range(0, len(requests), 1000):
            await sender.send(requests[i : i + 1000])
        await sender.settle(30)
        assert sender.answered == sender.sent == 2500
        entries = redis_sync.xrange(stream)
        assert [e[1][b"c"] for e in entries] == [f"n{i}".encode() for i in range(2500)]

        await sender.send([encode_command("XADD", stream, "not-an-id", "c", "x")])
        with pytest.raises(RuntimeError, match="refused"):
            await sender.settle(30)
    finally:
        await sender.stop()
