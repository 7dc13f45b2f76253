"""Every rule variant of engine.rules, and the presets (RULES.md: everything marked *variant*)."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest
from positions import O, P, actions, cards, play, position, run, said

from engine.actions import (
    Leave,
    NewMatch,
    Play,
    Refuse,
    StartDeal,
    Take,
    TurnCard,
)
from engine.cards import ALL_CARDS, count, parse_card, parse_cards
from engine.errors import IllegalTake, MatchOver, MustTake, WrongPhase
from engine.game import decide
from engine.game_events import (
    DealStarted,
    Event,
    MatchEnded,
    StakesSettled,
    WentOut,
)
from engine.legal import legal_actions
from engine.notation import format_card, parse_action
from engine.rules import CLASSIC, PRESETS, Forcing, Rules, StakeOnDraw, preset
from engine.state import Match, Phase

FORCEABLE = "t0 2S3S4S5S 2H3H4H5H | h0 KC KD | c 6S"  # worked case 14
EIGHT = "t0 AD2D3D4D5D6D7DJD | h0 KC KH | c QD"  # QD makes a 9-card run
KINGS = "t0 2S3S4S | h0 KC KD KH 5S 2C 3D 4H | c QD"  # three kings in hand, QD fits nowhere


# --- max_run_length ------------------------------------------------------------------------


def test_long_runs_allow_nine_and_ten_card_runs() -> None:
    nine = position(f"rules long-runs | offered 0 | {EIGHT}")
    assert "take => AD2D3D4D5D6D7DJDQD" in actions(nine)
    _, events = play(nine, "take => AD2D3D4D5D6D7DJDQD", "discard KC")
    assert said(events) == ["0 takes QD => AD2D3D4D5D6D7DJDQD", "0 discards KC"]
    ten = position("rules long-runs | offered 0 | t0 AD2D3D4D5D6D7DJDQD | h0 KC | c KD")
    assert "take => AD2D3D4D5D6D7DJDQDKD" in actions(ten)


def test_classic_limit_makes_the_ninth_card_a_split_and_not_forceable() -> None:
    classic = position(f"offered 0 | {EIGHT}")
    assert "take => AD2D3D4D5D6D7DJDQD" not in actions(classic)
    assert "take => AD2D3D 4D5D6D7DJDQD" in actions(classic)
    with pytest.raises(IllegalTake) as info:
        decide(classic, Play(P, parse_action("take => AD2D3D4D5D6D7DJDQD")))
    assert info.value.reason == "invalid_meld"
    _, events = play(classic, "refuse")
    assert said(events)[0] == "0 refuses QD"


def test_long_runs_make_the_ninth_card_forceable() -> None:
    after, events = play(position(f"rules long-runs | offered 0 | {EIGHT}"), "refuse")
    assert said(events) == ["0 refuses QD, forceable"]
    assert after.deal.phase is Phase.FORCE_WINDOW


# --- forcing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("phase", "decline"), [("offered", "refuse"), ("turned", "leave")])
def test_automatic_forcing_leaves_no_choice_but_to_take(phase: str, decline: str) -> None:
    match = position(f"rules automatic-forcing | {phase} 0 | {FORCEABLE}")
    assert actions(match) == ["take => 2H3H4H5H 2S3S4S5S6S"]
    with pytest.raises(MustTake) as info:
        decide(match, Play(P, parse_action(decline)))
    assert info.value.code == "move/must_take"
    after, _ = play(match, "take")
    assert after.deal.phase is Phase.DISCARD


def test_automatic_forcing_still_lets_a_player_decline_what_is_not_forceable() -> None:
    match = position("rules automatic-forcing | offered 0 | t0 2S3S4S 2H3H4H | h0 KC KD 5S | c 6S")
    assert actions(match) == ["take 5S => 2H3H4H 2S3S4S5S6S", "refuse"]
    _, events = play(match, "refuse")
    assert said(events)[0] == "0 refuses 6S"


@pytest.mark.parametrize(("phase", "decline"), [("offered", "refuse"), ("turned", "leave")])
def test_forcing_off_opens_no_force_window(phase: str, decline: str) -> None:
    match = position(f"rules no-forcing | {phase} 0 | {FORCEABLE}")
    assert decline in actions(match)
    after, events = play(match, decline)
    if decline == "refuse":
        top = format_card(match.deal.stock[0])
        assert said(events) == ["0 refuses 6S", "6S goes to the waste", f"0 turns {top}"]
    else:
        assert said(events) == ["0 leaves 6S"]
        assert after.deal.phase is Phase.OFFERED and after.deal.to_act == O
    assert "force" not in actions(after) and "waive" not in actions(after)


def test_optional_forcing_is_the_classic_default() -> None:
    after, _ = play(position(f"offered 0 | {FORCEABLE}"), "refuse")
    assert actions(after) == ["force", "waive"]


# --- hand melds without a centre card ---------------------------------------------------------


def test_hand_melds_appear_only_with_the_variant() -> None:
    classic = position(f"offered 0 | {KINGS}")
    assert actions(classic) == ["refuse"]
    with pytest.raises(IllegalTake) as info:
        decide(classic, Play(P, parse_action("meld KC KD KH => 2S3S4S KCKDKH")))
    assert info.value.reason == "no_centre_card"

    bicycle = actions(position(f"rules bicycle | offered 0 | {KINGS}"))
    assert bicycle == [  # hand melds first, by their hand cards, then the decline
        "meld KC KD KH => 2S3S4S KCKDKH",
        "meld 5S => 2S3S4S5S",
        "meld 5S KC KD KH => 2S3S4S5S KCKDKH",
        "refuse",
    ]


@pytest.mark.parametrize(("phase", "decline"), [("offered", "refuse"), ("turned", "leave")])
def test_a_hand_meld_keeps_the_turn_and_the_centre_card(phase: str, decline: str) -> None:
    match = position(f"rules bicycle | {phase} 0 | {KINGS}")
    after, events = play(match, "meld KC KD KH => 2S3S4S KCKDKH")
    assert said(events) == ["0 melds KC KD KH => 2S3S4S KCKDKH"]
    deal = after.deal
    assert deal.phase is match.deal.phase and deal.to_act == P
    assert deal.centre == parse_card("QD")
    assert deal.hands[P] == cards("5S 2C 3D 4H")
    assert count(deal.hands[P]) + count(deal.table_masks[P]) == 10
    assert actions(after) == ["meld 5S => 2S3S4S5S KCKDKH", decline]


def test_hand_melds_never_win_but_a_take_afterwards_does() -> None:
    match = position("rules bicycle | offered 0 | t0 2S3S4S5S6S7SJS | h0 KC KD KH | c QS")
    match, events = play(match, "meld KC KD KH => 2S3S4S5S6S7SJS KCKDKH")
    assert said(events) == ["0 melds KC KD KH => 2S3S4S5S6S7SJS KCKDKH"]
    assert match.deal.hands[P] == 0 and count(match.deal.table_masks[P]) == 10
    assert match.deal.phase is Phase.OFFERED and match.deal.outcome is None
    match, events = play(match, "take")
    assert said(events)[:2] == ["0 takes QS => 2S3S4S5S6S7SJSQS KCKDKH", "0 goes out"]
    assert count(match.deal.table_masks[P]) == 11


def test_hand_melds_are_not_allowed_while_discarding() -> None:
    match = position("rules bicycle | offered 0 | t0 2S3S4S | h0 KC KD KH 5S 2C 3D 4H | c 6S")
    match, _ = play(match, "take 5S")
    assert match.deal.phase is Phase.DISCARD
    with pytest.raises(WrongPhase):
        decide(match, Play(P, parse_action("meld KC KD KH => 2S3S4S5S6S KCKDKH")))


# --- stakes and the match ---------------------------------------------------------------------

# The non-dealer gets the even deck positions: A and 2 of every suit, 3C 3D; the stock's top is
# 3H, so the non-dealer turns it and goes out at once with 11 cards.
WIN_HAND = parse_cards("AC AD AH AS 2C 2D 2H 2S 3C 3D")
WIN_DEALER = parse_cards("4C 4D 4H 4S 5C 5D 5H 5S 6C 6D")


def win_deck() -> tuple[int, ...]:
    dealt = [c for pair in zip(WIN_HAND, WIN_DEALER, strict=True) for c in pair]
    top = parse_card("3H")
    return (*dealt, top, *(c for c in ALL_CARDS if c not in dealt and c != top))


def play_deal_to_a_win(match: Match) -> tuple[Match, list[Event]]:
    match, events = run(match, StartDeal(win_deck()))
    winner = match.to_act
    match, more = play(match, TurnCard(), Take(sum(1 << c for c in WIN_HAND)))
    assert WentOut(winner) in more
    return match, events + more


def play_deal_to_a_draw(match: Match) -> tuple[Match, list[Event]]:
    """Both players decline every card: with empty tables nothing is forceable."""
    match, events = run(match, StartDeal(tuple(ALL_CARDS)))
    while match.to_act is not None:
        action = legal_actions(match)[-1]
        assert isinstance(action, TurnCard | Refuse | Leave)
        match, more = play(match, action)
        events += more
    assert match.deal.outcome is not None and match.deal.outcome.winner is None
    return match, events


@pytest.mark.parametrize(
    ("stake_on_draw", "base", "stakes"),
    [
        (StakeOnDraw.DOUBLE, 1, [1, 2, 4]),
        (StakeOnDraw.CARRY, 1, [1, 2, 3]),
        (StakeOnDraw.NONE, 1, [1, 1, 1]),
        (StakeOnDraw.DOUBLE, 2, [2, 4, 8]),
        (StakeOnDraw.CARRY, 2, [2, 4, 6]),
        (StakeOnDraw.NONE, 2, [2, 2, 2]),
    ],
)
def test_stake_on_draw_over_two_draws_then_a_win(
    stake_on_draw: StakeOnDraw, base: int, stakes: list[int]
) -> None:
    rules = Rules(stake_on_draw=stake_on_draw, base_stake=base)
    match, events = run(None, NewMatch(rules=rules, deals=4))
    for deal in (play_deal_to_a_draw, play_deal_to_a_draw, play_deal_to_a_win):
        match, more = deal(match)
        events += more
    started = [e.stake for e in events if isinstance(e, DealStarted)]
    settled = [e for e in events if isinstance(e, StakesSettled)]
    assert started == stakes
    assert [s.next_stake for s in settled] == [*stakes[1:], base]
    assert [s.amount for s in settled] == [0, 0, stakes[2]]
    winner = settled[-1].winner
    assert winner is not None
    assert match.scores[winner] == stakes[2] and match.scores[1 - winner] == 0
    assert match.next_stake == base and not match.over


def test_base_stake_is_the_first_stake_and_what_a_win_pays() -> None:
    match, _ = run(None, NewMatch(rules=Rules(base_stake=5), first_dealer=0, deals=1))
    match, more = play_deal_to_a_win(match)
    assert [e.stake for e in more if isinstance(e, DealStarted)] == [5]
    assert match.scores == (0, 5) and match.over and match.winner == 1


def test_the_match_ends_after_its_number_of_deals() -> None:
    match, _ = run(None, NewMatch(first_dealer=0, deals=2))
    match, _ = play_deal_to_a_win(match)
    assert not match.over and match.deals_played == 1
    match, events = play_deal_to_a_win(match)
    assert events[-1] == MatchEnded(None, (1, 1))  # the deal alternates: one win each
    assert match.over and match.deals_played == 2
    with pytest.raises(MatchOver):
        decide(match, StartDeal(tuple(ALL_CARDS)))


def test_the_match_ends_when_a_score_reaches_the_target() -> None:
    match, _ = run(None, NewMatch(first_dealer=0, deals=None, target_score=3))
    winners = []
    while not match.over:
        match, events = play_deal_to_a_win(match)
        winners.append(next(e.winner for e in events if isinstance(e, StakesSettled)))
    assert winners == [1, 0, 1, 0, 1]
    assert match.scores == (2, 3) and match.winner == 1
    assert events[-1] == MatchEnded(1, (2, 3))


def test_a_doubled_stake_can_reach_the_target_at_once() -> None:
    match, _ = run(None, NewMatch(deals=10, target_score=4))
    for _ in range(2):
        match, _ = play_deal_to_a_draw(match)
    match, _ = play_deal_to_a_win(match)
    assert match.over and max(match.scores) == 4 and match.deals_played == 3


def test_a_match_without_a_deal_limit_goes_on_until_the_target() -> None:
    match, _ = run(None, NewMatch(deals=None, target_score=100))
    for _ in range(6):
        match, _ = play_deal_to_a_win(match)
    assert not match.over and match.scores == (3, 3) and match.deals_played == 6


def test_whichever_end_comes_first_ends_the_match() -> None:
    match, _ = run(None, NewMatch(deals=5, target_score=1))
    match, events = play_deal_to_a_win(match)
    assert match.over and match.deals_played == 1
    assert isinstance(events[-1], MatchEnded)


# --- the rule sets themselves -----------------------------------------------------------------

EXPECTED_PRESETS = {
    "classic": {},
    "long-runs": {"max_run_length": None},
    "automatic-forcing": {"forcing": Forcing.AUTOMATIC},
    "no-forcing": {"forcing": Forcing.OFF},
    "bicycle": {"hand_melds_without_centre_card": True},
    "carry-stakes": {"stake_on_draw": StakeOnDraw.CARRY},
    "flat-stakes": {"stake_on_draw": StakeOnDraw.NONE},
}


def test_classic_is_the_default() -> None:
    assert Rules() == CLASSIC == preset("classic")
    assert CLASSIC.max_run_length == 8
    assert CLASSIC.forcing is Forcing.OPTIONAL
    assert CLASSIC.hand_melds_without_centre_card is False
    assert CLASSIC.stake_on_draw is StakeOnDraw.DOUBLE
    assert CLASSIC.base_stake == 1
    assert NewMatch().rules == CLASSIC


@pytest.mark.parametrize("name", sorted(EXPECTED_PRESETS))
def test_each_preset_changes_one_option_of_classic(name: str) -> None:
    assert set(PRESETS) == set(EXPECTED_PRESETS)
    rules = preset(name)
    assert rules.name == name
    assert rules == replace(CLASSIC, name=name, **EXPECTED_PRESETS[name])  # type: ignore[arg-type]


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="bicycle"):
        preset("no-such-rules")


@pytest.mark.parametrize(
    "rules", [*PRESETS.values(), Rules(name="x", max_run_length=5, base_stake=3)]
)
def test_rules_round_trip_through_plain_json(rules: Rules) -> None:
    data = rules.as_dict()
    assert set(data) == {f.name for f in fields(Rules)}
    assert Rules.from_dict(json.loads(json.dumps(data))) == rules
    assert Rules.from_dict(data) == rules


def test_rules_from_dict_uses_defaults_and_rejects_unknown_options() -> None:
    assert Rules.from_dict({}) == CLASSIC
    assert Rules.from_dict({"forcing": "off"}).forcing is Forcing.OFF
    with pytest.raises(ValueError, match="colour"):
        Rules.from_dict({"colour": "red"})
    with pytest.raises(ValueError):
        Rules.from_dict({"forcing": "sometimes"})


@pytest.mark.parametrize("bad", [{"max_run_length": 2}, {"max_run_length": 11}, {"base_stake": 0}])
def test_rules_reject_impossible_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Rules(**bad)  # type: ignore[arg-type]


def test_started_match_carries_its_rules() -> None:
    match, _ = run(None, NewMatch(rules=PRESETS["bicycle"], deals=3, target_score=7))
    assert match.rules == PRESETS["bicycle"] and match.deals == 3 and match.target_score == 7
    assert match.next_stake == PRESETS["bicycle"].base_stake
