"""Step 4 of the full audit: each command re-decided by the engine on the state so far, and
the events it gives compared with the recorded ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from engine.actions import Action, Command, NewMatch, Play, Resign, StartDeal
from engine.errors import EngineError
from engine.game import decide, evolve
from engine.game_events import DealStarted, Event, MatchEnded, MatchStarted, StakesSettled
from engine.state import Match
from events.mapping import rules_from_wire, to_wire
from services.audit.audit_state import _AuditState
from services.audit.decode import _Decoded, _payload
from services.audit.results import EVENT_MISMATCH, ILLEGAL_MOVE, TURNED_CARD_MISMATCH
from services.audit.seat_checks import LOBBY_TYPES, Seating, _SeatChecks
from services.audit.wire import _action_of, _compact, _dump, _wire_of, same_event


class _Redecide(_SeatChecks, _AuditState):
    """Step 4 of ``_Audit``: the moves."""

    def redecide(self) -> None:
        events = self.events
        joins = self.joins
        count = len(events)
        match: Match | None = None
        seated = [False, False]
        seating = Seating(seated)
        commands: dict[str, int] = {}
        start = 0
        join = 0
        while start < count:
            first = events[start]
            command_id = first.command_id
            end = start + 1
            while end < count and events[end].command_id == command_id:
                end += 1
            if commands.setdefault(command_id, first.version) != first.version:
                raise self.fail_at(
                    first,
                    EVENT_MISMATCH,
                    f"command {command_id} was applied before, at version {commands[command_id]}",
                )
            group = events[start:end]
            if first.type in LOBBY_TYPES:
                self.check_lobby(group, match, seating)
                start = end
                continue
            if first.type == "bot_failed":  # a record for the clients: the match is unchanged
                self.check_bot_failed(group, match, seating)
                start = end
                continue
            if join < len(joins) and joins[join] < end:
                group = self._seat_players(group, seating, match is not None)
                while join < len(joins) and joins[join] < end:
                    join += 1
            if group:
                match = self._redecide_group(match, group, seated)
            start = end

    def _seat_players(
        self, group: list[_Decoded], seating: Seating, created: bool
    ) -> list[_Decoded]:
        """Seat the players a command's ``player_joined`` events name; return the other events.

        A join's events begin with its one ``player_joined``; a ``create_table`` seats its bots
        right after ``table_created``.
        """
        rest: list[_Decoded] = []
        opens = group[0].type == "table_created"
        for i, event in enumerate(group):
            if event.type != "player_joined":
                rest.append(event)
                continue
            if i > 0 and not (opens and all(e.type == "player_joined" for e in group[1:i])):
                raise self.fail_at(
                    event, EVENT_MISMATCH, "a player joins in the middle of a command"
                )
            if not (created or opens):
                raise self.fail_at(event, EVENT_MISMATCH, "a player joins a table not yet created")
            seat = event.payload["seat"]
            if seating.seated[seat]:
                raise self.fail_at(event, EVENT_MISMATCH, f"seat {seat} is already taken")
            seating.seated[seat] = True
            bot = event.payload.get("bot")
            if bot is not None:
                seating.bots[seat] = bot
        return rest

    def _redecide_group(
        self, match: Match | None, group: list[_Decoded], seated: list[bool]
    ) -> Match | None:
        first = group[0]
        command = self._command_of(first, seated)
        try:
            decided = decide(match, command)
        except EngineError as error:
            raise self.fail_at(first, ILLEGAL_MOVE, f"{error.code}: {error}") from None
        number = match.deal.number if match is not None and match.deal is not None else 0
        at = 0
        size = len(group)
        for engine_event in decided:
            kind = type(engine_event)
            if kind is DealStarted or kind is MatchStarted:
                self.status = "playing" if kind is DealStarted else "open"
                for want in self._wire(engine_event, first):
                    if at >= size:
                        self._short(group, want)
                    if not group[at].same(want):
                        self._mismatch(group[at], want)
                    at += 1
            else:
                if at >= size:
                    self._short(group, _dump(to_wire(engine_event))[0])
                got = group[at]
                if not same_event(got, engine_event):
                    self._mismatch(got, _dump(to_wire(engine_event))[0])
                at += 1
                if kind is StakesSettled and number in self.reveals:
                    want = _payload(self.reveals[number])
                    if at >= size:
                        self._short(group, want)
                    if not group[at].same(want):
                        self._mismatch(group[at], want)
                    at += 1
                elif kind is MatchEnded:
                    self.status = "over"
            match = evolve(match, engine_event)
        if at < size:
            raise self.fail_at(
                group[at], EVENT_MISMATCH, "the command gives no such event: it is one too many"
            )
        return match

    def _short(self, group: list[_Decoded], want: Mapping[str, Any]) -> NoReturn:
        raise self.fail_at(
            group[-1],
            EVENT_MISMATCH,
            f"the command's events end here, but the engine goes on with {_compact(want)}",
        )

    def _mismatch(self, got: _Decoded, want: Mapping[str, Any]) -> NoReturn:
        if got.type == "card_turned" and want["type"] == "card_turned":
            raise self.fail_at(
                got,
                TURNED_CARD_MISMATCH,
                f"seat {want['seat']} turns {want['card']} from the deal's deck, "
                f"the table says {got.payload['card']}",
            )
        raise self.fail_at(
            got,
            EVENT_MISMATCH,
            f"the engine gives {_compact(want)}, the table says {_compact(_payload(got.payload))}",
        )

    def _command_of(self, first: _Decoded, seated: list[bool]) -> Command:
        payload = first.payload
        kind = first.type
        if kind == "table_created":
            created = first.model
            assert created is not None  # kept by _decode
            rules = rules_from_wire(created.rules)
            return NewMatch(rules, created.first_dealer, created.deals, created.target_score)
        if kind == "deal_started":
            return StartDeal(self.decks[payload["number"]])
        if kind == "resigned":
            action: Action | None = None
        else:
            action = _action_of(kind, payload)
            if action is None:
                raise self.fail_at(first, EVENT_MISMATCH, f"no command starts with a {kind}")
        seat = payload["seat"]
        if not seated[seat]:
            raise self.fail_at(first, ILLEGAL_MOVE, f"seat {seat} acts but nobody sits there")
        return Resign(seat) if action is None else Play(seat, action)

    def _wire(self, engine_event: Event, first: _Decoded) -> list[dict[str, Any]]:
        """The wire events of ``DealStarted`` (with the recorded commitment) and
        ``MatchStarted`` (with the recorded turn clock)."""
        return _wire_of(engine_event, first.payload)
