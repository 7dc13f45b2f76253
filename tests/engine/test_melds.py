"""Melds and the exact-cover solver (RULES.md section 2), checked against brute force."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from positions import cards, table

from engine.cards import ALL_CARDS, CardMask, cards_of, count, mask_of, rank_of, suit_of
from engine.melds import can_split, is_meld, meld_arrangements, melds_for, splits

LIMITS = [8, None, 3, 5]


def brute_is_meld(mask: CardMask, limit: int | None) -> bool:
    """A set is 3-4 cards of one rank; a run 3..limit cards of one suit in consecutive ranks."""
    cs = cards_of(mask)
    if len({rank_of(c) for c in cs}) == 1:
        return len(cs) in (3, 4)
    if len({suit_of(c) for c in cs}) != 1:
        return False
    ranks = sorted(rank_of(c) for c in cs)
    longest = 10 if limit is None else limit
    return 3 <= len(cs) <= longest and ranks == list(range(ranks[0], ranks[0] + len(cs)))


def brute_splits(mask: CardMask, limit: int | None) -> set[tuple[int, ...]]:
    """Every set of disjoint melds (by brute_is_meld) whose union is the mask."""
    inside = [m for m in melds_for(None) if m & mask == m and brute_is_meld(m, limit)]
    found: set[tuple[int, ...]] = set()
    for k in range(count(mask) // 3 + 1):
        for combo in combinations(inside, k):
            union = 0
            for m in combo:
                if union & m:
                    break
                union |= m
            else:
                if union == mask:
                    found.add(tuple(sorted(combo)))
    return found


def subsets(mask: CardMask) -> list[CardMask]:
    out = [0]
    for c in cards_of(mask):
        out += [s | 1 << c for s in out]
    return out


def test_182_melds_50_sets_132_runs() -> None:
    melds = melds_for(8)
    assert len(melds) == 182 == len(set(melds))
    sizes = Counter(
        ("set" if len({rank_of(c) for c in cards_of(m)}) == 1 else "run", count(m)) for m in melds
    )
    assert sizes[("set", 3)] == 40
    assert sizes[("set", 4)] == 10
    runs = {n: sizes[("run", n)] for n in range(3, 11)}
    assert runs == {3: 32, 4: 28, 5: 24, 6: 20, 7: 16, 8: 12, 9: 0, 10: 0}
    assert sum(runs.values()) == 132


def test_194_melds_without_a_run_limit() -> None:
    melds = melds_for(None)
    assert len(melds) == 194 == len(set(melds))
    assert set(melds_for(8)) < set(melds)
    longer = set(melds) - set(melds_for(8))
    assert sorted(count(m) for m in longer) == [9] * 8 + [10] * 4


@pytest.mark.parametrize("limit", LIMITS)
def test_melds_for_lists_exactly_the_brute_force_melds(limit: int | None) -> None:
    assert all(brute_is_meld(m, limit) for m in melds_for(limit))
    small = [mask_of(cs) for size in (3, 4) for cs in combinations(ALL_CARDS, size)]
    one_suit = [m << (10 * s) for s in range(4) for m in range(1 << 10)]
    for m in small + one_suit:
        assert is_meld(m, limit) == brute_is_meld(m, limit), cards_of(m)
    expected = {m for m in small + one_suit if brute_is_meld(m, limit)}
    assert set(melds_for(limit)) == expected


def test_is_meld_defaults_to_the_classic_limit() -> None:
    assert is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD"))
    assert not is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD QD"))
    assert is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD QD"), None)
    assert is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD QD KD"), None)
    assert not is_meld(0)
    assert not is_meld(cards("7H"))


def test_splits_of_the_empty_set_is_one_empty_split() -> None:
    assert list(splits(0)) == [()]
    assert can_split(0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5S 6S 7S JS JH JD", ["5S6S7S JSJHJD"]),
        ("2S 3S 4S 5S 6S 7S", ["2S3S4S5S6S7S", "2S3S4S 5S6S7S"]),
        (
            "3C 4C 5C 3D 4D 5D 3H 4H 5H",
            ["3C4C5C 3D4D5D 3H4H5H", "3C3D3H 4C4D4H 5C5D5H"],
        ),
        ("7C 7D 7H 7S JC QC", ["7D7H7S 7CJCQC"]),
        ("7C 7D JC QC", []),
        ("4C 5C 6C 6H 6S", []),
        ("7C 7D 7H 7S JC QC KC", ["7C7D7H7S JCQCKC", "7D7H7S 7CJCQCKC"]),
    ],
)
def test_splits_lists_every_split(text: str, expected: list[str]) -> None:
    found = list(splits(cards(text)))
    assert len(found) == len(set(found))
    assert set(found) == {table(t) for t in expected}
    assert can_split(cards(text)) == bool(expected)


def _clustered(rng: random.Random, size: int) -> CardMask:
    """A random card set from a few neighbouring ranks, so that many splits exist."""
    low = rng.randrange(0, 7)
    pool = [c for c in ALL_CARDS if low <= rank_of(c) < low + 4]
    return mask_of(rng.sample(pool, size))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(0, 12), limit=st.sampled_from(LIMITS))
def test_splits_agrees_with_brute_force(seed: int, size: int, limit: int | None) -> None:
    mask = _clustered(random.Random(seed), size)
    found = list(splits(mask, limit))
    assert len(found) == len(set(found)), "a split is listed twice"
    assert all(list(s) == sorted(s) for s in found)
    assert set(found) == brute_splits(mask, limit)
    assert found == list(splits(mask, limit)), "the order is fixed"


def brute_arrangements(
    required: CardMask, optional: CardMask, limit: int | None
) -> set[tuple[CardMask, tuple[int, ...]]]:
    return {
        (used, split)
        for used in subsets(optional)
        for split in brute_splits(required | used, limit)
    }


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_required=st.integers(0, 7),
    n_optional=st.integers(0, 7),
    limit=st.sampled_from(LIMITS),
)
def test_meld_arrangements_agrees_with_brute_force(
    seed: int, n_required: int, n_optional: int, limit: int | None
) -> None:
    rng = random.Random(seed)
    both = _clustered(rng, n_required + n_optional)
    chosen = list(cards_of(both))
    rng.shuffle(chosen)
    required = mask_of(chosen[:n_required])
    optional = mask_of(chosen[n_required:])
    found = list(meld_arrangements(required, optional, limit))
    assert len(found) == len(set(found)), "a table is listed twice"
    for used, melds in found:
        assert used & ~optional == 0
        assert list(melds) == sorted(melds)
    assert set(found) == brute_arrangements(required, optional, limit)


def test_meld_arrangements_of_a_take() -> None:
    """Case 8 of RULES.md: table 6S 7S JS, centre 5S, hand JH JD 2C 3C KD 4H AD."""
    found = set(meld_arrangements(cards("6S 7S JS 5S"), cards("JH JD 2C 3C KD 4H AD"), 8))
    assert (0, table("5S6S7SJS")) in found
    assert (cards("JH JD"), table("5S6S7S JSJHJD")) in found
    assert (cards("4H"), table("5S6S7SJS")) not in found
    assert brute_arrangements(cards("6S 7S JS 5S"), cards("JH JD 2C 3C KD 4H AD"), 8) == found
