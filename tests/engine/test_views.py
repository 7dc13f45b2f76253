"""Views: no seat view, spectator view or visible event ever shows a hidden card."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import fields

import pytest

from engine.actions import NewMatch, Play, Resign, StartDeal
from engine.cards import ALL_CARDS, CardMask, cards_of, format_card, parse_card
from engine.errors import WrongPhase
from engine.game import decide, evolve
from engine.game_events import CardDeclined, CardWasted, DealStarted, Decline, Event
from engine.legal import legal_actions
from engine.notation import format_action, parse_position
from engine.rules import PRESETS
from engine.state import Match, Phase
from engine.views import (
    NEXT_DEAL,
    DealtView,
    format_visible_event,
    seat_parts,
    seat_view,
    spectator_view,
    stored_parts,
    transcript,
    visible_event,
    with_seat,
)

CARD_TOKEN = re.compile(r"(?<![A-Za-z0-9])((?:[A2-7JQK][CDHS])+)(?![A-Za-z0-9])")
CARDS = {format_card(c): c for c in ALL_CARDS}
VIEWERS: tuple[int | None, ...] = (0, 1, None)


def random_game(seed: int) -> Iterator[tuple[Match, Event]]:
    """Play a seeded random match under a random preset; yield the state after every event."""
    rng = random.Random(seed)
    rules = rng.choice(sorted(PRESETS.values(), key=lambda r: r.name))
    command: NewMatch | StartDeal | Play | Resign = NewMatch(
        rules, rng.randrange(2), rng.choice([1, 2, 3]), rng.choice([None, 2])
    )
    match: Match | None = None
    while match is None or not match.over:
        for event in decide(match, command):
            match = evolve(match, event)
            yield match, event
        assert match is not None
        if match.deal is None or match.deal.phase is Phase.OVER:
            deck = list(ALL_CARDS)
            rng.shuffle(deck)
            command = StartDeal(tuple(deck))
        elif rng.random() < 0.002:
            command = Resign(rng.randrange(2))
        else:
            command = Play(match.deal.to_act, rng.choice(legal_actions(match)))


def cards_named(text: str) -> CardMask:
    """Return every card named in a text as a whole token (melds like ``5S6S7S`` included)."""
    mask = 0
    for token in CARD_TOKEN.findall(text):
        for i in range(0, len(token), 2):
            mask |= 1 << CARDS[token[i : i + 2]]
    return mask


def hidden_from(match: Match, viewer: int | None, waste: bool = True) -> CardMask:
    """Return the cards ``viewer`` (None for a spectator) must not see in this state.

    The stock always; the other hands until the deal is over; the waste, which lies face down,
    in views (``waste``), but not in events: a wasted card was the face-up centre card before.
    """
    deal = match.deal
    if deal is None:
        return 0
    hidden = sum(1 << c for c in (*deal.stock, *(deal.waste if waste else ())))
    if deal.phase is not Phase.OVER:
        hidden |= sum(h for s, h in enumerate(deal.hands) if s != viewer)
    return hidden


def view_of(match: Match, viewer: int | None) -> str:
    view = spectator_view(match) if viewer is None else seat_view(match, viewer)
    return json.dumps(view)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200))
def test_no_view_or_visible_event_shows_a_hidden_card_at_any_step(seed: int) -> None:
    for match, event in random_game(seed):
        for viewer in VIEWERS:
            named = cards_named(view_of(match, viewer))
            assert not named & hidden_from(match, viewer), cards_of(
                named & hidden_from(match, viewer)
            )
            if match.deal is not None and viewer is not None:
                own = match.deal.hands[viewer]
                assert named & own == own  # the seat does see its own hand
            seen = visible_event(event, viewer)
            assert not isinstance(seen, DealStarted)
            named = cards_named(format_visible_event(seen)) | cards_held(seen)
            assert not named & hidden_from(match, viewer, waste=False), format_visible_event(seen)


def cards_held(event: object) -> CardMask:
    """Return the cards in the fields of an event: ``card``, ``hand``, ``table`` and ``deck``."""
    mask = 0
    for field in fields(event):  # type: ignore[arg-type]
        value = getattr(event, field.name)
        if field.name in ("card", "hand"):
            mask |= value if field.name == "hand" else 1 << value
        elif field.name == "table":
            mask |= sum(value)
        elif field.name == "deck":
            mask |= sum(1 << c for c in value)
    return mask


def test_the_scanners_find_cards_in_melds_and_fields() -> None:
    assert cards_named('{"a": ["take 5S => 5S6S7S"], "b": "7H", "phase": "offered"}') == (
        cards_named("5S 6S 7S 7H")
    )
    assert cards_held(DealStarted(1, 0, 1, (3, 4))) == 0b11000
    assert cards_held(CardWasted(5)) == 1 << 5


def test_views_are_json_with_counts_for_what_is_face_down() -> None:
    match = parse_position(
        "offered 0 | t0 2S3S4S | h0 5S KC KD KH | h1 AC 2C | c 6S | s 7D QD | w 3H"
    )
    view = seat_view(match, 0)
    assert json.loads(json.dumps(view)) == view
    deal = view["deal"]
    assert isinstance(deal, dict)
    assert (deal["stock_count"], deal["waste_count"], deal["centre"]) == (2, 1, "6S")
    assert deal["players"] == [
        {
            "seat": 0,
            "table": [["2S", "3S", "4S"]],
            "hand": ["5S", "KC", "KD", "KH"],
            "hand_count": 4,
        },
        {"seat": 1, "table": [], "hand": None, "hand_count": 2},
    ]
    assert "take 5S KC KD KH => 2S3S4S5S6S KCKDKH" in str(view["legal_actions"])
    assert seat_view(match, 1)["legal_actions"] == []
    spectator = spectator_view(match)
    assert spectator["legal_actions"] == [] and spectator["seat"] is None
    assert not cards_named(json.dumps(spectator)) & hidden_from(match, None)
    assert cards_named(json.dumps(spectator)) == cards_named("2S3S4S 6S")


@pytest.mark.parametrize("seed", range(20))
def test_a_seat_view_is_the_spectator_view_with_the_seats_part(seed: int) -> None:
    for match, _ in random_game(seed):
        spectator = spectator_view(match)
        parts = seat_parts(match)
        for seat in (0, 1):
            assert json.dumps(with_seat(spectator, parts[seat])) == json.dumps(
                seat_view(match, seat)
            )
            named = cards_named(json.dumps(parts[seat]))
            assert not named & hidden_from(match, seat), cards_of(named & hidden_from(match, seat))
        assert json.dumps(spectator) == json.dumps(spectator_view(match)), "left unchanged"


@pytest.mark.parametrize("seed", range(20))
def test_the_stored_parts_are_the_spectator_view_and_the_seat_parts(seed: int) -> None:
    for match, _ in random_game(seed):
        shared, *parts = stored_parts(match)
        spectator = {"seat": None, **shared, "legal_actions": []}
        assert json.dumps(spectator) == json.dumps(spectator_view(match))
        assert json.dumps(parts) == json.dumps(list(seat_parts(match)))


def test_a_seat_part_holds_its_hand_and_its_legal_actions_only() -> None:
    match = parse_position("offered 0 | t0 2S3S4S | h0 5S KC KD KH | h1 AC 2C | c 6S | s 7D QD")
    mine, theirs = seat_parts(match)
    assert set(mine) == {"seat", "hand", "legal_actions"}
    assert mine["hand"] == ["5S", "KC", "KD", "KH"] and mine["legal_actions"]
    assert theirs == {"seat": 1, "hand": ["AC", "2C"], "legal_actions": []}
    assert seat_parts(Match(), seated=False) == (
        {"seat": 0, "hand": None, "legal_actions": []},
        {"seat": 1, "hand": None, "legal_actions": []},
    )


def test_with_seat_refuses_what_is_not_a_seat_part() -> None:
    match = parse_position("offered 0 | h0 5S | h1 AC | c 6S | s 7D")
    spectator = spectator_view(match)
    with pytest.raises(ValueError, match="not a seat part"):
        with_seat(spectator, {"seat": 2, "hand": None, "legal_actions": []})
    with pytest.raises(ValueError, match="not a seat part"):
        with_seat(spectator, {"seat": 0, "hand": None})
    with pytest.raises(ValueError, match="no deal"):
        with_seat(spectator_view(Match()), {"seat": 0, "hand": ["5S"], "legal_actions": []})


@pytest.mark.parametrize("seed", range(10))
def test_the_seat_to_act_sees_exactly_its_legal_actions_and_between_deals_both_next_deal(
    seed: int,
) -> None:
    """Issue 18 c: between deals a view said ``legal_actions: []`` to both seats, and a client
    that follows its view waited for ever; what may happen next is now in the views."""
    between = 0
    for match, _ in random_game(seed):
        if match.to_act is not None:
            expected = [format_action(a) for a in legal_actions(match)]
            assert seat_view(match, match.to_act)["legal_actions"] == expected
            assert seat_view(match, 1 - match.to_act)["legal_actions"] == []
        elif match.between_deals:
            between += 1
            for seat in (0, 1):
                assert seat_view(match, seat)["legal_actions"] == [NEXT_DEAL]
                assert seat_view(match, seat, seated=False)["legal_actions"] == []
        else:  # the match is over: nothing more happens
            assert match.over
            assert [seat_view(match, s)["legal_actions"] for s in (0, 1)] == [[], []]
        assert spectator_view(match)["legal_actions"] == []
    assert between >= 1  # every random match passes between deals at least after MatchStarted


def test_next_deal_is_legal_exactly_between_deals() -> None:
    """``StartDeal`` is decided by the same ``between_deals`` the views offer it by."""
    match = evolve(None, decide(None, NewMatch(deals=2))[0])
    deck = tuple(ALL_CARDS)
    assert match.between_deals and seat_parts(match)[1]["legal_actions"] == [NEXT_DEAL]
    started = evolve(match, decide(match, StartDeal(deck))[0])
    assert not started.between_deals
    with pytest.raises(WrongPhase):
        decide(started, StartDeal(deck))
    done = parse_position("over 0 | outcome draw | h0 5S | h1 AC 2C | s 7D | w 3H")
    assert done.between_deals and seat_parts(done)[0]["legal_actions"] == [NEXT_DEAL]
    over = parse_position("over 0 | outcome draw | h0 5S | h1 AC 2C | s 7D | w 3H | match_over -")
    assert not over.between_deals and seat_parts(over)[0]["legal_actions"] == []


def test_both_hands_are_shown_once_the_deal_is_over() -> None:
    match = parse_position("over 0 | outcome draw | h0 5S | h1 AC 2C | s 7D | w 3H | match_over -")
    for view in (seat_view(match, 0), seat_view(match, 1), spectator_view(match)):
        deal = view["deal"]
        assert isinstance(deal, dict)
        assert [p["hand"] for p in deal["players"]] == [["5S"], ["AC", "2C"]]
        assert "7D" not in json.dumps(view) and "3H" not in json.dumps(view)
        assert deal["to_act"] is None and view["winner"] is None and view["match_over"]


def test_a_dealt_view_holds_only_the_viewers_hand() -> None:
    deck = tuple(ALL_CARDS)
    started = DealStarted(1, 0, 1, deck)
    dealt = evolve(evolve(None, decide(None, NewMatch())[0]), started).deal
    assert dealt is not None
    for seat in (0, 1):
        assert visible_event(started, seat) == DealtView(1, 0, 1, seat, dealt.hands[seat])
    assert visible_event(started, None) == DealtView(1, 0, 1, None, 0)
    assert format_visible_event(visible_event(started, None)) == "deal 1: dealer 0, stake 1"
    assert format_visible_event(visible_event(started, 1)).startswith(
        "deal 1: dealer 0, stake 1, hand AC "
    )


def test_public_events_pass_unchanged() -> None:
    card = parse_card("6S")
    events: list[Event] = [CardDeclined(0, card, Decline.REFUSED, False), CardWasted(card)]
    for event in events:
        assert visible_event(event, 1) is event
    assert transcript([CardWasted(card)], None) == ["6S goes to the waste"]


def test_there_are_two_seats() -> None:
    with pytest.raises(ValueError, match="seat 2"):
        seat_view(Match(), 2)
    with pytest.raises(ValueError, match="seat 2"):
        visible_event(CardWasted(5), 2)
