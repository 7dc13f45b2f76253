"""Tests of the wire contract: commands, domain events, the envelope and its hash chain."""

from __future__ import annotations

import dataclasses
import doctest
import json
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

import events
from engine.rules import PRESETS, Forcing, Rules, StakeOnDraw
from engine.secrecy import event_owner
from events import base, commands, domain, envelope, mapping, upcast
from events.base import ContractError
from events.chain import GENESIS_HASH, canonical_json, event_hash, verify_chain
from events.commands import MAX_COMMAND_BYTES, parse_command
from events.domain import (
    EVENT_TYPES,
    TABLE_EVENT_TYPES,
    CardTurned,
    CommandRejected,
    DealStarted,
    HandDealt,
    MeldMade,
    StakesSettled,
)
from events.envelope import BODY_KEYS, Envelope, HashMismatch, seal

IDS = {"command_id": "c-000001", "table_id": "T-1"}
HAND = ("AC", "2C", "3C", "4C", "5C", "6C", "7C", "JC", "QC", "KC")


def cmd(kind: str, **fields: Any) -> dict[str, Any]:
    """Return a raw command dict with the common fields filled in."""
    return {"type": kind, **IDS, **fields}


@pytest.mark.parametrize("module", [base, commands, domain, envelope, mapping, upcast])
def test_doctests(module: object) -> None:
    assert doctest.testmod(module).failed == 0  # type: ignore[arg-type]


# --- commands ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (cmd("turn"), commands.Turn(**IDS)),
        (cmd("refuse", expected_version=7), commands.Refuse(**IDS, expected_version=7)),
        (cmd("discard", card="j♣"), commands.Discard(**IDS, card="JC")),
        (cmd("take", hand=["5s"]), commands.Take(**IDS, hand=("5S",), table=None)),
        (
            cmd("take", hand=["KH"], table=[["kc", "KD", "KH"]]),
            commands.Take(**IDS, hand=("KH",), table=(("KC", "KD", "KH"),)),
        ),
        (cmd("join", name="  Ana  "), commands.Join(**IDS, name="Ana", seat=None)),
        (cmd("next_deal"), commands.NextDeal(**IDS)),
    ],
)
def test_commands_parse_and_normalise_cards(raw: dict[str, Any], expected: object) -> None:
    assert parse_command(raw) == expected
    assert parse_command(json.dumps(raw)) == expected
    assert parse_command(json.dumps(raw).encode()) == expected


def test_every_command_round_trips_through_json() -> None:
    samples = [
        cmd("create_table", rules="bicycle", deals=None, target_score=10, turn_seconds=30),
        cmd("create_table", rules={"forcing": "off"}, bots={"1": "greedy"}),
        cmd("join", seat=1, name="Bea"),
        cmd("turn"),
        cmd("take", hand=["5S"], table=[["5S", "6S", "7S"]]),
        cmd("take"),
        cmd("refuse"),
        cmd("leave"),
        cmd("force"),
        cmd("waive"),
        cmd("discard", card="KD"),
        cmd("meld_hand", hand=["KC", "KD", "KH"], table=[["KC", "KD", "KH"]]),
        cmd("resign"),
        cmd("next_deal"),
        cmd("leave_table"),
        cmd("rematch", next_table_id="t-abcdefghijkl"),
        cmd("report_bot_failure", code="bot/failed", message="the greedy bot raised KeyError"),
    ]
    assert {s["type"] for s in samples} == set(commands.COMMAND_TYPES)
    for raw in samples:
        command = parse_command(raw)
        assert parse_command(command.model_dump_json()) == command
        assert command.type == raw["type"]


def test_create_table_rules_from_a_preset_or_options() -> None:
    preset = parse_command(cmd("create_table", rules="long-runs"))
    assert isinstance(preset, commands.CreateTable)
    assert preset.to_rules() == PRESETS["long-runs"]
    options = parse_command(cmd("create_table", rules={"forcing": "off", "base_stake": 2}))
    assert isinstance(options, commands.CreateTable)
    assert options.to_rules() == Rules(name="custom", forcing=Forcing.OFF, base_stake=2)
    assert parse_command(cmd("create_table")).to_rules() == PRESETS["classic"]  # type: ignore[union-attr]


def test_rule_options_and_rule_set_match_the_engine_rules() -> None:
    names = [f.name for f in dataclasses.fields(Rules)]
    assert list(commands.RuleOptions.model_fields) == names
    assert list(domain.RuleSet.model_fields) == names
    defaults = commands.RuleOptions().model_dump()
    assert {**Rules().as_dict(), "name": "custom"} == defaults
    assert set(get_args(domain.Forcing)) == {f.value for f in Forcing}
    assert set(get_args(domain.StakeOnDraw)) == {s.value for s in StakeOnDraw}
    for rules in PRESETS.values():
        assert mapping.rules_from_wire(mapping.rules_to_wire(rules)) == rules


@pytest.mark.parametrize(
    ("raw", "code", "quoted"),
    [
        ("{", "command/malformed_json", "JSON text"),
        (b"\xff\xfe", "command/malformed_json", "JSON text"),
        ("[1, 2]", "command/malformed_json", "not list"),
        ("[" * 3000 + "]" * 3000, "command/malformed_json", "nested too deeply"),
        (
            '{"type": "turn", "x": ' + "[" * 3000 + "]" * 3000 + "}",
            "command/malformed_json",
            "nested",
        ),
        ('"turn"', "command/malformed_json", "not str"),
        ('{"command_id": "c-000001"}', "command/unknown_type", "None"),
        (json.dumps(cmd("fly")), "command/unknown_type", "'fly'"),
        (json.dumps(cmd("discard", card="8H")), "command/invalid", "'8H'"),
        (json.dumps(cmd("discard")), "command/invalid", "card"),
        (json.dumps(cmd("discard", card="7H", seat=0)), "command/invalid", "seat"),
        (json.dumps(cmd("turn", expected_version=-1)), "command/invalid", "expected_version"),
        (json.dumps(cmd("turn", expected_version="3")), "command/invalid", "expected_version"),
        (json.dumps({**cmd("turn"), "command_id": "short"}), "command/invalid", "command_id"),
        (json.dumps({**cmd("turn"), "table_id": "a:b"}), "command/invalid", "table_id"),
        (json.dumps(cmd("join", seat=True, name="x")), "command/invalid", "seat"),
        (json.dumps(cmd("join", seat=2, name="x")), "command/invalid", "seat"),
        (json.dumps(cmd("join", name="x" * 41)), "command/invalid", "name"),
        (json.dumps(cmd("join", name="a\u0007b")), "command/invalid", "control"),
        (json.dumps(cmd("take", hand=["7H", "7h"])), "command/invalid", "more than once"),
        (json.dumps(cmd("take", table=[["7H", "6H"]])), "command/invalid", "table.0"),
        (
            json.dumps(cmd("take", table=[["5H", "6H", "7H"], ["7H", "7C", "7D"]])),
            "command/invalid",
            "7H",
        ),
        (json.dumps(cmd("meld_hand", hand=[], table=[])), "command/invalid", "hand"),
        (json.dumps(cmd("create_table", rules="house")), "command/invalid", "'house'"),
        (json.dumps(cmd("create_table", rules={"jokers": 2})), "command/invalid", "jokers"),
        (
            json.dumps(cmd("create_table", rules={"max_run_length": 11})),
            "command/invalid",
            "max_run_length",
        ),
        (json.dumps(cmd("create_table", deals=None)), "command/invalid", "match must be able"),
        (json.dumps(cmd("create_table", bots={"2": "greedy"})), "command/invalid", "bots"),
        ("x" * (MAX_COMMAND_BYTES + 1), "command/too_large", str(MAX_COMMAND_BYTES)),
        (
            json.dumps(cmd("join", name="é" * 40, pad=" " * MAX_COMMAND_BYTES)),
            "command/too_large",
            "bytes",
        ),
    ],
)
def test_bad_commands_raise_a_contract_error_with_a_stable_code(
    raw: str | bytes, code: str, quoted: str
) -> None:
    with pytest.raises(ContractError) as caught:
        parse_command(raw)
    assert caught.value.code == code
    assert quoted in caught.value.message
    rejected = mapping.rejection(None, caught.value)
    assert (rejected.code, rejected.command_id) == (code, None)


def test_invalid_command_details_name_the_field_without_the_union_tag() -> None:
    with pytest.raises(ContractError) as caught:
        parse_command(cmd("take", hand=["7H", "XX"]))
    assert caught.value.details == ({"loc": "hand.1", "msg": caught.value.details[0]["msg"]},)
    assert "'XX'" in caught.value.details[0]["msg"]


def test_too_large_is_checked_before_parsing() -> None:
    huge = "{" * (MAX_COMMAND_BYTES + 1)  # not JSON either: size wins
    with pytest.raises(base.TooLarge):
        parse_command(huge)
    with pytest.raises(base.TooLarge):
        parse_command({**cmd("join", name="x"), "pad": "y" * MAX_COMMAND_BYTES})


def test_models_are_frozen_and_forbid_unknown_fields() -> None:
    turned = CardTurned(seat=0, card="7H")
    with pytest.raises(ValidationError):
        turned.seat = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        CardTurned.model_validate({"type": "card_turned", "v": 1, "seat": 0, "card": "7H", "x": 1})
    with pytest.raises(ValidationError):
        commands.Turn.model_validate({**cmd("turn"), "seat": 0})


# --- domain events -------------------------------------------------------------------------------


def sample_events() -> list[domain.EventModel]:
    """Return one event of every type."""
    return [
        domain.TableCreated(
            rules=mapping.rules_to_wire(Rules()),
            deals=3,
            target_score=None,
            turn_seconds=30,
            first_dealer=1,
        ),
        domain.PlayerJoined(seat=0, name="Ana"),
        domain.PlayerJoined(seat=1, name="Greedy bot", bot="greedy"),
        domain.PlayerLeft(seat=0),
        domain.RematchAgreed(seat=1),
        domain.RematchOpened(next_table_id="t-abcdefghijkl"),
        DealStarted(
            number=1, dealer=1, stake=1, commitment="a" * 64, algorithm="hmac-sha256-fy-v1"
        ),
        HandDealt(seat=0, cards=HAND),
        CardTurned(seat=0, card="7H"),
        domain.CardRefused(seat=1, card="7H", forceable=False),
        domain.CardLeft(seat=0, card="2S", forceable=True),
        domain.ForceDemanded(seat=1),
        domain.ForceWaived(seat=1),
        domain.CardWasted(card="7H"),
        MeldMade(seat=0, card="5S", hand=("6S", "7S"), table=(("5S", "6S", "7S"),)),
        domain.HandMelded(seat=0, hand=("KC", "KD", "KH"), table=(("KC", "KD", "KH"),)),
        domain.CardDiscarded(seat=0, card="QH"),
        domain.WentOut(seat=0),
        domain.GameDrawn(),
        domain.Resigned(seat=1),
        StakesSettled(winner=0, amount=1, scores=(1, 0), next_stake=1),
        domain.DealRevealed(number=1, seed="0" * 64, algorithm="hmac-sha256-fy-v1"),
        domain.MatchEnded(winner=None, scores=(2, 2)),
        domain.BotFailed(seat=1, bot="greedy", code="bot/failed", message="it raised KeyError"),
        CommandRejected(command_id="c-000001", code="move/not_your_turn", message="seat 1 …"),
    ]


def test_every_event_type_round_trips_through_json() -> None:
    samples = sample_events()
    assert {e.TYPE for e in samples} == set(EVENT_TYPES)
    for event in samples:
        assert upcast.parse_event(event.model_dump_json()) == event
        assert upcast.parse_event(event.model_dump(mode="json")) == event


def test_a_bot_failure_has_a_bot_code_and_a_short_message() -> None:
    """The report of a bot that could not move (issue 18 b) is checked like any event."""
    ok = {"type": "bot_failed", "v": 1, "seat": 1, "bot": "greedy", "code": "bot/failed"}
    assert upcast.parse_event({**ok, "message": "m"}) == domain.BotFailed(**{**ok, "message": "m"})
    for bad in ({"code": "move/failed"}, {"message": ""}, {"message": "x" * 201}, {"seat": 2}):
        with pytest.raises(ContractError) as info:
            upcast.parse_event({**ok, "message": "m", **bad})
        assert info.value.code == "event/invalid"
    with pytest.raises(ContractError) as refused:
        parse_command(cmd("report_bot_failure", code="bot/failed"))  # no message
    assert refused.value.code == "command/invalid"


def test_every_event_has_its_schema_version_and_type() -> None:
    for kind, cls in EVENT_TYPES.items():
        assert kind == cls.TYPE
        assert cls.model_fields["type"].default == kind
        assert cls.model_fields["v"].default == cls.VERSION >= 1
    assert StakesSettled.VERSION == 2


def test_an_event_class_whose_v_is_not_its_version_is_refused() -> None:
    from typing import ClassVar, Literal

    with pytest.raises(TypeError, match="VERSION"):

        class Wrong(domain.EventModel):
            VERSION: ClassVar[int] = 2
            type: Literal["wrong"] = "wrong"
            v: Literal[1] = 1


def test_hand_dealt_holds_ten_distinct_cards() -> None:
    with pytest.raises(ValidationError):
        HandDealt(seat=0, cards=HAND[:9])
    with pytest.raises(ValidationError):
        HandDealt(seat=0, cards=(*HAND[:9], "AC"))


def test_a_hand_dealt_is_owned_by_its_seat_and_every_other_event_is_public() -> None:
    for event in sample_events():
        expected = event.seat if isinstance(event, HandDealt) else None
        assert event_owner(event.TYPE, getattr(event, "seat", None)) == expected


def test_no_public_event_carries_a_deck_or_a_seed_before_the_reveal() -> None:
    for cls in TABLE_EVENT_TYPES.values():
        fields = set(cls.model_fields)
        assert "deck" not in fields
        if cls is not domain.DealRevealed:
            assert "seed" not in fields
    assert set(DealStarted.model_fields) == {
        "type",
        "v",
        "number",
        "dealer",
        "stake",
        "commitment",
        "algorithm",
    }


def test_payload_keys_never_collide_with_envelope_keys() -> None:
    for cls in TABLE_EVENT_TYPES.values():
        assert not (set(cls.model_fields) & (BODY_KEYS | {"hash", "prev_hash", "event_id"}))
    assert "command_rejected" not in TABLE_EVENT_TYPES


# --- envelope ------------------------------------------------------------------------------------

T0 = 1_700_000_000_000


def chain(payloads: list[domain.EventModel], table_id: str = "T-1") -> list[Envelope]:
    """Seal payloads as one table's events 1, 2, … caused by one command."""
    out: list[Envelope] = []
    prev = GENESIS_HASH
    for i, payload in enumerate(payloads, start=1):
        sealed = seal(table_id, i, "c-000001", "c-000001", T0 + i, prev, payload)  # type: ignore[arg-type]
        out.append(sealed)
        prev = sealed.hash
    return out


def test_seal_hashes_the_flat_body_chained_to_the_previous_hash() -> None:
    e = seal("T-1", 1, "c-000001", "c-000001", T0, GENESIS_HASH, CardTurned(seat=0, card="7H"))
    body = {
        "type": "card_turned",
        "v": 1,
        "seat": 0,
        "card": "7H",
        "table_id": "T-1",
        "version": 1,
        "command_id": "c-000001",
        "time": T0,
    }
    assert e.to_body() == body
    assert e.hash == event_hash(GENESIS_HASH, body)
    assert e.event_id == "T-1:1"
    assert e.causation_id == "c-000001"
    assert e.verify_hash()


def test_causation_is_in_the_body_only_when_it_differs_from_the_command() -> None:
    e = seal("T-1", 2, "timer-T-1-2", "T-1:1", T0, "1" * 64, domain.ForceWaived(seat=1))
    assert e.to_stored()["causation"] == "T-1:1"
    assert Envelope.from_body(e.to_body(), e.prev_hash, e.hash) == e


def test_body_stored_and_wire_forms_read_back() -> None:
    envelopes = chain(sample_events()[:-1])
    assert verify_chain(envelopes) is None
    assert verify_chain([e.to_body() | {"hash": e.hash} for e in envelopes]) is None
    for e in envelopes:
        assert Envelope.from_body(e.to_body(), e.prev_hash, e.hash) == e
        assert Envelope.from_body({**e.to_body(), "hash": e.hash, "prev_hash": e.prev_hash}) == e
        stored = e.stored_json()
        assert stored == canonical_json(e.to_stored())
        assert "table_id" not in e.to_stored() and "version" not in e.to_stored()
        assert Envelope.from_stored(e.table_id, e.version, stored, e.hash, e.prev_hash) == e
        assert Envelope.model_validate_json(e.model_dump_json()) == e
        wire = e.model_dump(mode="json")
        del wire["event_id"]
        assert Envelope.model_validate(wire) == e


def test_a_body_written_in_a_non_canonical_form_keeps_its_hash() -> None:
    body = {
        "type": "card_turned",
        "v": 1,
        "seat": 0,
        "card": "7h",
        "table_id": "T-1",
        "version": 1,
        "command_id": "c-000001",
        "causation": "c-000001",
        "time": T0,
    }
    h = event_hash(GENESIS_HASH, body)
    e = Envelope.from_body(body, GENESIS_HASH, h)
    assert e.payload == CardTurned(seat=0, card="7H")
    assert e.body == body and e.to_body() != body
    assert e.verify_hash() and verify_chain([e]) is None


def test_a_tampered_body_fails_its_hash() -> None:
    e = chain([CardTurned(seat=0, card="7H")])[0]
    body = {**e.to_body(), "card": "7S"}
    with pytest.raises(HashMismatch) as caught:
        Envelope.from_body(body, e.prev_hash, e.hash)
    assert caught.value.code == "event/bad_hash"
    forged = Envelope.from_body(body, e.prev_hash, e.hash, check=False)
    assert not forged.verify_hash()
    with pytest.raises(HashMismatch):
        Envelope.from_stored("T-2", 1, e.stored_json(), e.hash, e.prev_hash)


def test_envelope_rejects_a_wrong_event_id_and_a_rejection_payload() -> None:
    e = chain([CardTurned(seat=0, card="7H")])[0]
    with pytest.raises(ValidationError, match="event_id"):
        Envelope.model_validate({**e.model_dump(), "event_id": "T-1:2"})
    with pytest.raises(ValidationError):
        seal("T-1", 1, "c-000001", "c-000001", T0, GENESIS_HASH, sample_events()[-1])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        seal("T-1", 0, "c-000001", "c-000001", T0, GENESIS_HASH, CardTurned(seat=0, card="7H"))


def test_from_stored_reports_bad_input_with_event_codes() -> None:
    with pytest.raises(base.MalformedJson):
        Envelope.from_stored("T-1", 1, b"{", "0" * 64, GENESIS_HASH)
    body = {"type": "card_turned", "v": 1, "seat": 0, "card": "7H", "time": T0}
    h = event_hash(GENESIS_HASH, {**body, "table_id": "T-1", "version": 1})
    with pytest.raises(base.InvalidContent) as caught:
        Envelope.from_stored("T-1", 1, body, h, GENESIS_HASH)  # no command_id
    assert caught.value.code == "event/invalid"
    future = {**body, "v": 9, "command_id": "c-000001"}
    h = event_hash(GENESIS_HASH, {**future, "table_id": "T-1", "version": 1})
    with pytest.raises(base.UnknownVersion):
        Envelope.from_stored("T-1", 1, future, h, GENESIS_HASH)


PER_TABLE_OR_DEAL = {"table_created", "deal_started", "deal_revealed"}


def test_stored_bodies_of_moves_stay_under_200_bytes() -> None:
    command_id = "01JDXKQ4Z7W3M5V8N2B6C9T0RY"  # a 26-character ULID, a typical client id
    for payload in sample_events()[:-1]:
        e = seal("T-1", 1, command_id, command_id, T0, GENESIS_HASH, payload)  # type: ignore[arg-type]
        limit = 320 if payload.TYPE in PER_TABLE_OR_DEAL else 200
        assert len(e.stored_json()) < limit, payload.TYPE


def test_package_reexports_the_main_api() -> None:
    for name in events.__all__:
        assert getattr(events, name) is not None
    assert issubclass(envelope.Envelope, BaseModel)
