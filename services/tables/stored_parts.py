"""A table's stored view parts: built from a ``Table``, written as JSON, put back together.

Three parts per table (``public``, ``seat0``, ``seat1``), built in one place (:func:`parts_of`)
for the engine worker's append and the projector's :class:`TableFold`; :func:`assemble` builds a
viewer's view from the public part and its own.  Secrecy is ``engine.secrecy.sees``'s; the
parts and why they are split: ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from engine.state import Match
from engine.views import spectator_part, stored_parts, with_seat
from services.tables.table import FoldError, Table, event_of

__all__ = [
    "PUBLIC",
    "PUBLIC_ONLY",
    "RETIRED_PARTS",
    "SEAT_PARTS",
    "SPECTATOR",
    "STORED_PARTS",
    "VIEWERS",
    "TableFold",
    "assemble",
    "dump_part",
    "dump_parts",
    "part_dicts",
    "parts_for",
    "parts_of",
    "spectator_of",
    "version_of",
    "viewer_of",
]

PUBLIC = "public"
SPECTATOR = "spectator"
SEAT_PARTS = ("seat0", "seat1")
STORED_PARTS: tuple[str, ...] = (PUBLIC, *SEAT_PARTS)
"""The parts stored per table (engine worker and projector), as in ``KeySpace.table_view``."""
VIEWERS: tuple[str, ...] = (PUBLIC, *SEAT_PARTS, SPECTATOR)
"""The views a reader asks for: the public one, a seat's, a spectator's."""
RETIRED_PARTS: tuple[str, ...] = (SPECTATOR,)
"""Parts that projectors stored before the views were split; ``conquian project --rebuild``
deletes them."""

PUBLIC_ONLY = ("status", "seats", "turn_seconds", "to_act", "updated_at")
"""The table's own fields of the public view, in their order, after ``table_id`` and
``version``; the spectator view has ``seat`` (None) and ``legal_actions`` (empty) instead."""
_HEAD = ("table_id", "version")
_PUBLIC_HEAD = (*_HEAD, *PUBLIC_ONLY)
"""The public part's first fields: the head, then the table's own fields."""
_NOT_SPECTATOR = frozenset(_PUBLIC_HEAD)


# --- building ----------------------------------------------------------------------------------


def parts_of(table: Table, updated_at: int | None) -> dict[str, str]:
    """Return the stored parts of ``table`` as JSON text, by part name; ``updated_at`` is the
    time (ms) of its newest event.

    The one place they are built: the engine worker's append (``TableService.views_after``)
    and the projector's fold (:class:`TableFold`) both call it, so equal tables give equal
    bytes.  Raises FoldError before the table is created or inside a deal's start.
    """
    return dump_parts(part_dicts(table, updated_at))


def part_dicts(table: Table, updated_at: int | None) -> dict[str, dict[str, Any]]:
    """Return the stored parts of ``table`` as JSON-ready dicts (see :func:`parts_of`).

    ``public``: the head, the table's own fields (:data:`PUBLIC_ONLY`), the spectator view's
    fields, then ``rematch`` once a seat asked for one; ``seat0``/``seat1``: the head, then
    ``engine.views.seat_parts``.
    """
    match = table.match
    if match is None or table.pending is not None:
        raise FoldError(f"table {table.table_id} at version {table.version} has no views")
    seats = [None if s is None else s.public() for s in table.seats]
    shared, seat0, seat1 = stored_parts(match, seated=None not in seats)
    head = (table.table_id, table.version)
    own = (*head, table.status, seats, table.turn_seconds, match.to_act, updated_at)
    public: dict[str, Any] = dict(zip(_PUBLIC_HEAD, own, strict=True))
    public.update(shared)
    if table.rematch_agreed:
        bots = {i for i, s in enumerate(table.seats) if s is not None and s.bot is not None}
        agreed = sorted(table.rematch_agreed | bots)
        public["rematch"] = {"agreed": agreed, "table_id": table.rematch_table}
    return {
        PUBLIC: public,
        SEAT_PARTS[0]: {"table_id": table.table_id, "version": table.version, **seat0},
        SEAT_PARTS[1]: {"table_id": table.table_id, "version": table.version, **seat1},
    }


def dump_parts(parts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Return parts (:func:`part_dicts`) as JSON text, by part name."""
    return {name: dump_part(part) for name, part in parts.items()}


def dump_part(part: Mapping[str, Any]) -> str:
    """Return the JSON text of a part: compact, keys in the order the part was built, what
    ``json.dumps(part, separators=(",", ":"), ensure_ascii=False)`` writes.

    By orjson, without ``services.store.compact_json``'s option for other keys: parts have text keys
    only (``docs/performance.md`` has what each choice saved).  A part with another key raises
    TypeError.
    """
    return orjson.dumps(part).decode()


class TableFold:
    """The projector's table: folded from stored event bodies without the deal seeds (an
    unseeded :class:`Table`), with the time of its newest event, for its stored parts.

    Mutable on purpose: the projector keeps one per table in memory and folds each new event
    onto it.
    """

    __slots__ = ("table", "updated_at")

    def __init__(self, table_id: str) -> None:
        self.table = Table(table_id, seeded=False)
        self.updated_at: int | None = None

    @property
    def table_id(self) -> str:
        return self.table.table_id

    @property
    def version(self) -> int:
        return self.table.version

    @property
    def match(self) -> Match | None:
        return self.table.match

    @property
    def status(self) -> str:
        return self.table.status

    def apply_body(self, version: int, body: Mapping[str, Any]) -> bool:
        """Fold one stored event (its full body) at ``version``; False when already folded.

        Raises FoldError when ``version`` is not the next one, or the event does not fit.
        """
        table = self.table
        if version <= table.version:
            return False
        if version != table.version + 1:
            raise FoldError(
                f"table {table.table_id}: event {version} follows version {table.version}"
            )
        try:
            event = event_of(body)
        except ValueError as exc:
            raise FoldError(f"table {table.table_id} version {version}: {exc}") from exc
        self.table = table.apply(event, version)
        time = body.get("time")
        if isinstance(time, int) and not isinstance(time, bool):
            self.updated_at = time
        return True

    def view_dicts(self) -> dict[str, dict[str, Any]]:
        """Return every stored part as a JSON-ready dict (:func:`part_dicts`)."""
        return part_dicts(self.table, self.updated_at)

    def views(self) -> dict[str, str]:
        """Return every stored part as JSON text, by part name (:func:`parts_of`)."""
        return parts_of(self.table, self.updated_at)


# --- putting a viewer's view together ----------------------------------------------------------


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
