"""Melds (sets and runs) and the exact-cover solver over card bitmasks (RULES.md section 2).

The deck has 182 melds under the classic run limit of 8: 50 sets and 132 runs of 3 to 8 cards
(144 runs without a limit).  A meld is the bitmask of its cards; whether a card set splits into
melds is exact cover over that small list, indexed by each meld's lowest card.

>>> from engine.cards import parse_cards, mask_of
>>> is_meld(mask_of(parse_cards("6H 7H JH")), 8)
True
>>> len(melds_for(8))
182
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from itertools import combinations

from engine.cards import CardMask, card, iter_cards

Meld = CardMask


@cache
def melds_for(max_run_length: int | None) -> tuple[Meld, ...]:
    """Return every meld of the deck under a run limit, sets first, each as a bitmask."""
    limit = 10 if max_run_length is None else max_run_length
    sets = [
        sum(1 << card(rank, s) for s in chosen)
        for rank in range(10)
        for size in (3, 4)
        for chosen in combinations(range(4), size)
    ]
    runs = [
        sum(1 << card(r, suit) for r in range(start, start + length))
        for suit in range(4)
        for length in range(3, limit + 1)
        for start in range(0, 10 - length + 1)
    ]
    return tuple(sets + runs)


@cache
def _meld_set(max_run_length: int | None) -> frozenset[Meld]:
    return frozenset(melds_for(max_run_length))


@cache
def melds_by_low_card(max_run_length: int | None) -> tuple[tuple[Meld, ...], ...]:
    """Return, for each card, the melds whose lowest card (lowest bit) it is."""
    table: list[list[Meld]] = [[] for _ in range(40)]
    for m in melds_for(max_run_length):
        table[(m & -m).bit_length() - 1].append(m)
    return tuple(tuple(ms) for ms in table)


@cache
def melds_with_card(max_run_length: int | None) -> tuple[tuple[Meld, ...], ...]:
    """Return, for each card, every meld that holds it."""
    table: list[list[Meld]] = [[] for _ in range(40)]
    for m in melds_for(max_run_length):
        for c in iter_cards(m):
            table[c].append(m)
    return tuple(tuple(ms) for ms in table)


def is_meld(mask: CardMask, max_run_length: int | None = 8) -> bool:
    """Say whether the cards form one valid set or run under the run limit."""
    return mask in _meld_set(max_run_length)


def splits(mask: CardMask, max_run_length: int | None = 8) -> Iterator[tuple[Meld, ...]]:
    """Yield every way to split the cards into valid melds, each split sorted, in a fixed order.

    The empty set splits one way, into no melds.
    """
    by_low = melds_by_low_card(max_run_length)

    def walk(rest: CardMask, chosen: tuple[Meld, ...]) -> Iterator[tuple[Meld, ...]]:
        if not rest:
            yield tuple(sorted(chosen))
            return
        low = (rest & -rest).bit_length() - 1
        for m in by_low[low]:
            if m & rest == m:
                yield from walk(rest ^ m, (*chosen, m))

    yield from walk(mask, ())


def can_split(mask: CardMask, max_run_length: int | None = 8) -> bool:
    """Say whether the cards split into valid melds at all."""
    return next(splits(mask, max_run_length), None) is not None


def fits_somewhere(c: int, available: CardMask, max_run_length: int | None) -> bool:
    """Say whether some meld holds card ``c`` and only cards of ``available`` (a quick filter)."""
    return any(m & available == m for m in melds_with_card(max_run_length)[c])


def meld_arrangements(
    required: CardMask, optional: CardMask, max_run_length: int | None
) -> Iterator[tuple[CardMask, tuple[Meld, ...]]]:
    """Yield ``(optional cards used, melds)`` for every table that holds all required cards.

    Each table is a set of disjoint melds covering ``required`` and using any subset of the
    ``optional`` cards: melds that hold required cards, plus any number of melds made of optional
    cards alone.  Every table appears exactly once; melds within a table are sorted.
    """
    by_low = melds_by_low_card(max_run_length)
    with_card = melds_with_card(max_run_length)

    def extra(
        free: CardMask, above: int, used: CardMask, chosen: tuple[Meld, ...]
    ) -> Iterator[tuple[CardMask, tuple[Meld, ...]]]:
        # melds of optional cards alone, chosen in increasing order of their lowest card
        yield used, tuple(sorted(chosen))
        rest = free >> above << above
        while rest:
            low_bit = rest & -rest
            rest ^= low_bit
            low = low_bit.bit_length() - 1
            for m in by_low[low]:
                if m & free == m:
                    yield from extra(free & ~m, low + 1, used | m, (*chosen, m))

    def cover(
        rest: CardMask, free: CardMask, used: CardMask, chosen: tuple[Meld, ...]
    ) -> Iterator[tuple[CardMask, tuple[Meld, ...]]]:
        if not rest:
            yield from extra(free, 0, used, chosen)
            return
        low = (rest & -rest).bit_length() - 1
        available = rest | free
        for m in with_card[low]:
            # the meld covering the lowest uncovered required card: each table is found once
            if m & available == m:
                yield from cover(rest & ~m, free & ~m, used | (m & optional), (*chosen, m))

    yield from cover(required, optional & ~required, 0, ())
