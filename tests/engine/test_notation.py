"""Notation: cards of melds and tables, actions, positions both ways, errors and random games."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.actions import (
    Discard,
    Force,
    Leave,
    MeldHand,
    NewMatch,
    Play,
    Refuse,
    Resign,
    StartDeal,
    Take,
    TurnCard,
    Waive,
)
from engine.cards import mask_of, parse_card, parse_cards
from engine.errors import NotationError
from engine.game import decide, evolve
from engine.game_events import Event, WentOut
from engine.legal import legal_actions
from engine.notation import (
    format_action,
    format_event,
    format_meld,
    format_position,
    format_table,
    parse_action,
    parse_meld,
    parse_position,
    position_is_complete,
)
from engine.rules import PRESETS, Forcing, Rules, StakeOnDraw
from engine.state import Match, Phase

DOC = Path(__file__).resolve().parents[2] / "docs" / "notation.md"


def m(text: str) -> int:
    return mask_of(parse_cards(text))


def random_game(seed: int) -> Iterator[tuple[Match, Event]]:
    """Play a seeded random match under a random preset; yield the state after every event."""
    rng = random.Random(seed)
    rules = rng.choice(sorted(PRESETS.values(), key=lambda r: r.name))
    new = NewMatch(rules, rng.randrange(2), rng.choice([1, 2, 3, None]), rng.choice([2, 3]))
    if new.deals is not None and rng.random() < 0.5:  # also matches ended by deals alone
        new = NewMatch(new.rules, new.first_dealer, new.deals, None)
    match: Match | None = None
    command: NewMatch | StartDeal | Play | Resign = new
    for _ in range(3000):
        for event in decide(match, command):
            match = evolve(match, event)
            yield match, event
        if match is None or match.over:
            return
        command = _next_command(match, rng)


def _next_command(match: Match, rng: random.Random) -> StartDeal | Play | Resign:
    if match.deal is None or match.deal.phase is Phase.OVER:
        deck = list(range(40))
        rng.shuffle(deck)
        return StartDeal(tuple(deck))
    if rng.random() < 0.002:
        return Resign(rng.randrange(2))
    return Play(match.deal.to_act, rng.choice(legal_actions(match)))


# --- melds, tables, actions ------------------------------------------------------------------


def test_melds_read_in_rank_then_suit_order() -> None:
    assert format_meld(m("7S 5S 6S")) == "5S6S7S"
    assert format_meld(m("KH KC KD")) == "KCKDKH"
    assert format_meld(m("JH 6H 7H")) == "6H7HJH"
    assert format_table([m("7H 7D 7C 7S"), m("2S 3S 4S 5S")]) == "2S3S4S5S 7C7D7H7S"
    assert format_table([]) == "-"
    assert parse_meld("ks♠Q7s") == m("KS QS 7S")


@pytest.mark.parametrize("text", ["5S6", "5S8S7S", "5S5S6S", "XX"])
def test_bad_melds_name_the_text(text: str) -> None:
    with pytest.raises(NotationError, match=re.escape(text[:2])):
        parse_meld(text)


ACTIONS = [
    ("turn", TurnCard()),
    ("refuse", Refuse()),
    ("leave", Leave()),
    ("force", Force()),
    ("waive", Waive()),
    ("discard QD", Discard(parse_card("QD"))),
    ("take", Take()),
    ("take 5S", Take(m("5S"))),
    ("take => 6C7CJCQC", Take(0, (m("6C 7C JC QC"),))),
    (
        "take 5S KC KD KH => 2S3S4S5S6S KCKDKH",
        Take(m("5S KC KD KH"), tuple(sorted((m("2S 3S 4S 5S 6S"), m("KC KD KH"))))),
    ),
    ("meld KC KD KH => KCKDKH", MeldHand(m("KC KD KH"), (m("KC KD KH"),))),
]


@pytest.mark.parametrize(("text", "action"), ACTIONS)
def test_actions_parse_and_format_both_ways(text: str, action: object) -> None:
    assert parse_action(text) == action
    assert format_action(parse_action(text)) == text


def test_actions_accept_any_case_spacing_and_meld_order() -> None:
    assert format_action(parse_action("  TAKE kh  5s kc kd =>  khkckd 6s5s2s3s4s ")) == (
        "take 5S KC KD KH => 2S3S4S5S6S KCKDKH"
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("fold", "fold"),
        ("discard 8H", "8H"),
        ("take 5S 5S", "5S"),
        ("meld KC", "meld KC"),
        ("", "not an action"),
    ],
)
def test_bad_actions_name_the_text(text: str, named: str) -> None:
    with pytest.raises(NotationError, match=re.escape(named)) as info:
        parse_action(text)
    assert info.value.code == "notation/invalid"


# --- positions: worked cases of RULES.md written in the notation ------------------------------


def actions_of(position: str) -> list[str]:
    return [format_action(a) for a in legal_actions(parse_position(position))]


def test_case_5_nothing_fits_only_refuse() -> None:
    assert actions_of("offered 0 | h0 5C KD 2H 3S 4D 6H JS QH AC 7D | c 6C") == ["refuse"]


def test_case_7_lay_off_and_meld_a_set_in_one_take() -> None:
    actions = actions_of("offered 0 | t0 2S3S4S | h0 5S KH KD KC 2D AD QC | c 6S")
    assert "take 5S KC KD KH => 2S3S4S5S6S KCKDKH" in actions


def test_case_8_rearranging() -> None:
    actions = actions_of("offered 0 | t0 6S7SJS | h0 JH JD 2C 3C KD 4H AD | c 5S")
    assert "take JD JH => 5S6S7S JDJHJS" in actions


def test_case_9_must_refuse() -> None:
    assert actions_of("offered 0 | t0 6C6H6S | h0 5C KD 2H 3S 4D QH AC | c 4C") == ["refuse"]


def test_case_10_goes_out_through_decide() -> None:
    match = parse_position("offered 0 | t0 2S3S4S5S 7H7D7C7S | h0 QC KC | c JC")
    actions = actions_of(format_position(match))
    assert "take QC KC => 2S3S4S5S 7C7D7H7S JCQCKC" in actions
    assert "take QC => 2S3S4S5S 7CJCQC 7D7H7S" in actions  # legal, but does not go out
    events = decide(match, Play(0, parse_action("take QC KC")))
    assert WentOut(0) in events
    for event in events:
        match = evolve(match, event)
    assert format_position(match) == (
        "score 1:0 | results out:0 | over 0 | outcome out:0 | t0 2S3S4S5S 7C7D7H7S JCQCKC "
        "| match_over 0"
    )


def test_case_14_refusing_a_forceable_card_opens_the_force_window() -> None:
    match = parse_position("offered 0 | t0 2S3S4S5S 2H3H4H5H | h0 KC KD | c 6S | s 7D")
    for event in decide(match, Play(0, Refuse())):
        match = evolve(match, event)
    text = "force_window 1 | t0 2H3H4H5H 2S3S4S5S | h0 KC KD | c 6S | declined refused | s 7D"
    assert format_position(match) == text
    assert actions_of(text) == ["force", "waive"]


# --- positions: fields, defaults and errors --------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "no_deal",
        "deals 3 | target 5 | first 1 | no_deal",
        "rules bicycle | deals - | no_deal | next 2",
        "rules house max_run_length=- forcing=off hand_melds_without_centre_card=yes "
        "stake_on_draw=carry base_stake=2 | no_deal",
        "rules classic base_stake=3 | deal 2 | stake 6 | turn 1 | next 3",
        "deals 3 | score 1:0 | results out:0 | deal 2 | dealer 0 | discard 1 | h0 5D",
        "score 0:2 | results resign:1 | over 0 | outcome resign:1 | c 5S | match_over 1",
        "played 2 | deal 3 | turned 0 | h0 AC | h1 QD | c 2C | s 3C 4C | w 5C 6C",
    ],
)
def test_canonical_positions_format_back_to_themselves(text: str) -> None:
    assert format_position(parse_position(text)) == text


def test_custom_rules_and_presets_round_trip() -> None:
    house = Rules("house", None, Forcing.OFF, True, StakeOnDraw.CARRY, 2)
    for rules in [*PRESETS.values(), house, replace(PRESETS["bicycle"], base_stake=2)]:
        match = Match(rules=rules, next_stake=rules.base_stake)
        assert parse_position(format_position(match)) == match


def test_defaults_give_a_playable_position() -> None:
    match = parse_position("offered 0 | h0 QC KC | c JC")
    assert (match.rules, match.deals, match.scores, match.next_stake) == (
        PRESETS["classic"],
        1,
        (0, 0),
        1,
    )
    assert match.deal is not None and (match.deal.number, match.deal.dealer) == (1, 1)
    assert match.first_dealer == 1
    assert not position_is_complete(match)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("offered 0 | t0 2S3S | c JC", "2S3S"),
        ("offered 0 | t0 5S6S7S8S", "8S"),
        ("offered 0 | h0 QC | c QC", "QC"),
        ("offered 0 | h0 QC QC", "QC"),
        ("offered 0 | hand QC", "hand QC"),
        ("offered 0 | h0 QC | h0 KC", "h0 KC"),
        ("offered 2", "offered 2"),
        ("h0 QC | c JC", "phase"),
        ("no_deal | h0 QC", "no_deal"),
        ("rules bicyle | no_deal", "bicyle"),
        ("rules classic speed=9 | no_deal", "speed"),
        ("rules classic max_run_length=2 | no_deal", "max_run_length"),
        ("score 1-0 | no_deal", "score 1-0"),
        ("offered 0 | c JC QC", "c JC QC"),
        ("offered 0 | outcome won", "won"),
        ("offered 0 | declined maybe", "maybe"),
        ("offered 0 || c JC", "||"),
        ("deal 0 | offered 0", "deal 0"),
        ("no_deal | match_over 2", "match_over 2"),
        ("first x | no_deal", "first x"),
    ],
)
def test_bad_positions_name_the_field(text: str, named: str) -> None:
    with pytest.raises(NotationError, match=re.escape(named)):
        parse_position(text)


def test_a_long_run_is_a_meld_only_without_the_limit() -> None:
    long_run = "t0 AD2D3D4D5D6D7DJDQD"
    with pytest.raises(NotationError, match="not a meld"):
        parse_position(f"offered 0 | {long_run}")
    assert parse_position(f"rules long-runs | offered 0 | {long_run}").deal is not None


def test_states_the_notation_cannot_hold_are_refused() -> None:
    with pytest.raises(NotationError):
        format_position(Match(winner=0))
    with pytest.raises(NotationError, match="my house"):
        format_position(Match(rules=Rules(name="my house")))


# --- random games: every state both ways, every legal action both ways ------------------------


@pytest.mark.parametrize("seed", range(60))
def test_random_games_round_trip_at_every_step(seed: int) -> None:
    for match, event in random_game(seed):
        text = format_position(match)
        assert parse_position(text) == match, text
        assert format_position(parse_position(text)) == text
        assert format_event(event)
        assert match.deal is None or position_is_complete(match), text
        for action in legal_actions(match):
            assert parse_action(format_action(action)) == action


def test_completeness_spots_a_missing_or_doubled_card() -> None:
    match = next(state for state, _ in random_game(1) if state.deal is not None)
    assert match.deal is not None and position_is_complete(match)
    stock = match.deal.stock
    assert not position_is_complete(replace(match, deal=replace(match.deal, stock=stock[1:])))
    doubled = replace(match.deal, stock=(*stock[1:], match.deal.stock[1]))
    assert not position_is_complete(replace(match, deal=doubled))
    assert not position_is_complete(Match())


# --- the examples of docs/notation.md ---------------------------------------------------------


def doc_blocks(kind: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(rf"```{kind}\n(.*?)```", text, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_doc_positions_are_canonical() -> None:
    lines = doc_blocks("position")
    assert len(lines) >= 8
    for line in lines:
        assert format_position(parse_position(line)) == line


def test_doc_actions_are_canonical() -> None:
    lines = doc_blocks("action")
    assert lines
    for line in lines:
        assert format_action(parse_action(line)) == line
