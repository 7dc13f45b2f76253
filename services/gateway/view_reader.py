"""Reading a viewer's view of a table from the store, waiting for a newer one when asked to.

The engine worker and the projector store a table's view parts (``public``, ``seat0``,
``seat1``), each with the ``version`` it was built to (``docs/services.md``).  A viewer
(``public``, ``seat0``, ``seat1``, ``spectator``) gets its view put together from the parts it
needs, read in one ``MGET`` (``tables.stored_parts.assemble``): the gateway decides nothing
about what a viewer may see.  A table that left Redis has its parts read from the archive
(``docs/archive.md``).  A request may wait, up to a deadline, for a view at least as new as a
version (``min_version``), woken by the view hints on ``<ns>:views``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import orjson
from redis.asyncio import Redis

from services.archive.reads import ArchiveReader
from services.gateway import metrics
from services.gateway.hub import Hub
from services.store.keys import KeySpace
from services.tables.stored_parts import PUBLIC, assemble, parts_for, version_of

__all__ = ["MAX_POLL", "ViewReader"]

MAX_POLL = 0.5
"""The longest a view wait goes without re-reading the view: the most a lost hint delays it."""


def _parse(raw: bytes | str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = orjson.loads(raw)
    return value if isinstance(value, dict) else None


class ViewReader:
    """Reads viewers' views of tables from their stored parts and waits for newer ones."""

    def __init__(
        self, redis: Redis, keys: KeySpace, hub: Hub, archived: ArchiveReader | None = None
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.hub = hub
        self.archived = archived

    async def read(self, table_id: str, viewer: str) -> dict[str, Any] | None:
        """Return ``viewer``'s view of the table, None when the projector has written none."""
        return (await self.read_many(table_id, [viewer])).get(viewer)

    async def read_many(self, table_id: str, viewers: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Return several viewers' views of the table from one read (those that exist)."""
        parts = sorted({p for v in viewers for p in parts_for(v)})
        raws = await self.redis.mget([self.keys.table_view(table_id, p) for p in parts])
        if self.archived is not None and all(raw is None for raw in raws):
            table = self.archived.table(table_id)  # a finished table that left Redis
            if table is not None:
                raws = [table.views.get(p) for p in parts]
        stored = {p: _parse(raw) for p, raw in zip(parts, raws, strict=True)}
        out: dict[str, dict[str, Any]] = {}
        for viewer in viewers:
            view = assemble(viewer, stored.get(PUBLIC), stored.get(viewer))
            if view is not None:
                out[viewer] = view
        return out

    async def wait(
        self, table_id: str, viewer: str, min_version: int, timeout: float
    ) -> dict[str, Any] | None:
        """Return ``viewer``'s view once its version is at least ``min_version``, else (after
        ``timeout`` seconds) the newest there is, None if there is none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        poll = 0.05
        woken = True
        with self.hub.view_waiter(table_id) as moved:
            while True:
                view = await self.read(table_id, viewer)
                remaining = deadline - loop.time()
                if version_of(view) >= min_version:
                    if not woken:
                        metrics.RECHECKED.labels("view").inc()
                    return view
                if remaining <= 0:
                    return view
                try:
                    await asyncio.wait_for(moved.wait(), min(poll, remaining))
                except TimeoutError:
                    poll = min(poll * 2, MAX_POLL)
                woken = moved.is_set()
                moved.clear()
