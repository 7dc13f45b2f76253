"""Domain events of the engine: what happened, in the order it happened.

``decide`` returns them and ``evolve`` folds them; they hold everything needed to rebuild a
match exactly, including the full deck order of each deal (services redact it for players).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from engine.cards import Card, CardMask
from engine.melds import Meld
from engine.rules import Rules


class Decline(StrEnum):
    """How the active player declined the centre card."""

    REFUSED = "refused"
    LEFT = "left"


@dataclass(frozen=True)
class MatchStarted:
    """A match opened with its rules, first dealer and end condition."""

    rules: Rules
    first_dealer: int
    deals: int | None
    target_score: int | None


@dataclass(frozen=True)
class DealStarted:
    """A deal began: number (1-based), dealer, stake and the deck order it is dealt from."""

    number: int
    dealer: int
    stake: int
    deck: tuple[Card, ...]


@dataclass(frozen=True)
class CardTurned:
    """A seat turned the top card of the stock; it is now their turned card."""

    seat: int
    card: Card


@dataclass(frozen=True)
class CardDeclined:
    """A seat refused (offered) or left (turned) the centre card; ``forceable`` opens a window."""

    seat: int
    card: Card
    how: Decline
    forceable: bool


@dataclass(frozen=True)
class ForceDemanded:
    """``seat`` forced the card its opponent declined: the opponent must now take it."""

    seat: int


@dataclass(frozen=True)
class ForceWaived:
    """``seat`` let its opponent's declined card go on as if it were not forceable."""

    seat: int


@dataclass(frozen=True)
class CardWasted:
    """The refused card went face down to the waste, out of the game."""

    card: Card


@dataclass(frozen=True)
class MeldMade:
    """A seat took the centre card with the hand cards ``hand``; ``table`` is their new table."""

    seat: int
    card: Card
    hand: CardMask
    table: tuple[Meld, ...]


@dataclass(frozen=True)
class HandMelded:
    """A seat laid hand cards down without a centre card (variant); ``table`` is the new table."""

    seat: int
    hand: CardMask
    table: tuple[Meld, ...]


@dataclass(frozen=True)
class CardDiscarded:
    """A seat discarded a hand card face up; it is the opponent's offered card."""

    seat: int
    card: Card


@dataclass(frozen=True)
class WentOut:
    """A seat reached exactly 11 table cards with an empty hand and won the deal."""

    seat: int


@dataclass(frozen=True)
class GameDrawn:
    """A card was refused with no stock card left: the deal is a draw."""


@dataclass(frozen=True)
class Resigned:
    """A seat conceded the match."""

    seat: int


@dataclass(frozen=True)
class StakesSettled:
    """The deal's stake went to ``winner`` (None on a draw); scores and the next stake follow."""

    winner: int | None
    amount: int
    scores: tuple[int, int]
    next_stake: int


@dataclass(frozen=True)
class MatchEnded:
    """The match is over; ``winner`` has the higher score (None on a tie)."""

    winner: int | None
    scores: tuple[int, int]


Event = (
    MatchStarted
    | DealStarted
    | CardTurned
    | CardDeclined
    | ForceDemanded
    | ForceWaived
    | CardWasted
    | MeldMade
    | HandMelded
    | CardDiscarded
    | WentOut
    | GameDrawn
    | Resigned
    | StakesSettled
    | MatchEnded
)
