"""Follow every shard feed from a checkpoint of one's own: the loop the bots runner and clock share.

:class:`FeedFollower` delivers feed entries at least once; ``docs/services.md`` ("Module notes")
has its checkpoints and reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import takewhile
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from events.commands import Command
from events.domain import PlayerJoined, TableCreated
from services.store.base import EventStore, FeedEntry
from services.store.client import as_text
from services.store.keys import KeySpace
from services.store.outage import OUTAGE_ERRORS, Outage
from services.store.stream_watch import StreamWatch, xread_split
from services.tables.table import Table, event_of

_XReadReply = list[tuple[Any, list[tuple[Any, dict[Any, Any]]]]]

START = "0-0"
"""The position before the first entry of a feed."""


class FeedFollower:
    """Reads the shard feeds ``shards`` (default: all) after its checkpoints ``ckpt:<name>``."""

    def __init__(
        self,
        client: Redis | RedisCluster,
        keys: KeySpace,
        name: str,
        *,
        shards: Iterable[int] | None = None,
        count: int = 200,
        block_ms: int = 500,
        linger_ms: int = 0,
        idle_linger_ms: int | None = None,
        checkpoint_ms: int = 1_000,
    ) -> None:
        if not name or ":" in name:
            raise ValueError(f"invalid follower name {name!r}")
        self.client = client
        self.keys = keys
        self.name = name
        self.shards: tuple[int, ...] = tuple(range(keys.shards) if shards is None else shards)
        for shard in self.shards:
            keys.tag(shard)  # raises on a shard out of range
        self.count = count
        self.block_ms = block_ms
        self.linger_ms = linger_ms
        """After a batch the caller acted on, wait this long before reading again (unless a
        feed had ``count`` entries waiting): a busy deployment's entries come in fewer, larger
        batches, since each read costs about the same whatever it carries."""
        self.idle_linger_ms = linger_ms if idle_linger_ms is None else idle_linger_ms
        """The same pause after a batch the caller had nothing to do for."""
        self.checkpoint_ms = checkpoint_ms
        """How often :meth:`batches` writes the checkpoints (and when its loop ends)."""
        self.positions: dict[int, str] = {}
        self.saved: dict[int, str] = {}
        """The positions as last read from or written to the checkpoints."""
        self.full = False
        """Whether the last read found ``count`` entries on a feed (more may be waiting)."""
        self._feeds = {keys.feed(s): s for s in self.shards}
        self._watch = StreamWatch(client) if isinstance(client, RedisCluster) else None

    def checkpoint_key(self, shard: int) -> str:
        """Return ``<ns>:{sNN}:ckpt:<name>``."""
        return self.keys.shard_key(shard, "ckpt", self.name)

    async def load_checkpoints(self) -> dict[int, str]:
        """Read the checkpoint of every followed shard (``0-0`` where there is none)."""
        positions: dict[int, str] = {}
        for shard in self.shards:  # one GET per shard: the keys live in different slots
            raw = await self.client.get(self.checkpoint_key(shard))
            positions[shard] = START if raw is None else as_text(raw)
        self.positions = positions
        self.saved = dict(positions)
        return dict(positions)

    async def save(self) -> None:
        """Write the checkpoint of each shard whose position moved since the last one."""
        moved = {s: p for s, p in self.positions.items() if self.saved.get(s) != p}
        if not moved:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for shard, position in moved.items():  # one SET a key: they live in different slots
                pipe.set(self.checkpoint_key(shard), position)
            await pipe.execute()
        self.saved.update(moved)

    async def read(self, block_ms: int | None = None) -> list[FeedEntry]:
        """Read the next entries of all followed feeds (waiting up to ``block_ms`` for one).

        Advances the in-memory positions but writes no checkpoint (see :meth:`save`).
        """
        return [
            _entry(as_text(entry_id), fields)
            for _, entries in await self._xread(block_ms)
            for entry_id, fields in entries
        ]

    async def read_tables(self, block_ms: int | None = None) -> list[str]:
        """Read as :meth:`read` does, and return only the tables of the entries, each once: all
        that the bots runner and the clock need, decoded from nothing else."""
        tables: dict[Any, None] = {}
        for _, entries in await self._xread(block_ms):
            for _, fields in entries:
                tables[fields.get(b"t") or fields["t"]] = None  # or a client that decodes
        return [as_text(table) for table in tables]

    async def _xread(self, block_ms: int | None) -> _XReadReply:
        """One read of all followed feeds after their positions, which it advances; sets
        :attr:`full`."""
        if not self.positions:
            await self.load_checkpoints()
        streams: dict[Any, Any] = {feed: self.positions[s] for feed, s in self._feeds.items()}
        wait = self.block_ms if block_ms is None else block_ms
        reply: Any
        if self._watch is not None:
            reply = await xread_split(self.client, streams, self.count, wait, self._watch)
        else:
            reply = await self.client.xread(streams, count=self.count, block=wait or None)
        found = [(stream, entries) for stream, entries in cast(_XReadReply, reply or []) if entries]
        for stream, entries in found:
            self.positions[self._feeds[as_text(stream)]] = as_text(entries[-1][0])
        self.full = any(len(entries) >= self.count for _, entries in found)
        return found

    async def batches(self, stop: asyncio.Event | None = None) -> AsyncIterator[list[str]]:
        """Yield the tables of new feed entries (:meth:`read_tables`) until ``stop`` is set.

        The checkpoints move to the batches the caller has finished with (those before the
        one it asks for) at most every ``checkpoint_ms``, and when the loop ends normally: an
        exception in the caller's loop body leaves its batch, and those of the last
        ``checkpoint_ms``, to be read again.
        """
        await self.load_checkpoints()
        saved_at = time.monotonic()
        while stop is None or not stop.is_set():
            if time.monotonic() - saved_at >= self.checkpoint_ms / 1000:
                await self.save()
                saved_at = time.monotonic()
            tables = await self.read_tables()
            if tables:
                yield tables
        await self.save()

    async def linger(self, acted: bool) -> None:
        """Pause after a batch: ``linger_ms`` when the caller acted on it, else
        ``idle_linger_ms``; no pause when a feed may have more entries waiting."""
        pause = self.linger_ms if acted else self.idle_linger_ms
        if pause and not self.full:
            await asyncio.sleep(pause / 1000)


def _entry(position: str, fields: dict[Any, Any]) -> FeedEntry:
    """The feed entry at ``position`` from its fields ``t``, ``f`` and ``l``."""
    table = fields.get(b"t")
    if table is None:  # a client that decodes replies
        table, first, last = fields["t"], fields["f"], fields["l"]
    else:
        first, last = fields[b"f"], fields[b"l"]
    return FeedEntry(position, as_text(table), int(first), int(last))


async def follow_through_outages(
    follower: FeedFollower,
    handle: Callable[[list[str]], Awaitable[object]],
    stop: asyncio.Event | None,
    log: Any,
) -> None:
    """Run ``handle`` on each of ``follower``'s batches until ``stop`` is set, waiting out a
    Redis outage (:class:`services.store.outage.Outage`) instead of failing: after one, the
    follower starts again from its checkpoints (what it read since is read again: at least
    once).

    What ``handle`` returns says whether it acted on the batch (truthy: it did), which sets the
    pause before the next read (:meth:`FeedFollower.linger`).
    """
    outage = Outage(log, f"follow:{follower.name}")
    while stop is None or not stop.is_set():
        try:
            await follower.load_checkpoints()
            outage.ok()
            async for tables in follower.batches(stop):
                acted = await handle(tables)
                await follower.linger(bool(acted))
            return
        except OUTAGE_ERRORS as error:
            await outage.wait(error, stop)


# --- what the followers that send commands share ---------------------------------------------


def time_ms() -> int:
    """Return the time in ms since the epoch (the default clock of the services)."""
    return int(time.time() * 1000)


SETUP_EVENTS = 8
"""Events :func:`table_setups` reads from the start of a table: its creation (a
``table_created``, a ``player_joined`` a bot) and what follows it."""


@dataclass(frozen=True, slots=True)
class Setup:
    """What a table was created with that the followers act on (neither changes later)."""

    bots: bool
    """Whether a bot sits at the table: bots are seated by ``create_table`` only."""
    turn_seconds: int | None
    """The turn clock, None for none."""


async def table_setups(store: EventStore, table_ids: Sequence[str]) -> dict[str, Setup]:
    """Return the setup of each of ``table_ids`` from the events of its creation: the first
    :data:`SETUP_EVENTS` of each table, read at once and not folded.

    A table is left out when they do not show its whole creation (no event in Redis: the table
    is archived, or unknown) or it is unusually long: the follower loads that one.
    """
    firsts = await store.read_many(table_ids, first=SETUP_EVENTS)
    found: dict[str, Setup] = {}
    for table_id, events in firsts.items():
        setup = _setup([e.body for e in events])
        if setup is not None:
            found[table_id] = setup
    return found


def _setup(bodies: list[dict[str, Any]]) -> Setup | None:
    """The setup shown by a table's first event bodies, if they hold its creation, which is
    one append: the events that share the first one's command id."""
    if not bodies or bodies[0].get("type") != "table_created":
        return None
    created_by = bodies[0].get("command_id")
    creation = list(takewhile(lambda body: body.get("command_id") == created_by, bodies))
    if len(creation) == SETUP_EVENTS:  # its end not seen
        return None
    bots, turn_seconds = False, None
    for event in map(event_of, creation):
        if isinstance(event, TableCreated):
            turn_seconds = event.turn_seconds
        elif isinstance(event, PlayerJoined) and event.bot is not None:
            bots = True
    return Setup(bots, turn_seconds)


def between_deals(table: Table) -> bool:
    """Say whether the table waits for ``next_deal``: both seats taken, no deal running, match on.

    True before the first deal of a table whose seats were all filled at creation (two bots) and
    after each deal but the last.
    """
    match = table.match
    return match is not None and None not in table.seats and match.between_deals


def command_fields(command: Command, seat: int | None, received_ms: int) -> dict[Any, Any]:
    """Return the fields of a command stream entry (docs/services.md): ``c`` (the wire command
    as JSON), ``s`` (the seat, ``""`` for none) and ``r`` (``received_ms``)."""
    return {
        "c": command.model_dump_json(exclude_none=True),
        "s": "" if seat is None else str(seat),
        "r": str(received_ms),
    }


async def submit_command(
    client: Redis, keys: KeySpace, command: Command, seat: int | None, received_ms: int
) -> str:
    """XADD ``command`` for ``seat`` to its table's command stream; return the entry id."""
    fields = command_fields(command, seat, received_ms)
    entry_id = await client.xadd(keys.cmd(keys.shard_of(command.table_id)), fields)
    return as_text(entry_id)


def run_until_signal(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` on a new event loop; SIGINT and SIGTERM set ``stop``."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not on every OS
                loop.add_signal_handler(sig, stop.set)
        await main(stop)

    asyncio.run(runner())
