"""The event-store contract: every test runs against the memory store and the Redis store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from store_helpers import new_command_id, typical_body

from events.chain import GENESIS_HASH, event_hash, verify_chain
from services.store import (
    AppendRequest,
    EventStore,
    Head,
    InvalidEvent,
    InvalidTableId,
    VersionConflict,
)


async def fill(store: EventStore, table: str, n: int, per_command: int = 1) -> str:
    """Append ``n`` typical events, ``per_command`` at a time; return the last hash."""
    head = await store.head(table)
    version, h = head.version, head.hash
    while version < head.version + n:
        k = min(per_command, head.version + n - version)
        cid = new_command_id()
        res = await store.append(
            table, version, h, cid, [typical_body(version + j, cid) for j in range(k)], b"ok"
        )
        version, h = res.last_version, res.last_hash
    return h


async def test_empty_table(store: EventStore) -> None:
    assert await store.head("nothing") == Head(0, GENESIS_HASH, None)
    assert await store.read("nothing") == []
    assert await store.read("nothing", 3) == []
    assert await store.command_result("nothing", "c1") is None
    assert await store.secrets("nothing") == {}
    assert [t async for t in store.tables()] == []


async def test_append_and_read_back(store: EventStore) -> None:
    bodies = [typical_body(i, "c1") for i in range(3)]
    res = await store.append("t1", 0, GENESIS_HASH, "c1", bodies, b'{"ok":true}')
    assert (res.first_version, res.last_version, res.duplicate) == (1, 3, False)
    assert res.result == b'{"ok":true}'
    assert [e.version for e in res.events] == [1, 2, 3]

    events = await store.read("t1")
    assert events == list(res.events)
    prev = GENESIS_HASH
    for i, e in enumerate(events):
        assert e.table_id == "t1"
        assert e.body == {**bodies[i], "table_id": "t1", "version": i + 1}
        assert e.prev_hash == prev
        assert e.hash == event_hash(prev, e.body)
        prev = e.hash
    assert res.last_hash == prev
    assert verify_chain(events) is None
    assert await store.head("t1") == Head(3, prev, None)
    assert await store.command_result("t1", "c1") == b'{"ok":true}'


async def test_chain_continues_across_appends(store: EventStore) -> None:
    await fill(store, "t1", 10, per_command=3)
    events = await store.read("t1")
    assert [e.version for e in events] == list(range(1, 11))
    assert verify_chain(events) is None
    # flat wire dicts verify too
    assert verify_chain([e.to_dict() for e in events]) is None


async def test_read_ranges(store: EventStore) -> None:
    await fill(store, "t1", 8, per_command=2)
    everything = await store.read("t1")
    assert await store.read("t1", 1) == everything
    assert await store.read("t1", 4) == everything[3:]
    assert await store.read("t1", 4, 6) == everything[3:6]
    assert await store.read("t1", 8) == everything[7:]
    assert await store.read("t1", 8, 8) == everything[7:8]
    assert await store.read("t1", 9) == []
    assert await store.read("t1", 20) == []
    assert await store.read("t1", 2, 100) == everything[1:]
    assert await store.read("t1", 5, 4) == []
    tail = await store.read("t1", 5)
    assert tail[0].prev_hash == everything[3].hash
    assert verify_chain(tail, prev_hash=everything[3].hash, first_version=5) is None
    with pytest.raises(ValueError):
        await store.read("t1", 0)


async def test_duplicate_command_returns_first_result(store: EventStore) -> None:
    first = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], b"first")
    feed_before = await store.read_feed(store.keys.shard_of("t1"))
    # a redelivery: stale version, other events, other result -> the first outcome, no write
    again = await store.append(
        "t1", 0, GENESIS_HASH, "c1", [typical_body(5), typical_body(6)], b"second"
    )
    assert again.duplicate
    assert (again.first_version, again.last_version) == (1, 1)
    assert again.last_hash == first.last_hash
    assert again.result == b"first"
    assert again.events == ()
    assert len(await store.read("t1")) == 1
    assert (await store.head("t1")).version == 1
    assert await store.read_feed(store.keys.shard_of("t1")) == feed_before
    # also with the current version: still a duplicate, still nothing appended
    third = await store.append("t1", 1, first.last_hash, "c1", [typical_body(7)], b"third")
    assert third.duplicate and third.result == b"first"
    assert len(await store.read("t1")) == 1


async def test_duplicate_after_table_moved_on(store: EventStore) -> None:
    r1 = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0), typical_body(1)], "r1")
    r2 = await store.append("t1", 2, r1.last_hash, "c2", [typical_body(2)], "r2")
    dup = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], "x")
    assert dup.duplicate
    assert (dup.first_version, dup.last_version, dup.last_hash) == (1, 2, r1.last_hash)
    assert dup.result == b"r1"
    assert (await store.head("t1")).hash == r2.last_hash


async def test_command_ids_are_per_table(store: EventStore) -> None:
    await store.append("t1", 0, GENESIS_HASH, "same", [typical_body(0)], b"a")
    res = await store.append("t2", 0, GENESIS_HASH, "same", [typical_body(0)], b"b")
    assert not res.duplicate
    assert await store.command_result("t1", "same") == b"a"
    assert await store.command_result("t2", "same") == b"b"


async def test_a_command_id_another_sender_holds_records_the_refusal_only(
    store: EventStore,
) -> None:
    r1 = await store.append("t1", 0, GENESIS_HASH, "0:same-id", [typical_body(0)], b"a")
    for attempt in range(2):
        refused = await store.append(
            "t1",
            1,
            r1.last_hash,
            "1:same-id",
            [typical_body(1)],
            b"b",
            taken_by=("0:same-id", "same-id"),
            taken_result=b"taken",
        )
        assert refused.duplicate is bool(attempt)
        if refused.duplicate:  # the second time: the recorded refusal
            assert refused.result == b"taken" and not refused.refused
        else:
            assert refused.refused and refused.result == b"taken"
        assert (refused.first_version, refused.last_version) == (2, 1)
    assert await store.head("t1") == Head(1, r1.last_hash, None)  # nothing appended
    assert await store.command_result("t1", "1:same-id") == b"taken"
    assert await store.command_result("t1", "0:same-id") == b"a"
    free = await store.append(
        "t1", 1, r1.last_hash, "0:other-id", [typical_body(1)], b"c", taken_by=("other-id",)
    )
    assert not free.refused and free.last_version == 2  # no other sender holds it


async def test_version_conflict(store: EventStore) -> None:
    r1 = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], b"")
    with pytest.raises(VersionConflict) as info:
        await store.append("t1", 0, GENESIS_HASH, "c2", [typical_body(1)], b"x")
    err = info.value
    assert err.code == "store/version_conflict"
    assert (err.expected, err.actual, err.actual_hash) == (0, 1, r1.last_hash)
    with pytest.raises(VersionConflict) as info2:
        await store.append("t1", 5, r1.last_hash, "c3", [typical_body(1)], b"x")
    assert (info2.value.expected, info2.value.actual) == (5, 1)
    # nothing of the rejected appends was kept, not even their command ids
    assert len(await store.read("t1")) == 1
    assert await store.command_result("t1", "c2") is None
    assert await store.command_result("t1", "c3") is None
    ok = await store.append("t1", 1, r1.last_hash, "c2", [typical_body(1)], b"y")
    assert not ok.duplicate and ok.last_version == 2


async def test_hash_mismatch_conflict(store: EventStore) -> None:
    await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], b"")
    with pytest.raises(VersionConflict) as info:
        await store.append("t1", 1, "ab" * 32, "c2", [typical_body(1)], b"", secrets={"k": "v"})
    assert info.value.expected == info.value.actual == 1
    assert info.value.expected_hash == "ab" * 32
    assert len(await store.read("t1")) == 1
    assert await store.secrets("t1") == {}
    assert await store.command_result("t1", "c2") is None


async def test_zero_event_append_records_command(store: EventStore) -> None:
    r1 = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0)], b"ok")
    feed_before = await store.read_feed(store.keys.shard_of("t1"))
    rej = await store.append("t1", 1, r1.last_hash, "c2", [], b'{"rejected":"move/illegal"}')
    assert not rej.duplicate
    assert (rej.first_version, rej.last_version, rej.last_hash) == (2, 1, r1.last_hash)
    assert rej.events == ()
    assert await store.head("t1") == Head(1, r1.last_hash, None)
    assert await store.read_feed(store.keys.shard_of("t1")) == feed_before
    assert await store.command_result("t1", "c2") == b'{"rejected":"move/illegal"}'
    dup = await store.append("t1", 1, r1.last_hash, "c2", [typical_body(1)], b"other")
    assert dup.duplicate and dup.result == b'{"rejected":"move/illegal"}'
    assert (dup.first_version, dup.last_version, dup.last_hash) == (2, 1, r1.last_hash)
    assert len(await store.read("t1")) == 1


async def test_zero_event_append_on_empty_table(store: EventStore) -> None:
    rej = await store.append("t1", 0, GENESIS_HASH, "c1", [], "no")
    assert (rej.first_version, rej.last_version, rej.last_hash) == (1, 0, GENESIS_HASH)
    dup = await store.append("t1", 0, GENESIS_HASH, "c1", [], "no2")
    assert dup.duplicate and dup.result == b"no" and dup.last_hash == GENESIS_HASH
    assert await store.head("t1") == Head()


async def test_secrets_and_status_written_with_append(store: EventStore) -> None:
    commit = {"seed_hash": "ff" * 32, "seed": "s3cr3t"}
    r1 = await store.append(
        "t1", 0, GENESIS_HASH, "c1", [typical_body(0)], b"", secrets=commit, status="playing"
    )
    assert await store.secrets("t1") == commit
    assert await store.head("t1") == Head(1, r1.last_hash, "playing")
    # a duplicate writes nothing, secrets included
    await store.append("t1", 0, GENESIS_HASH, "c1", [], b"", secrets={"seed": "x"}, status="x")
    assert await store.secrets("t1") == commit
    assert (await store.head("t1")).status == "playing"
    # a later append adds/overwrites fields; status persists unless set
    r2 = await store.append("t1", 1, r1.last_hash, "c2", [typical_body(1)], secrets={"seed": ""})
    assert await store.secrets("t1") == {"seed_hash": "ff" * 32, "seed": ""}
    assert await store.head("t1") == Head(2, r2.last_hash, "playing")
    # a zero-event append can set status and secrets too
    await store.append("t1", 2, r2.last_hash, "c3", [], secrets={"revealed": "1"}, status="done")
    assert await store.head("t1") == Head(2, r2.last_hash, "done")
    assert (await store.secrets("t1"))["revealed"] == "1"


async def test_feed(store: EventStore) -> None:
    shard = store.keys.shard_of("t1")
    r1 = await store.append("t1", 0, GENESIS_HASH, "c1", [typical_body(0), typical_body(1)])
    await store.append("t1", 2, r1.last_hash, "c2", [typical_body(2)])
    feed = await store.read_feed(shard)
    assert [(f.table_id, f.first_version, f.last_version) for f in feed] == [
        ("t1", 1, 2),
        ("t1", 3, 3),
    ]
    assert await store.read_feed(shard, feed[0].position) == feed[1:]
    assert await store.read_feed(shard, feed[1].position) == []
    assert await store.read_feed(shard, count=1) == feed[:1]
    # another shard's feed does not see it
    other = next(s for s in range(store.keys.shards) if s != shard)
    assert all(f.table_id != "t1" for f in await store.read_feed(other))


async def test_feed_across_tables_of_a_shard(store: EventStore) -> None:
    tables = [f"tb{i}" for i in range(12)]
    for t in tables:
        await fill(store, t, 2, per_command=2)
    total = 0
    for shard in range(store.keys.shards):
        entries = await store.read_feed(shard, count=1000)
        assert all(store.keys.shard_of(e.table_id) == shard for e in entries)
        positions = [e.position for e in entries]
        assert len(set(positions)) == len(positions)
        total += len(entries)
    assert total == len(tables)


async def test_tables(store: EventStore) -> None:
    for t in ("a", "b", "c:1"):
        await fill(store, t, 1)
    await store.append("rejected-only", 0, GENESIS_HASH, "c", [], b"no")
    assert sorted([t async for t in store.tables()]) == ["a", "b", "c:1"]


async def test_versions_of_many_tables(store: EventStore) -> None:
    await fill(store, "a", 3)
    await fill(store, "b", 5, per_command=2)
    assert await store.versions(["b", "nothing", "a"]) == [5, 0, 3]
    assert await store.versions([]) == []


async def test_given_table_id_and_version_must_match(store: EventStore) -> None:
    ok = {**typical_body(0), "table_id": "t1", "version": 1, "hash": "x", "prev_hash": "y"}
    res = await store.append("t1", 0, GENESIS_HASH, "c1", [ok])
    assert res.events[0].body == {**typical_body(0), "table_id": "t1", "version": 1}
    for bad in (
        {**typical_body(1), "table_id": "t2"},
        {**typical_body(1), "version": 3},
        {**typical_body(1), "time": float("nan")},
        {**typical_body(1), "card": {1, 2}},
    ):
        with pytest.raises(InvalidEvent) as info:
            await store.append("t1", 1, res.last_hash, "c2", [bad])
        assert info.value.code == "store/invalid_event"
    assert len(await store.read("t1")) == 1
    assert await store.command_result("t1", "c2") is None


async def test_invalid_arguments(store: EventStore) -> None:
    with pytest.raises(InvalidTableId):
        await store.append("bad table", 0, GENESIS_HASH, "c1", [])
    with pytest.raises(InvalidTableId):
        await store.read("")
    with pytest.raises(ValueError):
        await store.append("t1", -1, GENESIS_HASH, "c1", [])
    with pytest.raises(ValueError):
        await store.append("t1", 0, "zz", "c1", [])
    with pytest.raises(ValueError):
        await store.append("t1", 0, "1" * 64, "c1", [])  # empty table chains to genesis
    with pytest.raises(ValueError):
        await store.append("t1", 0, GENESIS_HASH, "", [])


async def test_unicode_and_nested_bodies_round_trip(store: EventStore) -> None:
    body: dict[str, Any] = {
        "type": "chat",
        "v": 2,
        "text": "¡Olé! 7♥ — 你好",
        "nested": {"z": [1, {"b": None, "a": True}], "a": -3},
    }
    res = await store.append("t1", 0, GENESIS_HASH, "c1", [body])
    (e,) = await store.read("t1")
    assert e.body == {**body, "table_id": "t1", "version": 1}
    assert e.hash == res.last_hash == event_hash(GENESIS_HASH, json.loads(json.dumps(e.body)))


async def test_append_many_and_read_many(store: EventStore) -> None:
    reqs = [
        AppendRequest(f"m{i}", 0, GENESIS_HASH, f"c{i}", [typical_body(0), typical_body(1)], "ok")
        for i in range(20)
    ]
    results = await store.append_many(reqs)
    assert all(not isinstance(r, VersionConflict) and r.last_version == 2 for r in results)
    # a second batch: one stale request conflicts in place, a duplicate comes back as such
    first = results[0]
    assert not isinstance(first, VersionConflict)
    batch2 = [
        AppendRequest("m0", 2, first.last_hash, "d0", [typical_body(2)], "ok"),
        AppendRequest("m1", 0, GENESIS_HASH, "d1", [typical_body(2)], "stale"),
        AppendRequest("m2", 0, GENESIS_HASH, "c2", [typical_body(2)], "dup"),
    ]
    out = await store.append_many(batch2)
    assert not isinstance(out[0], VersionConflict) and out[0].last_version == 3
    assert isinstance(out[1], VersionConflict) and out[1].actual == 2
    assert not isinstance(out[2], VersionConflict) and out[2].duplicate
    assert out[2].result == b"ok"
    everything = await store.read_many([f"m{i}" for i in range(20)] + ["absent"])
    assert len(everything["m0"]) == 3 and everything["absent"] == []
    for t, events in everything.items():
        assert verify_chain(events) is None, t
        assert events == await store.read(t)
    firsts = await store.read_many(["m0", "m1", "absent"], first=2)
    assert firsts == {"m0": everything["m0"][:2], "m1": everything["m1"], "absent": []}
    # a cached fold brought up to date: only what came after the version it is at
    later = await store.read_many(["m0", "m1", "m2", "absent"], after={"m0": 1, "m1": 2})
    assert later == {
        "m0": everything["m0"][1:],
        "m1": [],
        "m2": everything["m2"],
        "absent": [],
    }
    assert await store.read_many(["m0"], first=2, after={"m0": 1}) == {"m0": everything["m0"][1:2]}
    for bad in ({"first": 0}, {"after": {"m0": -1}}):
        with pytest.raises(ValueError):
            await store.read_many(["m0"], **bad)  # type: ignore[arg-type]
    heads = await store.heads(["m0", "m1", "absent"])
    assert heads == [await store.head("m0"), await store.head("m1"), await store.head("absent")]
    assert heads[0].version == 3 and heads[2].version == 0


async def test_secrets_many_gives_each_tables_hash(store: EventStore) -> None:
    await store.append("s1", 0, GENESIS_HASH, "c1", [typical_body(0)], secrets={"seed:1": "ab"})
    await store.append("s2", 0, GENESIS_HASH, "c2", [typical_body(0)])
    assert await store.secrets_many(["s1", "s2", "absent"]) == {
        "s1": {"seed:1": "ab"},
        "s2": {},
        "absent": {},
    }
    await store.append("s2", 1, (await store.head("s2")).hash, "c3", [], secrets={"token:0": "d"})
    assert (await store.secrets_many(["s2"]))["s2"] == {"token:0": "d"}
    seeds = await store.secrets_many(["s1", "s2"], tokens=False)
    assert seeds == {"s1": {"seed:1": "ab"}, "s2": {}}


async def test_concurrent_appends_one_wins(store: EventStore) -> None:
    r1 = await store.append("t1", 0, GENESIS_HASH, "c0", [typical_body(0)])
    outcomes = await asyncio.gather(
        store.append("t1", 1, r1.last_hash, "ca", [typical_body(1, "ca")], b"a"),
        store.append("t1", 1, r1.last_hash, "cb", [typical_body(1, "cb")], b"b"),
        return_exceptions=True,
    )
    wins = [o for o in outcomes if not isinstance(o, BaseException)]
    losses = [o for o in outcomes if isinstance(o, VersionConflict)]
    assert len(wins) == 1 and len(losses) == 1
    events = await store.read("t1")
    assert len(events) == 2 and verify_chain(events) is None
    assert events[1].body["command_id"] in ("ca", "cb")
