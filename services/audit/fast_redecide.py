"""Step 4 of the fast path: each command re-decided by the engine, the events it gives
compared with the stored payload texts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.actions import Action, Command, Discard, NewMatch, Play, Resign, StartDeal
from engine.cards import Card
from engine.errors import EngineError
from engine.game import decide, evolve
from engine.game_events import DealStarted, MatchEnded, StakesSettled
from engine.state import Deal, Match
from services.audit.decode import _Decoded
from services.audit.fast_payloads import _json_decode
from services.audit.fast_text import _LOBBY_TYPES, _TEXT_OF, _deal_texts
from services.audit.plain_checks import _CARD_OF
from services.audit.results import Failure, _Failed
from services.audit.seat_checks import Seating, _SeatChecks
from services.audit.wire import _FORCE, _LEAVE, _REFUSE, _TURN, _WAIVE, _action_of, _fast_wire

_ACTIONS: dict[str, Action] = {
    "card_turned": _TURN,
    "card_refused": _REFUSE,
    "card_left": _LEAVE,
    "force_demanded": _FORCE,
    "force_waived": _WAIVE,
}
_PLAYS: dict[str, tuple[Play, Play]] = {
    kind: (Play(0, action), Play(1, action)) for kind, action in _ACTIONS.items()
}
"""The command of a move without fields, by its first event's type and the seat to act."""
_SEAT_TEXT = {'"seat":0': 0, '"seat":1': 1}


class _FastRedecide(_SeatChecks):
    """Step 4 of ``_FastAudit``: the moves (the attributes below are set by ``_FastAudit``);
    the lobby's commands are checked by the full audit's ``_SeatChecks``."""

    table_id: str
    rows: list[list[str]]
    starts: list[int]
    created: dict[int, tuple[dict[str, Any], NewMatch]]
    seats: dict[int, tuple[int, str | None]]
    lobby: dict[int, _Decoded]
    payloads: dict[int, dict[str, Any]]
    decks: dict[int, tuple[Card, ...]]
    reveals: dict[int, int]

    def redecide(self) -> str | None:
        """``_Audit.redecide``, comparing payload texts; returns the status the events set."""
        rows = self.rows
        text_of = _TEXT_OF
        plays = _PLAYS
        reveals = self.reveals
        seated = [False, False]
        seating = Seating(seated)
        match: Match | None = None
        status: str | None = None
        starts = self.starts
        for lo, hi in zip(starts, [*starts[1:], len(rows)]):  # noqa: B905 - same length
            first = rows[lo]
            kind = first[0]
            if kind in _LOBBY_TYPES:
                if not self.lobby_command(lo, hi, match, seating):
                    return None
                continue
            deal = match.deal if match is not None else None
            group: Sequence[int] = range(lo, hi)
            by_kind = plays.get(kind)
            if by_kind is not None and deal is not None:  # a move without fields: the seat's
                seat = deal.to_act
                if not seated[seat]:
                    return None
                command: Command = by_kind[seat]
            else:
                if kind == "player_joined" or kind == "table_created":
                    joined = self.seat_players(lo, hi, seating, match is not None)
                    if not joined:
                        if joined is None:
                            return None
                        continue
                    group = joined
                    first = rows[group[0]]
                    kind = first[0]
                other = self.command_of(group[0], kind, first[5], deal, seated)
                if other is None:
                    return None
                command = other
            try:
                decided = decide(match, command)
            except EngineError:
                return None
            at = 0
            size = len(group)
            for engine_event in decided:
                k = type(engine_event)
                text = text_of.get(k)
                if text is not None:
                    if at >= size:
                        return None
                    row = rows[group[at]]
                    if text(engine_event) != (row[0], row[5]):
                        return None
                    at += 1
                    if k is StakesSettled:
                        reveal = reveals.get(deal.number if deal is not None else 0)
                        if reveal is not None:  # the service appends the deal's reveal here
                            if at >= size or rows[group[at]][5] != rows[reveal][5]:
                                return None
                            if rows[group[at]][0] != "deal_revealed":
                                return None
                            at += 1
                    elif k is MatchEnded:
                        status = "over"
                elif isinstance(engine_event, DealStarted):
                    status = "playing"
                    payload = self.payloads[group[0]]
                    for want in _deal_texts(engine_event, payload):
                        if at >= size or (rows[group[at]][0], rows[group[at]][5]) != want:
                            return None
                        at += 1
                else:  # MatchStarted
                    status = "open"
                    wire = _fast_wire(engine_event, self.created[group[0]][0])
                    if len(wire) != 1 or at >= size or group[at] not in self.created:
                        return None
                    if self.created[group[at]][0] != wire[0]:
                        return None
                    at += 1
                match = evolve(match, engine_event)
            if at < size:
                return None
        return status

    def fail_at(self, event: _Decoded, code: str, reason: str) -> _Failed:
        """How ``_SeatChecks`` fails (the fast path then gives up: the full audit names it)."""
        return _Failed(Failure(self.table_id, event.version, event.type, code, reason))

    def lobby_command(self, lo: int, hi: int, match: Match | None, seating: Seating) -> bool:
        """``_Audit.redecide`` on a command of the lobby (rows ``lo`` to ``hi``): checked by
        ``_SeatChecks`` on the events decoded in step 1."""
        group = [self.lobby.get(i) for i in range(lo, hi)]
        events = [e for e in group if e is not None]
        if len(events) != len(group):  # another event in a lobby command: the full audit fails
            return False
        try:
            if events[0].type == "bot_failed":
                self.check_bot_failed(events, match, seating)
            else:
                self.check_lobby(events, match, seating)
        except _Failed:
            return False
        return True

    def seat_players(self, lo: int, hi: int, seating: Seating, created: bool) -> list[int] | None:
        """``_Audit._seat_players``: seat a join's player, or a new table's; the rest."""
        seated = seating.seated
        rows = self.rows
        rest = [lo] if rows[lo][0] == "table_created" else []
        i = lo + len(rest)
        while i < hi and rows[i][0] == "player_joined":
            if not (created or rest):
                return None
            seat, bot = self.seats[i]
            if seated[seat]:
                return None
            seated[seat] = True
            if bot is not None:
                seating.bots[seat] = bot
            i += 1
            if not rest:  # a join seats one player
                break
        return rest + list(range(i, hi))

    def command_of(
        self, i: int, kind: str, text: str, deal: Deal | None, seated: list[bool]
    ) -> Command | None:
        """``_Audit._command_of``, the seat of a move being the seat to act."""
        if kind == "table_created":
            return self.created[i][1]
        if kind == "deal_started":
            return StartDeal(self.decks[self.payloads[i]["number"]])
        if kind == "resigned":
            seat = _SEAT_TEXT.get(text)
            return Resign(seat) if seat is not None and seated[seat] else None
        action = _ACTIONS.get(kind)
        if action is None:
            if kind == "card_discarded":  # '"card":"XX","seat":N'
                action = Discard(_CARD_OF[text[8:10]])
            elif kind == "meld_made" or kind == "hand_melded":
                action = _action_of(kind, _json_decode("{" + text + "}"))
            if action is None:
                return None
        if deal is None or not seated[deal.to_act]:
            return None
        return Play(deal.to_act, action)
