"""A table's stored events in their wire form, with what ``engine.secrecy`` lets out of them.

Each outgoing event carries its ``owner``: ``engine.secrecy.sees`` decides who gets it and
``engine.secrecy.hashes_shown`` when its hashes go out (``docs/services.md``, "Secrecy"); why
hashes of a deal in play are withheld is in ``docs/api.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.secrecy import event_owner, hashes_shown
from events.envelope import Envelope
from services.lru import Lru
from services.store.base import EventStore, StoredEvent

DEAL_STARTED = "deal_started"
DEAL_REVEALED = "deal_revealed"


@dataclass(frozen=True)
class Outgoing:
    """One stored event as the gateway sends it: the wire envelope and the seat that owns it
    (None for a public event), for ``engine.secrecy.sees``."""

    version: int
    owner: int | None
    envelope: dict[str, Any]


def outgoing(stored: StoredEvent, open_from: int | None) -> Outgoing:
    """Return the wire form of a stored event, its hashes withheld unless
    ``engine.secrecy.hashes_shown`` lets them out (``open_from``: where the deal in play
    started)."""
    envelope = Envelope.from_body(stored.to_dict(), check=False)
    data: dict[str, Any] = envelope.model_dump(mode="json")
    if not hashes_shown(stored.version, open_from):
        data["hash"] = None
        data["prev_hash"] = None
    payload = envelope.payload
    return Outgoing(stored.version, event_owner(payload.TYPE, getattr(payload, "seat", None)), data)


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
    """Return the outgoing events, as the deal in play (started at ``open_from``) stands."""
    return [outgoing(e, open_from) for e in stored]


def seal_each(
    stored: Iterable[StoredEvent], open_from: int | None
) -> tuple[list[Outgoing], int | None]:
    """Return the outgoing events of a live update, each sealed as the deal stood at it (as if
    they went out one command at a time, however many a read brought), and the
    ``deal_started`` version of the deal in play after them."""
    out = []
    for event in stored:
        open_from = advance(open_from, (event,))
        out.append(outgoing(event, open_from))
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
