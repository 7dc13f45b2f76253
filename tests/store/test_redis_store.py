"""What only the Redis store has: its key layout and entry encoding, the script's atomicity under
real concurrency (separate connections), NOSCRIPT recovery, memory per event."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio
import structlog
from redis.crc import key_slot
from store_helpers import new_command_id, typical_body

from events.chain import GENESIS_HASH, canonical_json, verify_chain
from services.store import AppendRequest, KeySpace, RedisEventStore, VersionConflict
from services.store.redis_store import APPEND_LUA, READ_LUA, command_record
from services.store.scripts import ReadOnlyScript
from services.store.token_digests import move_token_digests

pytestmark = pytest.mark.redis


@pytest.fixture
def rstore(redis_client: redis.asyncio.Redis, redis_ns: str) -> RedisEventStore:
    return RedisEventStore(redis_client, KeySpace(redis_ns, shards=4))


@pytest.fixture
async def two_stores(
    redis_url: str, redis_ns: str
) -> AsyncIterator[tuple[RedisEventStore, RedisEventStore]]:
    """Two stores on two separate clients (separate connection pools)."""
    a = redis.asyncio.Redis.from_url(redis_url, decode_responses=False)
    b = redis.asyncio.Redis.from_url(redis_url, decode_responses=False)
    try:
        ks = KeySpace(redis_ns, shards=4)
        yield RedisEventStore(a, ks), RedisEventStore(b, ks)
    finally:
        await a.aclose()
        await b.aclose()


async def test_key_layout_and_entry_encoding(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    ks = rstore.keys
    shard = ks.shard_of("t1")
    tag = f"{{s{shard:02d}}}"
    res = await rstore.append(
        "t1", 0, GENESIS_HASH, "c1", [typical_body(0, "c1"), typical_body(1, "c1")], b"R",
        secrets={"seed_hash": "ab"}, status="playing",
    )  # fmt: skip
    ev_key = f"{redis_ns}:{tag}:t:t1:ev"
    entries = await redis_client.xrange(ev_key)
    assert [e[0] for e in entries] == [b"1-1", b"2-1"]
    for (_, fields), event in zip(entries, res.events, strict=True):
        assert set(fields) == {b"b", b"h"}
        assert fields[b"h"] == bytes.fromhex(event.hash)
        assert fields[b"b"] == b"\x1f".join(
            [b"card_turned", b"1", b"c1", b"k" * 22, str(event.body["time"]).encode(),
             canonical_json({"card": "7H", "seat": event.body["seat"]})[1:-1]]
        )  # fmt: skip
    head = await redis_client.hgetall(f"{redis_ns}:{tag}:t:t1:head")
    assert head == {b"version": b"2", b"hash": res.last_hash.encode(), b"status": b"playing"}
    assert await redis_client.hgetall(f"{redis_ns}:{tag}:t:t1:secret") == {b"seed_hash": b"ab"}
    assert await redis_client.hgetall(f"{redis_ns}:{tag}:t:t1:cmdids") == {b"c1": b"1 2 R"}
    assert await redis_client.pttl(f"{redis_ns}:{tag}:t:t1:cmdids") == -1  # playing: kept
    ((_, feed),) = await redis_client.xrange(f"{redis_ns}:{tag}:feed")
    assert feed == {b"t": b"t1", b"f": b"1", b"l": b"2"}


def test_script_keys_share_one_slot(rstore: RedisEventStore) -> None:
    for t in ("a", "b", "c", "table-9"):
        keys, _, _ = rstore.build_call(AppendRequest(t, 0, GENESIS_HASH, "c", [typical_body(0)]))
        assert len({key_slot(k.encode()) for k in keys}) == 1
        assert all(k.startswith(rstore.keys.shard_prefix(rstore.keys.shard_of(t))) for k in keys)


async def test_a_finished_tables_command_ids_expire_after_the_match(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    store = RedisEventStore(redis_client, KeySpace(redis_ns, shards=4), finished_ids_ms=300)
    key = store.keys.command_ids("t1")
    first = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], status="playing")
    assert await redis_client.pttl(key) == -1  # a match in play keeps every command id
    last = await store.append(
        "t1", 1, first.last_hash, "c2", [typical_body(1)], b"OK", status="over"
    )
    ttl = await redis_client.pttl(key)
    assert 0 < ttl <= 300
    # a command refused after the end is recorded too, and does not push the end back (NX)
    await store.append("t1", 2, last.last_hash, "c3", [], b"REFUSED")
    assert await redis_client.hget(key, "c3") == b"3 2 REFUSED"  # no events: first > last
    assert 0 < await redis_client.pttl(key) <= ttl
    again = await store.append("t1", 1, first.last_hash, "c2", [typical_body(1)])
    assert again.duplicate and again.result == b"OK"  # within the time: the first outcome
    await asyncio.sleep(0.4)
    assert not await redis_client.exists(key)
    with pytest.raises(VersionConflict):  # no longer a duplicate: decided again, refused
        await store.append("t1", 1, first.last_hash, "c2", [typical_body(1)])
    assert await store.command_result("t1", "c2") is None
    late = await store.append("t1", 2, last.last_hash, "c4", [], b"REFUSED")
    assert not late.duplicate
    assert 0 < await redis_client.pttl(key) <= 300  # a late command's record goes as well


async def test_the_append_that_ends_a_match_indexes_the_table_as_sealed(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis
) -> None:
    """The archiver's index (``KeySpace.sealed``): written in the append that sets 'over',
    scored by its last event's time, once (a later append does not move it)."""
    ks = rstore.keys
    index = ks.sealed(ks.shard_of("t1"))
    first = await rstore.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], status="playing")
    assert await redis_client.zscore(index, "t1") is None  # in play: not indexed
    ended = {**typical_body(1), "time": 1_700_000_123_456}
    last = await rstore.append("t1", 1, first.last_hash, "c2", [ended], status="over")
    assert await redis_client.zscore(index, "t1") == 1_700_000_123_456
    await rstore.append("t1", 2, last.last_hash, "c3", [], b"REFUSED")  # refused afterwards
    again = {**typical_body(2), "time": 1_800_000_000_000}
    await rstore.append("t1", 2, last.last_hash, "c4", [again], status="over")
    assert await redis_client.zrange(index, 0, -1, withscores=True) == [(b"t1", 1_700_000_123_456)]


async def test_finished_ids_none_keeps_command_ids_for_ever(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    store = RedisEventStore(redis_client, KeySpace(redis_ns, shards=4), finished_ids_ms=None)
    await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], status="over")
    assert await redis_client.pttl(store.keys.command_ids("t1")) == -1
    with pytest.raises(ValueError):
        RedisEventStore(redis_client, store.keys, finished_ids_ms=0)


async def test_a_command_id_in_the_shards_hash_of_older_stores_is_still_a_duplicate(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis
) -> None:
    """Stores before the per-table hash recorded every table's command ids in one hash per
    shard (``<table>|<command id>``): a command recorded there is answered, not applied again."""
    ks = rstore.keys
    first = await rstore.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], b"FIRST")
    record = await redis_client.hget(ks.command_ids("t1"), "c1")
    await redis_client.delete(ks.command_ids("t1"))
    await redis_client.hset(ks.cmdids(ks.shard_of("t1")), ks.cmdid_field("t1", "c1"), record)
    again = await rstore.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)])
    assert again.duplicate and again.result == b"FIRST"
    assert (again.first_version, again.last_version, again.last_hash) == (1, 1, first.last_hash)
    assert await rstore.command_result("t1", "c1") == b"FIRST"
    assert await command_record(redis_client, ks, "t1", "c1") == b"1 1 FIRST"
    assert await command_record(redis_client, ks, "t1", "other") is None
    assert not await redis_client.exists(ks.command_ids("t1"))  # nothing written anew


async def test_token_digests_go_to_their_own_hash_and_seeds_stay_in_the_secret_hash(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis
) -> None:
    """A reader of token digests (the gateway) needs no access to the seeds: an append's
    ``token:`` secrets go to the tokens hash, the others to the secret hash; ``secrets`` gives
    both, a digest of the tokens hash before one an older store kept in the secret hash."""
    ks = rstore.keys
    first = await rstore.append(
        "t1", 0, GENESIS_HASH, "c1", [typical_body(0)],
        secrets={"token:0": "d0", "seed:1": "s1", "token:1": "d1"},
    )  # fmt: skip
    assert await redis_client.hgetall(ks.secret("t1")) == {b"seed:1": b"s1"}
    assert await redis_client.hgetall(ks.tokens("t1")) == {b"token:0": b"d0", b"token:1": b"d1"}
    await rstore.append("t1", 1, first.last_hash, "c2", [], secrets={"token:1": ""})  # a leave
    assert await redis_client.hgetall(ks.tokens("t1")) == {b"token:0": b"d0", b"token:1": b""}
    await redis_client.hset(ks.secret("t1"), mapping={"token:0": "old", "token:2": "legacy"})
    assert await rstore.secrets("t1") == {
        "seed:1": "s1", "token:0": "d0", "token:1": "", "token:2": "legacy"
    }  # fmt: skip
    assert await rstore.secrets_many(["t1", "none"]) == {
        "t1": await rstore.secrets("t1"), "none": {}
    }  # fmt: skip
    # without the digests: the seeds alone, an older store's digests left out too
    assert await rstore.secrets_many(["t1"], tokens=False) == {"t1": {"seed:1": "s1"}}


async def test_older_stores_token_digests_move_once_to_their_own_hash(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis
) -> None:
    """At an engine worker's start the digests a store kept in the secret hash move to the
    tokens hash, once: a digest already there (newer) stays, the seeds stay, and the layout
    mark makes a later run skip the scan."""
    ks = rstore.keys
    for t in ("t1", "t2", "t3"):
        await rstore.append(t, 0, GENESIS_HASH, "c1", [typical_body(0)], secrets={"seed:1": t})
    await redis_client.hset(ks.secret("t1"), mapping={"token:0": "a0", "token:1": "a1"})
    await redis_client.hset(ks.secret("t2"), mapping={"token:0": "stale"})
    await redis_client.hset(ks.tokens("t2"), mapping={"token:0": "newer"})
    log = structlog.get_logger()
    assert await move_token_digests(redis_client, ks, log) == 3
    assert await redis_client.hgetall(ks.secret("t1")) == {b"seed:1": b"t1"}
    assert await redis_client.hgetall(ks.tokens("t1")) == {b"token:0": b"a0", b"token:1": b"a1"}
    assert await redis_client.hgetall(ks.secret("t2")) == {b"seed:1": b"t2"}
    assert await redis_client.hgetall(ks.tokens("t2")) == {b"token:0": b"newer"}
    assert await redis_client.hgetall(ks.tokens("t3")) == {}
    assert await redis_client.hget(ks.layout(), "tokens") == b"1"
    await redis_client.hset(ks.secret("t3"), "token:0", "after the mark")
    assert await move_token_digests(redis_client, ks, log) == 0  # marked: no scan
    assert await redis_client.hget(ks.secret("t3"), "token:0") == b"after the mark"
    await redis_client.hdel(ks.layout(), "tokens")
    assert await move_token_digests(redis_client, ks, log) == 1  # unmarked: runs again
    assert await redis_client.hgetall(ks.tokens("t3")) == {b"token:0": b"after the mark"}


async def test_noscript_is_recovered(redis_client: redis.asyncio.Redis, redis_ns: str) -> None:
    # A script text the server has never seen behaves as after SCRIPT FLUSH or a failover.
    store = RedisEventStore(redis_client, KeySpace(redis_ns, shards=4))
    store._script = redis_client.register_script(APPEND_LUA + f"\n-- {uuid.uuid4()}\n")
    assert not (await redis_client.script_exists(store.script_sha))[0]
    res = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)])
    assert res.last_version == 1
    # and in a pipeline (append_many)
    store._script = redis_client.register_script(APPEND_LUA + f"\n-- {uuid.uuid4()}\n")
    out = await store.append_many([AppendRequest("t2", 0, GENESIS_HASH, "c", [typical_body(0)])])
    assert not isinstance(out[0], VersionConflict) and out[0].last_version == 1


async def test_read_many_loads_its_script_on_noscript(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    # A read script the server has never seen, as after SCRIPT FLUSH (the shared server's
    # cache stays as it is): read_many loads it and reads the same events.
    store = RedisEventStore(redis_client, KeySpace(redis_ns, shards=4))
    for n, table_id in enumerate(["r1", "r2", "r3"]):
        await store.append(table_id, 0, GENESIS_HASH, "c1", [typical_body(i) for i in range(n + 1)])
    before = await store.read_many(["r1", "r2", "r3", "none"])
    store._read = ReadOnlyScript(redis_client, READ_LUA + f"\n-- {uuid.uuid4()}\n")
    assert not (await redis_client.script_exists(store._read.sha))[0]
    assert await store.read_many(["r1", "r2", "r3", "none"]) == before
    assert [len(before[t]) for t in ("r1", "r2", "r3", "none")] == [1, 2, 3, 0]
    assert (await redis_client.script_exists(store._read.sha))[0]


async def test_rejects_decoding_client(redis_url: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        with pytest.raises(ValueError):
            RedisEventStore(client)
    finally:
        await client.aclose()


async def test_race_two_connections_one_wins(
    two_stores: tuple[RedisEventStore, RedisEventStore],
) -> None:
    a, b = two_stores
    version, h = 0, GENESIS_HASH
    for round_ in range(50):
        ca, cb = f"a{round_}", f"b{round_}"
        outcomes = await asyncio.gather(
            a.append("race", version, h, ca, [typical_body(round_, ca)] * 2, b"a"),
            b.append("race", version, h, cb, [typical_body(round_, cb)], b"b"),
            return_exceptions=True,
        )
        wins = [o for o in outcomes if not isinstance(o, BaseException)]
        conflicts = [o for o in outcomes if isinstance(o, VersionConflict)]
        assert len(wins) == 1 and len(conflicts) == 1, outcomes
        assert conflicts[0].expected == version and conflicts[0].actual > version
        version, h = wins[0].last_version, wins[0].last_hash
        loser = cb if wins[0].result == b"a" else ca
        assert await a.command_result("race", loser) is None
    events = await a.read("race")
    assert len(events) == version and verify_chain(events) is None
    assert (await b.head("race")).hash == h


async def test_race_same_command_twice_applies_once(
    two_stores: tuple[RedisEventStore, RedisEventStore],
) -> None:
    a, b = two_stores
    for round_ in range(30):
        table = f"dup{round_}"
        cid = new_command_id()
        r1, r2 = await asyncio.gather(
            a.append(table, 0, GENESIS_HASH, cid, [typical_body(0, cid)], b"first"),
            b.append(table, 0, GENESIS_HASH, cid, [typical_body(0, cid)], b"first"),
        )
        assert sorted([r1.duplicate, r2.duplicate]) == [False, True]
        assert r1.last_hash == r2.last_hash and r1.result == r2.result == b"first"
        assert len(await a.read(table)) == 1


async def test_many_writers_many_tables_no_fork(
    two_stores: tuple[RedisEventStore, RedisEventStore],
) -> None:
    """Four writers over two connections hammer eight tables, retrying on conflict."""
    stores = [*two_stores, *two_stores]
    tables = [f"m{i}" for i in range(8)]
    applied: dict[str, int] = dict.fromkeys(tables, 0)

    async def writer(store: RedisEventStore, w: int) -> None:
        for i in range(40):
            table = tables[(w + i) % len(tables)]
            cid = f"w{w}-{i}"
            while True:
                head = await store.head(table)
                try:
                    res = await store.append(
                        table, head.version, head.hash, cid, [typical_body(i, cid)], b"ok"
                    )
                except VersionConflict:
                    continue
                assert not res.duplicate
                applied[table] += 1
                break

    await asyncio.gather(*(writer(s, w) for w, s in enumerate(stores)))
    for table in tables:
        events = await two_stores[0].read(table)
        assert len(events) == applied[table]
        assert verify_chain(events) is None


async def test_feed_maxlen_trims_the_feed_only(
    redis_client: redis.asyncio.Redis, redis_ns: str
) -> None:
    store = RedisEventStore(redis_client, KeySpace(redis_ns, shards=1), feed_maxlen=10)
    h = GENESIS_HASH
    for v in range(300):
        h = (await store.append("t1", v, h, f"c{v}", [typical_body(v)])).last_hash
    assert len(await store.read("t1")) == 300
    assert await redis_client.xlen(store.keys.feed(0)) < 300


async def test_read_survives_missing_previous_event(rstore: RedisEventStore) -> None:
    h = GENESIS_HASH
    for v in range(5):
        h = (await rstore.append("t1", v, h, f"c{v}", [typical_body(v)])).last_hash
    tail = await rstore.read("t1", 3, 4)
    assert [e.version for e in tail] == [3, 4]
    assert verify_chain(tail, prev_hash=tail[0].prev_hash, first_version=3) is None


async def test_seal_keeps_everything_and_saves_memory(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis
) -> None:
    h = GENESIS_HASH
    for v in range(60):
        cid = f"{uuid.uuid4().hex[:22]}"
        body = {**typical_body(v, cid), "causation": uuid.uuid4().hex[:22]}
        h = (await rstore.append("01JD7Q3KXW4N8ZC5T2M9PB", v, h, cid, [body], b"ok")).last_hash
    key = rstore.keys.events("01JD7Q3KXW4N8ZC5T2M9PB")
    before = await rstore.read("01JD7Q3KXW4N8ZC5T2M9PB")
    live = await redis_client.memory_usage(key, samples=0)
    await rstore.seal("01JD7Q3KXW4N8ZC5T2M9PB")
    sealed = await redis_client.memory_usage(key, samples=0)
    assert await rstore.read("01JD7Q3KXW4N8ZC5T2M9PB") == before
    assert sealed is not None and live is not None and sealed <= live
    assert sealed / 60 < 200, f"{sealed / 60:.1f} bytes per event"
    # appends go on after a seal
    res = await rstore.append("01JD7Q3KXW4N8ZC5T2M9PB", 60, h, "after", [typical_body(60)])
    assert res.last_version == 61
    await rstore.seal("never-written")  # no key: nothing to do


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1000])
async def test_reads_in_chunks(
    redis_client: redis.asyncio.Redis, redis_ns: str, chunk: int
) -> None:
    store = RedisEventStore(redis_client, KeySpace(redis_ns, shards=4), read_chunk=chunk)
    h = GENESIS_HASH
    for v in range(0, 14, 2):
        h = (
            await store.append("t1", v, h, f"c{v}", [typical_body(v), typical_body(v + 1)])
        ).last_hash
    await store.append("t2", 0, GENESIS_HASH, "c", [typical_body(0)])
    whole = await store.read("t1")
    assert [e.version for e in whole] == list(range(1, 15))
    assert verify_chain(whole) is None
    for lo, hi in [(1, None), (2, None), (3, 9), (6, 6), (14, None), (15, None), (9, 3)]:
        part = await store.read("t1", lo, hi)
        assert part == whole[lo - 1 : hi], (lo, hi)
    many = await store.read_many(["t1", "t2", "none"])
    assert many["t1"] == whole and len(many["t2"]) == 1 and many["none"] == []


async def test_corrupt_entries_raise_store_error(
    rstore: RedisEventStore, redis_client: redis.asyncio.Redis
) -> None:
    from services.store import StoreError

    await rstore.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)])
    await redis_client.xadd(
        rstore.keys.events("t1"), {"b": b"not\x1fsix", "h": b"x" * 32}, id="2-1"
    )
    with pytest.raises(StoreError):
        await rstore.read("t1")
    await redis_client.xadd(
        rstore.keys.events("t2"), {"b": b"a\x1f\x1f\x1f\x1f\x1f{bad", "h": b"x" * 32}, id="1-1"
    )
    with pytest.raises(StoreError):
        await rstore.read_many(["t2"])
