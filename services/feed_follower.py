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
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from events.commands import Command
from services.store.base import FeedEntry
from services.store.keys import KeySpace
from services.store.outage import OUTAGE_ERRORS, Outage
from services.store.stream_watch import StreamWatch, xread_split
from services.tables.table import Table

_XReadReply = list[tuple[Any, list[tuple[Any, dict[Any, Any]]]]]

START = "0-0"
"""The position before the first entry of a feed."""


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _field(fields: dict[Any, Any], name: str) -> Any:
    value = fields.get(name.encode("ascii"))
    return fields.get(name) if value is None else value


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
        """After a batch smaller than ``count``, wait this long before reading again, so that
        a busy deployment's entries come in fewer, larger batches (each read and checkpoint
        costs the same whatever it carries)."""
        self.positions: dict[int, str] = {}
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
            positions[shard] = START if raw is None else _text(raw)
        self.positions = positions
        return dict(positions)

    async def commit(self, entries: Sequence[FeedEntry]) -> None:
        """Write the checkpoint of each shard to the last position of ``entries`` on it."""
        last: dict[int, str] = {}
        for entry in entries:
            last[self.keys.shard_of(entry.table_id)] = entry.position
        if not last:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for shard, position in last.items():
                pipe.set(self.checkpoint_key(shard), position)
            await pipe.execute()

    async def read(self, block_ms: int | None = None) -> list[FeedEntry]:
        """Read the next entries of all followed feeds (waiting up to ``block_ms`` for one).

        Advances the in-memory positions but writes no checkpoint (see :meth:`commit`).
        """
        if not self.positions:
            await self.load_checkpoints()
        streams: dict[Any, Any] = {self.keys.feed(s): self.positions[s] for s in self.shards}
        wait = self.block_ms if block_ms is None else block_ms
        reply: Any
        if self._watch is not None:
            reply = await xread_split(self.client, streams, self.count, wait, self._watch)
        else:
            reply = await self.client.xread(streams, count=self.count, block=wait or None)
        out: list[FeedEntry] = []
        for stream, entries in cast(_XReadReply, reply or []):
            shard = self._feeds[_text(stream)]
            for entry_id, fields in entries:
                position = _text(entry_id)
                out.append(
                    FeedEntry(
                        position,
                        _text(_field(fields, "t")),
                        int(_field(fields, "f")),
                        int(_field(fields, "l")),
                    )
                )
                self.positions[shard] = position
        return out

    async def batches(self, stop: asyncio.Event | None = None) -> AsyncIterator[list[FeedEntry]]:
        """Yield batches of new feed entries until ``stop`` is set; checkpoint each when done.

        A batch's checkpoint is written when the next one is asked for (or the loop ends
        normally), so an exception in the caller's loop body leaves it to be read again.
        """
        await self.load_checkpoints()
        while stop is None or not stop.is_set():
            batch = await self.read()
            if not batch:
                continue
            yield batch
            await self.commit(batch)
            if self.linger_ms and len(batch) < self.count:
                await asyncio.sleep(self.linger_ms / 1000)


async def follow_through_outages(
    follower: FeedFollower,
    handle: Callable[[list[FeedEntry]], Awaitable[object]],
    stop: asyncio.Event | None,
    log: Any,
) -> None:
    """Run ``handle`` on each of ``follower``'s batches until ``stop`` is set, waiting out a
    Redis outage (:class:`services.store.outage.Outage`) instead of failing: after one, the follower
    starts again from its checkpoints (the batch in hand is read again: at least once)."""
    outage = Outage(log, f"follow:{follower.name}")
    while stop is None or not stop.is_set():
        try:
            await follower.load_checkpoints()
            outage.ok()
            async for batch in follower.batches(stop):
                await handle(batch)
            return
        except OUTAGE_ERRORS as error:
            await outage.wait(error, stop)


def unique_tables(entries: Iterable[FeedEntry]) -> list[str]:
    """Return the table ids of ``entries``, each once, in the order of their last entry."""
    last: dict[str, None] = {}
    for entry in entries:
        last.pop(entry.table_id, None)
        last[entry.table_id] = None
    return list(last)


# --- what the followers that send commands share ---------------------------------------------


def time_ms() -> int:
    """Return the time in ms since the epoch (the default clock of the services)."""
    return int(time.time() * 1000)


def between_deals(table: Table) -> bool:
    """Say whether the table waits for ``next_deal``: both seats taken, no deal running, match on.

    True before the first deal of a table whose seats were all filled at creation (two bots) and
    after each deal but the last.
    """
    match = table.match
    return match is not None and None not in table.seats and match.between_deals


async def submit_command(
    client: Redis, keys: KeySpace, command: Command, seat: int | None, received_ms: int
) -> str:
    """XADD ``command`` for ``seat`` to its table's command stream; return the entry id.

    The entry has the fields of docs/services.md: ``c`` (the wire command as JSON), ``s`` (the
    seat, ``""`` for none) and ``r`` (``received_ms``).
    """
    fields: dict[Any, Any] = {
        "c": command.model_dump_json(exclude_none=True),
        "s": "" if seat is None else str(seat),
        "r": str(received_ms),
    }
    entry_id = await client.xadd(keys.cmd(keys.shard_of(command.table_id)), fields)
    return _text(entry_id)


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
