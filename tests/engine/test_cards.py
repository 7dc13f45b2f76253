"""Card notation and card sets (RULES.md section 1)."""

from __future__ import annotations

import pytest

from engine.cards import (
    ALL_CARDS,
    DECK_SIZE,
    FULL_MASK,
    card,
    cards_of,
    count,
    display_order,
    format_card,
    format_cards,
    iter_cards,
    mask_of,
    parse_card,
    parse_cards,
    parse_spanish_card,
    rank_of,
    suit_of,
)
from engine.errors import EngineError, NotationError


def test_the_deck_has_forty_cards_without_8_9_10() -> None:
    assert DECK_SIZE == 40
    assert tuple(range(40)) == ALL_CARDS
    assert count(FULL_MASK) == 40
    names = {format_card(c) for c in ALL_CARDS}
    assert len(names) == 40
    assert names == {r + s for r in "A234567JQK" for s in "CDHS"}


def test_seven_and_jack_are_neighbours_and_the_ace_is_low() -> None:
    ranks = [rank_of(parse_card(f"{r}S")) for r in "A234567JQK"]
    assert ranks == list(range(10))
    assert rank_of(parse_card("JC")) == rank_of(parse_card("7C")) + 1
    assert suit_of(parse_card("AC")) == suit_of(parse_card("KC"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7H", "7H"),
        ("7h", "7H"),
        ("jc", "JC"),
        ("As", "AS"),
        ("kD", "KD"),
        (" QH ", "QH"),
        ("7♥", "7H"),
        ("J♣", "JC"),
        ("A♠", "AS"),
        ("K♦", "KD"),
        ("♠A", "AS"),
        ("q♡", "QH"),
        ("2♢", "2D"),
        ("3♧", "3C"),
        ("4♤", "4S"),
        ("H7", "7H"),
    ],
)
def test_parse_card_accepts_lower_case_and_suit_symbols(text: str, expected: str) -> None:
    assert format_card(parse_card(text)) == expected


@pytest.mark.parametrize("text", ["8H", "10S", "XX", "9C", "", "7", "7HH", "1S", "7X", "ZZ"])
def test_parse_card_names_the_bad_text(text: str) -> None:
    with pytest.raises(NotationError) as info:
        parse_card(text)
    err = info.value
    assert err.code == "notation/invalid"
    assert err.text == text
    assert repr(text) in str(err)
    assert isinstance(err, ValueError)
    assert isinstance(err, EngineError)


@pytest.mark.parametrize("bad", ["8H", "10S", "XX"])
def test_parse_cards_names_the_one_bad_card_in_a_list(bad: str) -> None:
    with pytest.raises(NotationError) as info:
        parse_cards(f"7H JC {bad} AS")
    assert info.value.text == bad
    assert bad in str(info.value)


def test_parse_cards_keeps_order_and_accepts_commas_and_iterables() -> None:
    assert format_cards(parse_cards("jc ♠A, 7h")) == "JC AS 7H"
    assert parse_cards(["7H", "jc"]) == parse_cards("7H JC")
    assert parse_cards("") == ()


def test_every_card_formats_and_parses_back() -> None:
    for c in ALL_CARDS:
        assert parse_card(format_card(c)) == c
        assert parse_card(format_card(c).lower()) == c
    assert parse_cards(format_cards(ALL_CARDS)) == ALL_CARDS


@pytest.mark.parametrize(
    ("text", "spanish"),
    [
        ("AD", "1 de oros"),
        ("7H", "7 de copas"),
        ("JC", "sota de bastos"),
        ("QS", "caballo de espadas"),
        ("KD", "rey de oros"),
        ("2C", "2 de bastos"),
    ],
)
def test_spanish_labels(text: str, spanish: str) -> None:
    c = parse_card(text)
    assert format_card(c, "es") == spanish
    assert parse_spanish_card(spanish) == c
    assert parse_spanish_card(spanish.upper()) == c


def test_spanish_labels_round_trip_for_the_whole_deck() -> None:
    for c in ALL_CARDS:
        assert parse_spanish_card(format_card(c, "es")) == c
    assert parse_spanish_card("as de oros") == parse_card("AD")
    assert format_cards(parse_cards("JC KD"), "es") == "sota de bastos, rey de oros"


@pytest.mark.parametrize("text", ["8 de oros", "sota de picas", "rey oros", "XX"])
def test_bad_spanish_label_names_the_text(text: str) -> None:
    with pytest.raises(NotationError) as info:
        parse_spanish_card(text)
    assert info.value.text == text
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("bad", [-1, 40, 99])
def test_format_card_rejects_an_index_outside_the_deck(bad: int) -> None:
    with pytest.raises(NotationError):
        format_card(bad)


def test_card_indices() -> None:
    assert card(0, 0) == parse_card("AC")
    assert card(9, 3) == parse_card("KS")
    for c in ALL_CARDS:
        assert card(rank_of(c), suit_of(c)) == c


def test_masks() -> None:
    hand = parse_cards("KD 7H AC JC")
    m = mask_of(hand)
    assert count(m) == 4
    assert cards_of(m) == tuple(sorted(hand))
    assert tuple(iter_cards(m)) == cards_of(m)
    assert format_cards(display_order(m)) == "AC 7H JC KD"
    assert mask_of(ALL_CARDS) == FULL_MASK
    assert cards_of(0) == ()
    assert mask_of(parse_cards("7H 7H")) == mask_of(parse_cards("7H"))
