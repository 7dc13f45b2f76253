"""Shard leases and the worker registry: which engine worker decides for which shard.

Acquire, compare-and-renew and release scripts on ``<ns>:{sNN}:lease``, and heartbeats in
``<ns>:workers`` for fair shares; ``docs/services.md`` ("Module notes") has the rules.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Iterable, Sequence
from typing import Any

from redis.asyncio import Redis

from services.store.client import load_missing
from services.store.keys import KeySpace

__all__ = [
    "ACQUIRE_LUA",
    "HEARTBEAT_LUA",
    "PRUNE_LEASES",
    "RELEASE_LUA",
    "RENEW_LUA",
    "ShardLeases",
    "fair_share",
    "heartbeat",
    "lease_key",
    "preference",
    "registry_key",
]

ACQUIRE_LUA = """#!lua
local holder = redis.call('GET', KEYS[1])
if holder == false or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
"""Take a free lease or one our id already holds: KEYS[1] the lease, ARGV[1] our worker id,
ARGV[2] lease ms; 1 if taken."""

RENEW_LUA = """#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
"""Compare-and-renew: KEYS[1] the lease, ARGV[1] our worker id, ARGV[2] lease ms; 1 if renewed."""

RELEASE_LUA = """#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
"""Compare-and-delete: KEYS[1] the lease, ARGV[1] our worker id; 1 if it was ours."""

HEARTBEAT_LUA = """#!lua
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
return redis.call('ZCOUNT', KEYS[1], now - tonumber(ARGV[2]), '+inf')
"""
"""Heartbeat: KEYS[1] the registry, ARGV[1] worker id, ARGV[2] live window ms, ARGV[3] prune
window ms; returns the number of live workers (ourselves included)."""

PRUNE_LEASES = 10
"""Registry entries silent for this many lease periods are removed."""


def lease_key(keys: KeySpace, shard: int) -> str:
    """The lease key of a shard: ``<ns>:{sNN}:lease``."""
    return keys.shard_key(shard, "lease")


def registry_key(keys: KeySpace) -> str:
    """The sorted set of worker heartbeats: ``<ns>:workers``."""
    return f"{keys.ns}:workers"


def fair_share(shards: int, live: int) -> int:
    """The most shards one of ``live`` workers may hold: ``ceil(shards / live)``."""
    return math.ceil(shards / max(live, 1))


def preference(member: str, shards: Iterable[int]) -> list[int]:
    """``shards`` in ``member``'s own order of preference (a hash of its id and the shard), so
    that processes starting together try different free shards first."""
    return sorted(
        shards,
        key=lambda s: hashlib.blake2b(f"{member}/{s}".encode(), digest_size=8).digest(),
    )


async def heartbeat(client: Redis, registry: str, member: str, lease_ms: int) -> int:
    """Record in the sorted set ``registry`` that ``member`` is alive (Redis server time);
    return the number of members seen within one lease period, ``member`` included (>= 1).

    The engine workers use ``<ns>:workers``, the projectors ``<ns>:projectors``."""
    script = client.register_script(HEARTBEAT_LUA)
    live = await script(keys=[registry], args=[member, lease_ms, lease_ms * PRUNE_LEASES])
    return max(int(live), 1)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


class ShardLeases:
    """The leases and heartbeat of one worker (``worker_id``) over the shards of ``keys``."""

    def __init__(self, client: Redis, keys: KeySpace, worker_id: str, lease_ms: int) -> None:
        if lease_ms < 10:
            raise ValueError(f"lease_ms must be >= 10, got {lease_ms}")
        self.client = client
        self.keys = keys
        self.worker_id = worker_id
        self.lease_ms = lease_ms
        self._acquire = client.register_script(ACQUIRE_LUA)
        self._renew = client.register_script(RENEW_LUA)
        self._release = client.register_script(RELEASE_LUA)

    # -- registry -----------------------------------------------------------------------------
    async def heartbeat(self) -> int:
        """Record that this worker is alive; return the number of live workers (>= 1)."""
        return await heartbeat(self.client, registry_key(self.keys), self.worker_id, self.lease_ms)

    async def deregister(self) -> None:
        """Leave the registry (clean shutdown): the others' fair share grows at once."""
        await self.client.zrem(registry_key(self.keys), self.worker_id)

    def fair_share(self, live: int) -> int:
        """The most shards this worker may hold while ``live`` workers run."""
        return fair_share(self.keys.shards, live)

    def preference(self, shards: Iterable[int]) -> list[int]:
        """``shards`` in this worker's own order of preference (see :func:`preference`)."""
        return preference(self.worker_id, shards)

    # -- leases -------------------------------------------------------------------------------
    async def owners(self) -> dict[int, str | None]:
        """The current holder of every shard's lease (None: free)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in range(self.keys.shards):
                pipe.get(lease_key(self.keys, shard))
            replies = await pipe.execute()
        return {shard: _text(value) for shard, value in enumerate(replies)}

    async def acquire(self, shards: Sequence[int]) -> tuple[list[int], float]:
        """Try to take each of ``shards`` (free, or held under our id by a previous process of
        ours); return the ones taken and the monotonic time the requests were sent (each lease
        is valid until that time plus ``lease_ms``)."""
        if not shards:
            return [], time.monotonic()
        sent = time.monotonic()
        await load_missing(self.client, [self._acquire])
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in shards:
                await self._acquire(
                    keys=[lease_key(self.keys, shard)],
                    args=[self.worker_id, self.lease_ms],
                    client=pipe,
                )
            replies = await pipe.execute()
        return [s for s, ok in zip(shards, replies, strict=True) if int(ok)], sent

    async def renew(self, shards: Sequence[int]) -> tuple[dict[int, bool], float]:
        """Extend our lease of each of ``shards``; return which are still ours and the
        monotonic time the renewals were sent."""
        sent = time.monotonic()
        if not shards:
            return {}, sent
        await load_missing(self.client, [self._renew])
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in shards:
                await self._renew(
                    keys=[lease_key(self.keys, shard)],
                    args=[self.worker_id, self.lease_ms],
                    client=pipe,
                )
            replies = await pipe.execute()
        return {s: bool(int(r)) for s, r in zip(shards, replies, strict=True)}, sent

    async def release(self, shards: Sequence[int]) -> list[int]:
        """Give back our lease of each of ``shards``; return the ones that were still ours."""
        if not shards:
            return []
        await load_missing(self.client, [self._release])
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in shards:
                await self._release(
                    keys=[lease_key(self.keys, shard)], args=[self.worker_id], client=pipe
                )
            replies = await pipe.execute()
        return [s for s, r in zip(shards, replies, strict=True) if int(r)]
