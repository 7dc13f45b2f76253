"""A table's events as one viewer may see them: redacted, and without hashes that would leak.

Who sees an event is ``events.domain.audience``; why hashes of a deal in play are withheld is in
``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from events.domain import audience
from events.envelope import Envelope
from services.lru import Lru
from services.store.base import EventStore, StoredEvent

DEAL_STARTED = "deal_started"
DEAL_REVEALED = "deal_revealed"


@dataclass(frozen=True)
class Outgoing:
    """One stored event as the gateway sends it: the wire envelope and who may see it."""

    version: int
    audience: int | None
    envelope: dict[str, Any]

    def visible_to(self, seat: int | None) -> bool:
        """Say whether ``seat`` (None for a spectator) may see the event."""
        return self.audience is None or self.audience == seat


def outgoing(stored: StoredEvent, sealed: bool) -> Outgoing:
    """Return the wire form of a stored event, hashes withheld when ``sealed``."""
    envelope = Envelope.from_body(stored.to_dict(), check=False)
    data: dict[str, Any] = envelope.model_dump(mode="json")
    if sealed:
        data["hash"] = None
        data["prev_hash"] = None
    return Outgoing(stored.version, audience(envelope.payload), data)


def advance(open_from: int | None, events: Iterable[StoredEvent]) -> int | None:
    """Return the version of the ``deal_started`` of the deal in play after ``events``."""
    for event in events:
        kind = event.body.get("type")
        if kind == DEAL_STARTED:
            open_from = event.version
        elif kind == DEAL_REVEALED:
            open_from = None
    return open_from


def seal_all(stored: Iterable[StoredEvent], open_from: int | None) -> list[Outgoing]:
    """Return the outgoing events, sealed when in the deal in play (started at ``open_from``)."""
    return [outgoing(e, open_from is not None and e.version > open_from) for e in stored]


def seal_each(
    stored: Iterable[StoredEvent], open_from: int | None
) -> tuple[list[Outgoing], int | None]:
    """Return the outgoing events of a live update, each sealed as the deal stood at it (as if
    they went out one command at a time, however many a read brought), and the
    ``deal_started`` version of the deal in play after them."""
    out = []
    for event in stored:
        open_from = advance(open_from, (event,))
        out.append(outgoing(event, open_from is not None and event.version > open_from))
    return out, open_from


class DealTracker:
    """Knows, per table, where the deal in play started at a given version (cached)."""

    def __init__(self, store: EventStore, cache_size: int = 10_000, chunk: int = 64) -> None:
        self.store = store
        self.chunk = chunk
        self._cache: Lru[str, tuple[int, int | None]] = Lru(cache_size)

    def remember(self, table_id: str, version: int, open_from: int | None) -> None:
        """Note that the deal in play at ``version`` started at ``open_from``."""
        known = self._cache.get(table_id)
        if known is None or known[0] <= version:
            self._cache.remember(table_id, (version, open_from))

    async def open_at(self, table_id: str, version: int) -> int | None:
        """Return the version of the ``deal_started`` of the deal in play at ``version``."""
        known = self._cache.get(table_id)
        if known is not None and known[0] == version:
            return known[1]
        if known is not None and known[0] < version <= known[0] + 4 * self.chunk:
            newer = await self.store.read(table_id, known[0] + 1, version)
            open_from = advance(known[1], newer)
        else:
            open_from = await self._scan_back(table_id, version)
        self.remember(table_id, version, open_from)
        return open_from

    async def _scan_back(self, table_id: str, version: int) -> int | None:
        high = version
        while high >= 1:
            low = max(1, high - self.chunk + 1)
            for event in reversed(await self.store.read(table_id, low, high)):
                kind = event.body.get("type")
                if kind == DEAL_REVEALED:
                    return None
                if kind == DEAL_STARTED:
                    return event.version
            high = low - 1
        return None
