"""Every worked case of RULES.md section 9, one test each, played through decide and evolve.

P is seat 0 (to act), O is seat 1.  Positions are built by ``positions.position`` from card texts;
the cards nobody names fill O's hand and the stock.
"""

from __future__ import annotations

import pytest
from positions import O, P, cards, play, position, run, table

from engine.actions import Discard, Force, Leave, NewMatch, Play, Refuse, StartDeal, Take, Waive
from engine.cards import FULL_MASK, cards_of, count, parse_card
from engine.errors import IllegalTake, MoveError
from engine.events import (
    CardDeclined,
    CardDiscarded,
    CardTurned,
    CardWasted,
    DealStarted,
    Decline,
    ForceDemanded,
    GameDrawn,
    MatchEnded,
    MeldMade,
    StakesSettled,
    WentOut,
)
from engine.game import decide
from engine.legal import legal_actions
from engine.melds import is_meld
from engine.state import Match, Outcome, Phase, Termination


def takes_of(match: Match) -> list[Take]:
    return [a for a in legal_actions(match) if isinstance(a, Take)]


def c(text: str) -> int:
    return parse_card(text)


def cards_list(text: str) -> list[int]:
    return list(cards_of(cards(text)))


def assert_conserved(match: Match) -> None:
    """RULES.md 9 case 18: every card is in exactly one place; no table card is in a hand."""
    deal = match.deal
    assert deal is not None
    places = [
        *(1 << x for x in deal.stock),
        *(1 << x for x in deal.waste),
        *([1 << deal.centre] if deal.centre is not None else []),
        *deal.hands,
        *(m for t in deal.tables for m in t),
    ]
    assert sum(count(p) for p in places) == 40
    union = 0
    for p in places:
        assert union & p == 0
        union |= p
    assert union == FULL_MASK
    for seat in (0, 1):
        assert deal.table_masks[seat] & (deal.hands[0] | deal.hands[1]) == 0


def test_case_01_runs_over_seven_jack_are_melds() -> None:
    assert is_meld(cards("6H 7H JH"))
    assert is_meld(cards("7C JC QC KC"))


@pytest.mark.parametrize("text", ["QS KS AS", "KD AD 2D", "7H JH KH", "5H 6H 7D"])
def test_case_02_no_wrapping_no_gaps_one_suit(text: str) -> None:
    assert not is_meld(cards(text))


def test_case_03_eight_card_run_is_a_meld_nine_is_not() -> None:
    assert is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD"))
    assert not is_meld(cards("AD 2D 3D 4D 5D 6D 7D JD QD"))
    # through the engine: QD on the 8-card run is legal only as a split, never as one run
    match = position("JS JH 2C 3C KC 4H AS", "AD 2D 3D | 4D 5D 6D 7D JD", "QD")
    assert Take(0, table("AD 2D 3D | 4D 5D 6D 7D JD QD")) in takes_of(match)
    with pytest.raises(IllegalTake) as info:
        decide(match, Play(P, Take(0, table("AD 2D 3D 4D 5D 6D 7D JD QD"))))
    assert info.value.reason == "invalid_meld"


def test_case_04_sets_of_three_and_four() -> None:
    assert is_meld(cards("7S 7H 7D"))
    assert is_meld(cards("7S 7H 7D 7C"))
    assert not is_meld(cards("7S 7H"))
    assert not is_meld(cards("7S 7H JD"))


def test_case_05_nothing_fits_an_empty_table_only_refuse() -> None:
    match = position("5C KD 2H 3S 4D 6H JS QH AC 7D", "", "6C")
    assert legal_actions(match) == [Refuse()]
    with pytest.raises(IllegalTake):
        decide(match, Play(P, Take(cards("5C 6H"))))
    top = match.deal.stock[0]
    after, events = play(match, Refuse())
    assert events == [
        CardDeclined(P, c("6C"), Decline.REFUSED, False),
        CardWasted(c("6C")),
        CardTurned(P, top),
    ]
    assert after.deal.phase is Phase.TURNED and after.deal.to_act == P
    assert after.deal.waste[-1] == c("6C")
    assert_conserved(after)


def test_case_06_lay_off_on_the_run_then_discard() -> None:
    match = position("AH 2S 3D 4H KD QS 5D", "7C JC QC", "6C")
    assert legal_actions(match) == [Take(0, table("6C 7C JC QC")), Refuse()]
    after, events = play(match, Take(0))
    assert events == [MeldMade(P, c("6C"), 0, table("6C 7C JC QC"))]
    assert after.deal.phase is Phase.DISCARD
    assert legal_actions(after) == [Discard(x) for x in cards_list("AH 2S 3D 4H KD QS 5D")]
    after, events = play(after, Discard(c("KD")))
    assert events == [CardDiscarded(P, c("KD"))]
    assert after.deal.phase is Phase.OFFERED and after.deal.to_act == O
    assert after.deal.centre == c("KD")
    assert_conserved(after)


def test_case_07_lay_two_on_the_run_and_a_new_set_in_one_take() -> None:
    match = position("5S KH KD KC 2D AD QC", "2S 3S 4S", "6S")
    both = Take(cards("5S KH KD KC"), table("2S 3S 4S 5S 6S | KH KD KC"))
    assert both in takes_of(match)
    assert Take(cards("5S"), table("2S 3S 4S 5S 6S")) in takes_of(match)
    assert all(t.hand & cards("5S") for t in takes_of(match))  # 6S needs 5S to reach the run
    after, events = play(match, both)
    assert events == [MeldMade(P, c("6S"), cards("5S KH KD KC"), both.table)]
    assert after.deal.hands[P] == cards("2D AD QC")
    assert legal_actions(after) == [Discard(x) for x in cards_list("2D AD QC")]
    after, _ = play(after, Discard(c("QC")))
    assert count(after.deal.hands[P]) + count(after.deal.table_masks[P]) == 10
    assert_conserved(after)


def test_case_08_rearranging_the_table_in_a_take() -> None:
    match = position("JH JD 2C 3C KD 4H AD", "6S 7S JS", "5S")
    rearranged = Take(cards("JH JD"), table("5S 6S 7S | JS JH JD"))
    assert rearranged in takes_of(match)
    assert Take(0, table("5S 6S 7S JS")) in takes_of(match)
    after, events = play(match, rearranged)
    assert events == [MeldMade(P, c("5S"), cards("JH JD"), table("5S 6S 7S | JS JH JD"))]
    assert after.deal.tables[P] == table("5S 6S 7S | JS JH JD")
    assert after.deal.phase is Phase.DISCARD
    assert_conserved(after)


def test_case_09_a_take_may_not_leave_two_cards_must_refuse() -> None:
    match = position("5C KD 2H 3S 4D QH AC", "6C 6H 6S", "4C")
    assert legal_actions(match) == [Refuse()]
    with pytest.raises(IllegalTake) as info:
        decide(match, Play(P, Take(cards("5C"), table("4C 5C 6C | 6H 6S"))))
    assert info.value.reason == "invalid_meld"
    with pytest.raises(IllegalTake) as info:
        decide(match, Play(P, Take(cards("5C"))))
    assert info.value.reason == "no_arrangement"
    after, events = play(match, Refuse())
    assert events[0] == CardDeclined(P, c("4C"), Decline.REFUSED, False)
    assert isinstance(events[1], CardWasted) and isinstance(events[2], CardTurned)
    assert_conserved(after)


def test_case_10_going_out_with_eleven_no_discard() -> None:
    match = position("QC KC", "2S 3S 4S 5S | 7H 7D 7C 7S", "JC")
    out = Take(cards("QC KC"), table("2S 3S 4S 5S | 7H 7D 7C 7S | JC QC KC"))
    borrowed = Take(cards("QC KC"), table("2S 3S 4S 5S | 7H 7D 7S | 7C JC QC KC"))
    with_both = [t for t in takes_of(match) if t.hand == cards("QC KC")]
    assert with_both == [out, borrowed]  # the default arrangement keeps the existing melds
    assert Take(cards("QC"), table("2S 3S 4S 5S | 7H 7D 7S | 7C JC QC")) in takes_of(match)
    after, events = play(match, out)
    assert events == [
        MeldMade(P, c("JC"), cards("QC KC"), out.table),
        WentOut(P),
        StakesSettled(P, 1, (1, 0), 1),
        MatchEnded(P, (1, 0)),
    ]
    assert not any(isinstance(e, CardDiscarded) for e in events)
    assert after.deal.outcome == Outcome(Termination.OUT, P)
    assert after.deal.hands[P] == 0 and count(after.deal.table_masks[P]) == 11
    assert legal_actions(after) == []
    assert_conserved(after)


AFTER_11 = "AH 2H 3H | 4C 5C 6C | KS KH KD KC"


def test_case_11_ten_down_with_an_empty_hand_is_not_a_win() -> None:
    match = position("QD", "AH 2H 3H | 4C 5C 6C | KS KH KD", "KC")
    take = Take(0, table(AFTER_11))
    assert take in takes_of(match)
    after, events = play(match, take)
    assert events == [MeldMade(P, c("KC"), 0, table(AFTER_11))]
    assert legal_actions(after) == [Discard(c("QD"))]
    after, events = play(after, Discard(c("QD")))
    assert events == [CardDiscarded(P, c("QD"))]
    deal = after.deal
    assert deal.hands[P] == 0 and count(deal.table_masks[P]) == 10
    assert deal.phase is Phase.OFFERED and deal.to_act == O and deal.outcome is None
    assert not after.over
    assert_conserved(after)


@pytest.mark.parametrize("how", ["leaves", "discards"])
def test_case_12_empty_hand_wins_with_a_card_that_fits(how: str) -> None:
    if how == "leaves":
        match = position("", AFTER_11, "7C", phase=Phase.TURNED, to_act=O)
        match, _ = play(match, Leave())
    else:
        o_hand = "7C 2S 3S 5S 7H 7D 7S AD 2D"  # 9 + 3 on the table: O has taken, now discards
        match = position(
            "", AFTER_11, phase=Phase.DISCARD, to_act=O, o_hand=o_hand, o_table="JS JH JD"
        )
        match, _ = play(match, Discard(c("7C")))
    assert match.deal.to_act == P and match.deal.centre == c("7C")
    win = Take(0, table("AH 2H 3H | 4C 5C 6C 7C | KS KH KD KC"))
    assert takes_of(match) == [win]
    after, events = play(match, win)
    assert events[:2] == [MeldMade(P, c("7C"), 0, win.table), WentOut(P)]
    assert after.deal.outcome == Outcome(Termination.OUT, P)
    assert_conserved(after)


def test_case_13_empty_hand_cannot_use_the_card_refuses() -> None:
    match = position("", AFTER_11, "QS")
    assert legal_actions(match) == [Refuse()]
    after, events = play(match, Refuse())
    assert events[0] == CardDeclined(P, c("QS"), Decline.REFUSED, False)
    assert after.deal.phase is Phase.TURNED and after.deal.to_act == P
    assert_conserved(after)


def test_case_14_forcing_a_refused_card_that_lays_off() -> None:
    match = position("KC KD", "2S 3S 4S 5S | 2H 3H 4H 5H", "6S")
    match, events = play(match, Refuse())
    assert events == [CardDeclined(P, c("6S"), Decline.REFUSED, True)]
    assert match.deal.phase is Phase.FORCE_WINDOW and match.deal.to_act == O
    assert legal_actions(match) == [Force(), Waive()]
    match, events = play(match, Force())
    assert events == [ForceDemanded(O)]
    assert match.deal.phase is Phase.FORCED and match.deal.to_act == P
    lay_off = Take(0, table("2S 3S 4S 5S 6S | 2H 3H 4H 5H"))
    assert legal_actions(match) == [lay_off]
    with pytest.raises(MoveError):
        decide(match, Play(P, Refuse()))
    match, events = play(match, lay_off)
    assert events == [MeldMade(P, c("6S"), 0, lay_off.table)]
    assert legal_actions(match) == [Discard(c("KC")), Discard(c("KD"))]
    match, _ = play(match, Discard(c("KD")))
    assert match.deal.to_act == O and match.deal.centre == c("KD")
    assert_conserved(match)


@pytest.mark.parametrize("centre", ["6S", "7H"])
@pytest.mark.parametrize("decline", [Refuse(), Leave()])
def test_case_15_a_card_that_needs_another_card_is_not_forceable(
    centre: str, decline: Refuse | Leave
) -> None:
    phase = Phase.OFFERED if isinstance(decline, Refuse) else Phase.TURNED
    match = position("KC KD QH 2D AC 6H 5C", "2S 3S 4S", centre, phase=phase)
    assert decline in legal_actions(match)
    after, events = play(match, decline)
    assert events[0] == CardDeclined(P, c(centre), decline_how(decline), False)
    assert after.deal.phase is not Phase.FORCE_WINDOW
    assert not any(isinstance(e, ForceDemanded) for e in events)
    assert_conserved(after)


def decline_how(action: Refuse | Leave) -> Decline:
    return Decline.REFUSED if isinstance(action, Refuse) else Decline.LEFT


def test_case_16_refusal_with_an_empty_stock_is_a_draw_next_deal_doubles() -> None:
    match = position("5C KD 2H 3S 4D 6H JS QH AC 7D", "", "6C", stock="", deals=3)
    assert match.deal.stock == ()
    after, events = play(match, Refuse())
    assert events == [
        CardDeclined(P, c("6C"), Decline.REFUSED, False),
        CardWasted(c("6C")),
        GameDrawn(),
        StakesSettled(None, 0, (0, 0), 2),
    ]
    assert after.deal.outcome == Outcome(Termination.DRAW, None)
    assert after.next_stake == 2 and not after.over
    assert_conserved(after)
    deck = tuple(range(40))
    after, events = run(after, StartDeal(deck))
    assert events == [DealStarted(2, after.deal.dealer, 2, deck)]
    assert after.deal.stake == 2


def test_case_17_empty_stock_take_and_discard_play_goes_on() -> None:
    match = position("AH 2S 3D 4H KD QS 5D", "7C JC QC", "6C", stock="")
    match, events = play(match, Take(0), Discard(c("QS")))
    assert not any(isinstance(e, GameDrawn | StakesSettled) for e in events)
    assert match.deal.phase is Phase.OFFERED and match.deal.to_act == O
    assert match.deal.centre == c("QS")
    assert Refuse() in legal_actions(match)
    assert_conserved(match)
    drawn, events = play(match, Refuse())  # O decides: refusing now ends the deal in a draw
    assert GameDrawn() in events
    assert drawn.deal.outcome == Outcome(Termination.DRAW, None)


def test_case_18_cards_are_conserved_and_table_cards_never_return() -> None:
    """A scripted deal on a fixed deck: P takes whenever it can, O declines; check every step."""
    deck = tuple(range(40))
    match, _ = run(None, NewMatch(first_dealer=O, deals=1), StartDeal(deck))
    seen_on_table = [0, 0]
    while match.to_act is not None:
        actions = legal_actions(match)
        choice = actions[0] if match.to_act == P else actions[-1]
        match, _ = play(match, choice)
        assert_conserved(match)
        for seat in (P, O):
            now = match.deal.table_masks[seat]
            assert seen_on_table[seat] & ~now == 0, "a table card left the table"
            seen_on_table[seat] = now
    assert match.deal.outcome is not None
