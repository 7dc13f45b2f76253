"""Reading tables from a store for the audit: heads and events in batches (:func:`load_tables`),
and the fast path's packed read of Redis (:func:`read_packed`, ``_PackedReads``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from events.chain import GENESIS_HASH
from services.audit.full_audit import audit_table
from services.audit.results import NO_TABLE, Failure, StoredLike, TableReport
from services.store.client import load_missing
from services.store.scripts import ReadOnlyScript

if TYPE_CHECKING:
    from services.store import RedisEventStore
    from services.store.base import EventStore, Head


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """A table as read for the audit: its events, its head, and where the store could not
    decode a stored body (``(version, reason)``; the events stop before it)."""

    table_id: str
    events: Sequence[StoredLike]
    head: Head
    corrupt: tuple[int, str] | None = None

    def audit(self) -> TableReport:
        """Return the audit of this table."""
        if not self.events and self.head.version == 0 and self.corrupt is None:
            failure = Failure(self.table_id, 0, None, NO_TABLE, "the store has no such table")
            return TableReport(self.table_id, 0, failure=failure)
        return audit_table(self.table_id, self.events, self.head, self.corrupt)


async def read_heads(store: EventStore, table_ids: Sequence[str]) -> dict[str, Head]:
    """The heads of many tables: one pipeline on Redis, one call each on other stores."""
    from services.store import Head, RedisEventStore

    if not isinstance(store, RedisEventStore):
        return {t: await store.head(t) for t in table_ids}
    async with store.client.pipeline(transaction=False) as pipe:
        for t in table_ids:
            pipe.hmget(store.keys.head(t), ["version", "hash", "status"])
        replies = await pipe.execute()
    heads: dict[str, Head] = {}
    for t, (version, digest, status) in zip(table_ids, replies, strict=True):
        heads[t] = (
            Head()
            if version is None
            else Head(
                int(version),
                digest.decode("ascii") if digest else GENESIS_HASH,
                status.decode("utf-8") if status is not None else None,
            )
        )
    return heads


async def load_tables(store: EventStore, table_ids: Sequence[str]) -> list[LoadedTable]:
    """Read many tables for the audit: their heads, then their events (``read_many``).

    A table whose events run past its head moved on while it was read: it is read once more.
    A table whose stored body the store cannot decode is read event by event up to it.
    """
    from services.store import StoreError

    heads = await read_heads(store, table_ids)
    try:
        stored: dict[str, Any] = await store.read_many(table_ids)
    except StoreError:
        stored = {}
    loaded: list[LoadedTable] = []
    for t in table_ids:
        if t not in stored:
            loaded.append(await _read_carefully(store, t, heads[t]))
            continue
        events = stored[t]
        head = heads[t]
        if events and events[-1].version > head.version:  # appended to while being read
            head = await store.head(t)
            events = await store.read(t)
        loaded.append(LoadedTable(t, events, head))
    return loaded


async def _read_carefully(store: EventStore, table_id: str, head: Head) -> LoadedTable:
    """Read a table whose batch read failed: the events up to the first body it cannot decode."""
    from services.store import RedisEventStore, StoredEvent, StoreError
    from services.store.redis_store import unpack_body

    try:
        return LoadedTable(table_id, await store.read(table_id), head)
    except StoreError as error:
        if not isinstance(store, RedisEventStore):
            return LoadedTable(table_id, [], head, (1, str(error)))
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await store.client.xrange(
        store.keys.events(table_id)
    )  # type: ignore[assignment]
    events: list[StoredEvent] = []
    prev = GENESIS_HASH
    for entry_id, fields in entries:
        version = int(entry_id.split(b"-")[0])
        digest = fields.get(b"h", b"").hex()
        try:
            body = unpack_body(table_id, version, fields.get(b"b", b""))
        except StoreError as error:
            return LoadedTable(table_id, events, head, (version, str(error)))
        events.append(StoredEvent(table_id, version, body, digest, prev))
        prev = digest
    return LoadedTable(table_id, events, head)


_FAST_READ_LUA = """#!lua flags=no-writes
local head = redis.call('HMGET', KEYS[2], 'version', 'hash', 'status')
local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])
local hs, bs = {}, {}
for i = 1, #e do
  local id, f = e[i][1], e[i][2]
  if id ~= i .. '-1' or #f ~= 4 then return {head[1], head[2], head[3], -1} end
  if f[1] == 'b' and f[3] == 'h' then
    bs[i], hs[i] = f[2], f[4]
  elseif f[1] == 'h' and f[3] == 'b' then
    bs[i], hs[i] = f[4], f[2]
  else
    return {head[1], head[2], head[3], -1}
  end
end
return {head[1], head[2], head[3], #e, table.concat(hs), table.concat(bs, '\\30')}
"""
"""The fast path's read of one table (read-only): its head (version, hash, status), then the
number of entries, their raw hashes one after the other and their stored bodies joined by 0x1E,
read in one step, so head and events agree.  The count is -1 when an entry is not the ``n-1``
of version ``n`` with exactly the fields ``b`` and ``h``: the store's own read takes it then.
KEYS: the table's stream and head; ARGV: the most entries to read."""

FAST_READ_MAX = 100_000
"""Longer tables are read by the store's own read, in chunks."""


@functools.cache
def _head_class() -> type[Head]:
    from services.store.base import Head  # not at the top: it imports redis

    return Head


def _head_of(version: bytes | None, digest: bytes | None, status: bytes | None) -> Head:
    """A head as ``read_heads`` makes it from the reply of HMGET version hash status."""
    head = _head_class()
    if version is None:
        return head()
    return head(
        int(version),
        digest.decode("ascii") if digest else GENESIS_HASH,
        status.decode("utf-8") if status is not None else None,
    )


async def read_packed(store: RedisEventStore, table_ids: Sequence[str]) -> list[list[Any]]:
    """The replies of ``_FAST_READ_LUA`` for many tables, in one pipeline."""
    script = getattr(store, "_audit_read", None)
    if script is None:
        script = ReadOnlyScript(store.client, _FAST_READ_LUA)
        setattr(store, "_audit_read", script)  # noqa: B010 - cached on the store it reads
    keys = store.keys
    await load_missing(store.client, [script])
    async with store.client.pipeline(transaction=False) as pipe:
        for t in table_ids:
            await script(keys=[keys.events(t), keys.head(t)], args=[FAST_READ_MAX], client=pipe)
        replies: list[list[Any]] = await pipe.execute()
    return replies


class _PackedReads:
    """The fast path's reads on one connection of the store's client: a batch's request is sent
    (:meth:`send`) before the batch before it is checked, so Redis runs it meanwhile, and its
    replies are read afterwards (:meth:`receive`; None if Redis refused the script: then
    :func:`read_packed` reads the batch again)."""

    def __init__(self, store: RedisEventStore) -> None:
        self.store = store
        self.sha: str | None = None

    async def send(self, table_ids: Sequence[str]) -> tuple[Any, int]:
        client = self.store.client
        if self.sha is None:
            self.sha = str(await client.script_load(_FAST_READ_LUA))
        keys = self.store.keys
        commands = [
            ("EVALSHA_RO", self.sha, 2, keys.events(t), keys.head(t), FAST_READ_MAX)
            for t in table_ids
        ]
        pool = client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await connection.send_packed_command(connection.pack_commands(commands))
        except BaseException:
            await self.drop(connection)
            raise
        return connection, len(commands)

    async def receive(self, sent: tuple[Any, int]) -> list[list[Any]] | None:
        from redis.exceptions import ResponseError

        connection, count = sent
        try:
            replies = [await connection.read_response() for _ in range(count)]
        except ResponseError:  # NOSCRIPT (a flushed script cache), …: the rest is unread
            await self.drop(connection)
            return None
        except BaseException:
            await self.drop(connection)
            raise
        await self.store.client.connection_pool.release(connection)
        return replies

    async def drop(self, connection: Any) -> None:
        """Close a connection whose replies are not all read, and give it back."""
        self.sha = None
        try:
            await connection.disconnect()
        finally:
            await self.store.client.connection_pool.release(connection)
