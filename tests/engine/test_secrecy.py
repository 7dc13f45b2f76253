"""Secrecy: ``engine.secrecy.sees`` shows each viewer all it may see and nothing hidden from it.

Random matches played by the engine's bots, checked for both seats and the spectator at every
step: the state's view, the engine event (``visible_event``) and the wire events the gateway
would send (``event_owner`` and ``hashes_shown``) hold no card hidden from that viewer (the
other seat's hand while the deal is played, the stock) and no seed before ``deal_revealed``,
and they hold everything the rules make public.
"""

from __future__ import annotations

import doctest
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import secrecy
from engine.actions import NewMatch, Play, StartDeal
from engine.bots import make_bot
from engine.cards import ALL_CARDS, CardMask, format_card
from engine.game import decide, evolve
from engine.game_events import DealStarted, Event, StakesSettled
from engine.legal import legal_actions
from engine.notation import format_action
from engine.rules import PRESETS
from engine.secrecy import VIEWERS, Viewer, event_owner, hashes_shown, sees
from engine.state import Match, Phase
from engine.views import (
    NEXT_DEAL,
    DealtView,
    format_visible_event,
    seat_view,
    spectator_part,
    spectator_view,
    stored_parts,
    visible_event,
    with_seat,
)
from events import domain
from events.fairness import commitment, deal_context, seed_hex, shuffle
from events.mapping import reveal, to_wire

CARD_TOKEN = re.compile(r"(?<![A-Za-z0-9])((?:[A2-7JQK][CDHS])+)(?![A-Za-z0-9])")
CARDS = {format_card(c): c for c in ALL_CARDS}
TABLE = "T-secrecy"


def cards_named(text: str) -> CardMask:
    """Every card named in a text as a whole token (melds such as ``5S6S7S`` included)."""
    mask = 0
    for token in CARD_TOKEN.findall(text):
        for i in range(0, len(token), 2):
            mask |= 1 << CARDS[token[i : i + 2]]
    return mask


def hidden_from(match: Match, viewer: Viewer, *, waste: bool) -> CardMask:
    """The cards ``viewer`` must not see now: the stock, the other hands until the deal is over,
    and in views the waste (face down; an event may name a wasted card, which lay face up)."""
    deal = match.deal
    if deal is None:
        return 0
    hidden = sum(1 << c for c in (*deal.stock, *(deal.waste if waste else ())))
    if deal.phase is not Phase.OVER:
        hidden |= sum(h for s, h in enumerate(deal.hands) if s != viewer)
    return hidden


@dataclass
class Step:
    """The state after one engine event, that event and the wire events it became."""

    match: Match
    event: Event
    wire: list[domain.TableEvent]
    seed: str | None  # the seed of the deal in play, not yet revealed


def random_match(seed: int, preset: str, bots: tuple[str, str], deals: int) -> Iterator[Step]:
    """Play a match between two engine bots, each deal shuffled from a seed as the service
    does; yield every step, a deal's ``deal_revealed`` with its ``stakes_settled``."""
    rng = random.Random(seed)
    players = (make_bot(bots[0]), make_bot(bots[1]))
    match: Match | None = None
    command: NewMatch | StartDeal | Play = NewMatch(PRESETS[preset], rng.randrange(2), deals)
    secret = b""
    while match is None or not match.over:
        for event in decide(match, command):
            match = evolve(match, event)
            promise = commitment(secret) if isinstance(event, DealStarted) else None
            wire = to_wire(event, commitment=promise)
            if isinstance(event, StakesSettled) and match.deal is not None:
                wire.append(reveal(match.deal.number, secret))
            playing = match.deal is not None and match.deal.phase is not Phase.OVER
            yield Step(match, event, wire, seed_hex(secret) if playing else None)
        assert match is not None
        if match.to_act is None and not match.over:
            secret = rng.randbytes(32)
            number = 1 if match.deal is None else match.deal.number + 1
            command = StartDeal(shuffle(secret, context=deal_context(TABLE, number)))
        elif match.to_act is not None:
            seat = match.to_act
            command = Play(seat, players[seat].choose(match, seat, rng))


def check_view(match: Match, viewer: Viewer) -> None:
    """The view holds no hidden card and every public thing the rules give ``viewer``."""
    view = spectator_view(match) if viewer is None else seat_view(match, viewer)
    shared, *parts = stored_parts(match)
    part = spectator_part() if viewer is None else parts[viewer]
    assert with_seat({"seat": None, **shared}, part) == view  # the stored parts agree
    text = json.dumps(view)
    leaked = cards_named(text) & hidden_from(match, viewer, waste=True)
    assert not leaked, f"{viewer} sees {leaked:#x} in {text}"
    deal = match.deal
    if deal is None:
        return
    shown = view["deal"]
    assert isinstance(shown, dict)
    over = deal.phase is Phase.OVER
    for seat, player in enumerate(shown["players"]):
        assert player["hand_count"] == deal.hands[seat].bit_count()
        assert cards_named(json.dumps(player["table"])) == sum(m for m in deal.tables[seat])
        mine = seat == viewer or over
        assert (player["hand"] is not None) == mine
        if mine:
            assert cards_named(" ".join(player["hand"])) == deal.hands[seat]
    centre = None if deal.centre is None else format_card(deal.centre)
    assert (shown["centre"], shown["stock_count"]) == (centre, len(deal.stock))
    assert (shown["waste_count"], shown["phase"]) == (len(deal.waste), deal.phase.value)
    assert view["scores"] == list(match.scores)
    legal: list[str] = []
    if viewer is not None and viewer == match.to_act:
        legal = [format_action(a) for a in legal_actions(match)]
    elif viewer is not None and match.between_deals:
        legal = [NEXT_DEAL]
    assert view["legal_actions"] == legal


def check_engine_event(step: Step, viewer: Viewer) -> None:
    """The engine event as ``viewer`` sees it holds no hidden card and, for a deal, its hand."""
    seen = visible_event(step.event, viewer)
    line = format_visible_event(seen)
    assert not cards_named(line) & hidden_from(step.match, viewer, waste=False), line
    if isinstance(step.event, DealStarted):
        assert isinstance(seen, DealtView)
        deal = step.match.deal
        assert deal is not None
        assert seen.hand == (0 if viewer is None else deal.hands[viewer])
    else:
        assert seen is step.event  # every other engine event is public


def check_wire_events(step: Step, viewer: Viewer) -> None:
    """The wire events ``viewer`` is sent hold no hidden card and no unrevealed seed; every
    public one reaches it, and each ``hand_dealt`` its own seat."""
    for event in step.wire:
        owner = event_owner(event.TYPE, getattr(event, "seat", None))
        shown = sees(viewer, owner)
        assert shown == (not isinstance(event, domain.HandDealt) or event.seat == viewer)
        if not shown:
            continue
        text = event.model_dump_json()
        leaked = cards_named(text) & hidden_from(step.match, viewer, waste=False)
        assert not leaked, f"{viewer} is sent {leaked:#x} in {text}"
        if step.seed is not None and not isinstance(event, domain.DealRevealed):
            assert step.seed not in text


def check_hashes(steps: list[Step]) -> None:
    """Hashes go out exactly outside a deal in play: not after its ``deal_started`` until its
    ``deal_revealed``, whoever looks."""
    started: int | None = None
    version = 0
    for step in steps:
        for event in step.wire:
            version += 1
            if isinstance(event, domain.DealStarted):
                started = version
            elif isinstance(event, domain.DealRevealed):
                started = None
            in_play = started is not None and version > started
            assert hashes_shown(version, started) is not in_play


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**32 - 1),
    preset=st.sampled_from(sorted(PRESETS)),
    bots=st.tuples(st.sampled_from(["random", "greedy"]), st.sampled_from(["random", "greedy"])),
    deals=st.integers(1, 2),
)
def test_every_viewer_sees_what_is_public_and_nothing_hidden_at_every_step(
    seed: int, preset: str, bots: tuple[str, str], deals: int
) -> None:
    steps = list(random_match(seed, preset, bots, deals))
    for step in steps:
        for viewer in VIEWERS:
            check_view(step.match, viewer)
            check_engine_event(step, viewer)
            check_wire_events(step, viewer)
    check_hashes(steps)


def test_the_scanner_finds_cards_in_melds_and_hands() -> None:
    assert cards_named('["5S6S7S"], "hand": ["KC"], "phase": "offered"') == cards_named(
        "5S 6S 7S KC"
    )
    assert cards_named("stock_count 7, seat 1") == 0


def test_a_seat_owns_its_own_and_everyone_sees_the_public_or_the_revealed() -> None:
    assert [sees(v, None) for v in VIEWERS] == [True, True, True]
    assert [sees(v, 1) for v in VIEWERS] == [False, True, False]
    assert [sees(v, 0, revealed=True) for v in VIEWERS] == [True, True, True]
    assert event_owner("hand_dealt", 1) == 1
    assert event_owner("card_turned", 1) is None
    assert event_owner("hand_dealt", None) is None
    with pytest.raises(ValueError, match="there is no seat 2"):
        sees(2, None)


def test_a_spectator_part_holds_nothing_and_with_seat_refuses_one_that_does() -> None:
    with pytest.raises(ValueError, match="spectator"):
        with_seat({"seat": None, "deal": None}, {**spectator_part(), "legal_actions": ["turn"]})
    with pytest.raises(ValueError, match="spectator"):
        with_seat({"seat": None, "deal": None}, {**spectator_part(), "hand": ["AC"]})


def test_doctests() -> None:
    assert doctest.testmod(secrecy).failed == 0
