"""Step 4 of the audit for the events no engine command gives: a seat given up before the
first deal (``player_left``), a rematch agreed after the match (``rematch_agreed``,
``rematch_opened``) and a bot's failure (``bot_failed``); both paths use it, ``docs/audit.md``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.state import Match
from services.audit.decode import _Decoded
from services.audit.results import EVENT_MISMATCH, ILLEGAL_MOVE, _Failed

LOBBY_TYPES = frozenset({"player_left", "rematch_agreed", "rematch_opened"})
"""The event types a command of the lobby starts with (``leave_table``, ``rematch``)."""


@dataclass
class Seating:
    """Who sits where, which seats are bots, and the rematch so far."""

    seated: list[bool]
    bots: dict[int, str] = field(default_factory=dict)
    agreed: set[int] = field(default_factory=set)
    opened: bool = False


class _SeatChecks:
    """Mixed into the audit: checks a lobby command's events (``fail_at`` is the audit's)."""

    fail_at: Callable[[_Decoded, str, str], _Failed]  # the audit's (``_AuditState.fail_at``)

    def check_lobby(self, group: list[_Decoded], match: Match | None, seating: Seating) -> None:
        """Check the events of a ``leave_table`` or ``rematch`` command; raise on the first
        that the service would not have written."""
        first = group[0]
        if first.type == "player_left":
            self._left(group, match, seating)
        else:
            self._rematch(group, match, seating)

    def check_bot_failed(
        self, group: list[_Decoded], match: Match | None, seating: Seating
    ) -> None:
        """Check a ``bot_failed`` command: one event, on a created table, naming the bot that
        sits on its seat.  It is no move, so nothing is re-decided."""
        event = group[0]
        if len(group) > 1:
            raise self.fail_at(group[1], EVENT_MISMATCH, "a bot_failed comes alone")
        if match is None:
            raise self.fail_at(event, EVENT_MISMATCH, "a bot fails at a table not yet created")
        seat, bot = event.payload["seat"], event.payload["bot"]
        if seating.bots.get(seat) != bot:
            raise self.fail_at(event, EVENT_MISMATCH, f"seat {seat} holds no {bot} bot")

    def _left(self, group: list[_Decoded], match: Match | None, seating: Seating) -> None:
        first = group[0]
        if len(group) > 1:
            raise self.fail_at(group[1], EVENT_MISMATCH, "a leave gives one player_left")
        seat = first.payload["seat"]
        if match is None or match.deal is not None:
            raise self.fail_at(first, ILLEGAL_MOVE, "a seat is given up only before the first deal")
        if not seating.seated[seat]:
            raise self.fail_at(first, ILLEGAL_MOVE, f"seat {seat} leaves but nobody sits there")
        seating.seated[seat] = False
        seating.bots.pop(seat, None)

    def _rematch(self, group: list[_Decoded], match: Match | None, seating: Seating) -> None:
        if match is None or not match.over:
            raise self.fail_at(group[0], ILLEGAL_MOVE, "a rematch comes only after the match")
        for i, event in enumerate(group):
            if event.type == "rematch_agreed" and i == 0:
                seat = event.payload["seat"]
                if not seating.seated[seat] or seat in seating.agreed:
                    raise self.fail_at(event, ILLEGAL_MOVE, f"seat {seat} cannot agree again")
                seating.agreed.add(seat)
            elif event.type == "rematch_opened" and not seating.opened:
                if len(seating.agreed | seating.bots.keys()) < 2:
                    raise self.fail_at(event, ILLEGAL_MOVE, "a rematch opened before both agreed")
                seating.opened = True
            else:
                raise self.fail_at(event, EVENT_MISMATCH, f"no rematch gives this {event.type}")
