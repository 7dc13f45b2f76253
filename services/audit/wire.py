"""Engine events and actions against their wire form: the action a move's first event
records, whether a recorded event is the wire form of an engine event, and the wire events of a
deal's or a match's start."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.actions import Action, Discard, Force, Leave, MeldHand, Refuse, Take, TurnCard, Waive
from engine.cards import Card, format_card
from engine.game_events import (
    CardDeclined,
    CardDiscarded,
    CardTurned,
    CardWasted,
    DealStarted,
    Decline,
    Event,
    ForceDemanded,
    ForceWaived,
    GameDrawn,
    HandMelded,
    MatchEnded,
    MatchStarted,
    MeldMade,
    Resigned,
    StakesSettled,
    WentOut,
)
from events.domain import EventModel
from events.mapping import to_wire
from services.audit.decode import _Decoded
from services.audit.plain_checks import _CARD_OF


def _wire_cards(cards: Iterable[Card]) -> list[str]:
    return [format_card(c) for c in sorted(cards, key=lambda c: (c % 10, c // 10))]


def _mask(cards: Iterable[str]) -> int:
    mask = 0
    for text in cards:
        mask |= 1 << _CARD_OF[text]
    return mask


def _melds(table: Iterable[Iterable[str]]) -> tuple[int, ...]:
    """``events.mapping.table_from_wire`` of a table of canonical cards."""
    return tuple(sorted(_mask(meld) for meld in table))


_TURN = TurnCard()
_REFUSE = Refuse()
_LEAVE = Leave()
_FORCE = Force()
_WAIVE = Waive()


def _action_of(kind: str, payload: Mapping[str, Any]) -> Action | None:
    """The action a move's first event records (None for events no move starts with)."""
    if kind == "card_turned":
        return _TURN
    if kind == "card_refused":
        return _REFUSE
    if kind == "card_left":
        return _LEAVE
    if kind == "meld_made":
        return Take(_mask(payload["hand"]), _melds(payload["table"]))
    if kind == "card_discarded":
        return Discard(_CARD_OF[payload["card"]])
    if kind == "force_demanded":
        return _FORCE
    if kind == "force_waived":
        return _WAIVE
    if kind == "hand_melded":
        return MeldHand(_mask(payload["hand"]), _melds(payload["table"]))
    return None


def _dump(events: Iterable[EventModel]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json") for e in events]


def _turned(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return t == "card_turned" and p["seat"] == e.seat and _CARD_OF[p["card"]] == e.card


def _declined(t: str, p: Mapping[str, Any], e: Any) -> bool:
    how = _DECLINES.get(t)
    return (
        how is e.how
        and p["seat"] == e.seat
        and _CARD_OF[p["card"]] == e.card
        and p["forceable"] == e.forceable
    )


def _wasted(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return t == "card_wasted" and _CARD_OF[p["card"]] == e.card


def _meld_made(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return (
        t == "meld_made"
        and p["seat"] == e.seat
        and _CARD_OF[p["card"]] == e.card
        and _mask(p["hand"]) == e.hand
        and _melds(p["table"]) == tuple(sorted(e.table))
    )


def _hand_melded(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return (
        t == "hand_melded"
        and p["seat"] == e.seat
        and _mask(p["hand"]) == e.hand
        and _melds(p["table"]) == tuple(sorted(e.table))
    )


def _discarded(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return t == "card_discarded" and p["seat"] == e.seat and _CARD_OF[p["card"]] == e.card


def _settled(t: str, p: Mapping[str, Any], e: Any) -> bool:
    if t != "stakes_settled":
        return False
    scores = p["scores"]
    return bool(
        p["winner"] == e.winner
        and p["amount"] == e.amount
        and scores[0] == e.scores[0]
        and scores[1] == e.scores[1]
        and p["next_stake"] == e.next_stake
    )


def _ended(t: str, p: Mapping[str, Any], e: Any) -> bool:
    if t != "match_ended":
        return False
    scores = p["scores"]
    return bool(p["winner"] == e.winner and scores[0] == e.scores[0] and scores[1] == e.scores[1])


def _seat_only(kind: str) -> Callable[[str, Mapping[str, Any], Any], bool]:
    def same(t: str, p: Mapping[str, Any], e: Any) -> bool:
        return t == kind and p["seat"] == e.seat

    return same


_DECLINES = {"card_refused": Decline.REFUSED, "card_left": Decline.LEFT}
_SAME: dict[type, Callable[[str, Mapping[str, Any], Any], bool]] = {
    CardTurned: _turned,
    CardDeclined: _declined,
    CardWasted: _wasted,
    MeldMade: _meld_made,
    CardDiscarded: _discarded,
    StakesSettled: _settled,
    MatchEnded: _ended,
    WentOut: _seat_only("went_out"),
    GameDrawn: lambda t, p, e: t == "game_drawn",
    ForceDemanded: _seat_only("force_demanded"),
    ForceWaived: _seat_only("force_waived"),
    HandMelded: _hand_melded,
    Resigned: _seat_only("resigned"),
}
"""For each engine event of a move, whether a canonical payload is its wire form: comparing
the fields is comparing ``to_wire``'s dump, since canonical payloads map to engine events one
to one (``tests/services/test_audit.py`` checks both ways), without building the dump."""


def same_event(got: _Decoded, engine_event: Event) -> bool:
    """Say whether a recorded event is the wire form of an engine event (``to_wire``)."""
    same = _SAME.get(type(engine_event))
    if same is not None and got.canonical:
        return same(got.type, got.payload, engine_event)
    return got.same(_dump(to_wire(engine_event))[0])


def _compact(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


_MATCH_WIRE: dict[tuple[MatchStarted, object], list[dict[str, Any]]] = {}


def _fast_wire(engine_event: Event, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``_wire_of`` of a ``MatchStarted``, remembered: most tables share their rules."""
    key = (engine_event, payload.get("turn_seconds"))
    wire = _MATCH_WIRE.get(key)  # type: ignore[arg-type]
    if wire is None:
        wire = _wire_of(engine_event, payload)
        if len(_MATCH_WIRE) >= 256:
            _MATCH_WIRE.clear()
        _MATCH_WIRE[key] = wire  # type: ignore[index]
    return wire


def _wire_of(engine_event: Event, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wire events of ``DealStarted`` (with the recorded commitment) and
    ``MatchStarted`` (with the recorded turn clock), from the first event's payload."""
    if isinstance(engine_event, DealStarted):
        commitment, algorithm = payload["commitment"], payload["algorithm"]
        return _dump(to_wire(engine_event, commitment=commitment, algorithm=algorithm))
    return _dump(to_wire(engine_event, turn_seconds=payload.get("turn_seconds")))
