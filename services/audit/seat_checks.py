"""Step 4 of the full audit for the events no engine command gives: a seat given up before the
first deal (``player_left``); ``docs/audit.md``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.state import Match
from services.audit.decode import _Event
from services.audit.results import EVENT_MISMATCH, ILLEGAL_MOVE, _Failed

LOBBY_TYPES = frozenset({"player_left"})
"""The event types a command of the lobby starts with (``leave_table``)."""


@dataclass
class Seating:
    """Who sits where, and which seats are bots."""

    seated: list[bool]
    bots: set[int] = field(default_factory=set)


class _SeatChecks:
    """Mixed into the audit: checks a lobby command's events (``fail_at`` is the audit's)."""

    fail_at: Callable[[_Event, str, str], _Failed]  # the audit's (``_AuditState.fail_at``)

    def check_lobby(self, group: list[_Event], match: Match | None, seating: Seating) -> None:
        """Check the events of a ``leave_table`` command; raise on the first that the
        service would not have written."""
        self._left(group, match, seating)

    def _left(self, group: list[_Event], match: Match | None, seating: Seating) -> None:
        first = group[0]
        if len(group) > 1:
            raise self.fail_at(group[1], EVENT_MISMATCH, "a leave gives one player_left")
        seat = first.payload["seat"]
        if match is None or match.deal is not None:
            raise self.fail_at(first, ILLEGAL_MOVE, "a seat is given up only before the first deal")
        if not seating.seated[seat]:
            raise self.fail_at(first, ILLEGAL_MOVE, f"seat {seat} leaves but nobody sits there")
        seating.seated[seat] = False
        seating.bots.discard(seat)
