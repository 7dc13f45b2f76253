"""The projector's read models of a table, read from Redis, waited for when asked to.

The projector writes one JSON string per part at ``KeySpace.table_view(table_id, part)``, with
the table ``version`` it was built to inside (``docs/services.md``): ``public``, ``seat0``,
``seat1`` and ``spectator``.  The gateway never builds a view itself; a request that needs a
view at least as new as a version (``min_version``, e.g. the version a command answered with)
waits for the projector's hint on ``<ns>:views`` up to a deadline.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from redis.asyncio import Redis

from services.gateway.hub import Hub
from services.store.keys import KeySpace

PARTS = ("public", "seat0", "seat1", "spectator")


def part_of(seat: int | None) -> str:
    """Return the view part of a viewer: ``seat0``, ``seat1`` or ``spectator`` (None)."""
    return "spectator" if seat is None else f"seat{seat}"


def version_of(view: dict[str, Any] | None) -> int:
    """Return the table version a view was built to (-1 for no view)."""
    if view is None:
        return -1
    version = view.get("version")
    return version if isinstance(version, int) else -1


class Views:
    """Reads the views of tables and waits for newer ones."""

    def __init__(self, redis: Redis, keys: KeySpace, hub: Hub) -> None:
        self.redis = redis
        self.keys = keys
        self.hub = hub

    async def read(self, table_id: str, part: str) -> dict[str, Any] | None:
        """Return the view ``part`` of the table, None when the projector has written none."""
        raw = await self.redis.get(self.keys.table_view(table_id, part))
        if raw is None:
            return None
        view = json.loads(raw)
        return view if isinstance(view, dict) else None

    async def read_many(self, table_id: str, parts: list[str]) -> dict[str, dict[str, Any]]:
        """Return several views of the table in one round trip (the parts that exist)."""
        keys = [self.keys.table_view(table_id, p) for p in parts]
        raws = await self.redis.mget(keys)
        out: dict[str, dict[str, Any]] = {}
        for part, raw in zip(parts, raws, strict=True):
            if raw is not None:
                view = json.loads(raw)
                if isinstance(view, dict):
                    out[part] = view
        return out

    async def wait(
        self, table_id: str, part: str, min_version: int, timeout: float
    ) -> dict[str, Any] | None:
        """Return the view once its version is at least ``min_version``, else (after
        ``timeout`` seconds) the newest there is, None if there is none."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        poll = 0.05
        with self.hub.view_waiter(table_id) as moved:
            while True:
                view = await self.read(table_id, part)
                remaining = deadline - loop.time()
                if version_of(view) >= min_version or remaining <= 0:
                    return view
                try:
                    await asyncio.wait_for(moved.wait(), min(poll, remaining))
                except TimeoutError:
                    poll = min(poll * 2, 0.5)
                moved.clear()
