"""Positions and moves for engine tests, written with card texts.

``position`` builds a full 40-card ``Match`` around the cards a test names: P is seat 0 and acts
by default, O is seat 1.  Cards nobody names fill O's hand up to 10 minus O's table, and the
rest is the stock (or the waste when the test gives the stock).  Melds in a table text are
separated by ``|``: ``"2S 3S 4S | KH KD KC"``.
"""

from __future__ import annotations

from engine.actions import Action, Command, Play
from engine.cards import (
    FULL_MASK,
    Card,
    CardMask,
    cards_of,
    count,
    mask_of,
    parse_card,
    parse_cards,
)
from engine.events import Event
from engine.game import decide, fold
from engine.melds import Meld
from engine.rules import CLASSIC, Rules
from engine.state import Deal, Match, Phase

P, O = 0, 1  # noqa: E741 -- P and O as in RULES.md section 9


def cards(text: str) -> CardMask:
    """Return the bitmask of the cards in a text such as ``"5S KH KD"``."""
    return mask_of(parse_cards(text))


def table(text: str) -> tuple[Meld, ...]:
    """Return a table (sorted meld bitmasks) from melds separated by ``|``."""
    return tuple(sorted(cards(part) for part in text.split("|") if part.strip()))


def position(
    hand: str,
    tbl: str = "",
    centre: str | None = None,
    *,
    phase: Phase = Phase.OFFERED,
    to_act: int = P,
    o_hand: str | None = None,
    o_table: str = "",
    stock: str | None = None,
    rules: Rules = CLASSIC,
    deals: int | None = 1,
    stake: int = 1,
) -> Match:
    """Return a match whose running deal has these cards; every card of the deck is placed once."""
    tables = (table(tbl), table(o_table))
    named = cards(hand) | _union(tables[0]) | _union(tables[1])
    centre_card: Card | None = parse_card(centre) if centre else None
    if centre_card is not None:
        named |= 1 << centre_card
    if o_hand is None:
        missing = 10 - count(_union(tables[1]))
        o_mask = mask_of(cards_of(FULL_MASK & ~named)[:missing])
    else:
        o_mask = cards(o_hand)
    rest = cards_of(FULL_MASK & ~named & ~o_mask)
    stock_cards = rest if stock is None else parse_cards(stock)
    waste = tuple(c for c in rest if c not in stock_cards)
    deal = Deal(
        number=1,
        dealer=O,
        stake=stake,
        phase=phase,
        to_act=to_act,
        hands=(cards(hand), o_mask),
        tables=tables,
        stock=stock_cards,
        waste=waste,
        centre=centre_card,
    )
    return Match(rules=rules, deals=deals, next_stake=stake, deal=deal)


def _union(melds: tuple[Meld, ...]) -> CardMask:
    mask = 0
    for m in melds:
        mask |= m
    return mask


def run(match: Match | None, *commands: Command) -> tuple[Match, list[Event]]:
    """Decide and fold each command in turn; return the final state and all events."""
    events: list[Event] = []
    for command in commands:
        new = decide(match, command)
        events += new
        match = fold(new, match)
    assert match is not None
    return match, events


def play(match: Match, *actions: Action) -> tuple[Match, list[Event]]:
    """Play actions, each by the seat to act; return the final state and all events."""
    events: list[Event] = []
    for action in actions:
        assert match.to_act is not None, "nobody is to act"
        match, new = run(match, Play(match.to_act, action))
        events += new
    return match, events
