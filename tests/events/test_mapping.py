"""Tests of the mapping between engine values and the wire, on seeded random matches."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from engine import actions, game_events
from engine.cards import parse_cards
from engine.game import decide, evolve, fold
from engine.game_events import Decline
from engine.legal import legal_actions
from engine.rules import PRESETS
from engine.secrecy import event_owner
from engine.state import Match, Phase
from events import commands, domain
from events.chain import GENESIS_HASH, verify_chain
from events.commands import parse_command
from events.envelope import Envelope, seal
from events.fairness import commitment, deal_context, shuffle
from events.mapping import (
    cards_from_wire,
    cards_to_wire,
    reveal,
    revealed_decks,
    table_from_wire,
    table_to_wire,
    to_engine,
    to_engine_command,
    to_wire,
)
from events.upcast import parse_event

TABLE = "T-random"
IDS = {"command_id": "c-000001", "table_id": TABLE}


@dataclass
class Played:
    """A random match: engine events, the commands that made them and each deal's seed."""

    events: list[game_events.Event] = field(default_factory=list)
    commands: list[tuple[actions.Command, int | None]] = field(default_factory=list)
    seeds: dict[int, bytes] = field(default_factory=dict)
    match: Match | None = None

    def apply(self, command: actions.Command, seat: int | None = None) -> list[game_events.Event]:
        new = decide(self.match, command)
        for event in new:
            self.match = evolve(self.match, event)
        self.events.extend(new)
        self.commands.append((command, seat))
        return new


def play_match(rng: random.Random) -> Played:
    """Play one match of random legal actions (and now and then a resignation)."""
    played = Played()
    rules = rng.choice(list(PRESETS.values()))
    deals = rng.choice([1, 2, 3, None])
    target = rng.choice([None, 2, 3]) if deals is not None else 2
    played.apply(actions.NewMatch(rules, rng.randrange(2), deals, target))
    while played.match is not None and not played.match.over:
        match = played.match
        if match.deal is None or match.deal.phase is Phase.OVER:
            number = match.deals_played + 1
            played.seeds[number] = rng.randbytes(32)
            deck = shuffle(played.seeds[number], context=deal_context(TABLE, number))
            played.apply(actions.StartDeal(deck))
        elif rng.random() < 0.003:
            played.apply(actions.Resign(match.deal.to_act), match.deal.to_act)
        else:
            seat = match.deal.to_act
            played.apply(actions.Play(seat, rng.choice(legal_actions(match))), seat)
    return played


def matches(count: int, seed: int) -> Iterator[Played]:
    rng = random.Random(seed)
    for _ in range(count):
        yield play_match(rng)


def wire_stream(played: Played) -> list[domain.TableEvent]:
    """The table's wire events: the engine's, with each deal's seed revealed when it ends."""
    out: list[domain.TableEvent] = []
    deal = 0
    for event in played.events:
        if isinstance(event, game_events.DealStarted):
            deal = event.number
            out += to_wire(event, commitment=commitment(played.seeds[deal]))
        else:
            out += to_wire(event, turn_seconds=20)
        if isinstance(event, game_events.StakesSettled):
            out.append(reveal(deal, played.seeds[deal]))
    return out


# --- cards and tables ----------------------------------------------------------------------------


def test_hands_and_melds_read_in_rank_then_suit_order() -> None:
    assert cards_to_wire(cards_from_wire(["KD", "2H", "5C", "2D"])) == ("2D", "2H", "5C", "KD")
    table = table_from_wire([["QC", "JC", "7C"], ["3S", "3H", "3D"], ["AH", "2H", "3C"]])
    assert table_to_wire(table) == (("AH", "2H", "3C"), ("3D", "3H", "3S"), ("7C", "JC", "QC"))
    assert table == tuple(sorted(table))
    assert table_to_wire(()) == ()


def test_deal_started_becomes_a_public_commitment_and_two_secret_hands() -> None:
    seed = bytes(range(32))
    deck = shuffle(seed, context="T-example/1")
    wire = to_wire(game_events.DealStarted(1, 1, 2, deck), commitment=commitment(seed))
    started, first, second = wire
    assert isinstance(started, domain.DealStarted)
    assert (started.number, started.dealer, started.stake) == (1, 1, 2)
    assert started.commitment == commitment(seed)
    assert isinstance(first, domain.HandDealt) and isinstance(second, domain.HandDealt)
    non_dealer = set(parse_cards("JD 5S KD KC 3C 3S JH KS AD 6S"))  # docs/fairness.md example
    assert (first.seat, cards_from_wire(first.cards)) == (0, sum(1 << c for c in non_dealer))
    assert second.seat == 1 and len(second.cards) == 10
    assert [event_owner(e.TYPE, getattr(e, "seat", None)) for e in wire] == [None, 0, 1]
    with pytest.raises(ValueError, match="commitment"):
        to_wire(game_events.DealStarted(1, 1, 2, deck))
    with pytest.raises(ValueError, match="deck_of"):
        to_engine(started)


def test_declines_become_refused_or_left() -> None:
    refused = to_wire(game_events.CardDeclined(0, 26, Decline.REFUSED, True))
    left = to_wire(game_events.CardDeclined(1, 26, Decline.LEFT, False))
    assert refused == [domain.CardRefused(seat=0, card="7H", forceable=True)]
    assert left == [domain.CardLeft(seat=1, card="7H", forceable=False)]
    assert to_engine(refused[0]) == [game_events.CardDeclined(0, 26, Decline.REFUSED, True)]


def test_wire_only_events_map_to_no_engine_event() -> None:
    for event in (
        domain.PlayerJoined(seat=0, name="Ana"),
        domain.HandDealt(
            seat=0, cards=tuple(["AC", "2C", "3C", "4C", "5C", "6C", "7C", "JC", "QC", "KC"])
        ),
        reveal(1, bytes(32)),
        domain.CommandRejected(command_id=None, code="command/invalid", message="no"),
    ):
        assert to_engine(event) == []


# --- commands ------------------------------------------------------------------------------------


def wire_command(command: actions.Command) -> commands.CommandModel | None:
    """The wire command a client sends for an engine command (None: the service's own)."""
    if isinstance(command, actions.Resign):
        return commands.Resign(**IDS)
    if not isinstance(command, actions.Play):
        return None
    action = command.action
    if isinstance(action, actions.Take):
        table = None if action.table is None else table_to_wire(action.table)
        return commands.Take(**IDS, hand=cards_to_wire(action.hand), table=table)
    if isinstance(action, actions.MeldHand):
        return commands.MeldHand(
            **IDS, hand=cards_to_wire(action.hand), table=table_to_wire(action.table)
        )
    if isinstance(action, actions.Discard):
        return commands.Discard(**IDS, card=cards_to_wire(1 << action.card)[0])
    simple: dict[type, type[commands.CommandModel]] = {
        actions.TurnCard: commands.Turn,
        actions.Refuse: commands.Refuse,
        actions.Leave: commands.Leave,
        actions.Force: commands.Force,
        actions.Waive: commands.Waive,
    }
    return simple[type(action)](**IDS)


def test_commands_map_to_engine_commands() -> None:
    create = parse_command({"type": "create_table", **IDS, "rules": "bicycle", "deals": 3})
    assert to_engine_command(create, None, first_dealer=1) == actions.NewMatch(
        PRESETS["bicycle"], 1, 3, None
    )
    assert to_engine_command(commands.Join(**IDS, name="Ana"), None) is None
    deck = tuple(range(40))
    assert to_engine_command(commands.NextDeal(**IDS), None, deck=deck) == actions.StartDeal(deck)
    with pytest.raises(ValueError, match="deck"):
        to_engine_command(commands.NextDeal(**IDS), 0)
    with pytest.raises(ValueError, match="seat"):
        to_engine_command(commands.Turn(**IDS), None)
    take = commands.Take(**IDS, hand=("7H",))
    assert to_engine_command(take, 1) == actions.Play(
        1, actions.Take(cards_from_wire(["7H"]), None)
    )
    assert to_engine_command(commands.Resign(**IDS), 0) == actions.Resign(0)


def test_played_commands_round_trip_through_json() -> None:
    for played in matches(10, seed=7):
        for command, seat in played.commands:
            wire = wire_command(command)
            if wire is None:
                continue
            parsed = parse_command(wire.model_dump_json())
            assert to_engine_command(parsed, seat) == command


# --- engine → wire → JSON → engine, on random matches -------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_engine_events_round_trip_through_the_wire(seed: int) -> None:
    for played in matches(15, seed=seed):
        wire = wire_stream(played)
        prev = GENESIS_HASH
        stored: list[Envelope] = []
        for version, payload in enumerate(wire, start=1):
            sealed = seal(TABLE, version, "c-000001", "c-000001", 1_000 * version, prev, payload)
            prev = sealed.hash
            raw = sealed.stored_json()
            stored.append(Envelope.from_stored(TABLE, version, raw, sealed.hash, sealed.prev_hash))
        assert verify_chain(stored) is None
        payloads = [parse_event(e.payload.model_dump_json()) for e in stored]
        assert payloads == wire

        # the service rebuilds from its secret seeds, an auditor from the revealed ones
        service_decks = {
            n: shuffle(s, context=deal_context(TABLE, n)) for n, s in played.seeds.items()
        }
        audit_decks = revealed_decks(TABLE, payloads)
        assert audit_decks == service_decks
        rebuilt = [e for p in payloads for e in to_engine(p, audit_decks.__getitem__)]
        assert rebuilt == played.events
        assert fold(rebuilt) == played.match


def test_mapped_events_equal_their_validated_form() -> None:
    """``to_wire`` skips pydantic's validation (engine values are canonical already): every event
    it maps from random matches equals what validating its dump, or its JSON, gives."""
    kinds: set[str] = set()
    for played in matches(60, seed=21):
        for event in wire_stream(played):
            model = type(event)
            assert model.model_validate(event.model_dump()) == event
            assert model.model_validate_json(event.model_dump_json()) == event
            kinds.add(event.TYPE)
    assert {"meld_made", "card_refused", "card_left", "stakes_settled", "hand_dealt"} <= kinds


def test_no_public_event_shows_a_hidden_card_before_the_reveal() -> None:
    """Cards still hidden when a deal ends (in a hand, or unturned in the stock) appear in no
    public event of that deal, and each ``hand_dealt`` goes to its own seat only."""
    for played in matches(20, seed=11):
        state: Match | None = None
        shown: set[str] = set()
        for event in played.events:
            state = evolve(state, event)
            wire = to_wire(event, commitment="0" * 64)
            if isinstance(event, game_events.DealStarted):
                shown = set()
            for w in wire:
                if isinstance(w, domain.HandDealt):
                    assert event_owner(w.TYPE, w.seat) == w.seat
                else:
                    assert event_owner(w.TYPE, getattr(w, "seat", None)) is None
                    shown |= _cards_in(w)
            if isinstance(event, game_events.StakesSettled):
                assert state is not None and state.deal is not None
                deal = state.deal
                hidden = deal.hands[0] | deal.hands[1] | sum(1 << c for c in deal.stock)
                assert not shown & set(cards_to_wire(hidden))


def _cards_in(event: domain.EventModel) -> set[str]:
    found: set[str] = set()
    for name in ("card", "hand", "cards", "deck", "seed"):
        value = getattr(event, name, None)
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, tuple):
            found |= set(value)
    for meld in getattr(event, "table", None) or ():
        found |= set(meld)
    return found


def test_revealed_decks_refuse_a_seed_that_does_not_match_its_commitment() -> None:
    started = domain.DealStarted(
        number=1, dealer=0, stake=1, commitment=commitment(bytes(32)), algorithm="hmac-sha256-fy-v1"
    )
    assert set(revealed_decks(TABLE, [started, reveal(1, bytes(32))])) == {1}
    with pytest.raises(ValueError, match="commitment"):
        revealed_decks(TABLE, [started, reveal(1, bytes(range(32)))])
    with pytest.raises(ValueError, match="never started"):
        revealed_decks(TABLE, [reveal(2, bytes(32))])
