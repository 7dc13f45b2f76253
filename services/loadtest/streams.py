"""``--via streams``: tables played straight onto the shard command streams, as the gateway
enqueues them (``docs/loadtest.md``, "Module notes").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import orjson
from redis.exceptions import RedisError

from services.loadtest.batcher import Batcher
from services.loadtest.feeds import FeedWatch
from services.loadtest.links import NoService, TableGivenUp
from services.loadtest.options import Options
from services.loadtest.play import TablePlay, view_version
from services.loadtest.stats import Stats
from services.loadtest.wakeup import Wakeup
from services.redis_server import redact_url
from services.store.client import connect
from services.store.keys import KeySpace, command_key
from services.tables.stored_parts import assemble

PIPELINES = 8
"""Pipelines of the batcher in flight at once."""
FIRST_POLL = 0.25
MAX_POLL = 1.0
"""Seconds between reads of a table that neither a feed entry nor a result hint woke: the
first, and at most (doubling), or twice and four times the run's typical wait for a result
when that is longer (:meth:`StreamsDriver.poll_start`). A poll only finds what a lost hint
would have announced; polling sooner cost the tool CPU for nothing (``docs/loadtest.md``,
"Module notes")."""


class StreamsDriver:
    """The Redis client, call batcher and feed watch of a run."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.keys = KeySpace(ns=options.namespace, shards=options.shards)
        # a connection for each shard feed's blocking read and each pipeline out, whatever the
        # pool's default (redis-py 8's pool holds 100 and raises MaxConnectionsError past them)
        self.client = connect(
            options.redis_url,
            call_timeouts=False,  # each table keeps its own deadlines
            max_connections=options.shards + PIPELINES + 4,
        )
        self.batcher = Batcher(self.client, in_flight=PIPELINES)
        self.feeds = FeedWatch(self.client, self.keys)
        self.typical = 0.0
        """The run's typical wait for a result, seconds (a moving average)."""

    def observe(self, waited: float) -> None:
        """Fold one wait for a result into :attr:`typical`."""
        self.typical += (waited - self.typical) / 64

    def poll_start(self) -> tuple[float, float]:
        """The first and the longest pause between polls of a waiting table."""
        return max(FIRST_POLL, 2 * self.typical), max(MAX_POLL, 4 * self.typical)

    async def start(self) -> None:
        """Check that Redis answers, start the batcher and the feed watch."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as error:
            raise NoService(f"{redact_url(self.options.redis_url)}: {error}") from None
        self.batcher.start()
        await self.feeds.start()

    async def close(self) -> None:
        """Stop the feed watch and the batcher; close the client."""
        await self.feeds.close()
        await self.batcher.close()
        await self.client.aclose()

    def table(self, table_id: str, play: TablePlay) -> StreamsTable:
        """Return the link of one table."""
        return StreamsTable(self, table_id, play)


class StreamsTable:
    """One table on the command streams (``docs/loadtest.md``)."""

    def __init__(self, driver: StreamsDriver, table_id: str, play: TablePlay) -> None:
        self.driver = driver
        self.options = driver.options
        self.table_id = table_id
        self.play = play
        keys = driver.keys
        self.stream = keys.cmd(keys.shard_of(table_id))
        self.cmdids = keys.command_ids(table_id)
        self.seats: dict[str, int] = {}  # the seat of each command id sent (its record's key)
        self.view_keys = [keys.table_view(table_id, part) for part in ("public", "seat0", "seat1")]
        self.wake = Wakeup()
        self.arrived: list[float] = [0.0, 0.0]
        self.public: dict[str, Any] | None = None
        self.watch_stats: Stats | None = None
        driver.feeds.watch(table_id, self._woken)

    def _woken(self, table_id: str, appends: int) -> None:
        if self.watch_stats is not None:
            self.watch_stats.moves(appends)
        self.wake.set()

    # --- calls -----------------------------------------------------------------------------

    def _xadd(self, command: Mapping[str, Any], seat: int | None) -> asyncio.Future[Any]:
        fields = {
            "c": orjson.dumps(command),
            "s": "" if seat is None else str(seat),
            "r": str(int(time.time() * 1000)),
        }
        return self.driver.batcher.call("xadd", self.stream, fields)

    async def _read(self, command_id: str | None) -> tuple[bytes | None, float]:
        """Read the command's record (if any) and the views; feed the views to ``play``."""
        batcher = self.driver.batcher
        # a GET a part, not one MGET: a cluster's pipeline refuses MGET, even on one slot
        calls = [batcher.call("get", key) for key in self.view_keys]
        if command_id is not None:
            calls.append(batcher.call("hget", self.cmdids, command_id))
        replies: list[Any] = await asyncio.gather(*calls, return_exceptions=True)  # all done
        for reply in replies:
            if isinstance(reply, BaseException):
                raise TableGivenUp("redis/error", repr(reply))
        parts: list[bytes | None] = replies[: len(self.view_keys)]
        raw: bytes | None = replies[-1] if command_id is not None else None
        at = time.perf_counter()
        self._see(parts, at)
        return raw, at

    def _see(self, parts: list[bytes | None], at: float) -> None:
        if parts[0] is None:
            return
        public = orjson.loads(parts[0])
        self.public = public
        if min(view_version(v) for v in self.play.views) >= public["version"]:
            return  # nothing newer than what both seats hold
        for seat in (0, 1):
            raw = parts[seat + 1]
            part = None if raw is None else orjson.loads(raw)
            view = assemble(f"seat{seat}", public, part)
            if view is not None and self.play.see_view(seat, view):
                self.arrived[seat] = at

    async def _pause(self, deadline: float, poll: float, code: str) -> float:
        """Wait for a feed entry of the table or the poll interval; return the next interval."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TableGivenUp(code, f"table {self.table_id}")
        if not await self.wake.wait(min(poll, remaining)):
            return min(poll * 2, self.driver.poll_start()[1])
        self.wake.clear()
        return poll

    async def _setup(self, kind: str, command: dict[str, Any], stats: Stats) -> None:
        started = time.perf_counter()
        try:
            await self._xadd(command, None)
        except Exception as error:
            raise TableGivenUp("redis/error", repr(error)) from None
        deadline = started + self.options.result_timeout
        result, _ = await self.result(str(command["command_id"]), deadline)
        if result.get("ok") is not True:
            raise TableGivenUp(f"{kind}/{result.get('code')}", f"{self.table_id}: {result}")
        stats.setup_done(kind, time.perf_counter() - started)

    # --- the TableLink protocol -------------------------------------------------------------

    async def open(self, stats: Stats) -> None:
        """Create the table (with bots on both seats for a bot table) and join both seats."""
        create: dict[str, Any] = {
            "type": "create_table",
            "table_id": self.table_id,
            "command_id": f"{self.table_id}-create",
            "deals": self.options.deals,
            "rules": self.options.rules,
        }
        bots = self.options.players == "bots"
        if bots:
            create["bots"] = {"0": self.options.bots[0], "1": self.options.bots[1]}
        await self._setup("create", create, stats)
        if bots:
            self.watch_stats = stats  # the bots' moves from here on
            return
        for seat in (0, 1):
            join = {
                "type": "join",
                "table_id": self.table_id,
                "command_id": f"{self.table_id}-join{seat}",
                "seat": seat,
                "name": f"load {seat}",
            }
            await self._setup("join", join, stats)

    async def send(self, seat: int, command: Mapping[str, Any]) -> float:
        """XADD the seat's command; return when it was handed to the batcher."""
        started = time.perf_counter()
        self.wake.clear()
        self.seats[str(command["command_id"])] = seat
        try:
            await self._xadd(command, seat)
        except Exception as error:
            raise TableGivenUp("redis/error", repr(error)) from None
        return started

    async def result(self, command_id: str, deadline: float) -> tuple[Mapping[str, Any], float]:
        """Return the command's recorded result and when it was read."""
        started = time.perf_counter()
        poll = self.driver.poll_start()[0]
        key = command_key(command_id, self.seats.pop(command_id, None))  # the seat's record
        while True:
            poll = await self._pause(deadline, poll, "result/timeout")
            raw, at = await self._read(key)
            if raw is not None:
                self.driver.observe(at - started)
                _first, last, text = raw.split(b" ", 2)
                result: dict[str, Any] = orjson.loads(text) if text else {}
                result["version"] = int(last)
                return result, at

    async def view_at(self, seat: int, version: int, deadline: float) -> float:
        """Return when a view of the seat at ``version`` or later was read."""
        poll = self.driver.poll_start()[0]
        while view_version(self.play.views[seat]) < version:
            poll = await self._pause(deadline, poll, "view/timeout")
            await self._read(None)
        return self.arrived[seat]

    async def changed(self, deadline: float) -> None:
        """Read the views until one is newer than what ``play`` holds."""
        poll = self.driver.poll_start()[0]
        before = [view_version(v) for v in self.play.views]
        while True:
            await self._read(None)
            if [view_version(v) for v in self.play.views] != before:
                return
            poll = await self._pause(deadline, poll, "view/timeout")

    async def watch(self, deadline: float, stats: Stats) -> int:
        """Read the public view on each feed entry until the match is over; return its deals."""
        poll = MAX_POLL
        while True:
            await self._read(None)
            if self.public is not None and self.public.get("status") == "over":
                return int(self.public.get("deals_played") or 0)
            poll = await self._pause(deadline, poll, "watch/timeout")

    async def reconnect(self) -> None:
        """Nothing to open again: the Redis client reconnects on its next call."""

    async def close(self) -> None:
        """Stop watching the table's feed entries."""
        self.driver.feeds.forget(self.table_id)
