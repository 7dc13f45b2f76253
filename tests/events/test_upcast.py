"""Tests of schema versions: upcasters on read, and a table log written by the v1 contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.game import fold
from events.base import ContractError, InvalidContent, MalformedJson, UnknownType, UnknownVersion
from events.chain import verify_chain
from events.domain import EVENT_TYPES, DealRevealed, StakesSettled
from events.envelope import Envelope
from events.mapping import cards_to_wire, revealed_deck, revealed_decks, to_engine
from events.upcast import UPCASTERS, parse_event, upcast, upcaster

FIXTURE = Path(__file__).parent / "fixtures" / "table_v1.jsonl"
TABLE = "T-fixture-v1"


def old_log() -> list[dict[str, Any]]:
    """The fixture: a two-deal table as the v1 contract stored it (flat body + hashes)."""
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


# --- the old-version fixture ---------------------------------------------------------------------


def test_fixture_holds_v1_events_whose_hashes_cover_the_bodies_as_written() -> None:
    log = old_log()
    assert [e["version"] for e in log] == list(range(1, len(log) + 1))
    assert verify_chain(log) is None
    kinds = {(e["type"], e["v"]) for e in log}
    assert {("stakes_settled", 1), ("deal_revealed", 1)} <= kinds
    assert all(isinstance(e["scores"], dict) for e in log if e["type"] == "stakes_settled")
    assert all(len(e["deck"]) == 40 for e in log if e["type"] == "deal_revealed")


def test_reading_the_v1_log_upcasts_every_event_to_the_current_version() -> None:
    log = old_log()
    envelopes = [Envelope.from_body(line) for line in log]
    for line, e in zip(log, envelopes, strict=True):
        assert e.payload.v == type(e.payload).VERSION
        assert e.verify_hash()
        assert (e.table_id, e.version, e.command_id, e.time) == (
            TABLE,
            line["version"],
            line["command_id"],
            line["time"],
        )
    assert verify_chain(envelopes) is None
    settled = [e.payload for e in envelopes if isinstance(e.payload, StakesSettled)]
    assert [s.scores for s in settled] == [(0, 1), (0, 2)]
    olds = [line for line in log if line["type"] == "stakes_settled"]
    assert [(o["scores"]["0"], o["scores"]["1"]) for o in olds] == [s.scores for s in settled]


def test_the_dropped_v1_deck_is_the_one_the_revealed_seed_determines() -> None:
    log = old_log()
    for line in log:
        if line["type"] != "deal_revealed":
            continue
        e = Envelope.from_body(line)
        assert isinstance(e.payload, DealRevealed)
        assert "deck" not in e.payload.model_dump()
        deck = revealed_deck(TABLE, e.payload)
        assert [cards_to_wire(1 << c)[0] for c in deck] == line["deck"]


def test_an_upcast_envelope_keeps_the_body_as_written_for_its_hash() -> None:
    line = next(x for x in old_log() if x["type"] == "stakes_settled")
    e = Envelope.from_body(line)
    written = {k: v for k, v in line.items() if k not in ("hash", "prev_hash")}
    assert e.body == written
    assert e.to_body() != written  # the current form: scores as a list, v 2
    assert e.to_body()["scores"] == [0, 1] and e.to_body()["v"] == 2


def test_the_stored_form_of_the_v1_log_reads_back_too() -> None:
    for line in old_log():
        stored = {k: v for k, v in line.items() if k not in ("table_id", "version")}
        stored.pop("hash")
        stored.pop("prev_hash")
        e = Envelope.from_stored(TABLE, line["version"], json.dumps(stored), line["hash"],
                                 line["prev_hash"])  # fmt: skip
        assert e == Envelope.from_body(line)


def test_the_v1_log_rebuilds_the_match() -> None:
    payloads = [Envelope.from_body(line).payload for line in old_log()]
    decks = revealed_decks(TABLE, payloads)
    match = fold(e for p in payloads for e in to_engine(p, decks.__getitem__))
    assert match is not None and match.over
    assert (match.scores, match.winner, match.deals_played) == ((0, 2), 1, 2)


# --- the registry --------------------------------------------------------------------------------


def test_every_version_step_has_an_upcaster_and_none_is_stray() -> None:
    steps = {(cls.TYPE, v) for cls in EVENT_TYPES.values() for v in range(1, cls.VERSION)}
    assert set(UPCASTERS) == steps


def test_upcast_lifts_step_by_step_and_leaves_the_input_alone() -> None:
    old = {"type": "stakes_settled", "v": 1, "winner": None, "amount": 0, "scores": {"1": 4}}
    new = upcast(old)
    assert new == {"type": "stakes_settled", "v": 2, "winner": None, "amount": 0, "scores": [0, 4]}
    assert old["scores"] == {"1": 4} and old["v"] == 1
    current = {"type": "card_turned", "v": 1, "seat": 0, "card": "7H"}
    assert upcast(current) == current


def test_registering_a_step_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="already"):
        upcaster("stakes_settled", 1)(lambda e: e)


def test_a_missing_step_is_an_unknown_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(UPCASTERS, ("deal_revealed", 1))
    with pytest.raises(UnknownVersion, match="no upcaster"):
        upcast({"type": "deal_revealed", "v": 1, "number": 1, "seed": "0" * 64})


@pytest.mark.parametrize(
    ("raw", "error", "code"),
    [
        ("{", MalformedJson, "event/malformed_json"),
        ("[]", MalformedJson, "event/malformed_json"),
        ({"v": 1}, UnknownType, "event/unknown_type"),
        ({"type": "table_opened", "v": 1}, UnknownType, "event/unknown_type"),
        ({"type": "went_out", "seat": 0}, UnknownVersion, "event/unknown_version"),
        ({"type": "went_out", "v": True, "seat": 0}, UnknownVersion, "event/unknown_version"),
        ({"type": "went_out", "v": 0, "seat": 0}, UnknownVersion, "event/unknown_version"),
        ({"type": "went_out", "v": 2, "seat": 0}, UnknownVersion, "event/unknown_version"),
        ({"type": "went_out", "v": 1, "seat": 2}, InvalidContent, "event/invalid"),
        ({"type": "stakes_settled", "v": 1, "scores": "x"}, InvalidContent, "event/invalid"),
    ],
)
def test_bad_events_raise_a_contract_error_with_a_stable_code(
    raw: Any, error: type[ContractError], code: str
) -> None:
    with pytest.raises(error) as caught:
        parse_event(raw)
    assert caught.value.code == code


def test_a_current_model_refuses_an_old_version_directly() -> None:
    with pytest.raises(ValueError):
        StakesSettled.model_validate(
            {"type": "stakes_settled", "v": 1, "winner": 0, "amount": 1, "scores": [1, 0],
             "next_stake": 1}
        )  # fmt: skip
