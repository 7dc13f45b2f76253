"""Reading the events a round or a rebuild folds: every table's range in one round trip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.projector.core import ProjectorCore
from services.projector.records import TableRead
from services.store.base import StoredEvent, StoreError
from services.store.redis_store import decode_packed
from services.store.scripts import ScriptCall


def _as_bytes(value: bytes | str) -> bytes:
    """The bytes of a reply (a client with ``decode_responses=True`` gives text)."""
    return value.encode("utf-8") if isinstance(value, str) else value


class ProjectorFetch(ProjectorCore):
    """Reads tables' missing events, chunk by chunk when a range is long."""

    async def _fetch(self, reads: Sequence[TableRead]) -> dict[str, list[StoredEvent]]:
        """Read every table's missing events in one round trip: one script call per shard (its
        streams share the shard's hash tag)."""
        if not reads:
            return {}
        by_shard: dict[int, list[TableRead]] = {}
        for r in reads:
            by_shard.setdefault(self.keys.shard_of(r.table_id), []).append(r)
        calls: list[ScriptCall] = []
        for rs in by_shard.values():
            keys = [self.keys.events(r.table_id) for r in rs]
            args: list[Any] = []
            for r in rs:
                args += [f"{r.first}-1", "+" if r.last is None else f"{r.last}-1", self.read_chunk]
            calls.append(self._script("read", keys, args))
        replies = iter(await self._run(calls))
        out: dict[str, list[StoredEvent]] = {}
        for rs in by_shard.values():
            bufs = next(replies)
            if isinstance(bufs, Exception):
                raise bufs
            for r, buf in zip(rs, bufs, strict=True):
                out[r.table_id] = await self._decode(r, _as_bytes(buf))
        return out

    async def _decode(self, r: TableRead, buf: bytes) -> list[StoredEvent]:
        """Decode a table's range, reading on chunk by chunk when the range was cut short."""
        events: list[StoredEvent] = []
        try:
            n, last, _ = decode_packed(r.table_id, buf, r.first, "", events)
            while n == self.read_chunk:
                end = "+" if r.last is None else f"{r.last}-1"
                call = self._script(
                    "read", [self.keys.events(r.table_id)], [f"({last}-1", end, self.read_chunk]
                )
                (more,) = await self._run([call])
                if isinstance(more, Exception):
                    raise more
                n, last, _ = decode_packed(r.table_id, _as_bytes(more[0]), last + 1, "", events)
        except StoreError as exc:
            self.log.error("read_failed", table=r.table_id, error=str(exc))
            return []
        return events
