"""Moving finished tables out of Redis: write, read back, verify, then delete (``Archiver``).

A table's keys go only after its archived copy was read back and checked, so a rerun after a
kill finishes the job; the steps are in ``docs/archive.md``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from services.archive.folder import Archive
from services.archive.pause import pause_point
from services.archive.prepare import prepare
from services.archive.record import ArchivedTable, ArchiveError, check_chain, pack, unpack
from services.archive.redis_tables import delete_tables, due_tables, export_tables
from services.lobby import listing
from services.log import get_logger
from services.store.base import Head
from services.store.redis_store import RedisEventStore

__all__ = ["ArchiveTally", "Archiver", "Refusal"]

_log = get_logger("archive")


@dataclass(frozen=True)
class Refusal:
    """A table left in Redis, with the reason code and a sentence."""

    table_id: str
    code: str
    reason: str

    def __str__(self) -> str:
        return f"{self.table_id}: {self.code}: {self.reason}"


@dataclass
class ArchiveTally:
    """What a run did: tables archived (written now, or found written by an earlier run),
    tables gone from Redis before their turn, heads that moved, refusals, bytes and events."""

    written: int = 0
    kept: int = 0
    gone: int = 0
    moved: list[str] = field(default_factory=list)
    events: int = 0
    bytes: int = 0
    seconds: float = 0.0
    refused: list[Refusal] = field(default_factory=list)

    @property
    def archived(self) -> int:
        """Tables deleted from Redis with their copy verified in the archive."""
        return self.written + self.kept

    def merge(self, other: ArchiveTally) -> None:
        """Add another run's counts to these."""
        self.written += other.written
        self.kept += other.kept
        self.gone += other.gone
        self.moved += other.moved
        self.events += other.events
        self.bytes += other.bytes
        self.refused += other.refused

    def as_dict(self) -> dict[str, Any]:
        """The tally as JSON-ready values."""
        return {
            "ok": not self.refused and not self.moved,
            "archived": self.archived,
            "written": self.written,
            "kept": self.kept,
            "gone": self.gone,
            "moved": list(self.moved),
            "refused": [
                {"table_id": r.table_id, "code": r.code, "reason": r.reason} for r in self.refused
            ],
            "events": self.events,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "tables_per_s": round(self.archived / self.seconds, 1) if self.seconds > 0 else 0.0,
        }


@dataclass(frozen=True)
class _Ready:
    """A table whose copy is in the archive, to verify: ``fresh`` when written by this run."""

    table: ArchivedTable
    fresh: bool
    size: int


class Archiver:
    """Moves finished tables from a Redis store into an archive (see the module docstring)."""

    def __init__(self, store: RedisEventStore, archive: Archive, *, batch: int = 100) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.store = store
        self.archive = archive
        self.batch = batch

    async def archive_due(self, ended_before_ms: int, limit: int | None = None) -> ArchiveTally:
        """Archive the indexed tables that ended before ``ended_before_ms`` (at most ``limit``),
        batch after batch until none is left; a refused table is not tried again this call."""
        started = time.perf_counter()
        tally = ArchiveTally()
        skip: set[str] = set()
        while limit is None or tally.archived < limit:
            per_shard = self.batch + len(skip)
            due = await due_tables(self.store.client, self.store.keys, ended_before_ms, per_shard)
            todo = [t for t in due if t not in skip]
            if limit is not None:
                todo = todo[: limit - tally.archived]
            if not todo:
                break
            done = await self.archive_tables(todo)
            skip.update(r.table_id for r in done.refused)
            skip.update(done.moved)
            tally.merge(done)
        tally.seconds = time.perf_counter() - started
        return tally

    async def archive_tables(self, table_ids: Sequence[str]) -> ArchiveTally:
        """Archive these tables, ``batch`` at a time."""
        started = time.perf_counter()
        tally = ArchiveTally()
        for i in range(0, len(table_ids), self.batch):
            part = await self._batch(table_ids[i : i + self.batch])
            tally.merge(part)
        tally.seconds = time.perf_counter() - started
        return tally

    async def _batch(self, table_ids: Sequence[str]) -> ArchiveTally:
        """Steps 1 to 5 of the module docstring for one batch of tables."""
        tally = ArchiveTally()
        exported = await export_tables(self.store.client, self.store.keys, table_ids)
        pause_point("exported")
        prepared: list[ArchivedTable] = []
        forget: list[tuple[str, Head]] = []  # no longer in Redis: its index entry goes
        for read in exported:
            if read.head.version == 0:
                tally.gone += 1
                forget.append((read.table_id, read.head))
                continue
            try:
                prepared.append(prepare(read))
            except ArchiveError as error:
                self._refuse(tally, read.table_id, error)
        ready = await self._copies(prepared, tally)
        verified = [r for r in ready if self._verified(r, tally)]
        await self._delete(verified, forget, tally)
        _log.debug("archived batch", tables=len(table_ids), **tally.as_dict())
        return tally

    async def _copies(self, prepared: Sequence[ArchivedTable], tally: ArchiveTally) -> list[_Ready]:
        """Step 3 for each table, in threads: each waits for its own fsyncs, not the others'."""
        copies = await asyncio.gather(
            *(asyncio.to_thread(self._store_copy, table) for table in prepared),
            return_exceptions=True,
        )
        ready: list[_Ready] = []
        for table, copy in zip(prepared, copies, strict=True):
            if isinstance(copy, ArchiveError):
                self._refuse(tally, table.table_id, copy)
            elif isinstance(copy, BaseException):
                raise copy
            else:
                ready.append(copy)
        return ready

    async def _delete(
        self, verified: Sequence[_Ready], forget: Sequence[tuple[str, Head]], tally: ArchiveTally
    ) -> None:
        """Step 5: delete the verified tables (and the index entries of tables already gone)."""
        heads = [(r.table.table_id, r.table.head) for r in verified]
        replies = await delete_tables(self.store.client, self.store.keys, [*heads, *forget])
        pause_point("deleted")
        gone = [t for (t, _), reply in zip(heads, replies, strict=False) if reply == 1]
        await listing.forget(self.store.client, self.store.keys, gone + [t for t, _ in forget])
        for r, reply in zip(verified, replies, strict=False):
            if reply != 1:  # the head moved (or went) after the copy was read: nothing deleted
                tally.moved.append(r.table.table_id)
                _log.error("table changed while archived", table=r.table.table_id, reply=reply)
                continue
            if r.fresh:
                tally.written += 1
            else:
                tally.kept += 1
            tally.events += r.table.version
            tally.bytes += r.size

    def _store_copy(self, table: ArchivedTable) -> _Ready:
        """Keep a verified copy an earlier run wrote, else write one (raises on a conflict)."""
        t = table.table_id
        existing = self.archive.get(t)
        if existing is not None:
            try:
                found = unpack(existing)
                check_chain(found)
            except ArchiveError as error:  # a damaged file: Redis still has the table
                _log.warning("archived file damaged, written again", table=t, code=error.code)
            else:
                if found.head != table.head or found.table_id != t:
                    raise ArchiveError(
                        "archive/conflict",
                        f"the archive holds another table {t} (version {found.version}, "
                        f"hash {found.hash[:12]}…) than Redis (version {table.version}, "
                        f"hash {table.hash[:12]}…)",
                    )
                self.archive.durable(t)
                return _Ready(table, False, len(existing))
        data = pack(table)
        self.archive.put(t, data)
        return _Ready(table, True, len(data))

    def _verified(self, ready: _Ready, tally: ArchiveTally) -> bool:
        """Read the copy back from the archive and check it (a failure is a refusal)."""
        table = ready.table
        try:
            data = self.archive.get(table.table_id)
            if data is None:
                raise ArchiveError("archive/lost", "the written file cannot be read back")
            copy = unpack(data)
            check_chain(copy, bodies=not ready.fresh)  # a fresh copy must equal what was meant
            if (copy != table) if ready.fresh else (copy.head != table.head):
                raise ArchiveError("archive/copy_differs", "the file read back is not the table")
        except ArchiveError as error:
            self._refuse(tally, table.table_id, error)
            return False
        pause_point("verified")
        return True

    @staticmethod
    def _refuse(tally: ArchiveTally, table_id: str, error: ArchiveError) -> None:
        tally.refused.append(Refusal(table_id, error.code, str(error)))
        _log.warning("table not archived", table=table_id, code=error.code, reason=str(error))
