"""Moving seat-token digests out of the secret hash, where stores before the tokens hash kept
them beside the deal seeds (``KeySpace.tokens``).

An engine worker runs :func:`move_token_digests` as it starts: one script a table, then a mark
in the namespace's layout hash, so that later starts skip the scan.  Why the two are apart:
``docs/deploy.md`` ("Redis users").
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from services.store.keys import KeySpace
from services.store.redis_store import RedisEventStore
from services.store.scripts import evalsha_many

__all__ = ["LAYOUT_FIELD", "MOVE_LUA", "move_token_digests"]

LAYOUT_FIELD = "tokens"
"""The field of ``KeySpace.layout`` set once every table's digests are in its tokens hash."""

MOVE_LUA = """#!lua
local flat = redis.call('HGETALL', KEYS[1])
local moved = 0
for i = 1, #flat, 2 do
  local field = flat[i]
  if string.sub(field, 1, 6) == 'token:' then
    if not redis.call('HGET', KEYS[2], field) then
      redis.call('HSET', KEYS[2], field, flat[i + 1])
    end
    redis.call('HDEL', KEYS[1], field)
    moved = moved + 1
  end
end
return moved
"""
"""Moves one table's token digests.  KEYS its secret hash, its tokens hash.  A digest already
in the tokens hash is newer (an append wrote it there) and stays.  Returns how many moved."""

BATCH = 500
"""Tables a pipeline of :data:`MOVE_LUA` calls."""


async def move_token_digests(client: Redis, keys: KeySpace, log: Any) -> int:
    """Move every table's token digests from its secret hash to its tokens hash, unless the
    namespace's layout says it was done; return the number of digests moved.

    Safe to run again and from several processes at once: a digest moves once.
    """
    layout = keys.layout()
    if await client.hget(layout, LAYOUT_FIELD) is not None:
        return 0
    script = client.register_script(MOVE_LUA)
    store = RedisEventStore(client, keys)
    moved = tables = 0
    batch: list[str] = []

    async def flush() -> None:
        nonlocal moved
        calls: list[tuple[list[str], list[Any]]] = [
            ([keys.secret(t), keys.tokens(t)], []) for t in batch
        ]
        moved += sum(int(n) for n in await evalsha_many(script, calls))
        batch.clear()

    async for table_id in store.tables():
        batch.append(table_id)
        tables += 1
        if len(batch) == BATCH:
            await flush()
    if batch:
        await flush()
    await client.hset(layout, LAYOUT_FIELD, "1")
    if moved:
        log.info("token digests moved to their own keys", tables=tables, digests=moved)
    return moved
