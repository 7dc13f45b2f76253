"""services.tables.table: one fold, seeded (the engine worker's) or not (the projector's)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from played_tables import play_games  # tests/services on sys.path

from engine.state import Match
from services.store import KeySpace, MemoryEventStore
from services.tables.table import FoldError, Table, event_of, fold_table


def without_stock_order(match: Match | None) -> Match | None:
    """The match with its stock in ascending card order: all an unseeded fold can know."""
    if match is None or match.deal is None:
        return match
    return replace(match, deal=replace(match.deal, stock=tuple(sorted(match.deal.stock))))


async def test_the_unseeded_fold_is_the_seeded_one_but_for_the_stock_order() -> None:
    """At every version of random bot games the two folds agree on everything but the order of
    the stock (and the seeds, the token hashes and the hashes, which an unseeded fold never
    reads); inside a deal's start the unseeded one waits for both hands."""
    store = MemoryEventStore(KeySpace("mem", shards=4))
    games = await play_games(store, 4, seed=31, deals=2, resign_chance=0.02)
    checked = 0
    for game in games:
        secrets = await store.secrets(game.table_id)
        stored = await store.read(game.table_id)
        seeded = Table(game.table_id).with_secrets(secrets)
        unseeded = Table(game.table_id, seeded=False)
        for e in stored:
            seeded = seeded.apply(event_of(e.body), e.version)
            unseeded = unseeded.apply(event_of(e.body), e.version)
            assert unseeded.version == seeded.version == e.version
            assert (unseeded.seats, unseeded.turn_seconds, unseeded.algorithms) == (
                seeded.seats,
                seeded.turn_seconds,
                seeded.algorithms,
            )
            assert unseeded.rematch_agreed == seeded.rematch_agreed
            if unseeded.pending is not None:  # a deal_started waiting for its hands
                continue
            assert without_stock_order(unseeded.match) == without_stock_order(seeded.match)
            assert unseeded.status == seeded.status
            checked += 1
        folded = fold_table(game.table_id, [(e.version, e.hash, e.body) for e in stored], secrets)
        assert folded == seeded.stored_as(stored[-1].version, stored[-1].hash)
        assert folded == game.table  # what the service cached after the last command
    assert checked > 200


async def test_a_seeded_fold_without_the_seed_fails_instead_of_guessing_a_deck() -> None:
    store = MemoryEventStore(KeySpace("mem", shards=4))
    (game,) = await play_games(store, 1, seed=3, deals=1)
    stored = [(e.version, e.hash, e.body) for e in await store.read(game.table_id)]
    with pytest.raises(KeyError):
        fold_table(game.table_id, stored, {})
    folded = fold_table(game.table_id, stored, await store.secrets(game.table_id))
    assert folded.version == stored[-1][0] and folded.hash == stored[-1][1]


def test_an_unseeded_fold_refuses_a_hand_without_its_deal() -> None:
    table = Table("T-bad", seeded=False)
    body = {"type": "hand_dealt", "v": 1, "seat": 0, "cards": [f"{r}C" for r in "A234567JQK"]}
    with pytest.raises(FoldError, match="without a deal_started"):
        table.apply(event_of(body), 1)
