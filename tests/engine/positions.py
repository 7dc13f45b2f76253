"""Positions and moves for engine tests, written in the notation of ``engine.notation``.

``position`` parses a position (docs/notation.md) and completes it to the 40 cards, so that every
test position is one a deal could hold (RULES.md 9, case 18): the cards the text does not name
fill seat 1's hand (O's) when ``h1`` is not given, up to 10 cards minus O's table (11 when O is
to discard), and the rest is the stock, or the waste when the text gives the stock (``s -`` for
an empty one).  P is seat 0, O is seat 1.
"""

from __future__ import annotations

from dataclasses import replace

from engine.actions import Action, Command, Play
from engine.cards import ALL_CARDS, CardMask, count, mask_of, parse_cards
from engine.game import decide, fold
from engine.game_events import Event
from engine.legal import legal_actions
from engine.melds import Meld
from engine.notation import (
    format_action,
    format_event,
    parse_action,
    parse_meld,
    parse_position,
    position_is_complete,
)
from engine.state import Match, Phase

P, O = 0, 1  # noqa: E741 -- P and O as in RULES.md section 9


def cards(text: str) -> CardMask:
    """Return the bitmask of the cards in a text such as ``"5S KH KD"``."""
    return mask_of(parse_cards(text))


def table(text: str) -> tuple[Meld, ...]:
    """Return a table from melds in the notation, ``"2S3S4S KHKDKC"``, as sorted bitmasks."""
    return tuple(sorted(parse_meld(word) for word in text.split()))


def position(text: str) -> Match:
    """Parse a position and complete it to 40 cards (see the module docstring)."""
    match = parse_position(text)
    deal = match.deal
    assert deal is not None, "a test position needs a running deal"
    keys = {field.split()[0].lower() for field in text.split("|") if field.strip()}
    named = deal.hands[0] | deal.hands[1] | deal.table_masks[0] | deal.table_masks[1]
    named |= mask_of(
        (*deal.stock, *deal.waste, *([deal.centre] if deal.centre is not None else []))
    )
    rest = [c for c in ALL_CARDS if not named >> c & 1]
    hands = deal.hands
    if "h1" not in keys:
        wanted = 10 - count(deal.table_masks[O])
        wanted += deal.phase is Phase.DISCARD and deal.to_act == O
        hands, rest = (hands[P], mask_of(rest[:wanted])), rest[wanted:]
    if "s" in keys:
        deal = replace(deal, hands=hands, waste=(*deal.waste, *rest))
    else:
        deal = replace(deal, hands=hands, stock=(*deal.stock, *rest))
    complete = replace(match, deal=deal)
    assert position_is_complete(complete)
    return complete


def actions(match: Match) -> list[str]:
    """Return the legal actions of a state in the notation, in their listed order."""
    return [format_action(a) for a in legal_actions(match)]


def said(events: list[Event]) -> list[str]:
    """Return events as transcript lines (``0 refuses 6S, forceable``)."""
    return [format_event(e) for e in events]


def run(match: Match | None, *commands: Command) -> tuple[Match, list[Event]]:
    """Decide and fold each command in turn; return the final state and all events."""
    events: list[Event] = []
    for command in commands:
        new = decide(match, command)
        events += new
        match = fold(new, match)
    assert match is not None
    return match, events


def play(match: Match, *moves: Action | str) -> tuple[Match, list[Event]]:
    """Play actions (objects or notation), each by the seat to act; return state and events."""
    events: list[Event] = []
    for move in moves:
        assert match.to_act is not None, "nobody is to act"
        action = parse_action(move) if isinstance(move, str) else move
        match, new = run(match, Play(match.to_act, action))
        events += new
    return match, events
