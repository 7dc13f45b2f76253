"""``services.store.client.connect``: the same bytes on the wire as redis-py, packed in C; the
consumers' client without call timeouts."""

from __future__ import annotations

import asyncio
import socket

import pytest
import redis.asyncio
from faststream.redis import RedisBroker
from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection
from redis.exceptions import DataError

from services.store.client import (
    KEEPALIVE,
    broker_options,
    connect,
    packing_in_c,
    without_call_timeouts,
)

ARGUMENT_LISTS = [
    ("SET", "k", "v"),
    ("EVALSHA", "a" * 40, 3, b"{s01}:t:x:ev", b"{s01}:t:x:head", b"{s01}:feed", -1, 2.5, "é"),
    ("CONFIG GET", "maxmemory"),
    (b"CLIENT SETNAME", b"name"),
    ("SET", "big", b"x" * 200_000),
    ("SET", "view", memoryview(b"a view")),
]


@pytest.mark.parametrize("args", ARGUMENT_LISTS, ids=lambda a: str(a[0]))
def test_packs_what_redis_py_packs(args: tuple[object, ...]) -> None:
    ours, theirs = packing_in_c(Connection)(), Connection()
    assert b"".join(ours.pack_command(*args)) == b"".join(theirs.pack_command(*args))


def test_pipelines_pack_what_redis_py_packs() -> None:
    ours, theirs = packing_in_c(Connection)(), Connection()
    packed = ours.pack_commands(ARGUMENT_LISTS)
    assert b"".join(packed) == b"".join(theirs.pack_commands(ARGUMENT_LISTS))


def test_a_wrong_argument_type_gets_redis_pys_error() -> None:
    with pytest.raises(DataError):
        packing_in_c(Connection)().pack_command("SET", "k", None)


def test_keeps_the_connection_class_the_url_asks_for() -> None:
    unix = connect("unix:///tmp/nowhere.sock")
    tcp = connect("redis://127.0.0.1:1/0", cluster=False)  # nothing there to ask
    assert issubclass(unix.connection_pool.connection_class, UnixDomainSocketConnection)
    assert issubclass(tcp.connection_pool.connection_class, Connection)
    assert packing_in_c(Connection) is tcp.connection_pool.connection_class


async def test_commands_and_pipelines_round_trip(redis_url: str, redis_ns: str) -> None:
    client = connect(redis_url)
    try:
        assert isinstance(client, redis.asyncio.Redis)
        await client.set(f"{redis_ns}:a", "é" * 3)
        async with client.pipeline(transaction=False) as pipe:
            pipe.set(f"{redis_ns}:b", b"\x00\xff" * 50_000)
            pipe.get(f"{redis_ns}:a")
            pipe.strlen(f"{redis_ns}:b")
            replies = await pipe.execute()
        assert replies == [True, "é".encode() * 3, 100_000]
        assert await client.config_get("maxmemory")  # a two-word command name
    finally:
        await client.aclose()


async def test_a_client_without_call_timeouts_leaves_dead_peers_to_tcp(redis_url: str) -> None:
    """The stream consumers' client: no socket timeout on any call (no task and no timer per
    command), keepalive probes and a user timeout on its TCP sockets instead."""
    plain, consumer = connect(redis_url), connect(redis_url, call_timeouts=False)
    try:
        for client in (plain, consumer):
            assert await client.ping()
        held = await plain.connection_pool.get_connection()
        assert held.socket_timeout == 5  # redis-py's default, kept for requests of people
        await plain.connection_pool.release(held)
        conn = await consumer.connection_pool.get_connection()
        try:
            assert conn.socket_timeout is None
            sock = conn._writer.transport.get_extra_info("socket")
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                for option, value in KEEPALIVE.items():
                    assert sock.getsockopt(socket.IPPROTO_TCP, option) == value
        finally:
            await consumer.connection_pool.release(conn)
    finally:
        await plain.aclose()
        await consumer.aclose()


def test_a_unix_socket_client_without_call_timeouts_gets_no_tcp_options() -> None:
    pool = connect("unix:///tmp/nowhere.sock", call_timeouts=False).connection_pool
    assert pool.connection_kwargs["socket_timeout"] is None
    assert "socket_keepalive" not in pool.connection_kwargs
    assert pool.make_connection().socket_timeout is None  # the options fit the class


def test_the_options_without_call_timeouts_suit_the_url() -> None:
    tcp = without_call_timeouts("redis://127.0.0.1:6379/0")
    assert tcp == {
        "socket_timeout": None,
        "socket_keepalive": True,
        "socket_keepalive_options": KEEPALIVE,
    }
    assert without_call_timeouts("unix:///tmp/r.sock?db=0") == {"socket_timeout": None}
    assert {socket.TCP_KEEPIDLE, socket.TCP_KEEPINTVL, socket.TCP_KEEPCNT} <= KEEPALIVE.keys()


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("redis://127.0.0.1:6379/0", Connection),
        ("rediss://127.0.0.1:6380/0", SSLConnection),
        ("unix:///tmp/r.sock?db=0", UnixDomainSocketConnection),
    ],
)
def test_a_brokers_options_keep_the_urls_connection_packed_in_c(
    url: str, base: type[Connection]
) -> None:
    options = broker_options(url)
    assert options["connection_class"] is packing_in_c(base)
    assert {k: options[k] for k in without_call_timeouts(url)} == without_call_timeouts(url)


async def test_a_broker_with_those_options_reads_through_the_packed_connection(
    redis_url: str, redis_ns: str
) -> None:
    broker = RedisBroker(redis_url, apply_types=False, **broker_options(redis_url))
    client = await broker.connect()
    try:
        stream = f"{redis_ns}:stream"
        await client.xadd(stream, {"f": "v"})
        assert [entry[1] for entry in await client.xrange(stream)] == [{b"f": b"v"}]
        connection = await client.connection_pool.get_connection()
        try:
            assert type(connection) is packing_in_c(Connection)
        finally:
            await client.connection_pool.release(connection)
    finally:
        await broker.stop()


async def test_a_full_pool_makes_a_call_wait_for_a_connection(
    redis_url: str, redis_ns: str
) -> None:
    """redis-py 8's pool raised MaxConnectionsError past its size: a gateway with more busy
    requests than connections failed them. The services' pool waits for one instead."""
    client = connect(redis_url, max_connections=2)
    try:
        blocked = [client.blpop([f"{redis_ns}:none"], timeout=0.3) for _ in range(5)]
        assert await asyncio.gather(*blocked) == [None] * 5  # five calls through two connections
        assert len(client.connection_pool._in_use_connections) == 0
    finally:
        await client.aclose()
