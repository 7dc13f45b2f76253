"""The fuzzers' checker catches what it is there to catch: it is tried on answers that do leak.

A seat's own view, read as if the other seat had been sent it, shows ten cards hidden from that
seat; the deal's seed in an answer is caught; a card the request itself named is not counted.
"""

from __future__ import annotations

import json

from fuzz_stack import Tables
from fuzz_truth import Truth, card_words, leaks

from tests.services.gateway_stack import Stack


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
        assert leaks(views[seat], other, sent=json.dumps({"hand": hand[:4]})) == sorted(hand[4:])


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
