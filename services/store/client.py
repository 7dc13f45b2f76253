"""One way to open a Redis client for the services: bytes replies, commands packed in C.

``connect`` gives a redis-py client (``RedisCluster`` on a cluster, Sentinel's primary for
``redis+sentinel://``); ``call_timeouts=False`` for the stream consumers.  Why, with figures:
``docs/performance.md`` ("Module notes").
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any, cast
from urllib.parse import urlsplit

import hiredis
import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import (
    AbstractConnection,
    BlockingConnectionPool,
    Connection,
    parse_url,
)
from redis.commands.core import AsyncScript

from services.store.sentinel import SCHEME as SENTINEL
from services.store.sentinel import parse_sentinel_url

__all__ = [
    "KEEPALIVE",
    "Client",
    "broker_options",
    "connect",
    "is_cluster",
    "load_missing",
    "make_broker",
    "packing_in_c",
    "without_call_timeouts",
]

Client = redis.asyncio.Redis | RedisCluster
"""What :func:`connect` returns: one Redis, or a Redis Cluster found from one of its nodes."""

KEEPALIVE: dict[int, int] = {
    option: value
    for name, value in (
        ("TCP_KEEPIDLE", 5),  # seconds idle before the first probe
        ("TCP_KEEPINTVL", 2),  # seconds between probes
        ("TCP_KEEPCNT", 3),  # unanswered probes before the connection is dropped
        ("TCP_USER_TIMEOUT", 15_000),  # ms a sent request may stay unacknowledged
    )
    if (option := getattr(socket, name, None)) is not None
}
"""TCP options of a connection without call timeouts (those this platform has): a dead peer
is noticed within about 11 s when idle and 15 s with a request in flight."""


def _split_name(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Send a command name such as ``"CONFIG GET"`` as two arguments, as redis-py does."""
    first = args[0]
    if isinstance(first, str) and " " in first:
        return (*first.split(), *args[1:])
    if isinstance(first, bytes) and b" " in first:
        return (*first.split(), *args[1:])
    return args


def as_text(value: bytes | str) -> str:
    """The text of a reply field (bytes from a client with ``decode_responses=False``)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


_PACKED: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def packing_in_c(base: type[AbstractConnection]) -> type[AbstractConnection]:
    """Return a subclass of a redis-py connection class whose commands hiredis packs."""
    if base in _PACKED:
        return _PACKED[base]

    class CPacked(base):  # type: ignore[valid-type,misc]
        def pack_command(self, *args: Any) -> list[bytes]:
            try:
                return [hiredis.pack_command(_split_name(args))]
            except TypeError:
                packed: list[bytes] = super().pack_command(*args)
                return packed

        def pack_commands(self, commands: Any) -> list[bytes]:
            out = bytearray()
            for command in commands:
                for chunk in self.pack_command(*command):
                    out += chunk
            return [bytes(out)]

    CPacked.__name__ = CPacked.__qualname__ = f"CPacked{base.__name__}"
    _PACKED[base] = CPacked
    return CPacked


def without_call_timeouts(url: str) -> dict[str, Any]:
    """The connection options of a client without call timeouts for ``url`` (also what the
    engine worker gives FastStream's broker, whose reads block in ``XREADGROUP``)."""
    if urlsplit(url).scheme == "unix":  # a unix socket has no TCP options
        return {"socket_timeout": None}
    return {"socket_timeout": None, "socket_keepalive": True, "socket_keepalive_options": KEEPALIVE}


def broker_options(url: str) -> dict[str, Any]:
    """The connection options of FastStream's ``RedisBroker`` for a stream consumer on ``url``:
    :func:`without_call_timeouts`, and the connection class redis-py would use for the URL (TCP,
    TLS or Unix socket) with its commands packed in C, as :func:`connect` gives its clients."""
    base: type[AbstractConnection] = parse_url(url).get("connection_class", Connection)
    return {**without_call_timeouts(url), "connection_class": packing_in_c(base)}


def make_broker(url: str, **kwargs: Any) -> Any:
    """FastStream's broker for a stream consumer on ``url``, without call timeouts: a
    ``RedisBroker`` packed in C (:func:`broker_options`), a ``RedisClusterBroker`` when ``url``
    is a cluster node, a ``RedisSentinelBroker`` for a ``redis+sentinel://`` URL."""
    from faststream.redis import RedisBroker, RedisClusterBroker, RedisSentinelBroker

    sentinel = parse_sentinel_url(url)
    if sentinel is not None:  # the primary's address comes from the Sentinels
        options = {**without_call_timeouts(url), **sentinel.broker_options(), **kwargs}
        return RedisSentinelBroker("redis://localhost", **options)
    if is_cluster(url):
        return RedisClusterBroker(url, **{**without_call_timeouts(url), **kwargs})
    return RedisBroker(url, **{**broker_options(url), **kwargs})


POOL_SIZE = 512
"""Connections a client opens at most (to each master of a cluster). redis-py 8's default is
100, and its pool then raises ``MaxConnectionsError``: a gateway with 150 busy tables failed
creates and joins, and an engine worker's seals took the connection of its acknowledgement."""
POOL_WAIT_S = 20.0
"""How long a call waits for one of a full pool's connections before it fails."""
NODE_POOL_SIZE = 2048
"""Connections a cluster client opens at most to each master. redis-py's cluster nodes do not
wait for a connection as one Redis's pool does: a call that finds them all out fails at once
with ``MaxConnectionsError`` (``store/unavailable``). A gateway saturated by 2,000 sockets on
three masters had 512 out at once and failed 29–53 of 1,000 tables' commands
(``docs/performance.md``, "Scaling", "Through the gateway")."""

_CLUSTER_MODE: dict[str, bool] = {}


def is_cluster(url: str) -> bool:
    """Whether the server at ``url`` runs in cluster mode (asked once per URL and process).

    Raises redis-py's ``ConnectionError`` when nothing answers (asked again next time).
    """
    known = _CLUSTER_MODE.get(url)
    if known is not None:
        return known
    if urlsplit(url).scheme in ("unix", SENTINEL):  # not a cluster node's address
        _CLUSTER_MODE[url] = False
        return False
    probe = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        enabled = bool(probe.info("cluster").get("cluster_enabled"))
    finally:
        probe.close()
    _CLUSTER_MODE[url] = enabled
    return enabled


def connect(
    url: str, *, call_timeouts: bool = True, cluster: bool | None = None, **options: Any
) -> redis.asyncio.Redis:
    """Return an asyncio client for ``url`` (bytes replies unless ``options`` say otherwise):
    a ``RedisCluster`` when the server there is a cluster node, else a ``Redis``.

    Typed as ``Redis`` either way: the services send only what both clients send alike
    (commands and scripts on one slot, pipelines without transactions); where the cluster
    needs another way, the code asks ``isinstance(client, RedisCluster)``.

    ``cluster`` None asks the server (:func:`is_cluster`, which raises when nothing answers);
    True or False says it. With ``call_timeouts=False`` no call has a socket timeout and TCP
    connections carry :data:`KEEPALIVE` (see the module docstring); ``options`` still win.
    """
    options.setdefault("decode_responses", False)
    if not call_timeouts:
        options = {**without_call_timeouts(url), **options}
    sentinel = parse_sentinel_url(url)
    if sentinel is None and (is_cluster(url) if cluster is None else cluster):
        options.setdefault("max_connections", NODE_POOL_SIZE)
        return cast(redis.asyncio.Redis, _cluster_client(url, options))
    options.setdefault("max_connections", POOL_SIZE)
    if sentinel is not None:
        client = sentinel.client(**options)
    else:  # a call waits for a connection when all are out, where redis-py 8's pool raises
        client = redis.asyncio.Redis.from_pool(
            BlockingConnectionPool.from_url(url, timeout=POOL_WAIT_S, **options)
        )
    pool = client.connection_pool
    pool.connection_class = packing_in_c(pool.connection_class)
    return client


def _cluster_client(url: str, options: dict[str, Any]) -> RedisCluster:
    """A ``RedisCluster`` from one node's ``url`` whose node connections pack in C."""
    client = RedisCluster.from_url(url, **options)
    packed: Any = packing_in_c(client.connection_kwargs["connection_class"])
    client.connection_kwargs["connection_class"] = packed  # the nodes it finds later
    for node in client.startup_nodes:
        node.connection_class = packed
    return client


async def load_missing(client: Client, scripts: Iterable[AsyncScript]) -> None:
    """On a cluster, load into every master the ``scripts`` one of them lacks, before a
    pipeline runs them by EVALSHA: redis-py's cluster pipeline leaves NOSCRIPT to its caller
    (its plain pipeline loads them itself), and a master restarted has none. One Redis: no-op.
    """
    if not isinstance(client, RedisCluster):
        return
    wanted = list(scripts)
    present = await client.script_exists(*(script.sha for script in wanted))
    for script, loaded in zip(wanted, present, strict=True):
        if not loaded:
            await client.script_load(script.script)
