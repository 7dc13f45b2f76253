"""Views are derived data kept out of Redis's append-only file, those the appends store and those
the projector writes: after a restart of Redis the events are all there, the views and
checkpoints are as of the last AOF rewrite (or gone), and the projector folds the feed from
there back to the same views, byte for byte.

Each test starts its own private Redis (AOF on, fsync at every write) in a temporary folder and
restarts it on the same folder.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio
from played_tables import (  # tests/services on sys.path
    SHARDS,
    Game,
    all_view_values,
    assert_checkpoints_at_feed_ends,
    assert_views_current,
)

from services.projector.run import Projector
from services.redis_server import LocalRedis
from services.store import KeySpace, RedisEventStore
from services.store.client import connect
from services.tables.service import TableService

NS = "restart"


class Server:
    """A private Redis on one data folder, restarted at will, with a client of the moment."""

    def __init__(self, folder: Path) -> None:
        self.redis = LocalRedis(folder, appendfsync="always")
        self.client: redis.asyncio.Redis | None = None

    async def start(self) -> redis.asyncio.Redis:
        await asyncio.to_thread(self.redis.start)
        self.client = connect(self.redis.url)
        return self.client

    async def restart(self) -> redis.asyncio.Redis:
        await self.stop()
        return await self.start()

    async def stop(self) -> None:
        if self.client is not None:
            await self.client.aclose()
            self.client = None
        await asyncio.to_thread(self.redis.stop)

    def appended_since_rewrite(self) -> bytes:
        """The AOF's incremental files: what was written since the last rewrite's base."""
        folder = self.redis.data_dir / "appendonlydir"
        return b"".join(p.read_bytes() for p in sorted(folder.glob("*.incr.aof")))


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    s = Server(tmp_path / "redis")
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def rewrite_aof(client: redis.asyncio.Redis) -> None:
    """BGREWRITEAOF, and wait until the new base is written."""
    await client.bgrewriteaof()
    for _ in range(200):
        info = await client.info("persistence")
        if not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]:
            assert info["aof_last_bgrewrite_status"] == "ok"
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the AOF rewrite did not finish")


async def test_after_a_restart_the_projector_folds_the_views_back(server: Server) -> None:
    keys = KeySpace(NS, shards=SHARDS)
    client = server.client
    assert client is not None
    store = RedisEventStore(client, keys)
    rng = random.Random(5)
    games = [Game(TableService(store), f"tbl-{i}", rng, deals=2) for i in range(4)]
    for g in games:
        await g.start()
        await g.play(12)
    assert await all_view_values(client, NS), "the appends stored views (TableService)"
    await Projector(client, keys).catch_up()
    written = server.appended_since_rewrite()
    assert b":ev" in written, "the events are in the AOF"
    assert b":view:" not in written and b":ckpt:" not in written, "views and checkpoints are not"

    # no rewrite since the views were written: a restart finds the events and no views at all
    client = await server.restart()
    store = RedisEventStore(client, keys)
    for g in games:
        g.service.store = store
    assert await all_view_values(client, NS) == {}
    for g in games:
        assert (await store.head(g.table_id)).version == g.table.version  # type: ignore[union-attr]
    stats = await Projector(client, keys).catch_up()
    assert stats.failed == 0 and stats.tables == len(games)
    await assert_views_current(client, keys, store, games)
    await assert_checkpoints_at_feed_ends(client, keys)
    at_rewrite = await all_view_values(client, NS)

    # a rewrite keeps what memory held; views written after it are lost at the next restart
    await rewrite_aof(client)
    for g in games:
        await g.play(10)
    await Projector(client, keys).catch_up()
    current = await all_view_values(client, NS)
    assert current != at_rewrite
    client = await server.restart()
    store = RedisEventStore(client, keys)
    for g in games:
        g.service.store = store
    assert await all_view_values(client, NS) == at_rewrite, "views as of the rewrite"

    stats = await Projector(client, keys).catch_up()
    assert stats.failed == 0
    assert await all_view_values(client, NS) == current, "folded back, byte for byte"
    await assert_views_current(client, keys, store, games)
    await assert_checkpoints_at_feed_ends(client, keys)
