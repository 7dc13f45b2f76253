"""Every worked case of RULES.md section 9, one test each, played through decide and evolve.

Positions are written in the notation (docs/notation.md); ``positions.position`` completes them
to 40 cards (unnamed cards fill O's hand and the stock).  P is seat 0 and acts, O is seat 1.
Events are compared as transcript lines (``engine.notation.format_event``).
"""

from __future__ import annotations

import pytest
from positions import O, P, actions, cards, play, position, run, said

from engine.actions import NewMatch, Play, StartDeal
from engine.cards import FULL_MASK, count, parse_card
from engine.errors import IllegalTake, MoveError
from engine.game import decide
from engine.game_events import DealStarted
from engine.legal import legal_actions
from engine.melds import is_meld
from engine.notation import format_card, parse_action
from engine.state import Match, Outcome, Phase, Termination

AFTER_11 = "t0 AH2H3H 4C5C6C KCKDKHKS"  # P after case 11: ten cards down, an empty hand


def assert_conserved(match: Match) -> None:
    """RULES.md 9 case 18: every card is in exactly one place; no table card is in a hand."""
    deal = match.deal
    assert deal is not None
    places = [1 << c for c in (*deal.stock, *deal.waste)]
    places += [1 << deal.centre] if deal.centre is not None else []
    places += [*deal.hands, *(m for t in deal.tables for m in t)]
    union = 0
    for p in places:
        assert union & p == 0
        union |= p
    assert union == FULL_MASK and sum(count(p) for p in places) == 40
    assert (deal.table_masks[P] | deal.table_masks[O]) & (deal.hands[P] | deal.hands[O]) == 0


def top_of_stock(match: Match) -> str:
    assert match.deal is not None
    return format_card(match.deal.stock[0])


def rejected(match: Match, action: str) -> IllegalTake:
    with pytest.raises(IllegalTake) as info:
        decide(match, Play(P, parse_action(action)))
    return info.value


def test_case_01_runs_over_seven_jack_are_melds() -> None:
    assert is_meld(cards("6H 7H JH"))
    assert is_meld(cards("7C JC QC KC"))


@pytest.mark.parametrize("text", ["QS KS AS", "KD AD 2D", "7H JH KH", "5H 6H 7D"])
def test_case_02_no_wrapping_no_gaps_one_suit(text: str) -> None:
    assert not is_meld(cards(text))


def test_case_03_eight_card_run_is_a_meld_nine_is_not() -> None:
    assert is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD"))
    assert not is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD QD"))
    # through the engine: QD on the 8-card run is legal only by splitting the run
    match = position("offered 0 | t0 AD2D3D4D5D6D7DJD | h0 KC KH | c QD")
    assert "take => AD2D3D 4D5D6D7DJDQD" in actions(match)
    assert "take => AD2D3D4D5D6D7DJDQD" not in actions(match)
    assert rejected(match, "take => AD2D3D4D5D6D7DJDQD").reason == "invalid_meld"


def test_case_04_sets_of_three_and_four() -> None:
    assert is_meld(cards("7S 7H 7D"))
    assert is_meld(cards("7S 7H 7D 7C"))
    assert not is_meld(cards("7S 7H"))
    assert not is_meld(cards("7S 7H JD"))


def test_case_05_nothing_fits_an_empty_table_only_refuse() -> None:
    match = position("offered 0 | h0 5C KD 2H 3S 4D 6H JS QH AC 7D | c 6C")
    assert actions(match) == ["refuse"]
    assert rejected(match, "take 5C 6H").reason == "no_arrangement"
    top = top_of_stock(match)
    after, events = play(match, "refuse")
    assert said(events) == ["0 refuses 6C", "6C goes to the waste", f"0 turns {top}"]
    assert after.deal.phase is Phase.TURNED and after.deal.to_act == P
    assert_conserved(after)


def test_case_06_lay_off_on_the_run_then_discard() -> None:
    match = position("offered 0 | t0 7CJCQC | h0 AH 2S 3D 4H KD QS 5D | c 6C")
    assert actions(match) == ["take => 6C7CJCQC", "refuse"]
    after, events = play(match, "take")
    assert said(events) == ["0 takes 6C => 6C7CJCQC"]
    assert actions(after) == [  # hand cards in deck order: clubs, diamonds, hearts, spades
        "discard 3D",
        "discard 5D",
        "discard KD",
        "discard AH",
        "discard 4H",
        "discard 2S",
        "discard QS",
    ]
    after, events = play(after, "discard KD")
    assert said(events) == ["0 discards KD"]
    assert after.deal.phase is Phase.OFFERED and after.deal.to_act == O
    assert after.deal.centre == parse_card("KD")
    assert_conserved(after)


def test_case_07_lay_two_on_the_run_and_a_new_set_in_one_take() -> None:
    match = position("offered 0 | t0 2S3S4S | h0 5S KH KD KC 2D AD QC | c 6S")
    both = "take 5S KC KD KH => 2S3S4S5S6S KCKDKH"
    assert both in actions(match)
    assert "take 5S => 2S3S4S5S6S" in actions(match)
    assert all(a.startswith("take 5S") for a in actions(match)[:-1])  # 6S needs 5S
    after, events = play(match, both)
    assert said(events) == ["0 takes 6S with 5S KC KD KH => 2S3S4S5S6S KCKDKH"]
    assert actions(after) == ["discard QC", "discard AD", "discard 2D"]
    after, _ = play(after, "discard QC")
    assert count(after.deal.hands[P]) + count(after.deal.table_masks[P]) == 10
    assert_conserved(after)


def test_case_08_rearranging_the_table_in_a_take() -> None:
    match = position("offered 0 | t0 6S7SJS | h0 JH JD 2C 3C KD 4H AD | c 5S")
    assert "take => 5S6S7SJS" in actions(match)
    rearranged = "take JD JH => 5S6S7S JDJHJS"
    assert rearranged in actions(match)
    after, events = play(match, rearranged)
    assert said(events) == ["0 takes 5S with JD JH => 5S6S7S JDJHJS"]
    assert after.deal.phase is Phase.DISCARD
    assert_conserved(after)


def test_case_09_a_take_may_not_leave_two_cards_must_refuse() -> None:
    match = position("offered 0 | t0 6C6H6S | h0 5C KD 2H 3S 4D QH AC | c 4C")
    assert actions(match) == ["refuse"]
    assert rejected(match, "take 5C => 4C5C6C 6H6S").reason == "invalid_meld"
    assert rejected(match, "take 5C").reason == "no_arrangement"
    after, events = play(match, "refuse")
    assert said(events)[:2] == ["0 refuses 4C", "4C goes to the waste"]  # not forceable
    assert_conserved(after)


def test_case_10_going_out_with_eleven_no_discard() -> None:
    match = position("offered 0 | t0 2S3S4S5S 7C7D7H7S | h0 QC KC | c JC")
    with_both = [a for a in actions(match) if a.startswith("take QC KC")]
    assert with_both == [  # the first, the default arrangement, keeps the existing melds
        "take QC KC => 2S3S4S5S 7C7D7H7S JCQCKC",
        "take QC KC => 2S3S4S5S 7CJCQCKC 7D7H7S",
    ]
    assert "take QC => 2S3S4S5S 7CJCQC 7D7H7S" in actions(match)  # legal, but not out
    after, events = play(match, with_both[0])
    assert said(events) == [
        "0 takes JC with QC KC => 2S3S4S5S 7C7D7H7S JCQCKC",
        "0 goes out",
        "0 wins 1: score 1:0, next stake 1",
        "match over: 0 wins 1:0",
    ]
    assert after.deal.outcome == Outcome(Termination.OUT, P)
    assert after.deal.hands[P] == 0 and count(after.deal.table_masks[P]) == 11
    assert legal_actions(after) == []
    assert_conserved(after)


def test_case_11_ten_down_with_an_empty_hand_is_not_a_win() -> None:
    match = position("offered 0 | t0 AH2H3H 4C5C6C KDKHKS | h0 QD | c KC")
    assert "take => AH2H3H 4C5C6C KCKDKHKS" in actions(match)
    after, events = play(match, "take => AH2H3H 4C5C6C KCKDKHKS")
    assert actions(after) == ["discard QD"]
    after, events = play(after, "discard QD")
    assert said(events) == ["0 discards QD"]
    deal = after.deal
    assert deal.hands[P] == 0 and count(deal.table_masks[P]) == 10
    assert deal.phase is Phase.OFFERED and deal.to_act == O and deal.outcome is None
    assert not after.over
    assert_conserved(after)


@pytest.mark.parametrize(
    ("text", "move"),
    [
        (f"turned 1 | {AFTER_11} | c 7C", "leave"),
        (f"discard 1 | {AFTER_11} | t1 JDJHJS | h1 2D 2S 3S 5S 7C 7D 7H AD", "discard 7C"),
    ],
    ids=["O leaves 7C", "O discards 7C"],
)
def test_case_12_empty_hand_wins_with_a_card_that_fits(text: str, move: str) -> None:
    match, _ = play(position(text), move)
    assert match.deal.to_act == P and match.deal.centre == parse_card("7C")
    assert actions(match) == ["take => AH2H3H 4C5C6C7C KCKDKHKS", "refuse"]
    after, events = play(match, "take")
    assert said(events)[:2] == ["0 takes 7C => AH2H3H 4C5C6C7C KCKDKHKS", "0 goes out"]
    assert after.deal.outcome == Outcome(Termination.OUT, P)
    assert_conserved(after)


def test_case_13_empty_hand_cannot_use_the_card_refuses() -> None:
    match = position(f"offered 0 | {AFTER_11} | c QS")
    assert actions(match) == ["refuse"]
    after, events = play(match, "refuse")
    assert said(events)[0] == "0 refuses QS"
    assert after.deal.phase is Phase.TURNED and after.deal.to_act == P
    assert_conserved(after)


def test_case_14_forcing_a_refused_card_that_lays_off() -> None:
    match = position("offered 0 | t0 2S3S4S5S 2H3H4H5H | h0 KC KD | c 6S")
    match, events = play(match, "refuse")
    assert said(events) == ["0 refuses 6S, forceable"]
    assert match.deal.phase is Phase.FORCE_WINDOW and match.deal.to_act == O
    assert actions(match) == ["force", "waive"]
    match, events = play(match, "force")
    assert said(events) == ["1 forces"]
    assert match.deal.phase is Phase.FORCED and match.deal.to_act == P
    assert actions(match) == ["take => 2H3H4H5H 2S3S4S5S6S"]
    with pytest.raises(MoveError):
        decide(match, Play(P, parse_action("refuse")))
    match, events = play(match, "take => 2H3H4H5H 2S3S4S5S6S")
    assert said(events) == ["0 takes 6S => 2H3H4H5H 2S3S4S5S6S"]
    assert actions(match) == ["discard KC", "discard KD"]
    match, _ = play(match, "discard KD")
    assert match.deal.to_act == O and match.deal.centre == parse_card("KD")
    assert_conserved(match)


@pytest.mark.parametrize("centre", ["6S", "7H"])
@pytest.mark.parametrize(("phase", "decline"), [("offered", "refuse"), ("turned", "leave")])
def test_case_15_a_card_that_needs_another_card_is_not_forceable(
    centre: str, phase: str, decline: str
) -> None:
    match = position(f"{phase} 0 | t0 2S3S4S | h0 KC KD QH 2D AC 6H 5C | c {centre}")
    assert decline in actions(match)
    after, events = play(match, decline)
    assert said(events)[0] == f"0 {decline}s {centre}"  # no ", forceable"
    assert after.deal.phase is not Phase.FORCE_WINDOW
    assert "force" not in actions(after)
    assert_conserved(after)


def test_case_16_refusal_with_an_empty_stock_is_a_draw_next_deal_doubles() -> None:
    match = position("deals 3 | offered 0 | h0 5C KD 2H 3S 4D 6H JS QH AC 7D | c 6C | s -")
    after, events = play(match, "refuse")
    assert said(events) == [
        "0 refuses 6C",
        "6C goes to the waste",
        "the deal is drawn",
        "no winner: score 0:0, next stake 2",
    ]
    assert after.deal.outcome == Outcome(Termination.DRAW, None)
    assert after.next_stake == 2 and not after.over
    assert_conserved(after)
    deck = tuple(range(40))
    after, events = run(after, StartDeal(deck))
    assert events == [DealStarted(2, P, 2, deck)]  # deal 1 was dealt by O: the deal alternates
    assert after.deal.stake == 2


def test_case_17_empty_stock_take_and_discard_play_goes_on() -> None:
    match = position("offered 0 | t0 7CJCQC | h0 AH 2S 3D 4H KD QS 5D | c 6C | s -")
    match, events = play(match, "take", "discard QS")
    assert said(events) == ["0 takes 6C => 6C7CJCQC", "0 discards QS"]
    assert match.deal.phase is Phase.OFFERED and match.deal.to_act == O
    assert actions(match)[-1] == "refuse"  # O decides on the discard
    assert_conserved(match)
    drawn, events = play(match, "refuse")  # refusing it now ends the deal in a draw
    assert "the deal is drawn" in said(events)
    assert drawn.deal.outcome == Outcome(Termination.DRAW, None)


def test_case_18_cards_are_conserved_and_table_cards_never_return() -> None:
    """A scripted deal on a fixed deck: P takes whenever it can, O declines; check every step."""
    match, _ = run(None, NewMatch(first_dealer=O, deals=1), StartDeal(tuple(range(40))))
    on_table = [0, 0]
    while match.to_act is not None:
        listed = legal_actions(match)
        match, _ = play(match, listed[0] if match.to_act == P else listed[-1])
        assert_conserved(match)
        for seat in (P, O):
            now = match.deal.table_masks[seat]
            assert on_table[seat] & ~now == 0, "a table card left the table"
            on_table[seat] = now
    assert match.deal.outcome is not None
