"""The projector: views folded without the seeds equal the engine's views of the true state, and
the Redis projector keeps them with the checkpoint, resumes, rebuilds, fences and publishes.

Tables are driven by ``TableService`` with bots choosing from the true state (seeds and all);
the projector only ever sees the streams.  The secrecy scan looks for card texts in the raw
JSON of each view: a seat's view never names a card of the opponent's hand (before the deal
ends) or of the stock, a spectator's or the public view names no hand card and no stock card.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
import structlog
from played_tables import (  # tests/services on sys.path
    CARD,
    SHARDS,
    Game,
    all_view_values,
    assert_checkpoints_at_feed_ends,
    assert_secret,
    assert_views_current,
    assert_views_equal_engine,
    play_games,
    read_views,
)
from prometheus_client import REGISTRY

from engine.rules import PRESETS
from engine.state import Match
from events.envelope import BODY_KEYS
from events.mapping import revealed_decks, to_engine
from events.upcast import parse_event
from services.cli import main as cli_main
from services.projector.records import ProjectorBusy
from services.projector.run import Projector, run_projector
from services.settings import load_settings
from services.store import KeySpace, MemoryEventStore, RedisEventStore
from services.tables.service import TableService
from services.tables.stored_parts import STORED_PARTS, TableFold, assemble, dump_part, parts_of
from services.tables.table import FoldError, Table, fold_table

FIXTURE = Path(__file__).parents[1] / "events" / "fixtures" / "table_v1.jsonl"


def test_card_scan_finds_cards_in_legal_actions_and_tables() -> None:
    text = '{"legal_actions":["take 5S KC KD KH => 2S3S4S5S6S KCKDKH"],"name":"ana"}'
    assert set(CARD.findall(text)) == {"5S", "KC", "KD", "KH", "2S", "3S", "4S", "6S"}


# --- the fold without seeds ------------------------------------------------------------------


@pytest.mark.slow
async def test_views_without_seeds_equal_the_engine_views_at_every_version() -> None:
    """Many random bot games on every rule preset: at every version the fold can show (every
    version but the two inside a deal's start), the views equal the engine's views of the
    state folded with the seeds and the views a writer builds from that state, and they never
    name a secret card."""
    store = MemoryEventStore(KeySpace("mem", shards=SHARDS))
    games: list[Game] = []
    for i, rules in enumerate(sorted(PRESETS)):
        games += await play_games(
            store, 6, seed=100 + i, prefix=f"fold-{i}", rules=rules, deals=3, resign_chance=0.01
        )
    checked = 0
    for game in games:
        table_id = game.table_id
        secrets = await store.secrets(table_id)
        truth: Table | None = None
        fold = TableFold(table_id)
        for e in await store.read(table_id):
            truth = fold_table(table_id, [(e.version, e.hash, e.body)], secrets, truth)
            assert fold.apply_body(e.version, e.body)
            starting = e.body["type"] == "deal_started"
            if starting or (e.body["type"] == "hand_dealt" and e.body["seat"] == 0):
                with pytest.raises(FoldError):  # inside a deal's start: no views
                    fold.views()
                continue
            assert truth.match is not None
            views = fold.views()
            for part, view in fold.view_dicts().items():  # orjson writes what json would
                assert views[part] == json.dumps(view, separators=(",", ":"), ensure_ascii=False)
            assert json.loads(views["public"])["version"] == e.version
            assert parts_of(truth, e.body["time"]) == views  # what a writer stores with it
            assert_views_equal_engine(views, truth.match, table_id)
            assert_secret(views, truth.match)
            checked += 1
        assert game.over and fold.status == "over"
    assert checked > 5_000


async def test_feed_positions_never_end_inside_a_deal_start() -> None:
    store = MemoryEventStore(KeySpace("mem", shards=SHARDS))
    await play_games(store, 3, seed=7, deals=3)
    for shard in range(SHARDS):
        for entry in await store.read_feed(shard, count=100_000):
            fold = TableFold(entry.table_id)
            for e in await store.read(entry.table_id, 1, entry.last_version):
                fold.apply_body(e.version, e.body)
            assert set(fold.views()) == set(STORED_PARTS)


def fixture_log() -> list[dict[str, Any]]:
    """The v1 fixture's stored bodies (its lines without ``hash`` and ``prev_hash``)."""
    lines = FIXTURE.read_text("utf-8").splitlines()
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("hash", "prev_hash")}
        for line in lines
        if line
    ]


def test_views_of_the_v1_fixture_equal_the_views_of_its_revealed_decks() -> None:
    """An old table log (v1 events, upcast on read) folds the same as with its revealed decks."""
    log = fixture_log()
    table_id = log[0]["table_id"]
    events = [parse_event({k: v for k, v in e.items() if k not in BODY_KEYS}) for e in log]
    decks = revealed_decks(table_id, events)
    from engine.game import evolve

    match: Match | None = None
    fold = TableFold(table_id)
    for raw, event in zip(log, events, strict=True):
        for engine_event in to_engine(event, decks.__getitem__):
            match = evolve(match, engine_event)
        fold.apply_body(raw["version"], raw)
        if raw["type"] == "deal_started" or (raw["type"] == "hand_dealt" and raw["seat"] == 0):
            continue
        assert match is not None
        assert_views_equal_engine(fold.views(), match, table_id)
    public = json.loads(fold.views()["public"])
    assert public["seats"] == [
        {"name": "Ana", "bot": None, "bot_failure": None},
        {"name": "Greedy", "bot": "greedy", "bot_failure": None},
    ]
    assert public["status"] == "over" and public["turn_seconds"] == 30


def test_fold_rejects_a_gap_and_a_card_that_is_not_in_the_stock() -> None:
    log = fixture_log()
    fold = TableFold("T-fixture-v1")
    with pytest.raises(FoldError):
        fold.apply_body(2, log[1])
    for raw in log[:6]:  # created, two joins, deal started, two hands
        fold.apply_body(raw["version"], raw)
    assert not fold.apply_body(3, log[2])  # already folded: nothing happens
    hands = {c for raw in log[4:6] for c in raw["cards"]}
    with pytest.raises(FoldError, match="not in the stock"):
        fold.apply_body(7, {"type": "card_turned", "v": 1, "seat": 1, "card": min(hands)})


def test_placeholder_stock_holds_exactly_the_unseen_cards() -> None:
    """The placeholder never claims a card that is seen elsewhere: 40 cards in all."""
    log = fixture_log()
    fold = TableFold(log[0]["table_id"])
    for raw in log:
        fold.apply_body(raw["version"], raw)
        match = fold.match
        if match is None or match.deal is None:
            continue
        deal = match.deal
        seen = deal.hands[0] | deal.hands[1] | deal.table_masks[0] | deal.table_masks[1]
        loose = [*deal.stock, *deal.waste, *([] if deal.centre is None else [deal.centre])]
        mask = 0
        for c in loose:
            assert not (seen | mask) >> c & 1
            mask |= 1 << c
        assert (seen | mask).bit_count() == 40


# --- the projector on Redis ------------------------------------------------------------------


@pytest.fixture
def keys(redis_ns: str) -> KeySpace:
    return KeySpace(redis_ns, shards=SHARDS)


@pytest.fixture
def store(redis_client: redis.asyncio.Redis, keys: KeySpace) -> RedisEventStore:
    return RedisEventStore(redis_client, keys)


async def test_catch_up_writes_every_view_part_and_the_checkpoint(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    games = await play_games(store, 6, seed=1)
    half = Game(TableService(store, store_views=False), "tbl-half", random.Random(2))
    await half.start()
    await half.play(15)
    games.append(half)

    before = REGISTRY.get_sample_value("conquian_projector_events_applied_total") or 0.0
    stats = await Projector(redis_client, keys, batch_size=7).catch_up()
    total = sum([(await store.head(g.table_id)).version for g in games])
    assert stats.events == total and stats.failed == 0
    assert REGISTRY.get_sample_value("conquian_projector_events_applied_total") == before + total
    assert REGISTRY.get_sample_value("conquian_projector_lag_seconds") is not None
    await assert_views_current(redis_client, keys, store, games)
    await assert_checkpoints_at_feed_ends(redis_client, keys)

    views = await read_views(redis_client, keys, "tbl-half")
    assert views is not None
    public = json.loads(views["public"])
    assert public["seats"] == [
        {"name": "ana", "bot": None, "bot_failure": None},
        {"name": "greedy bot", "bot": "greedy", "bot_failure": None},
    ]
    assert (public["status"], public["turn_seconds"], public["rules"]["name"]) == (
        "playing",
        30,
        "classic",
    )
    seat = public["to_act"]
    assert json.loads(views[f"seat{seat}"])["legal_actions"]
    assert json.loads(views[f"seat{1 - seat}"])["legal_actions"] == []
    mine = json.loads(views["seat0"])
    assert mine["hand"] is not None and "deal" not in mine, "a seat part holds its own hand"
    own = assemble("seat0", public, mine)
    assert own is not None
    own = own["deal"]["players"]
    assert own[0]["hand"] == mine["hand"] and own[1]["hand"] is None
    assert half.table is not None and half.table.match is not None
    assert half.table.match.deal is not None
    assert own[1]["hand_count"] == half.table.match.deal.hands[1].bit_count()


async def test_a_restarted_projector_resumes_from_the_checkpoint(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    service = TableService(store, store_views=False)
    rng = random.Random(3)
    games = [Game(service, f"tbl-{i}", rng, deals=3) for i in range(4)]
    for g in games:
        await g.start()
        await g.play(20)
    first = await Projector(redis_client, keys).catch_up()
    assert first.entries > 0
    for g in games:
        await g.play(25)
    appended = 0
    for shard in range(SHARDS):
        ckpt = await redis_client.get(keys.ckpt(shard, "projector"))
        appended += len(await store.read_feed(shard, ckpt.decode() if ckpt else "0-0", 10_000))

    restarted = Projector(redis_client, keys)
    stats = await restarted.catch_up()
    assert stats.entries == appended  # only the entries after the checkpoint
    await assert_views_current(redis_client, keys, store, games)
    await assert_checkpoints_at_feed_ends(redis_client, keys)
    again = await restarted.catch_up()
    assert (again.entries, again.tables) == (0, 0)


async def test_reapplying_entries_already_reflected_changes_nothing(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    games = await play_games(store, 3, seed=4)
    projector = Projector(redis_client, keys)
    await projector.catch_up()
    before = await all_view_values(redis_client, keys.ns)
    hints = await _collect_hints(redis_client, keys.ns)

    entries = {s: await store.read_feed(s, "0-0", 10_000) for s in range(SHARDS)}
    stats = await projector.apply(
        {
            s: [(e.position, e.table_id, e.first_version, e.last_version) for e in es]
            for s, es in entries.items()
        }
    )
    assert stats.tables == 0 and stats.events == 0
    assert await all_view_values(redis_client, keys.ns) == before
    await assert_checkpoints_at_feed_ends(redis_client, keys)  # never moved backwards

    # A projector that starts with no checkpoint (and an empty cache) reads the stored view
    # versions and writes nothing older: views never go back.
    await redis_client.delete(*[keys.ckpt(s, "projector") for s in range(SHARDS)])
    fresh = await Projector(redis_client, keys).catch_up()
    assert fresh.tables == 0 and fresh.entries > 0
    assert await all_view_values(redis_client, keys.ns) == before
    await assert_checkpoints_at_feed_ends(redis_client, keys)
    await assert_views_current(redis_client, keys, store, games)
    assert await hints() == []


async def _collect_hints(client: redis.asyncio.Redis, ns: str) -> Any:
    pubsub = client.pubsub()
    await pubsub.subscribe(f"{ns}:views")
    await pubsub.get_message(timeout=1.0)  # the subscribe confirmation

    async def drain() -> list[str]:
        out = []
        while (
            m := await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        ) is not None:
            out += m["data"].decode().split("\n")  # one message a shard write, a hint a line
        await pubsub.aclose()
        return out

    return drain


async def test_each_write_publishes_a_hint_per_table(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    hints = await _collect_hints(redis_client, keys.ns)
    game = Game(TableService(store, store_views=False), "tbl-hint", random.Random(5))
    await game.start()
    projector = Projector(redis_client, keys)
    await projector.catch_up()
    await game.play(3)
    await projector.catch_up()
    head = await store.head("tbl-hint")
    got = await hints()
    assert got[-1] == f"tbl-hint {head.version}"
    assert [int(h.split()[1]) for h in got] == sorted(int(h.split()[1]) for h in got)


@pytest.mark.slow
async def test_projected_views_are_the_true_views_after_every_command(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    """Random bot games on Redis, the projector run after each command: at every version it
    writes, the views equal the engine's views of the true state and leak nothing."""
    service = TableService(store, store_views=False)
    rng = random.Random(6)
    projector = Projector(redis_client, keys)
    checked = 0
    for i, rules in enumerate(("classic", "bicycle", "automatic-forcing", "no-forcing")):
        game = Game(service, f"tbl-{i}", rng, rules=rules, deals=2, resign_chance=0.005)
        await game.start()
        while True:
            await projector.catch_up()
            assert game.table is not None and game.table.match is not None
            views = await read_views(redis_client, keys, game.table_id)
            assert views is not None
            assert json.loads(views["public"])["version"] == game.table.version
            assert_views_equal_engine(views, game.table.match, game.table_id)
            assert_secret(views, game.table.match)
            checked += 1
            if not await game.step():
                break
    assert checked > 100


async def test_rebuild_gives_the_same_views_byte_for_byte(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    games = await play_games(store, 5, seed=8)
    half = Game(TableService(store, store_views=False), "tbl-half", random.Random(9))
    await half.start()
    await half.play(10)
    await Projector(redis_client, keys, batch_size=3).catch_up()
    incremental = await all_view_values(redis_client, keys.ns)
    assert len(incremental) == len(STORED_PARTS) * (len(games) + 1)

    orphan = keys.table_view("tbl-gone", "public")
    retired = keys.table_view("tbl-1", "spectator")  # what projectors stored before the split
    lobby = keys.view(0, "lobby")
    await redis_client.set(orphan, b'{"version":1}')
    await redis_client.set(retired, b'{"version":1}')
    await redis_client.set(lobby, b"not the projector's")
    await redis_client.set(keys.table_view("tbl-0", "seat0"), b'{"version":999}')

    rebuilt = await Projector(redis_client, keys).rebuild()
    assert rebuilt.tables == len(games) + 1 and rebuilt.deleted == 2 and rebuilt.failed == 0
    after = await all_view_values(redis_client, keys.ns)
    assert after.pop(lobby.encode()) == b"not the projector's"
    assert after == incremental
    await assert_checkpoints_at_feed_ends(redis_client, keys)

    # and following goes on from the rebuilt checkpoints
    await half.play(5)
    stats = await Projector(redis_client, keys).catch_up()
    assert stats.entries == 5
    await assert_views_current(redis_client, keys, store, [*games, half])


async def test_rebuild_while_tables_move_stands_for_the_feed_end_it_started_from(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    """Appends that land during a rebuild are left to the catch-up after it: views then equal
    the views an incremental projector writes."""
    service = TableService(store, store_views=False)
    games = [Game(service, f"tbl-{i}", random.Random(i), deals=3) for i in range(6)]
    for g in games:
        await g.start()
        await g.play(10)
    projector = Projector(redis_client, keys)
    original = projector._fetch

    async def fetch_then_move(reads: Any) -> Any:
        out = await original(reads)
        for g in games:  # every table moves after its events were read
            await g.play(2)
        return out

    projector._fetch = fetch_then_move  # type: ignore[method-assign]
    await projector.rebuild(chunk=2)
    projector._fetch = original  # type: ignore[method-assign]
    for g in games:
        views = await read_views(redis_client, keys, g.table_id)
        assert views is not None
    await projector.catch_up()
    await assert_views_current(redis_client, keys, store, games)
    await assert_checkpoints_at_feed_ends(redis_client, keys)


async def test_a_write_is_refused_when_the_checkpoint_moved_underneath(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    game = Game(TableService(store, store_views=False), "tbl-cas", random.Random(13))
    await game.start()
    projector = Projector(redis_client, keys)
    await projector.catch_up()
    shard = keys.shard_of("tbl-cas")
    before = await read_views(redis_client, keys, "tbl-cas")
    await game.play(3)
    await redis_client.set(keys.ckpt(shard, "projector"), b"1-0")  # another writer moved it
    stats = await projector.step()
    assert stats.tables == 0 and projector.cached("tbl-cas") is None
    assert shard not in projector.positions
    assert await read_views(redis_client, keys, "tbl-cas") == before
    await projector.catch_up()  # reads the checkpoint again and carries on from there
    await assert_views_current(redis_client, keys, store, [game])


async def test_a_feed_trimmed_past_the_checkpoint_is_reported(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    game = Game(TableService(store, store_views=False), "tbl-trim", random.Random(14))
    await game.start()
    await game.play(5)
    shard = keys.shard_of("tbl-trim")
    await redis_client.xtrim(keys.feed(shard), maxlen=2, approximate=False)
    projector = Projector(redis_client, keys)
    await projector.catch_up()
    assert shard in projector.gaps
    other = Projector(redis_client, keys)
    await other.load_positions(range(SHARDS))
    assert other.gaps == {}  # the checkpoint is past what was trimmed


async def test_leases_partition_shards_and_fence_writes(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    games = await play_games(store, 4, seed=10)
    first = Projector(redis_client, keys, owner="first", lease_ms=5_000, batch_size=20)
    second = Projector(redis_client, keys, owner="second", lease_ms=5_000)
    assert await first.claim() == set(range(SHARDS))
    assert await second.claim() == set()
    with pytest.raises(ProjectorBusy):
        await second.rebuild()

    # a lease taken over while the first is working: its write is refused, nothing is written
    shard = keys.shard_of(games[0].table_id)
    await redis_client.set(first.lease_key(shard), b"second", px=5_000)
    stats = await first.catch_up()
    assert shard not in first.owned
    assert await read_views(redis_client, keys, games[0].table_id) is None
    assert await redis_client.get(keys.ckpt(shard, "projector")) is None
    others = [g for g in games if keys.shard_of(g.table_id) != shard]
    # the other shards' tables are written (a table may be written in more than one round when
    # its shard's feed holds more than a batch, so the rounds' sum is at least their number)
    assert stats.tables >= len(others)
    await assert_views_current(redis_client, keys, store, others)

    await first.release()
    await redis_client.delete(first.lease_key(shard))
    assert await second.claim() == set(range(SHARDS))
    await second.catch_up()
    await assert_views_current(redis_client, keys, store, games)
    await second.release()
    for s in range(SHARDS):
        assert await redis_client.get(second.lease_key(s)) is None


async def test_projectors_split_the_shards_and_take_over_a_stopped_ones(
    redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    games = await play_games(store, 4, seed=12)
    a = Projector(redis_client, keys, owner="a", lease_ms=5_000)
    b = Projector(redis_client, keys, owner="b", lease_ms=5_000)
    assert await a.balance() == set(range(SHARDS))  # alone: every shard
    assert await b.balance() == set()  # its share is half, but no shard is free yet
    a_held = await a.balance()  # two live projectors: a gives back what is above its share
    assert len(a_held) == SHARDS // 2
    b_held = await b.balance()
    assert b_held == set(range(SHARDS)) - a_held
    for s in range(SHARDS):
        assert await redis_client.get(a.lease_key(s)) == (b"a" if s in a_held else b"b")
    assert await a.balance() == a_held and await b.balance() == b_held  # stable
    await a.catch_up()
    await b.catch_up()
    await assert_views_current(redis_client, keys, store, games)

    # a stops cleanly: b's next balance takes every shard
    await a.release()
    await a.deregister()
    assert a.owned == set()
    assert await b.balance() == set(range(SHARDS))
    assert await redis_client.zrange(b.registry_key, 0, -1) == [b"b"]
    await b.release()
    await b.deregister()


async def test_run_projector_follows_the_feeds_until_stopped(
    redis_url: str, redis_client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore
) -> None:
    settings = load_settings(redis_url=redis_url, namespace=keys.ns, shards=SHARDS, lease_ms=1_000)
    hints = await _collect_hints(redis_client, keys.ns)
    stop = asyncio.Event()
    task = asyncio.create_task(run_projector(settings, stop))
    game = Game(TableService(store, store_views=False), "tbl-live", random.Random(11))
    await game.start()
    await game.play(10)
    head = await store.head("tbl-live")
    for _ in range(100):
        views = await read_views(redis_client, keys, "tbl-live")
        if views is not None and json.loads(views["public"])["version"] == head.version:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the running projector did not catch up")
    stop.set()
    projector = await asyncio.wait_for(task, timeout=5)
    assert projector.owned == set()
    for s in range(SHARDS):
        assert await redis_client.get(projector.lease_key(s)) is None
    assert f"tbl-live {head.version}" in await hints()
    assert REGISTRY.get_sample_value("conquian_projector_lag_seconds") is not None


async def test_run_projector_starts_again_from_redis_after_a_failed_round(
    redis_url: str,
    redis_client: redis.asyncio.Redis,
    keys: KeySpace,
    store: RedisEventStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A round that fails after folding (the write never reaches Redis) must not leave the
    cache ahead of the views: the next rounds write those versions all the same."""
    failures = []
    original = Projector._commit

    async def commit_once_failing(self: Projector, writes: Any, stats: Any) -> None:
        if not failures:
            failures.append(True)
            raise redis.exceptions.ConnectionError("connection lost")
        await original(self, writes, stats)

    monkeypatch.setattr(Projector, "_commit", commit_once_failing)
    game = Game(TableService(store, store_views=False), "tbl-fail", random.Random(15))
    await game.start()
    settings = load_settings(redis_url=redis_url, namespace=keys.ns, shards=SHARDS)
    stop = asyncio.Event()
    task = asyncio.create_task(run_projector(settings, stop))
    head = await store.head("tbl-fail")
    for _ in range(100):
        views = await read_views(redis_client, keys, "tbl-fail")
        if views is not None and json.loads(views["public"])["version"] == head.version:
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, timeout=5)
    assert failures
    await assert_views_current(redis_client, keys, store, [game])


# --- the command line ------------------------------------------------------------------------


def _drive(redis_url: str, ns: str, count: int) -> None:
    async def go() -> None:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=False)
        try:
            await play_games(RedisEventStore(client, KeySpace(ns, SHARDS)), count, seed=12)
        finally:
            await client.aclose()

    asyncio.run(go())


def _cli_views(redis_sync: redis.Redis, ns: str) -> dict[bytes, bytes]:
    keys = sorted(redis_sync.scan_iter(match=f"{ns}:*:view:*"))
    return dict(zip(keys, redis_sync.mget(keys), strict=True)) if keys else {}


@pytest.fixture
def quiet_logs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keep the CLI's logs out of the output it prints, and keep it from pointing structlog at
    capsys's stream, which closes after the test (whatever earlier tests configured)."""
    import services.log

    saved = structlog.get_config()
    structlog.configure(logger_factory=structlog.WriteLoggerFactory(file=io.StringIO()))
    monkeypatch.setattr(services.log, "configure", lambda *args, **kwargs: None)
    yield
    structlog.configure(**saved)


@pytest.mark.usefixtures("quiet_logs")
def test_cli_project_once_then_rebuild(
    redis_url: str, redis_ns: str, redis_sync: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    _drive(redis_url, redis_ns, 3)
    common = ["--redis-url", redis_url, "--namespace", redis_ns, "--shards", str(SHARDS)]
    assert cli_main(["project", "--once", *common]) == 0
    out = capsys.readouterr().out
    assert out.startswith("applied ") and "0 tables written" not in out
    once = _cli_views(redis_sync, redis_ns)
    assert len(once) == 3 * len(STORED_PARTS)

    assert cli_main(["project", "--rebuild", *common]) == 0
    assert capsys.readouterr().out.startswith("rebuilt 3 tables from ")
    assert _cli_views(redis_sync, redis_ns) == once
    assert not list(redis_sync.scan_iter(match=f"{redis_ns}:*:projlease"))


@pytest.mark.usefixtures("quiet_logs")
def test_cli_rebuild_refuses_while_another_projector_holds_a_lease(
    redis_url: str, redis_ns: str, redis_sync: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    ks = KeySpace(redis_ns, SHARDS)
    redis_sync.set(ks.shard_key(2, "projlease"), b"someone-else", px=10_000)
    common = ["--redis-url", redis_url, "--namespace", redis_ns, "--shards", str(SHARDS)]
    assert cli_main(["project", "--rebuild", *common]) == 1
    assert "shards 2 are held by another projector" in capsys.readouterr().err


def test_python_m_entry_point_parses_the_same_arguments() -> None:
    from services.projector.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0


@pytest.mark.parametrize(
    "name", ["ann", "Zoë ✓", 'quote " and \\ back', "tab\tnew\nline\x01", "\u2028 emoji 🃏"]
)
def test_view_text_is_the_standard_librarys_compact_json(name: str) -> None:
    view = {"seats": [{"name": name, "bot": None}, None], "scores": [1, 0], "ok": True}
    assert dump_part(view) == json.dumps(view, separators=(",", ":"), ensure_ascii=False)


def test_a_view_has_text_keys_only() -> None:
    with pytest.raises(TypeError):
        dump_part({"scores": {0: 1, 1: 0}})


def test_view_keys_are_the_key_spaces_table_view_keys() -> None:
    keys = KeySpace("vk", shards=16)
    projector = Projector(redis.asyncio.Redis(), keys)
    for table_id in ("T-1", "table.x:y_z", "x" * 128):
        expected = [keys.table_view(table_id, part) for part in STORED_PARTS]
        assert projector.view_keys(table_id) == expected
