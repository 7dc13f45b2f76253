"""Cards of the 40-card Conquian deck, their notation and card sets as bitmasks.

A card is an ``int`` from 0 to 39: ``suit * 10 + rank``.  Suits are clubs, diamonds, hearts,
spades (``C D H S``); ranks run low to high ``A 2 3 4 5 6 7 J Q K`` so that 7 and J are
neighbours (RULES.md section 1).  A set of cards is an ``int`` bitmask with bit ``card`` set.

>>> format_card(parse_card("7h"))
'7H'
>>> format_cards(parse_cards("jc ♠A"))
'JC AS'
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Literal

from engine.errors import NotationError

Card = int
CardMask = int
Labels = Literal["en", "es"]

RANKS = "A234567JQK"
SUITS = "CDHS"
DECK_SIZE = 40
FULL_MASK: CardMask = (1 << DECK_SIZE) - 1
ALL_CARDS: tuple[Card, ...] = tuple(range(DECK_SIZE))

_SUIT_SYMBOLS = {"♣": "C", "♦": "D", "♥": "H", "♠": "S", "♧": "C", "♢": "D", "♡": "H", "♤": "S"}
_SPANISH_SUITS = {"C": "bastos", "D": "oros", "H": "copas", "S": "espadas"}
_SPANISH_RANKS = ("1", "2", "3", "4", "5", "6", "7", "sota", "caballo", "rey")
_SPANISH_SUIT_LETTER = {name: letter for letter, name in _SPANISH_SUITS.items()}


_TEXT_OF_CARD: tuple[str, ...] = tuple(RANKS[c % 10] + SUITS[c // 10] for c in ALL_CARDS)
"""The canonical text of every card, by card."""
_CARD_OF_TEXT: dict[str, Card] = {text: c for c, text in enumerate(_TEXT_OF_CARD)}
"""Every card by its canonical text."""


def card(rank: int, suit: int) -> Card:
    """Return the card of a rank index (0 = ace … 9 = king) and a suit index (0 = clubs …)."""
    return suit * 10 + rank


def rank_of(c: Card) -> int:
    """Return the rank index of a card: 0 for the ace up to 9 for the king."""
    return c % 10


def suit_of(c: Card) -> int:
    """Return the suit index of a card: 0 clubs, 1 diamonds, 2 hearts, 3 spades."""
    return c // 10


def parse_card(text: str) -> Card:
    """Parse one card such as ``7H``, ``jc`` or ``A♠``; the suit may come first or last.

    Canonical text (``7H``, what every service writes) is one dictionary look-up.  Raises
    NotationError naming the text when it is not a card of the 40-card deck (``8H``, ``10S``
    and ``XX`` are errors).
    """
    found = _CARD_OF_TEXT.get(text)
    if found is not None:
        return found
    raw = text.strip()
    letters = "".join(_SUIT_SYMBOLS.get(ch, ch) for ch in raw).upper()
    if len(letters) == 2:
        for rank_ch, suit_ch in ((letters[0], letters[1]), (letters[1], letters[0])):
            if rank_ch in RANKS and suit_ch in SUITS:
                return card(RANKS.index(rank_ch), SUITS.index(suit_ch))
    raise NotationError(f"not a card of the 40-card deck: {text!r}", text=text)


def parse_cards(text: str | Iterable[str]) -> tuple[Card, ...]:
    """Parse cards separated by spaces or commas (or an iterable of card texts), in order."""
    parts = text.replace(",", " ").split() if isinstance(text, str) else list(text)
    return tuple(parse_card(p) for p in parts)


def format_card(c: Card, labels: Labels = "en") -> str:
    """Format a card as ``7H`` or, with Spanish labels, ``7 de copas`` / ``sota de bastos``."""
    if labels == "en" and type(c) is int and 0 <= c < DECK_SIZE:
        return _TEXT_OF_CARD[c]
    if not 0 <= c < DECK_SIZE:
        raise NotationError(f"card index out of range: {c!r}", text=str(c))
    if labels == "es":
        return f"{_SPANISH_RANKS[rank_of(c)]} de {_SPANISH_SUITS[SUITS[suit_of(c)]]}"
    return RANKS[rank_of(c)] + SUITS[suit_of(c)]


def parse_spanish_card(text: str) -> Card:
    """Parse a Spanish label such as ``sota de bastos`` or ``1 de oros`` into a card."""
    words = text.strip().lower().split()
    if len(words) == 3 and words[1] == "de" and words[2] in _SPANISH_SUIT_LETTER:
        rank_word = "1" if words[0] in ("as", "1") else words[0]
        if rank_word in _SPANISH_RANKS:
            suit = SUITS.index(_SPANISH_SUIT_LETTER[words[2]])
            return card(_SPANISH_RANKS.index(rank_word), suit)
    raise NotationError(f"not a Spanish card label: {text!r}", text=text)


def format_cards(cards: Iterable[Card], labels: Labels = "en") -> str:
    """Format cards in the given order separated by spaces (commas with Spanish labels)."""
    sep = ", " if labels == "es" else " "
    return sep.join(format_card(c, labels) for c in cards)


def mask_of(cards: Iterable[Card]) -> CardMask:
    """Return the bitmask of a collection of cards."""
    m = 0
    for c in cards:
        m |= 1 << c
    return m


def cards_of(mask: CardMask) -> tuple[Card, ...]:
    """Return the cards of a bitmask in deck order (by suit, then rank)."""
    return tuple(iter_cards(mask))


def iter_cards(mask: CardMask) -> Iterator[Card]:
    """Yield the cards of a bitmask in deck order."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def display_order(mask: CardMask) -> tuple[Card, ...]:
    """Return the cards of a mask ordered by rank, then suit: how a set or a hand reads."""
    return tuple(sorted(iter_cards(mask), key=lambda c: (rank_of(c), suit_of(c))))


def count(mask: CardMask) -> int:
    """Return how many cards a bitmask holds."""
    return mask.bit_count()
