"""``is_legal`` (decide's fast path) agrees with ``legal_actions`` at every step of random deals."""

from __future__ import annotations

import random

import pytest

from engine.actions import (
    Action,
    Discard,
    Force,
    Leave,
    MeldHand,
    NewMatch,
    Play,
    Refuse,
    StartDeal,
    Take,
    TurnCard,
    Waive,
)
from engine.game import decide, evolve
from engine.legal import is_legal, legal_actions
from engine.rules import PRESETS
from engine.state import Match

SIMPLE: tuple[Action, ...] = (TurnCard(), Refuse(), Leave(), Force(), Waive())


def near_misses(match: Match, listed: list[Action], rng: random.Random) -> list[Action]:
    """Return actions close to the listed ones: cards added or dropped, melds merged or split."""
    deal = match.deal
    assert deal is not None
    out: list[Action] = [*SIMPLE, *(Discard(c) for c in range(40))]
    for action in listed:
        if not isinstance(action, Take | MeldHand) or action.table is None:
            continue
        table = action.table
        kind = type(action)
        extra = rng.randrange(40)
        out.append(kind(action.hand | 1 << extra, table))  # a card the table does not hold
        out.append(kind(action.hand, tuple(sorted((*table, 1 << extra)))))
        if len(table) >= 2:
            merged = tuple(sorted((table[0] | table[1], *table[2:])))
            out.append(kind(action.hand, merged))
            out.append(kind(action.hand, table[::-1]))  # not in canonical order
        meld = table[0]
        low = meld & -meld
        out.append(kind(action.hand, tuple(sorted((meld ^ low, *table[1:])))))  # a card short
        if action.hand:
            out.append(kind(action.hand & (action.hand - 1), table))
    return out


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_is_legal_agrees_with_legal_actions(preset: str) -> None:
    rng = random.Random(preset)
    for _ in range(60):
        match: Match | None = None
        deck = list(range(40))
        rng.shuffle(deck)
        for command in (NewMatch(PRESETS[preset], rng.randrange(2)), StartDeal(tuple(deck))):
            for event in decide(match, command):
                match = evolve(match, event)
        assert match is not None
        while match.to_act is not None:
            listed = legal_actions(match)
            for action in listed:
                assert is_legal(match, action), action
            for action in near_misses(match, listed, rng):
                assert is_legal(match, action) == (action in listed), action
            action = rng.choice(listed)
            for event in decide(match, Play(match.to_act, action)):
                match = evolve(match, event)
        assert not is_legal(match, TurnCard()) and not is_legal(match, Discard(0))
