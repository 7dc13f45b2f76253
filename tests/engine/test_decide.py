"""decide: every error code, the default take, purity, resigning, forcing and the first turn.

Positions are written in the notation (docs/notation.md) and completed to 40 cards by
``positions.position``; P is seat 0, O is seat 1.
"""

from __future__ import annotations

import copy

import pytest
from positions import O, P, actions, cards, play, position, run, said

from engine.actions import Command, NewMatch, Play, Resign, StartDeal, Take
from engine.cards import ALL_CARDS, cards_of, format_card, parse_card
from engine.errors import EngineError, IllegalTake
from engine.game import decide, fold
from engine.game_events import DealStarted, MatchStarted
from engine.legal import default_take, legal_actions
from engine.notation import format_action, parse_action
from engine.state import Match, Outcome, Phase, Termination

DECK = tuple(ALL_CARDS)
CASE_7 = "t0 2S3S4S | h0 5S KH KD KC 2D AD QC"  # worked case 7 without its phase and centre
OFFERED_7 = f"offered 0 | {CASE_7} | c 6S"
FORCEABLE = "t0 2S3S4S5S 2H3H4H5H | h0 KC KD | c 6S"  # worked case 14


def rejects(match: Match | None, command: Command | str, code: str) -> EngineError:
    """Assert that decide rejects the command with this code and changes nothing.

    A string is an action in the notation, played by the seat to act.
    """
    if isinstance(command, str):
        assert match is not None and match.deal is not None
        command = Play(match.deal.to_act, parse_action(command))
    before = copy.deepcopy(match)
    listed = legal_actions(match) if match is not None else None
    with pytest.raises(EngineError) as info:
        decide(match, command)
    assert info.value.code == code, info.value
    assert match == before
    if match is not None:
        assert legal_actions(match) == listed
    return info.value


def ended_deal(deals: int = 3) -> Match:
    """A match whose first deal P has just won (worked case 10)."""
    text = f"deals {deals} | offered 0 | t0 2S3S4S5S 7C7D7H7S | h0 QC KC | c JC"
    match, _ = play(position(text), "take QC KC")
    assert match.deal.phase is Phase.OVER
    return match


# --- error codes -------------------------------------------------------------------------------


def test_not_your_turn() -> None:
    match = position(OFFERED_7)
    err = rejects(match, Play(O, parse_action("refuse")), "move/not_your_turn")
    assert "seat 1" in err.message and "seat 0" in err.message
    rejects(match, Play(O, parse_action("take 5S")), "move/not_your_turn")


@pytest.mark.parametrize("seat", [2, -1])
def test_there_is_no_seat_two(seat: int) -> None:
    match = position(OFFERED_7)
    err = rejects(match, Play(seat, parse_action("refuse")), "move/not_your_turn")
    assert str(seat) in err.message
    rejects(match, Resign(seat), "move/not_your_turn")


@pytest.mark.parametrize(
    ("phase", "action"),
    [
        ("offered", "discard 5S"),
        ("offered", "turn"),
        ("offered", "leave"),
        ("offered", "force"),
        ("offered", "waive"),
        ("turned", "refuse"),
        ("turned", "discard 5S"),
        ("discard", "take"),
        ("discard", "refuse"),
        ("discard", "leave"),
        ("discard", "meld KC KD KH => 2S3S4S KCKDKH"),
        ("turn", "take"),
        ("turn", "refuse"),
    ],
)
def test_wrong_phase(phase: str, action: str) -> None:
    where = {"offered": "| c 6S", "turned": "| c 6S", "discard": "7H", "turn": ""}[phase]
    rejects(position(f"{phase} 0 | {CASE_7} {where}"), action, "move/wrong_phase")


def test_wrong_phase_around_the_match() -> None:
    rejects(None, Play(P, parse_action("turn")), "move/wrong_phase")
    rejects(None, StartDeal(DECK), "move/wrong_phase")
    match, _ = run(None, NewMatch())
    rejects(match, NewMatch(), "move/wrong_phase")  # NewMatch twice
    match, _ = run(match, StartDeal(DECK))
    rejects(match, NewMatch(), "move/wrong_phase")
    rejects(match, StartDeal(DECK), "move/wrong_phase")  # a deal is running


def test_unknown_card_in_a_discard() -> None:
    match = position(f"discard 0 | {CASE_7} 7H")
    err = rejects(match, "discard JC", "move/unknown_card")
    assert "JC" in err.message
    rejects(
        match, f"discard {format_card(max(cards_of(match.deal.hands[O])))}", "move/unknown_card"
    )
    rejects(match, "discard 2S", "move/unknown_card")  # a table card


@pytest.mark.parametrize("arrangement", [" => 2S3S4S5S6S KCKDKHQH", ""])
def test_unknown_card_in_a_take(arrangement: str) -> None:
    match = position(OFFERED_7)
    err = rejects(match, f"take 5S QH KH KD KC{arrangement}", "move/unknown_card")
    assert "QH" in err.message
    rejects(match, "take 6S 5S", "move/unknown_card")  # the centre card is no hand card
    rejects(match, "take 2S 5S", "move/unknown_card")  # nor is a table card


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("take 5S => 2S3S4S5S", "cards"),  # the centre card is missing
        ("take 5S => 5S6S7S", "cards"),  # old table cards are missing, 7S comes from nowhere
        ("take 5S => 2S3S4S5S6S KCKDKH", "cards"),  # hand cards not named
        ("take 5S => 2S3S4S5S6S7S", "cards"),
        ("take 5S => 2S3S 4S5S6S", "invalid_meld"),
        ("take 5S KH KD => 2S3S4S5S6S KDKH", "invalid_meld"),
        ("take 5S => 2S3S4S5S 4S5S6S", "overlap"),
        ("take 5S => 2S3S4S5S6S 2S3S4S5S6S", "overlap"),
    ],
)
def test_illegal_take_says_why(action: str, reason: str) -> None:
    match = position(OFFERED_7)
    err = rejects(match, action, "move/illegal_take")
    assert isinstance(err, IllegalTake)
    assert err.reason == reason


def test_a_take_may_not_use_the_opponents_melds() -> None:
    match = position("offered 0 | t0 2S3S4S | t1 5S6S7S | h0 KH KD KC 2D AD QC 3H | c JS")
    assert actions(match) == ["refuse"]
    err = rejects(match, "take => 2S3S4S5S6S7SJS", "move/illegal_take")
    assert isinstance(err, IllegalTake) and err.reason == "cards"
    assert "5S" in err.message


def test_illegal_take_without_any_arrangement() -> None:
    match = position(OFFERED_7)
    err = rejects(match, "take 2D AD", "move/illegal_take")
    assert isinstance(err, IllegalTake) and err.reason == "no_arrangement"
    assert "6S" in err.message and "2D" in err.message


def test_hand_meld_without_the_variant_is_an_illegal_take() -> None:
    match = position(OFFERED_7)
    err = rejects(match, "meld KC KD KH => 2S3S4S KCKDKH", "move/illegal_take")
    assert isinstance(err, IllegalTake) and err.reason == "no_centre_card"


def test_deal_over() -> None:
    match = ended_deal()
    rejects(match, Play(O, parse_action("refuse")), "move/deal_over")
    rejects(match, Play(P, parse_action("discard AS")), "move/deal_over")
    fresh, _ = run(None, NewMatch())
    rejects(fresh, Play(O, parse_action("turn")), "move/deal_over")  # no deal has started yet


def test_match_over() -> None:
    match = ended_deal(deals=1)
    assert match.over
    rejects(match, StartDeal(DECK), "move/match_over")
    rejects(match, Play(O, parse_action("turn")), "move/match_over")
    rejects(match, Resign(O), "move/match_over")
    rejects(match, Play(2, parse_action("turn")), "move/match_over")


@pytest.mark.parametrize(
    "deck",
    [DECK[:-1], (*DECK, 0), (*DECK[:-1], 0), (*DECK[:-1], 40), (*DECK[:-1], -1), ()],
)
def test_invalid_deck(deck: tuple[int, ...]) -> None:
    match, _ = run(None, NewMatch())
    rejects(match, StartDeal(deck), "move/invalid_deck")


@pytest.mark.parametrize(
    "command",
    [
        NewMatch(first_dealer=2),
        NewMatch(first_dealer=-1),
        NewMatch(deals=0),
        NewMatch(deals=None, target_score=0),
        NewMatch(deals=None, target_score=None),  # a match that can never end
    ],
)
def test_new_match_rejects_impossible_settings(command: NewMatch) -> None:
    rejects(None, command, "move/invalid_match")


# --- the default take --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "default"),
    [
        # keep the most existing melds: 7C stays in the set of sevens
        (
            "t0 2S3S4S5S 7C7D7H7S | h0 QC KC | c JC",
            "take QC KC => 2S3S4S5S 7C7D7H7S JCQCKC",
        ),
        ("t0 2S3S4S | h0 5S 6S 7S AH 2C 3D 4H | c JS", "take 5S 6S 7S => 2S3S4S 5S6S7SJS"),
        # then the fewest melds
        ("h0 2S 3S 4S 5S 6S AH 2C 3D KH QD | c 7S", "take 2S 3S 4S 5S 6S => 2S3S4S5S6S7S"),
        # then the first in card order: three runs before three sets
        (
            "h0 3C 3D 3H 4C 4D 4H 5C 5D KS QS | c 5H",
            "take 3C 3D 3H 4C 4D 4H 5C 5D => 3C4C5C 3D4D5D 3H4H5H",
        ),
    ],
)
def test_a_take_without_a_table_gets_the_default_arrangement(text: str, default: str) -> None:
    match = position(f"offered 0 | {text}")
    expected = parse_action(default)
    assert isinstance(expected, Take)
    same_hand = [a for a in legal_actions(match) if isinstance(a, Take) and a.hand == expected.hand]
    assert len(same_hand) > 1
    assert default_take(match, expected.hand) == expected == same_hand[0]
    without_table = Take(expected.hand)
    assert said(decide(match, Play(P, without_table)))[0].endswith(default.split("=>")[1])


def test_a_table_in_any_order_is_the_same_take() -> None:
    match = position(OFFERED_7)
    in_order = decide(match, Play(P, parse_action("take 5S KH KD KC => 2S3S4S5S6S KCKDKH")))
    reversed_ = decide(match, Play(P, parse_action("take 5S KH KD KC => KCKDKH 2S3S4S5S6S")))
    assert in_order == reversed_


# --- purity -------------------------------------------------------------------------------------


def test_decide_changes_nothing_when_it_accepts() -> None:
    match = position(OFFERED_7)
    before = copy.deepcopy(match)
    for action in legal_actions(match):
        assert decide(match, Play(P, action))
        assert match == before
    assert fold(decide(match, Play(P, parse_action("refuse"))), match) != match


# --- resigning ----------------------------------------------------------------------------------


@pytest.mark.parametrize("seat", [P, O])
@pytest.mark.parametrize(
    "text",
    [
        f"deals 5 | stake 2 | offered 0 | {CASE_7} | c 6S",
        f"deals 5 | stake 2 | discard 0 | {CASE_7} 7H",  # P holds 11 cards mid-turn
    ],
)
def test_resign_mid_deal_pays_the_stake_and_ends_the_match(seat: int, text: str) -> None:
    after, events = run(position(text), Resign(seat))
    scores = "2:0" if seat == O else "0:2"
    assert said(events) == [
        f"{seat} resigns",
        f"{1 - seat} wins 2: score {scores}, next stake 1",
        f"match over: {1 - seat} wins {scores}",
    ]
    assert after.over and after.winner == 1 - seat
    assert after.deal.outcome == Outcome(Termination.RESIGN, 1 - seat)
    assert after.results == (Outcome(Termination.RESIGN, 1 - seat),)
    assert legal_actions(after) == []


def test_resign_between_deals_ends_the_match_without_a_payment() -> None:
    match = ended_deal(deals=3)
    after, events = run(match, Resign(O))
    assert said(events) == ["1 resigns", "match over: 0 wins 1:0"]
    assert after.over and after.winner == P and after.scores == (1, 0)
    assert after.deal == match.deal


def test_resign_before_the_first_deal() -> None:
    match, _ = run(None, NewMatch(deals=3))
    after, events = run(match, Resign(P))
    assert said(events) == ["0 resigns", "match over: 1 wins 0:0"]
    assert after.over and after.winner == O


# --- forcing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "forceable"),
    [
        ("t0 7C7D7H | h0 AC 2D 3H 4S 5C 6D JH | c 7S", True),  # the fourth card of a set
        ("t0 KDKHKS | h0 AC 2D 3H 4S 5C 6D JH | c KC", True),
        ("t0 2S3S4S | h0 QC KD 6H 5D JC 7H AH | c AS", True),  # either end of a run
        ("t0 2S3S4S | h0 QC KD 6H 5D JC 7H AH | c 5S", True),
        ("t0 5H6H7H | h0 AC 2D 3S 4C QD KS AS | c JH", True),  # 7 and J are neighbours
        ("t0 2S3S4S 6S7SJS | h0 QC KD 6H 5D | c 5S", True),  # fits either meld
        ("t0 JCQCKC | h0 2D 3H 4S 5D 6H 7S AD | c AC", False),  # the ace is low
        ("t0 2S3S4S | h0 QC KD 6H 5D JC 7H AH | c 6S", False),  # needs 5S from the hand
        ("t0 7C7D7H7S | h0 AH 2D 3S 4C QD KS | c 6C", False),
        ("t0 AD2D3D4D5D6D7DJD | h0 KC KH | c QD", False),  # a 9-card run needs a split
    ],
)
def test_forceable_means_it_lays_off_on_one_meld_as_it_is(text: str, forceable: bool) -> None:
    match = position(f"offered 0 | {text}")
    after, events = play(match, "refuse")
    centre = text.split("| c ")[1]
    assert said(events)[0] == f"0 refuses {centre}" + (", forceable" if forceable else "")
    assert (after.deal.phase is Phase.FORCE_WINDOW) == forceable


def declined(how: str, stock: str = "") -> Match:
    """P has refused or left worked case 14's 6S; O is to force or waive."""
    phase = "offered" if how == "refuse" else "turned"
    match, events = play(position(f"{phase} 0 | {FORCEABLE}{stock}"), how)
    assert said(events) == [f"0 {how}s 6S, forceable"]
    assert match.deal.phase is Phase.FORCE_WINDOW and match.deal.to_act == O
    assert match.deal.centre == parse_card("6S")
    assert actions(match) == ["force", "waive"]
    return match


@pytest.mark.parametrize("how", ["refuse", "leave"])
def test_the_force_window_belongs_to_the_opponent(how: str) -> None:
    match = declined(how)
    rejects(match, Play(P, parse_action("take")), "move/not_your_turn")
    rejects(match, "refuse", "move/wrong_phase")
    rejects(match, "take", "move/wrong_phase")


@pytest.mark.parametrize("how", ["refuse", "leave"])
def test_forced_player_must_take(how: str) -> None:
    match, events = play(declined(how), "force")
    assert said(events) == ["1 forces"]
    assert match.deal.phase is Phase.FORCED and match.deal.to_act == P
    assert actions(match) == ["take => 2H3H4H5H 2S3S4S5S6S"]
    rejects(match, Play(O, parse_action("take")), "move/not_your_turn")
    rejects(match, "refuse", "move/must_take")
    rejects(match, "leave", "move/must_take")
    after, events = play(match, "take")  # the default arrangement works here too
    assert said(events) == ["0 takes 6S => 2H3H4H5H 2S3S4S5S6S"]
    assert after.deal.phase is Phase.DISCARD


def test_waived_refusal_goes_to_the_waste_and_the_refuser_turns() -> None:
    match = declined("refuse")
    top = format_card(match.deal.stock[0])
    after, events = play(match, "waive")
    assert said(events) == ["1 waives", "6S goes to the waste", f"0 turns {top}"]
    assert after.deal.phase is Phase.TURNED and after.deal.to_act == P
    assert after.deal.declined is None


def test_waived_leave_becomes_the_opponents_offered_card() -> None:
    after, events = play(declined("leave"), "waive")
    assert said(events) == ["1 waives"]
    assert after.deal.phase is Phase.OFFERED and after.deal.to_act == O
    assert after.deal.centre == parse_card("6S") and after.deal.declined is None
    assert actions(after)[-1] == "refuse"


def test_waived_refusal_on_an_empty_stock_is_a_draw() -> None:
    after, events = play(declined("refuse", stock=" | s -"), "waive")
    assert said(events) == [
        "1 waives",
        "6S goes to the waste",
        "the deal is drawn",
        "no winner: score 0:0, next stake 2",
        "match over: tie 0:0",
    ]
    assert after.over and after.deal.outcome == Outcome(Termination.DRAW, None)


def test_a_forced_eleventh_card_goes_out() -> None:
    match = position("offered 0 | t0 2S3S4S5S 2H3H4H KCKDKH | c 6S")
    after, events = play(match, "refuse", "force", "take")
    assert said(events)[-4:-2] == ["0 takes 6S => 2H3H4H 2S3S4S5S6S KCKDKH", "0 goes out"]
    assert after.deal.outcome == Outcome(Termination.OUT, P)


# --- the first turn -----------------------------------------------------------------------------


@pytest.mark.parametrize("first_dealer", [0, 1])
def test_first_turn(first_dealer: int) -> None:
    match, events = run(None, NewMatch(first_dealer=first_dealer, deals=2), StartDeal(DECK))
    dealer, first = first_dealer, 1 - first_dealer
    assert events[-1] == DealStarted(1, dealer, 1, DECK)
    deal = match.deal
    assert deal.phase is Phase.TURN and deal.to_act == first and deal.centre is None
    assert deal.hands[first] == sum(1 << DECK[i] for i in range(0, 20, 2))
    assert deal.hands[dealer] == sum(1 << DECK[i] for i in range(1, 20, 2))
    assert deal.stock == DECK[20:]
    assert actions(match) == ["turn"]
    rejects(match, Play(dealer, parse_action("turn")), "move/not_your_turn")
    rejects(match, "refuse", "move/wrong_phase")

    match, events = play(match, "turn")
    top = format_card(DECK[20])
    assert said(events) == [f"{first} turns {top}"]
    assert match.deal.phase is Phase.TURNED and match.deal.centre == DECK[20]
    assert actions(match)[-1] == "leave"
    rejects(match, "refuse", "move/wrong_phase")

    match, events = play(match, "leave")
    assert said(events) == [f"{first} leaves {top}"]
    assert match.deal.phase is Phase.OFFERED and match.deal.to_act == dealer
    assert actions(match)[-1] == "refuse"


def test_the_deal_alternates() -> None:
    match, events = run(None, NewMatch(first_dealer=1, deals=3))
    assert events == [MatchStarted(NewMatch().rules, 1, 3, None)]
    dealers = []
    for _ in range(3):
        match, _ = run(match, StartDeal(DECK))
        dealers.append(match.deal.dealer)
        assert match.to_act == 1 - match.deal.dealer
        while match.to_act is not None:
            match, _ = play(match, legal_actions(match)[-1])
    assert dealers == [1, 0, 1]


def test_take_texts_parse_back_to_the_listed_takes() -> None:
    match = position(OFFERED_7)
    listed = legal_actions(match)
    assert [parse_action(format_action(a)) for a in listed] == listed
    assert cards("5S KH KD KC") in {a.hand for a in listed if isinstance(a, Take)}
