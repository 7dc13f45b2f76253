"""Text notation for cards run together into melds, tables of melds and how a deal ended.

The shared vocabulary of ``engine.notation`` (actions, events) and ``engine.position_notation``
(whole positions); docs/notation.md has the grammar.
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.cards import (
    ALL_CARDS,
    Card,
    CardMask,
    display_order,
    format_card,
    format_cards,
    iter_cards,
    parse_card,
    rank_of,
    suit_of,
)
from engine.errors import NotationError
from engine.melds import Meld
from engine.state import Outcome, Termination

NONE = "-"  # an empty table, hand or place; no limit; no winner
_SEATS = ("0", "1")
_CARDS = {format_card(c): c for c in ALL_CARDS}

# --- cards, melds, tables and outcomes -------------------------------------------------------


def format_hand(mask: CardMask) -> str:
    """Format a set of cards in rank order, then suit (``2D 2H 5C JS``); ``-`` when empty."""
    return format_cards(display_order(mask)) if mask else NONE


def format_meld(meld: Meld) -> str:
    """Format a meld as its cards run together in rank, then suit order: ``5S6S7S``, ``KCKDKH``."""
    return "".join(format_card(c) for c in display_order(meld))


def table_order(table: Iterable[Meld]) -> list[Meld]:
    """Return melds in reading order: by their lowest card's rank, then its suit."""
    return sorted(table, key=lambda m: min((rank_of(c), suit_of(c)) for c in iter_cards(m)))


def format_table(table: Iterable[Meld]) -> str:
    """Format melds in reading order (``table_order``), space-separated; ``-`` when empty."""
    return " ".join(format_meld(m) for m in table_order(table)) or NONE


def parse_meld(text: str) -> Meld:
    """Parse cards run together (``5s6s7s``) into a bitmask; it need not be a valid meld.

    Raises NotationError naming the text when a card does not parse or repeats.
    """
    try:
        if len(text) % 2:
            raise NotationError("a meld is 2-character cards run together", text=text)
        return _distinct([text[i : i + 2] for i in range(0, len(text), 2)])
    except NotationError as exc:
        raise NotationError(f"{exc.message} in the meld {text!r}", text=exc.text) from None


def _card(text: str) -> Card:
    """Parse a card, looking the usual upper-case form up first (positions are long)."""
    found = _CARDS.get(text)
    return parse_card(text) if found is None else found


def _distinct(words: list[str]) -> CardMask:
    """Return the mask of card texts; raises NotationError when one is not a card or repeats."""
    mask = 0
    for word in words:
        bit = 1 << _card(word)
        if mask & bit:
            raise NotationError(f"the card {word} is named twice", text=word)
        mask |= bit
    return mask


def format_outcome(outcome: Outcome) -> str:
    """Format how a deal ended: ``out:0``, ``resign:1`` (the number is the winner) or ``draw``."""
    winner = "" if outcome.winner is None else f":{outcome.winner}"
    return outcome.termination.value + winner


def parse_outcome(text: str) -> Outcome:
    """Parse ``out:0``, ``resign:1`` or ``draw``; raises NotationError naming the text."""
    term, _, winner = text.lower().partition(":")
    if term not in {t.value for t in Termination} or winner not in ("", *_SEATS):
        raise NotationError(f"not an outcome (out:S, resign:S, draw): {text!r}", text=text)
    return Outcome(Termination(term), int(winner) if winner else None)
