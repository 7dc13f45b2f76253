"""How a table's views are stored in Redis, and how each viewer's view is put back together.

Three parts per table (``public``, ``seat0``, ``seat1``); :func:`assemble` builds a viewer's view
from the public part and its own.  Secrecy is ``engine.secrecy.sees``'s (``docs/services.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from engine.views import spectator_part, with_seat

__all__ = [
    "PUBLIC",
    "PUBLIC_ONLY",
    "RETIRED_PARTS",
    "SEAT_PARTS",
    "SPECTATOR",
    "STORED_PARTS",
    "VIEWERS",
    "assemble",
    "dump_view",
    "parts_for",
    "spectator_of",
    "version_of",
    "viewer_of",
]

PUBLIC = "public"
SPECTATOR = "spectator"
SEAT_PARTS = ("seat0", "seat1")
STORED_PARTS: tuple[str, ...] = (PUBLIC, *SEAT_PARTS)
"""The parts the projector stores, as in ``KeySpace.table_view(table_id, part)``."""
VIEWERS: tuple[str, ...] = (PUBLIC, *SEAT_PARTS, SPECTATOR)
"""The views a reader asks for: the public one, a seat's, a spectator's."""
RETIRED_PARTS: tuple[str, ...] = (SPECTATOR,)
"""Parts that projectors stored before the views were split; ``conquian project --rebuild``
deletes them."""

PUBLIC_ONLY = ("status", "seats", "turn_seconds", "to_act", "updated_at")
"""The table's own fields of the public view, in their order, after ``table_id`` and
``version``; the spectator view has ``seat`` (None) and ``legal_actions`` (empty) instead."""
_HEAD = ("table_id", "version")
_NOT_SPECTATOR = frozenset((*_HEAD, *PUBLIC_ONLY))


def dump_view(view: Mapping[str, Any]) -> str:
    """Return the JSON text of a view part: compact, keys in the order the part was built, what
    ``json.dumps(view, separators=(",", ":"), ensure_ascii=False)`` writes.

    By orjson, without ``services.compact_json``'s option for other keys: views have text keys
    only (``docs/performance.md`` has what each choice saved).  A view with another key raises
    TypeError.
    """
    return orjson.dumps(view).decode()


def viewer_of(seat: int | None) -> str:
    """Return the view of a viewer: ``seat0``, ``seat1`` or ``spectator`` (None)."""
    return SPECTATOR if seat is None else SEAT_PARTS[seat]


def parts_for(viewer: str) -> tuple[str, ...]:
    """Return the stored parts a viewer's view is built from.

    Raises ValueError for a viewer that is not one of :data:`VIEWERS`.
    """
    if viewer in SEAT_PARTS:
        return (PUBLIC, viewer)
    if viewer in (PUBLIC, SPECTATOR):
        return (PUBLIC,)
    raise ValueError(f"there is no view {viewer!r}: views are {', '.join(VIEWERS)}")


def version_of(view: Mapping[str, Any] | None) -> int:
    """Return the table version a view (or part) was built to (-1 for none)."""
    if view is None:
        return -1
    version = view.get("version")
    return version if isinstance(version, int) and not isinstance(version, bool) else -1


def spectator_of(public: Mapping[str, Any]) -> dict[str, Any]:
    """Return the spectator view in the public view: the head, then the spectator fields in
    their order, with ``engine.views.spectator_part`` (``seat`` in its place after the head)."""
    view: dict[str, Any] = {k: public.get(k) for k in (*_HEAD, "seat")}
    view.update((k, v) for k, v in public.items() if k not in _NOT_SPECTATOR)
    return with_seat(view, spectator_part())


def assemble(
    viewer: str, public: Mapping[str, Any] | None, seat: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """Return ``viewer``'s view from the stored public part and, for a seat, its own part;
    None when a needed part is missing or the two were built to different versions.

    A seat part that holds a whole seat view (a ``deal``: what projectors stored before the
    split) is that view and comes back as it is.  Raises ValueError for an unknown viewer or a
    seat part of the wrong shape.
    """
    needed = parts_for(viewer)
    if viewer in SEAT_PARTS and seat is not None and "deal" in seat:
        return dict(seat)
    if public is None or (len(needed) > 1 and seat is None):
        return None
    if viewer == PUBLIC:
        return dict(public)
    spectator = spectator_of(public)
    if seat is None:
        return spectator
    if seat.get("seat") != SEAT_PARTS.index(viewer):
        raise ValueError(f"the {viewer} part is seat {seat.get('seat')!r}'s")
    if version_of(seat) != version_of(public):
        return None
    return with_seat(spectator, seat)
