"""The whole service on a three-master Redis Cluster of its own, one master SIGKILLed mid-run.

``conquian serve`` is given one node's address and finds the cluster by itself. Bot tables are
played to the end while a master is killed and started again from its AOF; then every master
holds some tables, every table audits clean, no accepted command was lost or applied twice,
and a rebuild of the views equals the views.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
import redis.exceptions
from redis.asyncio.cluster import RedisCluster

from services.chaos.checks import applied_twice, command_runs, read_views, run_cli
from services.followers.feed import FeedFollower
from services.redis_server.cluster import LocalCluster, slot_ranges
from services.settings import load_settings
from services.store.client import connect, is_cluster
from services.store.keys import KeySpace
from services.store.packed import send_packed
from services.store.redis_store import RedisEventStore
from services.store.shard_leases import heartbeat, registry_key
from services.store.stream_watch import (
    StreamWatch,
    answered,
    xread_each,
    xreadgroup_on,
)
from tests.services.test_serve import ROOT, free_port, http, start_serve, wait_for_line

pytestmark = pytest.mark.redis

TABLES = 54
SHARDS = 16
NAMESPACE = "clt"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "cluster", masters=3) as running:
        yield running


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster for the tests that kill nothing (each keeps to its own namespace)."""
    with LocalCluster(tmp_path_factory.mktemp("cluster"), masters=3) as running:
        yield running


def test_slot_ranges_cover_every_slot_once() -> None:
    for masters in (1, 2, 3, 5, 7):
        ranges = slot_ranges(masters)
        assert ranges[0][0] == 0 and ranges[-1][1] == 16383
        assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))


async def test_connect_finds_the_cluster_from_any_node_and_one_redis_stays_one(
    shared_cluster: LocalCluster, redis_url: str
) -> None:
    assert is_cluster(shared_cluster.node_url(2)) and not is_cluster(redis_url)
    plain = connect(redis_url)
    assert isinstance(plain, redis.asyncio.Redis)
    await plain.aclose()
    client = connect(shared_cluster.node_url(2), call_timeouts=False)
    try:
        assert isinstance(client, RedisCluster)
        await client.initialize()
        assert len(client.get_primaries()) == 3
        keys = KeySpace("cc1", shards=16)
        for shard in range(16):  # a script on each shard's slot, wherever its master is
            await client.set(keys.shard_key(shard, "x"), shard)
        masters = {client.get_node_from_key(keys.shard_key(s, "x")).name for s in range(16)}
        assert len(masters) == 3
        assert [int(await client.get(keys.shard_key(s, "x"))) for s in range(16)] == list(range(16))
    finally:
        await client.aclose()


def test_conquian_shards_shows_every_master_with_its_shards(
    shared_cluster: LocalCluster, redis_url: str
) -> None:
    env = {**os.environ, "REDIS_URL": shared_cluster.url, "CONQUIAN_SHARDS": "64"}
    shown = run_cli(env, "shards", "--json")
    assert shown.returncode == 0, shown.stderr
    spread = json.loads(shown.stdout)
    assert sorted(spread) == sorted(f"127.0.0.1:{port}" for port in shared_cluster.ports)
    assert sorted(s for shards in spread.values() for s in shards) == list(range(64))
    assert all(len(shards) > 64 / 3 / 2 for shards in spread.values())  # even enough at 64
    text = run_cli(env, "shards")
    assert text.returncode == 0 and text.stdout.count("shards (") == 3
    single = run_cli({**os.environ, "REDIS_URL": redis_url, "CONQUIAN_SHARDS": "4"}, "shards")
    assert single.returncode == 0 and "4 shards (1.00 x even)  0 1 2 3" in single.stdout


async def test_the_probes_ask_the_master_that_holds_the_key(
    shared_cluster: LocalCluster, redis_url: str
) -> None:
    client = connect(shared_cluster.url)
    assert isinstance(client, RedisCluster)
    try:
        await client.initialize()
        url_node = f"127.0.0.1:{shared_cluster.ports[0]}"
        # a namespace whose registry is on another master than the URL's node: MOVED there
        ns = next(f"pr{i}" for i in range(100) if _master(client, f"pr{i}:workers") != url_node)
        keys = KeySpace(ns, 16)
        await heartbeat(client, registry_key(keys), "w-probe", 10_000)
    finally:
        await client.aclose()
    for url in (shared_cluster.url, redis_url):
        env = {**os.environ, "REDIS_URL": url, "CONQUIAN_NAMESPACE": ns}
        assert run_probe(env, "redis").returncode == 0
        missing = run_probe({**env, "CONQUIAN_WORKER_ID": "w-none"}, "worker")
        assert missing.returncode == 1, missing.stderr
    ready = run_probe(
        {
            **os.environ,
            "REDIS_URL": shared_cluster.url,
            "CONQUIAN_NAMESPACE": ns,
            "CONQUIAN_WORKER_ID": "w-probe",
            "CONQUIAN_LEASE_MS": "10000",  # the heartbeat above is seconds old by now
        },
        "worker",
    )
    assert ready.returncode == 0, ready.stderr
    assert run_probe(dict(os.environ), "nothing").returncode == 2


def _master(client: RedisCluster, key: str) -> str:
    return str(client.get_node_from_key(key).name)


def run_probe(env: dict[str, str], name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.serve.probe", name],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def test_a_master_away_stalls_only_its_own_feeds(tmp_path: Path) -> None:
    """With ``cluster-require-full-coverage no`` the other masters answer while one is away:
    a feed follower's split read skips the away master's feeds and reads the others'."""
    keys = KeySpace("cc3", shards=16)
    with LocalCluster(
        tmp_path / "partial", extra_args={"cluster-require-full-coverage": "no"}
    ) as cluster:
        client = connect(cluster.url, call_timeouts=False)
        follower = FeedFollower(client, keys, "partial", block_ms=300)
        try:
            await client.initialize()  # type: ignore[attr-defined]
            away = f"127.0.0.1:{cluster.ports[1]}"
            on_away = {s for s in range(16) if _master(client, keys.feed(s)) == away}  # type: ignore[arg-type]
            await follower.load_checkpoints()
            cluster.kill(1)
            await asyncio.sleep(3.0)  # the others mark it failed (cluster-node-timeout 2 s)
            for shard in sorted(set(range(16)) - on_away):
                await client.xadd(keys.feed(shard), {"t": f"t{shard}", "f": 1, "l": 1})
            read: list[str] = []
            for _ in range(20):
                read += [e.table_id for e in await follower.read(block_ms=100)]
                if len(read) == 16 - len(on_away):
                    break
            assert sorted(read) == sorted(f"t{s}" for s in set(range(16)) - on_away)
        finally:
            if follower._watch is not None:
                await follower._watch.close()
            await client.aclose()


async def test_a_feed_follower_on_a_cluster_reads_every_master_and_wakes_on_news(
    shared_cluster: LocalCluster,
) -> None:
    """The split XREAD: entries of every shard (all three masters) come back; an idle read
    waits on the watches and wakes within a fraction of its block when a feed moves."""
    keys = KeySpace("cc2", shards=16)
    client = connect(shared_cluster.url, call_timeouts=False)
    follower = FeedFollower(client, keys, "watcher", block_ms=2000)
    try:
        for shard in range(16):
            await client.xadd(keys.feed(shard), {"t": f"t{shard}", "f": 1, "l": 2})
        first = await follower.read(block_ms=0)
        assert sorted(e.table_id for e in first) == sorted(f"t{s}" for s in range(16))
        assert await follower.read(block_ms=300) == []  # nothing new: the watches time out

        async def later() -> None:
            await asyncio.sleep(0.3)
            await client.xadd(keys.feed(11), {"t": "late", "f": 3, "l": 3})

        started = time.monotonic()
        news, _ = await asyncio.gather(follower.read(), later())
        assert [e.table_id for e in news] == ["late"]
        assert time.monotonic() - started < 1.5  # woken by the watch, not by its timeout
    finally:
        if follower._watch is not None:
            await follower._watch.close()
        await client.aclose()


async def test_stream_reads_on_a_cluster_go_to_their_master_without_asking_for_keys(
    shared_cluster: LocalCluster,
) -> None:
    """The split reads of every follower, the engine worker and the watch name each stream's
    master: no master is asked ``COMMAND GETKEYS`` (a round trip a stream, which redis-py
    pays for ``XREAD`` and ``XREADGROUP`` otherwise), and every entry still comes back."""
    keys = KeySpace("cc5", shards=16)
    client = connect(shared_cluster.url, call_timeouts=False)
    assert isinstance(client, RedisCluster)
    masters = [redis.asyncio.Redis(port=p) for p in shared_cluster.ports]
    watch = StreamWatch(client)
    try:
        feeds = [keys.feed(s) for s in range(16)]
        for shard, feed in enumerate(feeds):
            await client.xadd(feed, {"t": f"t{shard}"})
            await client.xgroup_create(feed, "g", id="0")
        for master in masters:
            await master.config_resetstat()
        read = answered_tables(await xread_each(client, dict.fromkeys(feeds, "0-0"), 10))
        async with client.pipeline(transaction=False) as pipe:
            for feed in feeds:
                xreadgroup_on(client, "g", "c1", feed, 10, sender=pipe)
            grouped = answered_tables(answered(await pipe.execute()))
        ends = {feed: "$" for feed in feeds}

        async def later() -> None:
            await asyncio.sleep(0.2)
            await client.xadd(feeds[5], {"t": "late"})

        woke, _ = await asyncio.gather(watch.wait(ends, 3000), later())
        got_keys = [
            (await master.info("commandstats")).get("cmdstat_command|getkeys") for master in masters
        ]
        assert read == grouped == sorted(f"t{s}" for s in range(16))
        assert woke
        assert got_keys == [None, None, None]
    finally:
        await watch.close()
        for master in masters:
            await master.aclose()
        await client.aclose()


async def test_packed_calls_go_a_write_a_master_and_what_moved_goes_again(
    shared_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``send_packed`` on a cluster: every call answered in its place, error replies in
    theirs; a call sent to a master that does not hold its slot (a stale slot table) gets
    MOVED and goes again through redis-py's cluster pipeline."""
    client = connect(shared_cluster.url, call_timeouts=False)
    assert isinstance(client, RedisCluster)
    try:
        await client.initialize()
        names = [f"cc6:{i}" for i in range(24)]
        assert len({_master(client, n) for n in names}) == 3
        sets = [("SET", n, f"v{i}") for i, n in enumerate(names)]
        assert await send_packed(client, sets) == [b"OK"] * 24
        stale = {names[0], names[5], names[9]}
        nodes = client.get_primaries()

        def wrong_master(cluster: Any, key: Any) -> Any:
            right = client.get_node_from_key(key)
            if key not in stale:
                return right
            return next(n for n in nodes if n.name != right.name)

        monkeypatch.setattr("services.store.packed.master_of", wrong_master)
        replies = await send_packed(client, [*[("GET", n) for n in names], ("HGET", names[1], "f")])
        assert replies[:24] == [f"v{i}".encode() for i in range(24)]
        assert isinstance(replies[24], redis.exceptions.ResponseError)  # WRONGTYPE, in place
    finally:
        await client.aclose()


def answered_tables(replies: list[Any]) -> list[str]:
    return sorted(fields[b"t"].decode() for _, entries in replies for _, fields in entries)


async def test_the_store_pipelines_load_their_scripts_on_a_master_that_lost_them(
    shared_cluster: LocalCluster,
) -> None:
    """After SCRIPT FLUSH on every master (as after a restart), and then on one alone,
    read_many and append_many load their script where it is missing and answer as before."""
    from events.chain import GENESIS_HASH
    from services.store import AppendRequest, AppendResult

    keys = KeySpace("cc4", shards=16)
    tables = [f"ns-{n}" for n in range(12)]
    client = connect(shared_cluster.url)
    assert isinstance(client, RedisCluster)
    try:
        await client.initialize()
        assert len({_master(client, keys.events(t)) for t in tables}) == 3
        store = RedisEventStore(client, keys)
        body = {"type": "table_created", "command_id": "c-create", "time": 1}
        for t in tables:
            await store.append(t, 0, GENESIS_HASH, "c-create", [body])
        before = await store.read_many(tables)
        assert all(len(events) == 1 for events in before.values())
        await _flush_scripts(shared_cluster, range(3))
        assert await store.read_many(tables) == before
        await _flush_scripts(shared_cluster, [1])  # one master lacks them, the others do not
        more = [
            AppendRequest(t, 1, before[t][0].hash, "c-next", [{**body, "type": "noted"}])
            for t in tables
        ]
        appended = await store.append_many(more)
        assert all(isinstance(r, AppendResult) and r.last_version == 2 for r in appended)
        await _flush_scripts(shared_cluster, [2])
        after = await store.read_many(tables)
        assert {t: events[:1] for t, events in after.items()} == before
        assert all(len(events) == 2 for events in after.values())
    finally:
        await client.aclose()


async def _flush_scripts(cluster: LocalCluster, masters: Iterable[int]) -> None:
    for index in masters:
        node = redis.asyncio.Redis.from_url(cluster.node_url(index))
        try:
            await node.script_flush()
        finally:
            await node.aclose()


def retrying(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """An HTTP call retried while a master is away (what a client does with a 5xx)."""
    for _ in range(200):
        try:
            return http(method, url, body)
        except (urllib.error.HTTPError, urllib.error.URLError, TimeoutError) as exc:
            if isinstance(exc, urllib.error.HTTPError) and exc.code < 500:
                raise
            time.sleep(0.1)
    raise AssertionError(f"{method} {url} kept failing")


def test_bot_tables_on_a_cluster_survive_a_master_killed_and_restarted(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": cluster.url,
        "CONQUIAN_NAMESPACE": NAMESPACE,
        "CONQUIAN_SHARDS": str(SHARDS),
        "CONQUIAN_LOG_LEVEL": "WARNING",
        "CONQUIAN_CLAIM_IDLE_MS": "1000",
        "CONQUIAN_LEASE_MS": "3000",
    }
    log = tmp_path / "serve.log"
    with log.open("w") as errors:
        serve = start_serve(env, port, "--workers", "2", stderr=errors)
    base = f"http://127.0.0.1:{port}"
    tables: list[str] = []
    try:
        wait_for_line(serve.stdout, "Conquian is running at", time.monotonic() + 120)
        for i in range(TABLES):
            bots = {"0": "greedy", "1": "random" if i % 2 else "greedy"}
            # three deals a match: bots play a one-deal match out while the others are
            # created, and the master must go down in the middle of the games
            tables.append(http("POST", f"{base}/tables", {"bots": bots, "deals": 3})["table_id"])
        time.sleep(0.5)
        over = [t for t in tables if http("GET", f"{base}/tables/{t}").get("status") == "over"]
        assert len(over) < TABLES // 2, "the master must be killed mid-run"
        cluster.kill(1)
        time.sleep(3.0)  # past cluster-node-timeout: the others mark it failed
        cluster.restart(1)
        deadline = time.monotonic() + 240
        waiting = set(tables)
        while waiting and time.monotonic() < deadline:
            for table in sorted(waiting):
                if retrying("GET", f"{base}/tables/{table}").get("status") == "over":
                    waiting.discard(table)
            time.sleep(0.5)
        assert not waiting, f"{len(waiting)} tables never finished; log: {log.read_text()[-3000:]}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            metrics = response.read().decode()
        hints = re.search(r'conquian_gateway_hints_total\{channel="results"\} (\S+)', metrics)
        assert hints and float(hints.group(1)) > 0, "no result hint reached the gateway"
        os.killpg(serve.pid, signal.SIGINT)
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()

    asyncio.run(_check_store(cluster.url, tables))

    audit = run_cli(env, "audit", "--all", "--json")
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    report = json.loads(audit.stdout)
    assert report["ok"] is True and report["tables"] >= TABLES, audit.stdout[-2000:]

    replay = run_cli(env, "replay", tables[0])
    assert replay.returncode == 0 and "deal 1" in replay.stdout.lower(), replay.stdout[-2000:]

    before = asyncio.run(_views(cluster.url, tables))
    rebuild = run_cli(env, "project", "--rebuild")
    assert rebuild.returncode == 0, rebuild.stderr[-3000:]
    assert asyncio.run(_views(cluster.url, tables)) == before

    # the finished tables leave every master for the archive, and audit the same from there
    archive = run_cli(env, "archive", "--archive-dir", str(tmp_path / "archive"),
                      "--older-than", "0", "--json")  # fmt: skip
    assert archive.returncode == 0, archive.stdout[-2000:] + archive.stderr[-2000:]
    assert asyncio.run(_views(cluster.url, tables)) == dict.fromkeys(before)  # keys gone
    again = run_cli(env, "audit", "--all", "--json", "--archive-dir", str(tmp_path / "archive"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert json.loads(again.stdout)["tables"] == report["tables"]


async def _check_store(url: str, tables: list[str]) -> None:
    settings = load_settings(redis_url=url, namespace=NAMESPACE, shards=SHARDS)
    client = connect(url)
    assert isinstance(client, RedisCluster)
    try:
        await client.initialize()
        store = RedisEventStore(client, settings.keys)
        masters = Counter(client.get_node_from_key(settings.keys.head(t)).name for t in tables)
        assert len(masters) == 3, masters  # every master holds some of the tables
        for table in tables:
            head = await store.head(table)
            assert head.status == "over", (table, head)
            events = await store.read(table)
            assert [e.version for e in events] == list(range(1, head.version + 1))
            runs = command_runs(events)  # each command's events in one run: applied once
            assert applied_twice(runs) == [], f"{table}: a command applied twice"
            answered = await client.hgetall(settings.keys.command_ids(table))
            for field, record in answered.items():
                result = json.loads(record.split(b" ", 2)[2])
                if result.get("ok"):
                    command_id = field.decode().rpartition(":")[2]  # "<seat>:<id>" or "<id>"
                    assert command_id in runs, f"{table}: accepted {field!r} has no events"
    finally:
        await client.aclose()


async def _views(url: str, tables: list[str]) -> dict[str, Any]:
    settings = load_settings(redis_url=url, namespace=NAMESPACE, shards=SHARDS)
    client = connect(url)
    try:
        return await read_views(client, settings.keys, tables)
    finally:
        await client.aclose()


async def test_the_lobby_is_one_slot_whatever_the_master_of_each_table(
    shared_cluster: LocalCluster,
) -> None:
    """Rows of tables on every master are written and paged through a cluster client."""
    from redis.crc import key_slot

    from engine.state import changed
    from events.commands import CreateTable
    from services.lobby import listing
    from services.store import MemoryEventStore
    from services.tables.service import TableService
    from services.tables.table import SeatHolder, Table

    keys = KeySpace("lob", shards=16)
    assert len({key_slot(keys.lobby(p).encode()) for p in ("waiting", "running", "rows")}) == 1
    service = TableService(MemoryEventStore())
    rows = []
    for n in range(12):
        created = await service.execute(
            CreateTable(table_id=f"lt-{n}", command_id=f"c-create-{n:03d}"), None
        )
        assert created.table is not None
        table: Table = created.table
        if n % 3 == 0:  # both seats taken: a running table
            table = changed(table, seats=(SeatHolder("ana"), SeatHolder("bo")))
        rows.append(listing.lobby_row(table))
    client = connect(shared_cluster.url)
    assert isinstance(client, RedisCluster)
    try:
        await client.initialize()
        masters = {_master(client, keys.head(f"lt-{n}")) for n in range(12)}
        assert len(masters) == 3  # the tables are all over the cluster, the lobby in one slot
        for n, row in enumerate(rows):
            await listing.write_rows(client, keys, [row], 1_000 + n)
        pages: list[str] = []
        cursor = None
        while True:
            page = await listing.page(client, keys, "waiting", 3, cursor)
            pages += [t["table_id"] for t in page["tables"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == [f"lt-{n}" for n in range(11, -1, -1) if n % 3]
        running = await listing.page(client, keys, "running", 100, None)
        assert [t["table_id"] for t in running["tables"]] == ["lt-9", "lt-6", "lt-3", "lt-0"]
        await listing.forget(client, keys, [f"lt-{n}" for n in range(12)])
        assert (await listing.page(client, keys, "running", 100, None))["tables"] == []
    finally:
        await client.aclose()
