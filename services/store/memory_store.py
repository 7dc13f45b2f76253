"""The event store in memory: the same interface and behaviour as the Redis store, for tests and
for running the engine without Redis.  Every append runs without awaiting, so it is atomic with
respect to other coroutines of the same event loop (it is not thread-safe)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from .base import (
    GENESIS_HASH,
    AppendResult,
    EventStore,
    FeedEntry,
    Head,
    NewEvent,
    StoredEvent,
    VersionConflict,
    check_append_args,
    prepare_events,
)
from .keys import KeySpace, check_table_id

__all__ = ["MemoryEventStore"]


@dataclass
class _Table:
    events: list[StoredEvent] = field(default_factory=list)
    status: str | None = None
    has_head: bool = False
    secrets: dict[str, str] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)

    @property
    def last_hash(self) -> str:
        return self.events[-1].hash if self.events else GENESIS_HASH


@dataclass(frozen=True)
class _Command:
    first: int
    last: int
    result: bytes


class MemoryEventStore(EventStore):
    """In-memory event store (see the module docstring)."""

    def __init__(self, keys: KeySpace | None = None, *, feed_maxlen: int | None = None) -> None:
        self.keys = keys or KeySpace()
        self._tables: dict[str, _Table] = {}
        self._commands: dict[tuple[str, str], _Command] = {}
        self._feeds: dict[int, list[FeedEntry]] = {}
        self._feed_seq = 0
        self._feed_maxlen = feed_maxlen

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
        check_append_args(table_id, expected_version, expected_hash, command_id)
        self.keys.cmdid_field(table_id, command_id)  # same validation as Redis
        prepared = prepare_events(table_id, expected_version, expected_hash, events)
        result_bytes = result.encode("utf-8") if isinstance(result, str) else bytes(result)

        table = self._tables.get(table_id) or _Table()
        seen = self._commands.get((table_id, command_id))
        if seen is not None:
            last_hash = table.events[seen.last - 1].hash if seen.last > 0 else GENESIS_HASH
            return AppendResult(seen.first, seen.last, last_hash, True, seen.result)
        version = len(table.events)
        if any((table_id, other) in self._commands for other in taken_by):
            refusal = taken_result.encode() if isinstance(taken_result, str) else taken_result
            self._commands[(table_id, command_id)] = _Command(version + 1, version, refusal)
            return AppendResult(version + 1, version, expected_hash, False, refusal, refused=True)
        if version != expected_version or table.last_hash != expected_hash:
            raise VersionConflict(
                table_id, expected_version, version, expected_hash, table.last_hash
            )

        self._tables[table_id] = table
        first, last = version + 1, version + len(prepared)
        table.events.extend(prepared)
        if prepared:
            table.has_head = True
            self._feed_seq += 1
            feed = self._feeds.setdefault(self.keys.shard_of(table_id), [])
            feed.append(FeedEntry(f"{self._feed_seq}-0", table_id, first, last))
            if self._feed_maxlen is not None and len(feed) > self._feed_maxlen:
                del feed[: len(feed) - self._feed_maxlen]
        if status:
            table.status = status
            table.has_head = True
        self._commands[(table_id, command_id)] = _Command(first, last, result_bytes)
        if secrets:
            table.secrets.update(secrets)
        if views and prepared:
            table.views.update(views)
        return AppendResult(first, last, table.last_hash, False, result_bytes, tuple(prepared))

    async def read(
        self, table_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        check_table_id(table_id)
        if from_version < 1:
            raise ValueError(f"from_version must be >= 1, got {from_version}")
        table = self._tables.get(table_id)
        if table is None:
            return []
        stop = len(table.events) if to_version is None else min(to_version, len(table.events))
        return table.events[from_version - 1 : max(stop, from_version - 1)]

    async def head(self, table_id: str) -> Head:
        check_table_id(table_id)
        table = self._tables.get(table_id)
        if table is None or not table.has_head:
            return Head()
        return Head(len(table.events), table.last_hash, table.status)

    async def read_feed(self, shard: int, after: str = "0-0", count: int = 100) -> list[FeedEntry]:
        self.keys.tag(shard)  # range check
        pos = _position(after)
        out = [e for e in self._feeds.get(shard, []) if _position(e.position) > pos]
        return out[:count]

    async def tables(self) -> AsyncIterator[str]:
        for table_id, table in list(self._tables.items()):
            if table.has_head:
                yield table_id

    async def command_result(self, table_id: str, command_id: str) -> bytes | None:
        check_table_id(table_id)
        seen = self._commands.get((table_id, command_id))
        return None if seen is None else seen.result

    async def secrets(self, table_id: str) -> dict[str, str]:
        check_table_id(table_id)
        table = self._tables.get(table_id)
        return dict(table.secrets) if table else {}

    def views(self, table_id: str) -> dict[str, str]:
        """The view parts the table's appends stored (part name -> JSON text)."""
        check_table_id(table_id)
        table = self._tables.get(table_id)
        return dict(table.views) if table else {}


def _position(position: str) -> tuple[int, int]:
    if position in ("", "0"):
        return (0, 0)
    ms, _, seq = position.partition("-")
    return (int(ms), int(seq or 0))
