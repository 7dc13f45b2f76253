"""The fuzzers' checker catches what it is there to catch: it is tried on answers that do leak.

A seat's own view, read as if the other seat had been sent it, shows ten cards hidden from that
seat; the deal's seed in an answer is caught; a message may quote the cards its request named.
The ids and names clients choose name no card: a command id or a player's name that spells a
hidden card is no leak where it comes back (an envelope, a lobby row).
"""

from __future__ import annotations

import doctest
import json
from typing import Any

import fuzz_truth
import pytest
from fuzz_stack import Tables
from fuzz_truth import Secrets, Truth, card_words, leaks

from engine.cards import cards_of, format_card
from tests.services.gateway_stack import Stack, wire_command


async def test_a_hand_shown_to_the_other_seat_is_caught(
    stack: Stack, tables: Tables, truth: Truth
) -> None:
    table_id = tables.play
    views = {}
    for seat in (0, 1):
        headers = {"Authorization": f"Bearer {tables.token(table_id, seat)}"}
        views[seat] = (await stack.http.get(f"/tables/{table_id}/view", headers=headers)).text
    spectator = await truth.hidden(table_id, None)
    assert len(spectator.cards) == 40 - len(card_words(views[0]) & card_words(views[1]))
    for seat in (0, 1):
        own = await truth.hidden(table_id, seat)
        assert leaks(views[seat], own) == []
        other = await truth.hidden(table_id, 1 - seat)
        hand = json.loads(views[seat])["deal"]["players"][seat]["hand"]
        assert len(hand) == 10 and leaks(views[seat], other) == sorted(hand)
        assert leaks(views[seat], spectator) == sorted(hand)
        quoting = json.dumps({"hand": hand[:4]})  # no excuse for a card in a card field
        assert leaks(views[seat], other, sent=quoting) == sorted(hand)


async def test_the_seed_of_the_deal_in_play_is_caught(tables: Tables, truth: Truth) -> None:
    secrets = await truth.hidden(tables.play, 0)
    (seed,) = secrets.seeds
    assert leaks(json.dumps({"message": f"seed {seed}"}), secrets) == [seed]
    assert leaks(json.dumps({"message": f"seed {seed}"}), secrets, sent=seed) == []


async def test_a_table_that_moves_changes_its_mark(
    stack: Stack, tables: Tables, truth: Truth
) -> None:
    before = await truth.marks(tables.ids)
    await stack.join(tables.open, "Di", 1)  # seats the second player: the deal starts
    after = await truth.marks(tables.ids)
    assert after[tables.play] == before[tables.play]
    assert after[tables.open].version > before[tables.open].version
    assert after[tables.open].stream == after[tables.open].version


async def test_ids_and_names_that_name_hidden_cards_are_no_leak(
    stack: Stack, tables: Tables, truth: Truth
) -> None:
    """A client's command id and player name come back in later answers (an envelope's
    ``command_id``, a lobby row's ``name``) that the request quoting them is not sent with:
    the cards they name are not shown."""
    table_id = tables.play
    table, _ = await truth.table(table_id)
    assert table.match is not None and table.match.deal is not None
    hands = table.match.deal.hands
    seat = next(s for s in (0, 1) if s == table.match.deal.to_act)
    theirs = sorted(format_card(c) for c in cards_of(hands[1 - seat]))
    headers = {"Authorization": f"Bearer {tables.token(table_id, seat)}"}
    view = (await stack.http.get(f"/tables/{table_id}/view", headers=headers)).json()
    command_id = f"fz-{theirs[0]}-{theirs[1]}_{theirs[2]}"
    command = wire_command(view["legal_actions"][0], table_id, command_id, view["version"])
    sent = await stack.http.post(
        f"/tables/{table_id}/commands", json=command.model_dump(mode="json"), headers=headers
    )
    assert sent.json()["ok"] is True, sent.text
    await stack.join(tables.open, f"{theirs[3]} {theirs[4]}", 1)
    hidden = await truth.hidden(table_id, seat)
    spectator = await truth.hidden(table_id, None)
    assert set(theirs) <= hidden.cards
    events = (await stack.http.get(f"/tables/{table_id}/events", headers=headers)).text
    assert command_id in events and leaks(events, hidden) == []
    lobby = (await stack.http.get("/tables", params={"status": "running"})).text
    assert theirs[3] in lobby and leaks(lobby, spectator) == []
    opened = (await stack.http.get(f"/tables/{tables.open}/events")).text
    assert theirs[4] in opened and leaks(opened, spectator) == []


SEED = "5e" * 32
HIDDEN = Secrets(frozenset({"2C", "4D", "7H", "AH", "KS", "QS"}), frozenset({SEED}), 1)
"""Cards and a seed hidden from a viewer, for the checker's cases below."""


@pytest.mark.parametrize(
    "answer",
    [
        {"events": [{"command_id": "c-4D-x9", "causation_id": "c-4D-x9", "event_id": "t-7H:5"}]},
        {"events": [{"payload": {"type": "player_joined", "seat": 1, "name": "KS"}}]},
        {"tables": [{"table_id": "fz-QS", "rules": "7H QS", "seats": [{"name": "4D 7H"}]}]},
        {"rules": {"name": "AH2C"}, "rematch": {"table_id": "t-KS", "token": "x-7H_y"}},
        {"next_cursor": "MDAw-KS_", "details": [{"loc": "QS", "msg": "Extra inputs"}]},
        {"ok": True, "command_id": "fz-AH2C-KS", "version": 7},
    ],
)
def test_ids_and_names_a_client_chose_show_no_card(answer: Any) -> None:
    assert leaks(json.dumps(answer), HIDDEN) == []


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ({"deal": {"players": [{"hand": ["7H", "3C"]}, {"hand": None}]}}, ["7H"]),
        (
            {"deal": {"players": [{"table": [["QS", "KS", "AS"]]}], "centre": "2C"}},
            ["2C", "KS", "QS"],
        ),
        ({"events": [{"payload": {"type": "card_discarded", "card": "4D"}}]}, ["4D"]),
        ({"events": [{"payload": {"type": "hand_dealt", "cards": ["ah", "♠K"]}}]}, ["AH", "KS"]),
        ({"legal_actions": ["take 3C 4C => 2C3C4C", "discard 7H"]}, ["2C", "7H"]),
        ({"stock_top": "7H"}, ["7H"]),
        ({"deal": {"stock": ["4D", "QS"], "peek": {"next": "AH2C"}}}, ["2C", "4D", "AH", "QS"]),
        ({"KS": 1}, ["KS"]),
        ({"message": "the stock's top is 7H", "command_id": "fz-x-7H"}, ["7H"]),
    ],
)
def test_hidden_cards_where_the_contract_puts_cards_are_caught(
    answer: Any, shown: list[str]
) -> None:
    assert leaks(json.dumps(answer), HIDDEN) == shown


def test_a_message_may_quote_the_request_a_card_field_may_not() -> None:
    sent = json.dumps({"type": "discard", "card": "7h", "command_id": "fz-KS-QS-1"})
    message = {"ok": False, "code": "move/unknown_card", "message": "7H is not in your hand"}
    assert leaks(json.dumps(message), HIDDEN, sent) == []
    quoting = {**message, "message": "invalid command_id 'fz-KS-QS-1'"}
    assert leaks(json.dumps(quoting), HIDDEN, sent) == []
    assert leaks(json.dumps({**message, "message": "4D, QS: no"}), HIDDEN, sent) == ["4D"]
    assert leaks(json.dumps({"ok": False, "hand": ["7H"]}), HIDDEN, sent) == ["7H"]
    assert leaks("7H is not in your hand", HIDDEN, sent) == []  # an answer that is no JSON
    assert leaks("AH is not in your hand", HIDDEN, sent) == ["AH"]


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps({"command_id": SEED}),
        json.dumps({"seats": [{"name": f"seed {SEED}"}]}),
        json.dumps({SEED: True}),
        '{"message": "seed \\u0035' + SEED[1:] + '"}',  # a JSON escape cannot hide it
        f"seed {SEED}",  # an answer that is no JSON
    ],
)
def test_a_seed_anywhere_is_caught(answer: str) -> None:
    assert leaks(answer, HIDDEN) == [SEED]
    assert leaks(answer, HIDDEN, sent=json.dumps({"command_id": SEED})) == []


def test_the_doctests_pass() -> None:
    failed, tried = doctest.testmod(fuzz_truth)
    assert failed == 0 and tried >= 8  # leaks and the readers of cards it is made of
