"""Reading finished tables back from the archive, for the gateway, replay and the audit.

:class:`ArchiveReader` reads and decodes archived tables (the last few kept in memory).
:class:`ArchiveBackedStore` is an event store that reads Redis first and, for a table Redis no
longer holds, the archive: same heads, same events, so whoever reads through it (the gateway's
routes, its live rooms, ``conquian replay``) answers for an archived table exactly as it did
before the table left Redis.  Everything that writes goes to Redis.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from services.archive.folder import Archive, FolderArchive
from services.archive.record import ArchivedTable, unpack
from services.lru import Lru
from services.store.base import (
    AppendRequest,
    AppendResult,
    EventStore,
    FeedEntry,
    Head,
    NewEvent,
    StoredEvent,
    VersionConflict,
    check_read_many,
)
from services.store.redis_store import RedisEventStore

__all__ = ["ArchiveBackedStore", "ArchiveReader", "open_archive"]


def open_archive(folder: str | None, namespace: str) -> FolderArchive | None:
    """The folder archive of a deployment (``CONQUIAN_ARCHIVE_DIR``), None when it has none."""
    return FolderArchive(folder, namespace) if folder else None


@dataclass
class _Entry:
    table: ArchivedTable
    events: list[StoredEvent] = field(default_factory=list)


class ArchiveReader:
    """Archived tables by id, decoded; the ``cache_size`` most recently read kept in memory
    (an archived table never changes).  A file that cannot be decoded raises ``ArchiveError``."""

    def __init__(self, archive: Archive, cache_size: int = 256) -> None:
        self.archive = archive
        self._cache: Lru[str, _Entry] = Lru(cache_size)

    def _entry(self, table_id: str) -> _Entry | None:
        entry = self._cache.recall(table_id)
        if entry is None:
            data = self.archive.get(table_id)
            if data is None:
                return None
            entry = _Entry(unpack(data))
            self._cache.remember(table_id, entry)
        return entry

    def table(self, table_id: str) -> ArchivedTable | None:
        """The archived table, None when it is not archived."""
        entry = self._entry(table_id)
        return None if entry is None else entry.table

    def events(self, table_id: str) -> list[StoredEvent] | None:
        """The archived table's events as the store reads them, None when it is not archived."""
        entry = self._entry(table_id)
        if entry is None:
            return None
        if not entry.events and entry.table.events:
            entry.events = entry.table.stored_events()
        return entry.events


class ArchiveBackedStore(EventStore):
    """Redis first, the archive for a table Redis does not hold (see the module docstring)."""

    keeps_views = True

    def __init__(self, live: RedisEventStore, reader: ArchiveReader) -> None:
        self.live = live
        self.reader = reader
        self.keys = live.keys

    # -- writes: Redis ------------------------------------------------------------------------
    async def append(
        self,
        table_id: str,
        expected_version: int,
        expected_hash: str,
        command_id: str,
        events: Sequence[NewEvent] = (),
        result: bytes | str = b"",
        *,
        secrets: Mapping[str, str] | None = None,
        status: str | None = None,
        views: Mapping[str, str] | None = None,
        taken_by: Sequence[str] = (),
        taken_result: bytes | str = b"",
    ) -> AppendResult:
        return await self.live.append(
            table_id,
            expected_version,
            expected_hash,
            command_id,
            events,
            result,
            secrets=secrets,
            status=status,
            views=views,
            taken_by=taken_by,
            taken_result=taken_result,
        )

    async def append_many(
        self, requests: Sequence[AppendRequest]
    ) -> list[AppendResult | VersionConflict]:
        return await self.live.append_many(requests)

    async def seal(self, table_id: str) -> None:
        await self.live.seal(table_id)

    # -- reads: Redis, then the archive -------------------------------------------------------
    async def head(self, table_id: str) -> Head:
        head = await self.live.head(table_id)
        if head.version == 0:
            archived = self.reader.table(table_id)
            if archived is not None:
                return archived.head
        return head

    async def read(
        self, table_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        events = await self.live.read(table_id, from_version, to_version)
        return events or self._archived(table_id, from_version, to_version)

    def _archived(
        self, table_id: str, from_version: int, to_version: int | None
    ) -> list[StoredEvent]:
        """Events ``from_version..to_version`` of an archived table ([] for none)."""
        archived = self.reader.events(table_id)
        if archived is None:
            return []
        end = len(archived) if to_version is None else min(to_version, len(archived))
        return archived[from_version - 1 : end]

    async def read_many(
        self,
        table_ids: Sequence[str],
        first: int | None = None,
        after: Mapping[str, int] | None = None,
    ) -> dict[str, list[StoredEvent]]:
        since = check_read_many(first, after)
        found = await self.live.read_many(table_ids, first, after)
        for t, events in found.items():
            if not events:  # an archived table, or nothing after ``after``
                found[t] = self._archived(t, since.get(t, 0) + 1, first)
        return found

    async def read_feed(self, shard: int, after: str = "0-0", count: int = 100) -> list[FeedEntry]:
        return await self.live.read_feed(shard, after, count)

    async def tables(self) -> AsyncIterator[str]:
        seen: set[str] = set()
        async for table_id in self.live.tables():
            seen.add(table_id)
            yield table_id
        for table_id in self.reader.archive.list():
            if table_id not in seen:
                yield table_id

    async def command_result(self, table_id: str, command_id: str) -> bytes | None:
        return await self.live.command_result(table_id, command_id)

    async def secrets(self, table_id: str) -> dict[str, str]:
        """The secret hash in Redis; for an archived table, its seat token hashes (its seeds
        are in its ``deal_revealed`` events)."""
        found = await self.live.secrets(table_id)
        if found:
            return found
        archived = self.reader.table(table_id)
        return {} if archived is None else dict(archived.tokens)
