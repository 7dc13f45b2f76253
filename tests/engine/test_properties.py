"""Seeded random matches over every preset, with every invariant checked after every step.

After each command: the 40 cards are conserved (RULES.md 9 case 18), hand + table is 10 between
turns (11 for the taker until the discard), every table meld is valid, tables only grow, the
state equals the replay of all events, decide accepts every listed action and rejects unlisted
ones, and in take phases a brute force over hand subsets and ``splits`` agrees with the takes of
``legal_actions``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.actions import (
    Action,
    Command,
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
from engine.cards import ALL_CARDS, FULL_MASK, CardMask, cards_of, count
from engine.errors import EngineError, MoveError, NotYourTurn
from engine.game import decide, evolve, fold
from engine.game_events import CardDeclined, Event, WentOut
from engine.legal import legal_actions
from engine.melds import is_meld, melds_for, splits
from engine.rules import PRESETS, Forcing, Rules
from engine.state import Match, Phase, Termination

PRESET_NAMES = sorted(PRESETS)
TAKE_PHASES = (Phase.OFFERED, Phase.TURNED, Phase.FORCED)
BETWEEN_TURNS = (Phase.TURN, Phase.OFFERED, Phase.TURNED, Phase.FORCE_WINDOW, Phase.FORCED)
STYLES = ("uniform", "taker", "decliner")


# --- invariants of one state --------------------------------------------------------------------


def check_conserved(match: Match) -> None:
    deal = match.deal
    assert deal is not None
    places = [1 << c for c in (*deal.stock, *deal.waste)]
    places += [1 << deal.centre] if deal.centre is not None else []
    places += [*deal.hands, *(m for t in deal.tables for m in t)]
    union = 0
    for p in places:
        assert union & p == 0, f"card(s) {cards_of(union & p)} are in two places"
        union |= p
    assert union == FULL_MASK and sum(count(p) for p in places) == 40


def check_counts(match: Match) -> None:
    deal = match.deal
    assert deal is not None
    held = [count(deal.hands[s]) + count(deal.table_masks[s]) for s in (0, 1)]
    if deal.phase in BETWEEN_TURNS:
        assert held == [10, 10]
    elif deal.phase is Phase.DISCARD:
        assert held[deal.to_act] == 11 and held[1 - deal.to_act] == 10
        assert deal.hands[deal.to_act], "a taker with an empty hand would have gone out"
    else:
        outcome = deal.outcome
        assert outcome is not None
        if outcome.termination is Termination.OUT:
            winner = outcome.winner
            assert winner is not None
            assert deal.hands[winner] == 0 and count(deal.table_masks[winner]) == 11
            assert held[1 - winner] == 10
        elif outcome.termination is Termination.DRAW:
            assert held == [10, 10] and not deal.stock


def check_tables(match: Match, before: Match | None) -> None:
    deal = match.deal
    assert deal is not None
    for seat in (0, 1):
        melds = deal.tables[seat]
        assert list(melds) == sorted(melds)
        assert all(is_meld(m, match.rules.max_run_length) for m in melds)
        old = before.deal if before is not None else None
        if old is not None and old.number == deal.number:
            assert old.table_masks[seat] & ~deal.table_masks[seat] == 0, "a table card left"
            assert deal.waste[: len(old.waste)] == old.waste
            assert old.stock[len(old.stock) - len(deal.stock) :] == deal.stock


def check_phase_actions(match: Match, listed: list[Action]) -> None:
    deal = match.deal
    assert deal is not None
    assert len(listed) == len(set(listed)), "an action is listed twice"
    kinds = [type(a) for a in listed]
    phase, seat = deal.phase, deal.to_act
    if phase is Phase.TURN:
        assert listed == [TurnCard()]
    elif phase is Phase.DISCARD:
        assert listed == [Discard(c) for c in cards_of(deal.hands[seat])]
    elif phase is Phase.FORCE_WINDOW:
        assert listed == [Force(), Waive()]
    elif phase is Phase.FORCED:
        assert listed and set(kinds) == {Take}
    elif phase in (Phase.OFFERED, Phase.TURNED):
        decline = Refuse() if phase is Phase.OFFERED else Leave()
        assert (decline in listed) != (
            match.rules.forcing is Forcing.AUTOMATIC and lays_off(match, seat, deal.centre)
        )
        assert kinds == sorted(kinds, key=[MeldHand, Take, Refuse, Leave].index)
        if not match.rules.hand_melds_without_centre_card:
            assert MeldHand not in kinds
    else:
        assert listed == []


def check_take_order(match: Match, listed: list[Action]) -> None:
    """Takes come by hand cards; each group starts with the default arrangement (docs/rules.md)."""
    assert match.deal is not None
    takes = [a for a in listed if isinstance(a, Take)]
    assert [t.hand for t in takes] == sorted(t.hand for t in takes)
    old = set(match.deal.tables[match.deal.to_act])
    groups: dict[CardMask, list[Take]] = {}
    for t in takes:
        groups.setdefault(t.hand, []).append(t)
    for group in groups.values():
        best = min(
            group, key=lambda t: (-len(old & set(t.table or ())), len(t.table or ()), t.table)
        )
        assert group[0] == best


def lays_off(match: Match, seat: int, card: int | None) -> bool:
    """Brute force of RULES.md 7: the card extends one existing meld as it is."""
    assert match.deal is not None and card is not None
    limit = match.rules.max_run_length
    return any(is_meld(m | 1 << card, limit) for m in match.deal.tables[seat])


# --- brute-force legality -----------------------------------------------------------------------


def subsets(mask: CardMask) -> list[CardMask]:
    out = [0]
    for c in cards_of(mask):
        out += [s | 1 << c for s in out]
    return out


def live_cards(hand: CardMask, available: CardMask, limit: int | None) -> CardMask:
    """Hand cards that lie in some meld of the available cards (no other card can be melded)."""
    live = 0
    for m in melds_for(limit):
        if m & available == m:
            live |= m
    return hand & live


def brute_tables(required: CardMask, hand: CardMask, limit: int | None) -> set[tuple]:
    """Every (hand cards, table) with the table a split of required + those hand cards."""
    live = live_cards(hand, required | hand, limit)
    return {(used, s) for used in subsets(live) for s in splits(required | used, limit)}


def check_brute_force(match: Match, listed: list[Action]) -> None:
    deal = match.deal
    assert deal is not None
    if deal.phase not in TAKE_PHASES:
        return
    seat, limit = deal.to_act, match.rules.max_run_length
    hand, table = deal.hands[seat], deal.table_masks[seat]
    assert deal.centre is not None
    takes = {(a.hand, a.table) for a in listed if isinstance(a, Take)}
    assert takes == brute_tables(table | 1 << deal.centre, hand, limit)
    melds = {(a.hand, a.table) for a in listed if isinstance(a, MeldHand)}
    if match.rules.hand_melds_without_centre_card and deal.phase is not Phase.FORCED:
        assert melds == {(u, t) for u, t in brute_tables(table, hand, limit) if u}
    else:
        assert not melds


# --- decide agrees with the list ----------------------------------------------------------------


def normal(action: Action) -> Action:
    if isinstance(action, Take | MeldHand) and action.table is not None:
        return type(action)(action.hand, tuple(sorted(action.table)))
    return action


def candidates(rng: random.Random, match: Match, listed: list[Action]) -> list[Action]:
    """Actions near the legal ones: every kind, random cards, random and mutated tables."""
    deal = match.deal
    assert deal is not None
    seat, limit = deal.to_act, match.rules.max_run_length
    hand, table = deal.hands[seat], deal.table_masks[seat]
    centre = 0 if deal.centre is None else 1 << deal.centre
    out: list[Action] = [TurnCard(), Refuse(), Leave(), Force(), Waive()]
    out += [Discard(rng.randrange(40)), Discard(rng.choice(cards_of(hand) or (0,)))]
    for _ in range(3):
        used = sum(1 << c for c in cards_of(hand) if rng.random() < 0.3)
        if rng.random() < 0.2:
            used |= 1 << rng.randrange(40)
        tables = list(islice(splits(table | centre | used, limit), 3))
        tables.append((rng.choice(melds_for(None)), *(tables[0] if tables else ())))
        out.append(Take(used, None))
        for t in tables:
            out += [Take(used, t), MeldHand(used, t)]
    for action in rng.sample(listed, min(3, len(listed))):
        if isinstance(action, Take | MeldHand) and action.table:
            out.append(type(action)(action.hand, action.table[1:]))
            out.append(type(action)(action.hand ^ 1 << rng.randrange(40), action.table))
    return out


def check_decide_agrees(rng: random.Random, match: Match, listed: list[Action]) -> None:
    deal = match.deal
    assert deal is not None
    seat = deal.to_act
    legal = set(listed)
    for action in listed:
        assert decide(match, Play(seat, action)), action
    for action in rng.sample(listed, min(2, len(listed))):
        with pytest.raises(NotYourTurn):
            decide(match, Play(1 - seat, action))
    take_hands = {a.hand for a in listed if isinstance(a, Take)}
    for action in candidates(rng, match, listed):
        if isinstance(action, Take) and action.table is None:
            ok = action.hand in take_hands
        else:
            ok = normal(action) in legal
        try:
            decide(match, Play(seat, action))
        except MoveError:
            assert not ok, f"decide rejects the listed {action}"
        else:
            assert ok, f"decide accepts the unlisted {action}"


# --- random play --------------------------------------------------------------------------------


@dataclass
class Walk:
    """One random match, checked at every step; ``seen`` counts the events that happened."""

    rng: random.Random
    rules: Rules
    brute: bool = False
    agree: bool = True
    seen: Counter[str] = field(default_factory=Counter)
    events: list[Event] = field(default_factory=list)
    match: Match | None = None

    def apply(self, command: Command) -> None:
        before = self.match
        new = decide(before, command)
        self.events += new
        self.seen.update(type(e).__name__ for e in new)
        for e in new:
            self.match = evolve(self.match, e)
            if isinstance(e, CardDeclined):
                self.check_decline(before, e)
        if isinstance(command, Play) and isinstance(command.action, Take):
            assert before is not None and before.deal is not None
            whole_hand = command.action.hand == before.deal.hands[command.seat]
            assert (WentOut(command.seat) in new) == whole_hand, "out is a take of the whole hand"
        self.check(before)

    def check_decline(self, before: Match | None, event: CardDeclined) -> None:
        assert before is not None
        fits = lays_off(before, event.seat, event.card)
        assert event.forceable == (fits and self.rules.forcing is Forcing.OPTIONAL)
        assert not (fits and self.rules.forcing is Forcing.AUTOMATIC), "declined a forced card"

    def check(self, before: Match | None) -> None:
        match = self.match
        assert match is not None
        if match.deal is None:
            return
        check_conserved(match)
        check_counts(match)
        check_tables(match, before)
        listed = legal_actions(match)
        assert legal_actions(match) == listed, "legal_actions is deterministic"
        if match.to_act is None:
            assert listed == []
            assert fold(self.events) == match, "replay differs from the state"
            if match.deal.outcome is not None and before is not None and before.to_act is not None:
                assert match.results[-1] == match.deal.outcome
                assert len(match.results) == match.deals_played == match.deal.number
            return
        check_phase_actions(match, listed)
        check_take_order(match, listed)
        if self.brute:
            check_brute_force(match, listed)
        if self.agree:
            check_decide_agrees(self.rng, match, listed)

    def choose(self, style: str, listed: list[Action]) -> Action:
        declines = [a for a in listed if isinstance(a, Refuse | Leave)]
        others = [a for a in listed if not isinstance(a, Refuse | Leave)]
        if style == "taker" and others:
            return self.rng.choice(others)
        if style == "decliner" and declines and self.rng.random() < 0.8:
            return declines[0]
        return self.rng.choice(listed)

    def play(self, deals: int, resign_rate: float = 0.002) -> None:
        self.apply(NewMatch(self.rules, self.rng.randrange(2), deals, self.rng.choice([None, 3])))
        while self.match is not None and not self.match.over:
            if self.rng.random() < resign_rate:
                self.apply(Resign(self.rng.randrange(2)))
                break
            if self.match.to_act is None:
                deck = list(ALL_CARDS)
                self.rng.shuffle(deck)
                self.apply(StartDeal(tuple(deck)))
                styles = (self.rng.choice(STYLES), self.rng.choice(STYLES))
                continue
            seat = self.match.to_act
            self.apply(Play(seat, self.choose(styles[seat], legal_actions(self.match))))
        assert self.match is not None and self.match.over
        assert fold(self.events) == self.match
        with pytest.raises(EngineError):
            decide(self.match, StartDeal(tuple(ALL_CARDS)))


# --- the tests ----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**64 - 1))
def test_random_deals_keep_every_invariant(name: str, seed: int) -> None:
    """7 presets x 60 matches of up to 5 deals: about 1,700 deals, brute-force legality included."""
    Walk(random.Random(seed), PRESETS[name], brute=True, agree=False).play(deals=5)


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESET_NAMES)
@settings(max_examples=10, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**64 - 1))
def test_decide_accepts_exactly_the_listed_actions(name: str, seed: int) -> None:
    """At every step decide accepts each listed action and rejects the unlisted candidates."""
    Walk(random.Random(seed), PRESETS[name], agree=True).play(deals=3)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_random_play_reaches_every_kind_of_event(name: str) -> None:
    """The walks are not vacuous: outs, draws, forcing, hand melds and resigning all happen."""
    seen: Counter[str] = Counter()
    rng = random.Random(f"coverage-{name}")
    for _ in range(25):
        Walk(rng, PRESETS[name], agree=False, seen=seen).play(deals=4, resign_rate=0.005)
    rules = PRESETS[name]
    expected = {"WentOut", "GameDrawn", "MeldMade", "CardDiscarded", "CardWasted", "Resigned"}
    expected |= {"MatchEnded", "StakesSettled"}
    if rules.forcing is Forcing.OPTIONAL:
        expected |= {"ForceDemanded", "ForceWaived"}
    if rules.hand_melds_without_centre_card:
        expected.add("HandMelded")
    assert expected <= set(seen), expected - set(seen)
    if rules.forcing is not Forcing.OPTIONAL:
        assert not {"ForceDemanded", "ForceWaived"} & set(seen)
    if not rules.hand_melds_without_centre_card:
        assert "HandMelded" not in seen
