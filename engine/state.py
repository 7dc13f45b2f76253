"""The state of a match and of its running deal: immutable values, changed only by ``evolve``.

Between turns each player's hand + table holds 10 cards; the 40 cards are always the stock,
the centre card, the waste, both hands and both tables (RULES.md 9, case 18).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from engine.cards import Card, CardMask
from engine.game_events import Decline
from engine.melds import Meld
from engine.rules import CLASSIC, Rules

_V = TypeVar("_V")


def changed(value: _V, **changes: object) -> _V:
    """Return a copy of a frozen state value with some fields changed.

    The same as ``dataclasses.replace`` for the plain frozen dataclasses of this module, without
    its per-call introspection: state changes happen at every event, so this is the hot path.
    """
    new: _V = object.__new__(type(value))
    new.__dict__.update(value.__dict__, **changes)
    return new


class Phase(StrEnum):
    """What the deal waits for."""

    TURN = "turn"  # the non-dealer turns the first card
    OFFERED = "offered"  # the seat to act takes or refuses the opponent's card
    TURNED = "turned"  # the seat to act takes or leaves the card it turned
    DISCARD = "discard"  # the seat to act discards after a take
    FORCE_WINDOW = "force_window"  # the seat to act forces or waives the opponent's decline
    FORCED = "forced"  # the seat to act must take the card it declined
    OVER = "over"  # the deal has ended


class Termination(StrEnum):
    """How a deal ended."""

    OUT = "out"
    DRAW = "draw"
    RESIGN = "resign"


@dataclass(frozen=True)
class Outcome:
    """How a deal ended and who won it (None for a draw)."""

    termination: Termination
    winner: int | None


@dataclass(frozen=True)
class Deal:
    """One deal: hands and tables per seat, stock (top first), waste, centre card and phase.

    ``declined`` remembers how a card in a force window or forced take was declined, and
    ``centre_seat`` who turned or discarded the centre card.
    """

    number: int
    dealer: int
    stake: int
    phase: Phase
    to_act: int
    hands: tuple[CardMask, CardMask]
    tables: tuple[tuple[Meld, ...], tuple[Meld, ...]]
    stock: tuple[Card, ...]
    waste: tuple[Card, ...] = ()
    centre: Card | None = None
    declined: Decline | None = None
    outcome: Outcome | None = None

    @property
    def table_masks(self) -> tuple[CardMask, CardMask]:
        """Return the cards on each seat's table as one bitmask per seat."""
        return (_union(self.tables[0]), _union(self.tables[1]))


def _union(melds: tuple[Meld, ...]) -> CardMask:
    mask = 0
    for m in melds:
        mask |= m
    return mask


@dataclass(frozen=True)
class Match:
    """A match at one table: rules, scores, the stake of the next deal and the running deal.

    ``deal`` is the current or last deal (None before the first); ``over`` ends the match.
    """

    rules: Rules = CLASSIC
    first_dealer: int = 0
    deals: int | None = 1
    target_score: int | None = None
    scores: tuple[int, int] = (0, 0)
    next_stake: int = 1
    deals_played: int = 0
    deal: Deal | None = None
    results: tuple[Outcome, ...] = ()
    over: bool = False
    winner: int | None = None

    @property
    def next_dealer(self) -> int:
        """Return who deals the next deal: the first dealer, then alternating."""
        return (self.first_dealer + self.deals_played) % 2

    @property
    def between_deals(self) -> bool:
        """Say whether the match waits for its next deal: none dealt yet, or the last one over,
        and the match not over.  ``StartDeal`` is legal then and only then; either player may
        ask for it (the deal goes to ``next_dealer`` whoever asks)."""
        return not self.over and (self.deal is None or self.deal.phase is Phase.OVER)

    @property
    def to_act(self) -> int | None:
        """Return the seat that must act now, or None between deals and after the match."""
        if self.over or self.deal is None or self.deal.phase is Phase.OVER:
            return None
        return self.deal.to_act
