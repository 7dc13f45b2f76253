"""A finished table's side in Redis: finding it, reading all of it, and deleting it.

Each call touches one table's keys or one shard's index (one Redis Cluster slot); what each
function reads and deletes is in ``docs/archive.md`` ("Module notes").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from events.chain import GENESIS_HASH
from services.store.base import Head, StoredEvent, StoreError
from services.store.client import as_text, load_missing
from services.store.codec import decode_packed, unpack_body
from services.store.keys import KeySpace
from services.store.redis_store import RedisEventStore
from services.store.scripts import PACK_ENTRIES_LUA, ReadOnlyScript
from services.tables.stored_parts import RETIRED_PARTS, STORED_PARTS

__all__ = [
    "DELETE_LUA",
    "EXPORT_LUA",
    "Exported",
    "delete_tables",
    "due_tables",
    "export_keys",
    "export_tables",
    "index_finished",
    "table_keys",
]

EXPORT_LUA = (
    "#!lua flags=no-writes\n"
    + PACK_ENTRIES_LUA
    + """
local head = redis.call('HMGET', KEYS[1], 'version', 'hash', 'status')
local out = {head[1] or '', head[2] or '', head[3] or ''}
out[4] = pack_entries(redis.call('XRANGE', KEYS[2], '-', '+'))
local secrets = redis.call('HGETALL', KEYS[3])
for _, v in ipairs(redis.call('HGETALL', KEYS[4])) do secrets[#secrets + 1] = v end
out[5] = secrets
for k = 5, #KEYS do out[k + 1] = redis.call('GET', KEYS[k]) or '' end
return out
"""
)
"""Reads one whole table: KEYS head, events, secret hash, token digests, then the view parts
(``STORED_PARTS``).  Returns {version, hash, status ('' when absent), the packed events
(``READ_LUA``'s framing), the secret hash then the token digests as one flat list (a digest in
both: the tokens hash's last), one value per view key ('' when absent)}."""

DELETE_LUA = """#!lua
local head = redis.call('HMGET', KEYS[1], 'version', 'hash')
if not head[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return -1
end
if head[1] ~= ARGV[2] or head[2] ~= ARGV[3] then return 0 end
redis.call('DEL', KEYS[1], unpack(KEYS, 5))
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return 1
"""
"""Deletes one archived table.  KEYS head, the shard's index, the shard's timers and their
versions (``…:timers:v``), then every other key of the table; ARGV table id, version, hash.
Returns 1 (deleted), 0 (the head moved: nothing deleted) or -1 (no head: only the index entry
went)."""


def table_keys(keys: KeySpace, table_id: str) -> list[str]:
    """KEYS of :data:`DELETE_LUA` for a table: head, index, timers, timer versions, then its
    events, secret hash, token digests, command ids and every view part (stored and
    retired)."""
    shard = keys.shard_of(table_id)
    timers = keys.timers(shard)
    parts = (*STORED_PARTS, *RETIRED_PARTS)
    return [
        keys.head(table_id),
        keys.sealed(shard),
        timers,
        f"{timers}:v",  # the turn clock's versions (services.followers.turn_clock)
        keys.events(table_id),
        keys.secret(table_id),
        keys.tokens(table_id),
        keys.command_ids(table_id),
        *(keys.table_view(table_id, part) for part in parts),
    ]


def export_keys(keys: KeySpace, table_id: str) -> list[str]:
    """KEYS of :data:`EXPORT_LUA` for a table: head, events, secret hash, token digests, view
    parts."""
    views = [keys.table_view(table_id, part) for part in STORED_PARTS]
    head, events = keys.head(table_id), keys.events(table_id)
    return [head, events, keys.secret(table_id), keys.tokens(table_id), *views]


@dataclass(frozen=True)
class Exported:
    """One table as :data:`EXPORT_LUA` read it: head, events, secret hash, stored view parts
    (those present), or ``problem`` when the stored events cannot be decoded."""

    table_id: str
    head: Head
    events: list[StoredEvent]
    secrets: dict[str, str]
    views: dict[str, str]
    problem: str | None = None


def _exported(table_id: str, reply: Sequence[Any]) -> Exported:
    version, digest, status = (as_text(x) for x in reply[:3])
    head = Head(int(version), digest or GENESIS_HASH, status or None) if version else Head()
    flat = [as_text(x) for x in reply[4]]
    secrets = dict(zip(flat[::2], flat[1::2], strict=True))
    views = {part: as_text(raw) for part, raw in zip(STORED_PARTS, reply[5:], strict=True) if raw}
    events: list[StoredEvent] = []
    problem = None
    packed = reply[3] if isinstance(reply[3], bytes) else reply[3].encode("utf-8")
    try:
        decode_packed(table_id, packed, 1, GENESIS_HASH, events)
    except StoreError as exc:  # a stored body the store cannot read
        problem = str(exc)
    return Exported(table_id, head, events, secrets, views, problem)


async def export_tables(client: Redis, keys: KeySpace, table_ids: Sequence[str]) -> list[Exported]:
    """Read whole tables, one script call each, in one pipeline."""
    if not table_ids:
        return []
    script = ReadOnlyScript(client, EXPORT_LUA)
    await load_missing(client, [script])
    async with client.pipeline(transaction=False) as pipe:
        for t in table_ids:
            await script(keys=export_keys(keys, t), args=[], client=pipe)
        replies = await pipe.execute()
    return [_exported(t, reply) for t, reply in zip(table_ids, replies, strict=True)]


async def delete_tables(
    client: Redis, keys: KeySpace, heads: Sequence[tuple[str, Head]]
) -> list[int]:
    """Delete archived tables whose head is still the one given: :data:`DELETE_LUA`'s reply
    for each (1 deleted, 0 head moved, -1 no head)."""
    if not heads:
        return []
    script = client.register_script(DELETE_LUA)
    await load_missing(client, [script])
    async with client.pipeline(transaction=False) as pipe:
        for table_id, head in heads:
            await script(
                keys=table_keys(keys, table_id),
                args=[table_id, head.version, head.hash],
                client=pipe,
            )
        replies = await pipe.execute()
    return [int(r) for r in replies]


async def due_tables(client: Redis, keys: KeySpace, ended_before_ms: int, limit: int) -> list[str]:
    """Tables of every shard's index that ended before ``ended_before_ms``, at most ``limit``
    a shard, oldest first within a shard."""
    async with client.pipeline(transaction=False) as pipe:
        for shard in range(keys.shards):
            pipe.zrangebyscore(keys.sealed(shard), "-inf", f"({ended_before_ms}", 0, limit)
        replies = await pipe.execute()
    return [as_text(member) for members in replies for member in members]


async def index_finished(store: RedisEventStore, chunk: int = 500) -> int:
    """Put into their shard's index the finished tables (head status ``over``) that are not in
    it, scored by their last event's time: the tables that ended before the index was written
    by the appends.  Lists the tables with ``store.tables()``; returns how many it added."""
    added = 0
    batch: list[str] = []
    async for table_id in store.tables():
        batch.append(table_id)
        if len(batch) >= chunk:
            added += await _index_batch(store, batch)
            batch = []
    if batch:
        added += await _index_batch(store, batch)
    return added


async def _index_batch(store: RedisEventStore, table_ids: Sequence[str]) -> int:
    keys, client = store.keys, store.client
    async with client.pipeline(transaction=False) as pipe:
        for t in table_ids:
            pipe.hget(keys.head(t), "status")
            pipe.xrevrange(keys.events(t), "+", "-", count=1)
        replies = await pipe.execute()
    finished: list[tuple[str, int]] = []
    for i, t in enumerate(table_ids):
        status, last = replies[2 * i], replies[2 * i + 1]
        if status != b"over" or not last:
            continue
        entry_id, fields = last[0]
        version = int(as_text(entry_id).split("-")[0])
        try:
            when = unpack_body(t, version, fields.get(b"b", b"")).get("time")
        except StoreError:  # indexed all the same: the archiver says what is wrong with it
            when = 0
        finished.append((t, when if isinstance(when, int) else 0))
    if not finished:
        return 0
    async with client.pipeline(transaction=False) as pipe:
        for t, when in finished:
            pipe.zadd(keys.sealed(keys.shard_of(t)), {t: when}, nx=True)
        added = await pipe.execute()
    return sum(int(n) for n in added)
