"""Views stored with the appends: the table service builds a decided command's views
(``TableService.views_after``) and the append script stores them in the same atomic step as the
events, so a view is current when the command's answer is.  They are the bytes the projector
folds from the same events; they are written only with events; a projector folding behind them
never undoes them; and a projector that finds a table's views current reads none of its events.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
import redis.asyncio
from played_tables import (  # tests/services on sys.path
    SHARDS,
    Game,
    assert_checkpoints_at_feed_ends,
    folded_views,
    read_views,
)
from prometheus_client import REGISTRY

from events.commands import NextDeal
from services.projector import run as follow_module
from services.projector.metrics import LAG
from services.projector.records import RoundStats, ShardWrite
from services.projector.run import Projector
from services.store import KeySpace, MemoryEventStore, RedisEventStore
from services.store.base import VersionConflict
from services.tables.results import CommandResult
from services.tables.service import TableService
from services.tables.stored_parts import STORED_PARTS, TableFold


@pytest.fixture
def store(redis_client: redis.asyncio.Redis, redis_ns: str) -> RedisEventStore:
    return RedisEventStore(redis_client, KeySpace(redis_ns, shards=SHARDS))


class ViewsKept(MemoryEventStore):
    """The memory store, with a writer that builds views for it (as for Redis)."""

    keeps_views = True


async def play(
    service: TableService, table_id: str, rng: random.Random, commands: int | None = None
) -> list[CommandResult]:
    """Play a table (``test_projector.Game``): ``commands`` moves after its start, or to the
    end of the match; return every command's outcome."""
    game = Game(service, table_id, rng)
    await game.start()
    await game.play(commands)
    return game.outcomes


# --- the service's views are the projector's ---------------------------------------------------


async def test_every_command_stores_the_views_the_projector_folds() -> None:
    """At every version a command leaves, the views stored with its append are, byte for
    byte, what the projector folds from the events up to there."""
    store = ViewsKept(KeySpace("mem", shards=SHARDS))
    service = TableService(store)
    rng = random.Random(4)
    checked = 0
    for i in range(8):
        table_id = f"inline-{i}"
        outcomes = await play(service, table_id, rng, commands=None if i % 2 else 40)
        table = outcomes[-1].table
        assert table is not None
        assert store.views(table_id) == await folded_views(store, table_id)
        assert json.loads(store.views(table_id)["public"])["version"] == table.version
        checked += len(outcomes)
    assert checked > 200


async def test_views_are_built_only_for_a_store_that_keeps_them() -> None:
    kept, plain = ViewsKept(), MemoryEventStore()
    await play(TableService(kept), "t-1", random.Random(1), commands=3)
    await play(TableService(plain), "t-1", random.Random(1), commands=3)
    await play(TableService(kept, store_views=False), "t-2", random.Random(1), commands=3)
    assert set(kept.views("t-1")) == set(STORED_PARTS)
    assert plain.views("t-1") == {} and kept.views("t-2") == {}


# --- the append script ---------------------------------------------------------------------------


async def test_the_append_stores_views_only_with_its_events(
    redis_client: redis.asyncio.Redis, store: RedisEventStore
) -> None:
    keys = store.keys
    service = TableService(store)
    outcomes = await play(service, "tbl-a", random.Random(2), commands=6)
    table = outcomes[-1].table
    assert table is not None and all(o.viewed for o in outcomes)
    views = await read_views(redis_client, keys, "tbl-a")
    assert views == await folded_views(store, "tbl-a")

    # a rejection (no event), a duplicate and a version conflict change no view
    stale = NextDeal(command_id="stale-cmd", table_id="tbl-a", expected_version=1)
    rejected = await service.execute(stale, 0)
    assert not rejected.ok and not rejected.viewed
    again = await service.execute(NextDeal(command_id="stale-cmd", table_id="tbl-a"), 0)
    assert again.duplicate and not again.viewed
    other = {p: json.dumps({"table_id": "tbl-a", "version": 999}) for p in STORED_PARTS}
    with pytest.raises(VersionConflict):
        await store.append(
            "tbl-a", table.version - 1, table.hash, "late-cmd", [{"type": "x"}], views=other
        )
    assert await read_views(redis_client, keys, "tbl-a") == views
    appended = await store.append("tbl-a", table.version, table.hash, "none-cmd", (), views=other)
    assert appended.first_version > appended.last_version
    assert await read_views(redis_client, keys, "tbl-a") == views


# --- the projector beside them -------------------------------------------------------------------


async def test_a_projector_reads_no_events_of_tables_whose_views_are_current(
    redis_client: redis.asyncio.Redis, store: RedisEventStore
) -> None:
    keys = store.keys
    service = TableService(store)
    rng = random.Random(5)
    for i in range(5):
        await play(service, f"cur-{i}", rng)
    before = {f"cur-{i}": await read_views(redis_client, keys, f"cur-{i}") for i in range(5)}
    projector = Projector(redis_client, keys, batch_size=50)
    LAG.set(5.0)
    stats = await projector.catch_up()
    assert stats.entries > 0 and stats.events == 0 and stats.failed == 0
    assert REGISTRY.get_sample_value("conquian_projector_lag_seconds") == 0  # caught up
    for table_id, views in before.items():
        assert await read_views(redis_client, keys, table_id) == views
    await assert_checkpoints_at_feed_ends(redis_client, keys)  # they still reach the feed ends
    rebuilt = Projector(redis_client, keys)
    assert (await rebuilt.rebuild()).failed == 0
    for table_id, views in before.items():  # and a rebuild gives the same bytes
        assert await read_views(redis_client, keys, table_id) == views


async def test_a_projector_folds_what_was_appended_without_views(
    redis_client: redis.asyncio.Redis, store: RedisEventStore
) -> None:
    keys = store.keys
    """Some commands stored views, some did not (a writer with ``store_views=False``): the
    projector folds exactly the tables left behind, and ends at the current views."""
    rng = random.Random(6)
    with_views, without = TableService(store), TableService(store, store_views=False)
    await play(with_views, "mix-a", rng, commands=10)
    await play(without, "mix-b", rng, commands=10)
    projector = Projector(redis_client, keys, batch_size=50)
    stats = await projector.catch_up()
    head_b = await store.head("mix-b")
    assert stats.events == head_b.version  # mix-b folded from its first event, mix-a not at all
    for table_id in ("mix-a", "mix-b"):
        views = await read_views(redis_client, keys, table_id)
        assert views == await folded_views(store, table_id)


async def test_a_projector_behind_never_undoes_newer_views(
    redis_client: redis.asyncio.Redis, store: RedisEventStore
) -> None:
    keys = store.keys
    service = TableService(store)
    outcomes = await play(service, "late", random.Random(7), commands=8)
    current = await read_views(redis_client, keys, "late")
    fold = TableFold("late")
    older = outcomes[3].last_version
    assert older < outcomes[-1].last_version
    for e in await store.read("late", 1, older):  # a fold of an older version
        fold.apply_body(e.version, e.body)
    projector = Projector(redis_client, keys)
    shard = keys.shard_of("late")
    checkpoint = (await redis_client.get(projector.checkpoint_key(shard)) or b"").decode()
    write = ShardWrite(shard, checkpoint, checkpoint)
    write.views.update(zip(projector.view_keys("late"), fold.views().values(), strict=True))
    (reply,) = await projector._run([projector._write_call(write)])
    assert int(reply[0]) == 0  # written: the checkpoint matched ...
    assert await read_views(redis_client, keys, "late") == current  # ... and nothing undone
    assert outcomes[-1].table is not None
    assert json.loads(current["public"] or "{}")["version"] == outcomes[-1].table.version
    # views of the same version are written again (a rebuild rewrites what it finds)
    same = ShardWrite(shard, checkpoint, checkpoint)
    rewritten = {p: v.replace('"ana"', '"ann"') for p, v in current.items() if v is not None}
    same.views.update(zip(projector.view_keys("late"), rewritten.values(), strict=True))
    await projector._run([projector._write_call(same)])
    assert await read_views(redis_client, keys, "late") == rewritten


class ScriptedRounds:
    """A projector whose rounds report what a script says (for ``_follow``'s pauses)."""

    def __init__(self, rounds: list[RoundStats], stop: asyncio.Event) -> None:
        self.rounds = rounds
        self.stop = stop
        self.owned = {0}

    async def balance(self) -> None:
        return None

    async def step(self, block_ms: int | None = None) -> RoundStats:
        stats = self.rounds.pop(0)
        if not self.rounds:
            self.stop.set()
        return stats


async def test_a_projector_lingers_only_after_rounds_that_found_every_view_current(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pauses: list[float] = []

    async def no_wait(awaitable: Any, timeout: float) -> None:
        pauses.append(timeout)
        awaitable.close()
        raise TimeoutError

    monkeypatch.setattr(follow_module.asyncio, "wait_for", no_wait)
    stop = asyncio.Event()
    rounds = [
        RoundStats(entries=5),  # every table current: linger
        RoundStats(entries=5, events=9, tables=2),  # folded: straight on
        RoundStats(),  # the blocking read timed out: straight on
        RoundStats(entries=3, failed=1),  # a fold failed: straight on
        RoundStats(entries=7),  # current again: linger
    ]
    projector = ScriptedRounds(rounds, stop)
    await follow_module._follow(projector, stop, 10_000, 40)  # type: ignore[arg-type]
    assert pauses == [0.04, 0.04]
    pauses.clear()
    stop.clear()
    projector.rounds = [RoundStats(entries=5), RoundStats(entries=5)]
    await follow_module._follow(projector, stop, 10_000, 0)  # type: ignore[arg-type]
    assert pauses == []  # no linger set: never a pause


async def test_views_that_cannot_be_built_never_refuse_a_command(
    redis_client: redis.asyncio.Redis,
    store: RedisEventStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = store.keys
    """A bug in building views: the command is accepted and appended without them, and the
    projector folds the table to the views it would have had."""

    def broken(*_: object) -> dict[str, str]:
        raise RuntimeError("no views today")

    monkeypatch.setattr("services.tables.service.parts_of", broken)
    outcomes = await play(TableService(store), "broken", random.Random(8), commands=4)
    assert all(o.ok and not o.viewed for o in outcomes)
    assert await read_views(redis_client, keys, "broken") is None
    monkeypatch.undo()
    stats = await Projector(redis_client, keys).catch_up()
    assert stats.failed == 0 and stats.events == (await store.head("broken")).version
    assert await read_views(redis_client, keys, "broken") == await folded_views(store, "broken")
