"""One way to open a Redis client for the services: bytes replies, commands packed in C.

redis-py's asyncio connection packs every command into RESP in Python, argument by argument
(about 19 µs for an append's ~20 arguments on the benchmark machine, 3 µs with hiredis): on the
engine worker's hot path that was 8–9 % of its CPU.  ``connect`` returns an ordinary
``redis.asyncio.Redis`` whose pool makes connections of the same class as redis-py would (TCP,
TLS or Unix socket, from the URL) with ``pack_command``/``pack_commands`` done by
``hiredis.pack_command``.  An argument hiredis cannot pack (a memoryview, say) falls back to
redis-py's own packer, which also raises redis-py's usual error for a wrong type.
"""

from __future__ import annotations

from typing import Any

import hiredis
import redis.asyncio
from redis.asyncio.connection import AbstractConnection

__all__ = ["connect", "packing_in_c"]


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


def connect(url: str, **options: Any) -> redis.asyncio.Redis:
    """Return an asyncio client for ``url`` (bytes replies unless ``options`` say otherwise)."""
    options.setdefault("decode_responses", False)
    client = redis.asyncio.Redis.from_url(url, **options)
    pool = client.connection_pool
    pool.connection_class = packing_in_c(pool.connection_class)
    return client
