"""``--via streams``: tables played straight onto the shard command streams, as the gateway
enqueues them, by one loop that reads and sends for every table in shared pipelines
(``docs/loadtest.md``, "Module notes").
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections import deque
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from services.loadtest.feeds import FeedWatch
from services.loadtest.links import NoService, TableGivenUp, may_retry, retry_pause
from services.loadtest.options import Options
from services.loadtest.play import TablePlay
from services.loadtest.streams_table import Call, StreamTable, Wait
from services.loadtest.wakeup import Wakeup
from services.redis_server import redact_url
from services.store.client import connect
from services.store.keys import KeySpace
from services.store.packed import send_packed

if TYPE_CHECKING:
    from services.loadtest.runner import Run

FIRST_POLL = 0.25
MAX_POLL = 1.0
"""Seconds between reads of a table that neither a feed entry nor a result hint woke: the
first, and at most (doubling), or twice and four times the run's typical wait for a result
when that is longer (:meth:`StreamsDriver.poll_start`). A poll only finds what a lost hint
would have announced; polling sooner cost the tool CPU for nothing (``docs/loadtest.md``,
"Module notes")."""
BATCH = 1000
"""Tables read or sent to in one pipeline at most; the rest go in the next."""
ERROR_PAUSE = 1.0
"""Seconds a slot waits after a table was given up before it starts the next one."""
READS = frozenset({Wait.SETUP, Wait.RESULT, Wait.VIEW, Wait.CHANGE, Wait.WATCH})
"""The waits that a read ends (not ``SEND`` nor ``DONE``)."""


class _Nobody:
    """The feed watch's reader before a run's loop starts: news for no table."""

    def appended(self, table_id: str, last: int) -> None:
        """Ignore a feed entry."""

    def answered(self, table_id: str, command_id: str, seat: int | None) -> None:
        """Ignore a result hint."""


class StreamsDriver:
    """The Redis client and feed watch of a run, and the pipelines its loop sends."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.keys = KeySpace(ns=options.namespace, shards=options.shards)
        # a connection for each shard feed's blocking read, the hints and the pipeline out,
        # whatever the pool's default (redis-py 8's holds 100 and raises MaxConnectionsError)
        self.client = connect(
            options.redis_url,
            call_timeouts=False,  # each table keeps its own deadlines
            max_connections=options.shards + 8,
        )
        self.feeds = FeedWatch(self.client, self.keys, _Nobody())
        self.typical = 0.0
        """The run's typical wait for a result, seconds (a moving average)."""

    def observe(self, waited: float) -> None:
        """Fold one wait for a result into :attr:`typical`."""
        self.typical += (waited - self.typical) / 64

    def poll_start(self) -> tuple[float, float]:
        """The first and the longest pause between polls of a waiting table."""
        return max(FIRST_POLL, 2 * self.typical), max(MAX_POLL, 4 * self.typical)

    async def start(self) -> None:
        """Check that Redis answers; start the feed watch."""
        try:
            await self.client.ping()
        except (RedisError, OSError) as error:
            raise NoService(f"{redact_url(self.options.redis_url)}: {error}") from None
        await self.feeds.start()

    async def close(self) -> None:
        """Stop the feed watch; close the client."""
        await self.feeds.close()
        await self.client.aclose()

    def players(self, run: Run) -> list[Coroutine[Any, Any, None]]:
        """Return the one loop that plays every slot of the run."""
        loop = StreamsPlay(run, self)
        self.feeds.reader = loop
        return [loop.play()]

    async def execute(self, calls: list[Call]) -> list[Any]:
        """Send ``calls`` packed (one write, a master each on a cluster: ``send_packed``);
        return a reply or an exception a call (every call's, when the connection failed)."""
        try:
            return await send_packed(self.client, calls)
        except (RedisError, OSError) as error:
            return [error] * len(calls)


class StreamsPlay:
    """The loop of a streams run: every table a :class:`StreamTable`, woken by the feed watch
    or its poll timer, read and sent to in pipelines shared by all (``docs/loadtest.md``)."""

    def __init__(self, run: Run, driver: StreamsDriver) -> None:
        self.run = run
        self.driver = driver
        self.options = run.options
        self.context = run.context
        self.stats = run.stats
        self.tables: dict[str, StreamTable] = {}
        self.reads: dict[str, StreamTable] = {}
        """Tables to read in the next pipeline, in the order they were woken."""
        self.sends: deque[StreamTable] = deque()
        self.timers: list[tuple[float, int, StreamTable | None, int]] = []
        """A heap of (when, number, table or None to start slot, slot): polls, paced sends,
        retries, slot starts; a table's entry is stale once its ``timer`` is another number."""
        self.numbers = itertools.count()
        self.news = Wakeup()
        self.slots_left = run.options.tables
        self.stopped = False
        self.first_poll, self.max_poll = driver.poll_start()
        """The driver's pauses between polls, as of the last round."""

    # --- the feed watch's reader --------------------------------------------------------------

    def appended(self, table_id: str, last: int) -> None:
        """Wake a table for a feed entry past what it holds (a bot table for every one)."""
        table = self.tables.get(table_id)
        if table is None:
            return
        if table.wait is Wait.WATCH:
            self.stats.moves(1)
        elif last <= table.news_after or table.wait not in READS:
            return
        self._read_soon(table)

    def answered(self, table_id: str, command_id: str, seat: int | None) -> None:
        """Wake a table for the result hint of the command it waits for."""
        table = self.tables.get(table_id)
        if table is not None and table.awaits(command_id, seat):
            self._read_soon(table)

    def _read_soon(self, table: StreamTable) -> None:
        if table.table_id not in self.reads:
            self.reads[table.table_id] = table
            self.news.set()

    # --- the loop ----------------------------------------------------------------------------

    async def play(self) -> None:
        """Play every slot until none is left (see ``services.loadtest.runner``)."""
        for slot in range(self.options.tables):
            self._timer(None, self.run.start_at(slot), slot)
        stop = asyncio.create_task(self._wake_on_stop())
        try:
            while self.slots_left > 0:
                now = time.perf_counter()
                if self.context.stop.is_set() and not self.stopped:
                    self._stop(now)
                self._fire(now)
                if self.sends or self.reads:
                    await self._round()
                    continue
                wait = self.timers[0][0] - now if self.timers else 1.0
                await self.news.wait(wait)
                self.news.clear()
        finally:
            stop.cancel()
            self.run.active -= len(self.tables)
            self.tables.clear()
            self.driver.feeds.reader = _Nobody()

    async def _wake_on_stop(self) -> None:
        await self.context.stop.wait()
        self.news.set()

    def _timer(self, table: StreamTable | None, at: float, slot: int = -1) -> None:
        number = next(self.numbers)
        if table is not None:
            table.timer = number
        heapq.heappush(self.timers, (at, number, table, slot))

    def _fire(self, now: float) -> None:
        """Act on the timers due (a slot's start, a send, a poll), and drop the stale ones on
        top of the heap, which would wake the loop for nothing."""
        timers = self.timers
        while timers:
            at, number, table, slot = timers[0]
            stale = table is not None and number != table.timer
            if at > now and not stale:
                return
            heapq.heappop(timers)
            if table is None:
                self._start(slot, now)
            elif not stale:
                table.timer = -1
                if table.wait is Wait.SEND:
                    self.sends.append(table)
                elif table.wait in READS:
                    table.poll = min(table.poll * 2, self.max_poll)
                    self._read_soon(table)

    async def _round(self) -> None:
        """One pipeline: the commands ready to go, then the reads of the tables woken."""
        now = time.perf_counter()
        self.first_poll, self.max_poll = self.driver.poll_start()
        at_ms = str(int(time.time() * 1000))
        calls: list[Call] = []
        sending: list[StreamTable] = []
        while self.sends and len(sending) < BATCH:
            table = self.sends.popleft()
            if table.wait is not Wait.SEND:
                continue
            if self.stopped and table.attempt == 0:  # not sent yet: no more once stopped
                self.table_done(table, now, finished=False)
                continue
            if not table.first and table.move is not None:
                self.stats.command_sent(table.move.bad)
            table.sending(self, now)
            calls.append(table.xadd(at_ms))
            sending.append(table)
        reading = self._take_reads()
        spans: list[tuple[StreamTable, int, int]] = []
        for table in reading:
            start = len(calls)
            calls += table.calls()
            spans.append((table, start, len(calls)))
        replies = await self.driver.execute(calls)
        at = time.perf_counter()
        for table, reply in zip(sending, replies, strict=False):
            if isinstance(reply, Exception):
                self._failed(table, TableGivenUp("redis/error", repr(reply)), at)
            else:  # wait for its record: woken by news, else polled
                self._timer(table, min(table.sent_at + table.poll, table.deadline))
        for table, start, end in spans:
            try:
                moved = table.take(self, replies[start:end], at)
            except TableGivenUp as error:
                self._failed(table, error, at)
                continue
            self._place(table, moved, at)

    def _take_reads(self) -> list[StreamTable]:
        reads = self.reads
        if len(reads) <= BATCH:
            tables = list(reads.values())
            reads.clear()
        else:
            tables = [reads.pop(key) for key in list(itertools.islice(reads, BATCH))]
        return [table for table in tables if table.wait in READS]

    def _place(self, table: StreamTable, moved: bool, at: float) -> None:
        """Put a table where its wait says: to send, to read at once, or to wait on."""
        wait = table.wait
        if wait is Wait.DONE:
            return
        if moved:  # a wake or a timer of the wait it left is no longer its
            self.reads.pop(table.table_id, None)
            table.timer = -1
        if wait is Wait.SEND:
            if table.due > at:
                self._timer(table, table.due)
            else:
                self.sends.append(table)
        elif moved and wait in (Wait.CHANGE, Wait.WATCH):
            self._read_soon(table)
        else:
            self._timer(table, min(at + table.poll, table.deadline))

    def _failed(self, table: StreamTable, error: TableGivenUp, at: float) -> None:
        """Make the call again after a pause (``--retry``, as ``links`` does), or give the
        table up."""
        context = self.context
        wait = table.wait
        since = table.since if wait is Wait.CHANGE else table.first
        if (
            context.retry
            and wait in (Wait.RESULT, Wait.VIEW, Wait.CHANGE)
            and may_retry(error.code)
            and at - since <= context.retry_for
        ):
            table.attempt += 1
            self.stats.retried(error.code)
            pause = retry_pause(table.attempt)
            if wait is Wait.RESULT:  # the same command again, with the same id
                table.wait = Wait.SEND
                table.due = at + pause
            else:
                table.deadline = at + pause + context.result_timeout
                table.poll = self.first_poll
            self.reads.pop(table.table_id, None)
            self._timer(table, at + pause)
            return
        self.run.given_up(table.table_id, error)
        self.table_done(table, at, finished=False, given_up=True)

    # --- slots and tables ------------------------------------------------------------------

    def _start(self, slot: int, now: float) -> None:
        """Start the slot's next table: its create goes out in the next pipeline."""
        if self.stopped:
            self.slots_left -= 1
            return
        options = self.options
        table_id = self.run.next_table_id()
        play = TablePlay(table_id, options.seed, options.bad_share)
        table = StreamTable(table_id, slot, self.driver.keys, play)
        self.tables[table_id] = table
        self.run.active += 1
        create: dict[str, Any] = {
            "type": "create_table",
            "table_id": table_id,
            "command_id": f"{table_id}-create",
            "deals": options.deals,
            "rules": options.rules,
        }
        if options.players == "bots":
            create["bots"] = {"0": options.bots[0], "1": options.bots[1]}
        table.setup(self, "create", create)
        self.sends.append(table)

    def setup_done(self, table: StreamTable, at: float) -> None:
        """Go on from a create or join answered: the next join, or play."""
        table_id = table.table_id
        if table.kind == "create" and self.options.players == "bots":
            self.stats.table_started()
            table.wait = Wait.WATCH
            table.deadline = at + self.options.timeout
            table.poll = MAX_POLL
        elif table.kind == "create" or table.command_id == f"{table_id}-join0":
            seat = 0 if table.kind == "create" else 1
            join = {
                "type": "join",
                "table_id": table_id,
                "command_id": f"{table_id}-join{seat}",
                "seat": seat,
                "name": f"load {seat}",
            }
            table.setup(self, "join", join)
        else:
            self.stats.table_started()
            table.changing(self, at)  # read the seats' parts at once

    def table_done(
        self, table: StreamTable, at: float, *, finished: bool, given_up: bool = False
    ) -> None:
        """End a table (its match over, stopped, or given up); start the slot's next one when
        the run goes on for a duration."""
        table.wait = Wait.DONE
        table.timer = -1
        self.tables.pop(table.table_id, None)
        self.reads.pop(table.table_id, None)
        self.run.active -= 1
        if finished:
            self.stats.table_finished(table.play.deals_finished)
        if self.options.duration is None or self.stopped:
            self.slots_left -= 1
        else:
            self._timer(None, at + (ERROR_PAUSE if given_up else 0.0), table.slot)

    def _stop(self, now: float) -> None:
        """The run stops: no table starts any more, and those with nothing in flight end."""
        self.stopped = True
        starts = [entry for entry in self.timers if entry[2] is None]
        self.slots_left -= len(starts)
        self.timers = [entry for entry in self.timers if entry[2] is not None]
        heapq.heapify(self.timers)
        for table in list(self.tables.values()):
            idle = table.wait is Wait.CHANGE or (table.wait is Wait.SEND and table.attempt == 0)
            if idle:
                self.table_done(table, now, finished=False)
