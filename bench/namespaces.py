"""The benchmarks' throw-away key namespaces on a shared Redis: deleted by prefix, never FLUSHDB."""

from __future__ import annotations

import redis.asyncio


async def delete_namespace(client: redis.asyncio.Redis, ns: str) -> None:
    """UNLINK every key under ``<ns>:``, a thousand at a time."""
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{ns}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)
