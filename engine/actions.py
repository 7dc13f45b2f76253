"""Player actions and the commands that drive a match (RULES.md sections 3-8).

An action is what the seat to act does; ``legal_actions`` lists them and ``decide`` accepts a
command only when its action is one of them.  Card sets are bitmasks and tables are sorted
tuples of meld bitmasks (see ``engine.cards`` and ``engine.melds``).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.cards import Card, CardMask
from engine.melds import Meld
from engine.rules import CLASSIC, Rules


@dataclass(frozen=True, order=True)
class TurnCard:
    """Turn the top card of the stock on the first turn of a deal (RULES.md 4.1)."""


@dataclass(frozen=True, order=True)
class Take:
    """Take the centre card with the named hand cards; ``table`` is the whole table after it.

    ``table`` may be ``None`` in a command: the engine then picks the arrangement by the rule
    of ``engine.legal.default_take`` (keep the most existing melds, then the fewest melds).
    """

    hand: CardMask = 0
    table: tuple[Meld, ...] | None = None


@dataclass(frozen=True, order=True)
class Refuse:
    """Refuse the offered card; it goes to the waste and the same player turns the next one."""


@dataclass(frozen=True, order=True)
class Leave:
    """Leave the turned card face up; it becomes the opponent's offered card."""


@dataclass(frozen=True, order=True)
class Discard:
    """Discard one hand card face up after a take; it is the opponent's offered card."""

    card: Card


@dataclass(frozen=True, order=True)
class Force:
    """Demand that the opponent take the forceable card they declined (RULES.md 7)."""


@dataclass(frozen=True, order=True)
class Waive:
    """Let the opponent's declined card go on as if it were not forceable."""


@dataclass(frozen=True, order=True)
class MeldHand:
    """Lay hand cards down without a centre card (variant ``hand_melds_without_centre_card``)."""

    hand: CardMask
    table: tuple[Meld, ...]


Action = TurnCard | Take | Refuse | Leave | Discard | Force | Waive | MeldHand

ACTION_ORDER: dict[type, int] = {
    TurnCard: 0,
    MeldHand: 1,
    Take: 2,
    Refuse: 3,
    Leave: 4,
    Discard: 5,
    Force: 6,
    Waive: 7,
}


@dataclass(frozen=True)
class Play:
    """A seat's action: the command players send."""

    seat: int
    action: Action


@dataclass(frozen=True)
class NewMatch:
    """Open a match: rules, who deals first, how many deals and/or the score that ends it."""

    rules: Rules = CLASSIC
    first_dealer: int = 0
    deals: int | None = 1
    target_score: int | None = None


@dataclass(frozen=True)
class StartDeal:
    """Start the next deal with the shuffled deck (the shuffle arrives as data)."""

    deck: tuple[Card, ...]


@dataclass(frozen=True)
class Resign:
    """A seat concedes: the running deal goes to the opponent and the match ends."""

    seat: int


Command = Play | NewMatch | StartDeal | Resign
