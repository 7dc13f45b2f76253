"""``conquian archive``: finished tables leave Redis for the archive, verified, exactly once.

Tables are recorded with ``conquian selfplay --record`` into the test's namespace; the archive
is a folder under ``tmp_path``.  What is checked: the file format and its chain check (a
changed body, a cut file), what a run archives (finished tables, after their age) and what it
leaves (a live table, one whose seed is not revealed, a conflict with another table of the
same id), that every key of an archived table is gone, reruns, the ``--scan`` fallback, views
folded when Redis lost them, and the delete's head check.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from events.commands import CreateTable
from services import cli
from services.archive.folder import FolderArchive
from services.archive.mover import Archiver
from services.archive.record import ArchiveError, check_chain, pack, unpack
from services.archive.redis_tables import delete_tables, export_tables
from services.lobby import listing
from services.lobby.listing import lobby_row
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.store import Head, KeySpace, RedisEventStore
from services.tables.service import TableService

SHARDS = 4
SEED = 5
TABLES = [f"selfplay-{SEED}-{i}" for i in range(5)]


def record(url: str, ns: str, deals: int = 5, seed: int = SEED) -> None:
    """Record ``deals`` one-deal tables (and one of two deals when seed is SEED)."""

    async def go() -> None:
        client = redis.asyncio.Redis.from_url(url)
        try:
            store = RedisEventStore(client, KeySpace(ns, SHARDS))
            await record_selfplay(SelfplayConfig(deals, seed, ("greedy", "random")), store)
        finally:
            await client.aclose()

    asyncio.run(go())


def archive_cli(
    capsys: pytest.CaptureFixture[str], url: str, ns: str, folder: Path, *args: str
) -> tuple[int, Any]:
    base = ["archive", "--redis-url", url, "--namespace", ns, "--shards", str(SHARDS)]
    code = cli.main([*base, "--archive-dir", str(folder), "--older-than", "0", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def keys_of(client: redis.Redis, ns: str, table_id: str) -> list[bytes]:
    """Every key of the namespace that names the table."""
    return [
        k
        for k in client.scan_iter(match=f"{ns}*", count=1000)
        if f":{table_id}:".encode() in k + b":"
    ]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "archive"


# --- the file ----------------------------------------------------------------------------------


async def test_a_file_reads_back_equal_and_its_chain_is_checked(
    redis_client: redis.asyncio.Redis, redis_ns: str, redis_url: str
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns, 1)
    keys = KeySpace(redis_ns, SHARDS)
    (exported,) = await export_tables(redis_client, keys, [TABLES[0]])
    from services.archive.prepare import prepare

    table = prepare(exported)
    data = pack(table)
    assert pack(table) == data  # no time or name in the gzip header: equal tables, equal bytes
    assert unpack(data) == table
    check_chain(unpack(data))
    assert [e.to_dict() for e in table.stored_events()] == [e.to_dict() for e in exported.events]
    text = gzip.decompress(data).split(b"\n")
    assert len(text) == table.version + 2 and text[-1] == b""
    # a changed body under its old hash: the chain check names the event
    changed = text[5].replace(b'"v":1', b'"v":2')
    tampered = gzip.compress(b"\n".join([*text[:5], changed, *text[6:]]))
    with pytest.raises(ArchiveError, match="event 5: the hash is not its body's"):
        check_chain(unpack(tampered))
    with pytest.raises(ArchiveError) as cut:
        unpack(data[: len(data) // 2])
    assert cut.value.code == "archive/corrupt"
    dropped = gzip.compress(b"\n".join([*text[:3], *text[4:]]))
    with pytest.raises(ArchiveError, match="counts"):
        unpack(dropped)


# --- archiving ---------------------------------------------------------------------------------


async def test_finished_tables_move_to_the_archive_and_their_keys_go(
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    redis_ns: str,
    redis_sync: redis.Redis,
    redis_client: redis.asyncio.Redis,
    folder: Path,
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns)
    keys = KeySpace(redis_ns, SHARDS)
    store = RedisEventStore(redis_client, keys)
    live = CreateTable(table_id="live-1", command_id="c-live-1", rules="classic", deals=1)
    created = await TableService(store).execute(live, None)
    assert created.ok and created.table is not None
    live_table = created.table
    before = {t: await store.read(t) for t in TABLES}
    heads = {t: await store.head(t) for t in TABLES}
    # a lobby row left behind (a running row whose end was never written, a finished one)
    stale = [listing.LobbyRow(t, 1, "running", {"table_id": t}) for t in TABLES]
    await listing.write_rows(redis_client, keys, [*stale, lobby_row(live_table)], 1)

    # not old enough yet: nothing moves
    code, data = await asyncio.to_thread(
        archive_cli, capsys, redis_url, redis_ns, folder, "--older-than", "86400"
    )
    assert (code, data["archived"]) == (0, 0)

    code, data = await asyncio.to_thread(archive_cli, capsys, redis_url, redis_ns, folder)
    assert code == 0, data
    assert data["archived"] == data["written"] == len(TABLES)
    assert data["events"] == sum(len(e) for e in before.values())
    archive = FolderArchive(folder, redis_ns)
    assert sorted(archive.list()) == sorted(TABLES)
    for t in TABLES:
        assert keys_of(redis_sync, redis_ns, t) == []
        copy = unpack(archive.get(t) or b"")
        check_chain(copy)
        assert copy.head == heads[t]
        assert [e.to_dict() for e in copy.stored_events()] == [e.to_dict() for e in before[t]]
        assert set(copy.views) == {"public", "seat0", "seat1"}
        assert not any(k.startswith("seed:") for k in copy.tokens)
    for shard in range(SHARDS):
        assert redis_sync.zcard(keys.sealed(shard)) == 0
    assert (await store.head("live-1")).status == "open"  # a live table stays
    assert redis_sync.zrange(keys.lobby("running"), 0, -1) == []  # archived: out of the lobby
    assert redis_sync.hkeys(keys.lobby("rows")) == [b"live-1"]
    assert len(redis_sync.zrange(keys.lobby("waiting"), 0, -1)) == 1

    # a second run finds nothing left
    code, data = await asyncio.to_thread(archive_cli, capsys, redis_url, redis_ns, folder)
    assert (code, data["archived"], data["refused"]) == (0, 0, [])


async def test_a_rerun_keeps_a_verified_copy_and_rewrites_a_damaged_one(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis, folder: Path
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns, 3)
    keys = KeySpace(redis_ns, SHARDS)
    store = RedisEventStore(redis_client, keys)
    archive = FolderArchive(folder, redis_ns)
    from services.archive.prepare import prepare

    exported = await export_tables(redis_client, keys, TABLES[:3])
    archive.put(TABLES[0], pack(prepare(exported[0])))  # an earlier run died before deleting
    archive.put(TABLES[1], b"not a gzip file")  # a damaged file (Redis still has the table)
    kept_bytes = archive.get(TABLES[0])
    tally = await Archiver(store, archive).archive_due(2**62)
    assert (tally.written, tally.kept, tally.refused) == (2, 1, [])
    assert archive.get(TABLES[0]) == kept_bytes
    for t in TABLES[:3]:
        check_chain(unpack(archive.get(t) or b""))
        assert (await store.head(t)).version == 0


async def test_tables_it_must_not_archive_stay_in_redis(
    redis_url: str,
    redis_ns: str,
    redis_client: redis.asyncio.Redis,
    redis_sync: redis.Redis,
    folder: Path,
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns, 3)
    keys = KeySpace(redis_ns, SHARDS)
    store = RedisEventStore(redis_client, keys)
    archive = FolderArchive(folder, redis_ns)
    # a seed in the secret hash that the events do not reveal
    redis_sync.hset(keys.secret(TABLES[0]), "seed:2", "ab" * 32)
    # another table of the same id already in the archive (an id used again)
    other = await export_tables(redis_client, keys, [TABLES[1]])
    from services.archive.prepare import prepare

    stranger = prepare(other[0])
    stranger = type(stranger)(
        stranger.table_id,
        stranger.version - 1,
        stranger.events[-2][0],
        "over",
        None,
        stranger.events[:-1],
    )
    archive.put(TABLES[1], pack(stranger))
    tally = await Archiver(store, archive).archive_due(2**62)
    codes = {r.table_id: r.code for r in tally.refused}
    assert codes == {TABLES[0]: "archive/unrevealed_seed", TABLES[1]: "archive/conflict"}
    assert tally.written == 1
    assert not archive.exists(TABLES[0])
    assert unpack(archive.get(TABLES[1]) or b"") == stranger  # left as it was
    for t in TABLES[:2]:
        assert (await store.head(t)).status == "over"
        assert redis_sync.zscore(keys.sealed(keys.shard_of(t)), t) is not None


async def test_the_delete_checks_the_head(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis, redis_sync: redis.Redis
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns, 1)
    keys = KeySpace(redis_ns, SHARDS)
    head = await RedisEventStore(redis_client, keys).head(TABLES[0])
    older = Head(head.version - 1, head.hash, head.status)
    other = Head(head.version, "0" * 64, head.status)
    assert await delete_tables(redis_client, keys, [(TABLES[0], older), (TABLES[0], other)]) == [
        0,
        0,
    ]
    assert keys_of(redis_sync, redis_ns, TABLES[0])  # nothing deleted
    assert await delete_tables(redis_client, keys, [(TABLES[0], head)]) == [1]
    assert keys_of(redis_sync, redis_ns, TABLES[0]) == []
    assert await delete_tables(redis_client, keys, [(TABLES[0], head)]) == [-1]


async def test_views_that_redis_lost_are_folded_as_the_projector_would(
    redis_url: str,
    redis_ns: str,
    redis_client: redis.asyncio.Redis,
    redis_sync: redis.Redis,
    folder: Path,
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns, 1)
    keys = KeySpace(redis_ns, SHARDS)
    parts = ("public", "seat0", "seat1")
    stored = {p: redis_sync.get(keys.table_view(TABLES[0], p)) for p in parts}
    assert all(stored.values())
    redis_sync.delete(*(keys.table_view(TABLES[0], p) for p in parts))  # a restart lost them
    archive = FolderArchive(folder, redis_ns)
    tally = await Archiver(RedisEventStore(redis_client, keys), archive).archive_due(2**62)
    assert tally.written == 1
    views = unpack(archive.get(TABLES[0]) or b"").views
    assert {p: views[p].encode() for p in parts} == stored


async def test_scan_indexes_tables_that_ended_before_the_index(
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    redis_ns: str,
    redis_sync: redis.Redis,
    folder: Path,
) -> None:
    await asyncio.to_thread(record, redis_url, redis_ns, 2)
    keys = KeySpace(redis_ns, SHARDS)
    old = TABLES[1]
    redis_sync.zrem(keys.sealed(keys.shard_of(old)), old)  # sealed by an older version
    code, data = await asyncio.to_thread(archive_cli, capsys, redis_url, redis_ns, folder)
    assert (code, data["archived"], data["indexed"]) == (0, 1, 0)
    assert redis_sync.exists(keys.head(old))
    code, data = await asyncio.to_thread(archive_cli, capsys, redis_url, redis_ns, folder, "--scan")
    assert (code, data["archived"], data["indexed"]) == (0, 1, 1)
    assert sorted(FolderArchive(folder, redis_ns).list()) == TABLES[:2]
    assert not redis_sync.exists(keys.head(old))


def test_archive_needs_an_archive_dir(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONQUIAN_ARCHIVE_DIR", raising=False)
    with pytest.raises(SystemExit) as exited:
        cli.main(["archive", "--redis-url", "redis://127.0.0.1:1/0"])
    assert exited.value.code == 2
    assert "--archive-dir" in capsys.readouterr().err


# --- the background mode -----------------------------------------------------------------------


async def test_the_service_archives_what_ends_and_stops_on_request(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis, folder: Path
) -> None:
    from services.archive.service import run_archiver
    from services.settings import load_settings

    await asyncio.to_thread(record, redis_url, redis_ns, 2)
    keys = KeySpace(redis_ns, SHARDS)
    redis_client_sync = redis.Redis.from_url(redis_url)
    try:
        old = TABLES[1]  # ended before the index: found by the scan at start
        redis_client_sync.zrem(keys.sealed(keys.shard_of(old)), old)
    finally:
        redis_client_sync.close()
    settings = load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=SHARDS,
        archive_dir=str(folder),
        archive_after_ms=0,
        archive_interval_ms=100,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(run_archiver(settings, stop))
    store = RedisEventStore(redis_client, keys)
    archive = FolderArchive(folder, redis_ns)
    for _ in range(100):
        if sorted(archive.list()) == TABLES[:2] and (await store.head(old)).version == 0:
            break
        await asyncio.sleep(0.05)
    assert sorted(archive.list()) == TABLES[:2]
    later = "selfplay-6-0"
    await asyncio.to_thread(record, redis_url, redis_ns, 1, 6)  # a table that ends later
    for _ in range(100):
        if archive.exists(later) and (await store.head(later)).version == 0:
            break
        await asyncio.sleep(0.05)
    assert sorted(archive.list()) == sorted([*TABLES[:2], later])
    stop.set()
    await asyncio.wait_for(task, 5)
    for t in [*TABLES[:2], later]:
        assert (await store.head(t)).version == 0


def test_serve_runs_the_archiver_only_with_an_archive_dir() -> None:
    import argparse

    from services.serve.cli import children

    args = argparse.Namespace(workers=1, host="127.0.0.1", port=8000)
    assert "archive" not in [c.name for c in children(args)]
    (archiver,) = [c for c in children(args, archive=True) if c.name == "archive"]
    assert archiver.argv[1:] == ["-m", "services.archive"]


def test_every_script_call_stays_in_one_cluster_slot() -> None:
    """The read and the delete of a table pass every key in KEYS, all of the table's slot."""
    from redis.crc import key_slot

    from services.archive.redis_tables import export_keys, table_keys

    keys = KeySpace("cq", 64)
    for t in ("a", "table-9", "selfplay-5-3", "t-abcdefghijkl"):
        deleted, read = table_keys(keys, t), export_keys(keys, t)
        slots = {key_slot(k.encode()) for k in [*deleted, *read]}
        assert slots == {key_slot(keys.sealed(keys.shard_of(t)).encode())}
        assert len(set(deleted)) == len(deleted)
