"""One way to open a Redis client for the services: bytes replies, commands packed in C.

redis-py's asyncio connection packs every command into RESP in Python, argument by argument
(about 19 µs for an append's ~20 arguments on the benchmark machine, 3 µs with hiredis): on the
engine worker's hot path that was 8–9 % of its CPU.  ``connect`` returns an ordinary
``redis.asyncio.Redis`` whose pool makes connections of the same class as redis-py would (TCP,
TLS or Unix socket, from the URL) with ``pack_command``/``pack_commands`` done by
``hiredis.pack_command``.  An argument hiredis cannot pack (a memoryview, say) falls back to
redis-py's own packer, which also raises redis-py's usual error for a wrong type.

``connect(url, call_timeouts=False)`` is the client of the stream consumers (engine worker,
projector; the worker gives FastStream's broker the same options, ``broker_options``: its
``XREADGROUP`` over every owned shard's stream, once a turn, is packed in C as well).
redis-py 8 gives every connection a 5 s socket timeout by default, and pays for it on every
call: each send runs in a task of its own under ``asyncio.wait_for`` and each reply is read
inside an ``asyncio.timeout`` block, about 5–10 µs of CPU per pipelined command on the benchmark
machine (``bench/redis_client.py``), where an append costs Redis 20 µs. A consumer has no use
for a per-call deadline (a slow Redis is waited for; its leases say whether it is still alive),
so its connections have none; a peer that vanishes is still found, by TCP: keepalive probes on
an idle connection (such as one blocked in ``XREADGROUP``) and, while a request is
unacknowledged, ``TCP_USER_TIMEOUT``, both in the kernel at no cost per call. The gateway and
the command-line tools keep redis-py's timeout: a request of a person should fail rather than
wait.
"""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import hiredis
import redis.asyncio
from redis.asyncio.connection import AbstractConnection, Connection, parse_url

__all__ = ["KEEPALIVE", "broker_options", "connect", "packing_in_c", "without_call_timeouts"]

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


def connect(url: str, *, call_timeouts: bool = True, **options: Any) -> redis.asyncio.Redis:
    """Return an asyncio client for ``url`` (bytes replies unless ``options`` say otherwise).

    With ``call_timeouts=False`` no call has a socket timeout and TCP connections carry
    :data:`KEEPALIVE` (see the module docstring); ``options`` still win.
    """
    options.setdefault("decode_responses", False)
    if not call_timeouts:
        options = {**without_call_timeouts(url), **options}
    client = redis.asyncio.Redis.from_url(url, **options)
    pool = client.connection_pool
    pool.connection_class = packing_in_c(pool.connection_class)
    return client
