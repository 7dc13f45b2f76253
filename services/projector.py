"""The projector: follows the shard feeds and keeps every table's views, checkpointed atomically.

For each shard it follows (``<ns>:{sNN}:feed``, one entry per append: table, first and last
version), the projector keeps per table the four view parts of :mod:`services.views_fold`
(``public``, ``seat0``, ``seat1``, ``spectator``) under ``KeySpace.table_view(table_id, part)``,
each a JSON string with the ``version`` it reflects, and the checkpoint
``<ns>:{sNN}:ckpt:projector``: the feed position of the last entry applied.  Views are folded
from the table streams alone; the projector never reads the deal seeds (see
:mod:`services.views_fold` for why the views need none).

One round (:meth:`Projector.step`), three round trips whatever the number of shards:

1. up to ``batch_size`` entries of every followed feed after its checkpoint: one ``XREAD BLOCK``
   on all of them at once, which answers at once with every feed that has entries, and
   otherwise wakes on the first new entry (a quiet deployment sees each command at once).
   Without waiting (``catch_up``, ``--once``), one read-only script call per shard, all in one
   pipeline, each returning its entries as one string;
2. group the entries by shard and table; for each table only the events it lacks are read:
   from the version in the in-memory fold cache, or, for a table not in the cache, the whole
   stream plus the version of its stored ``public`` view (so a projector that starts behind
   its views never writes an older version over a newer one).  One script call per shard
   reads all its tables' ranges (the store's ``READ_LUA`` framing), all in one pipeline;
3. fold, build the views of every table that moved (several entries of one table in a round
   cost one set of views);
4. per shard one Lua call (all shards' calls in one pipeline) that checks the lease and that the
   checkpoint is still the one the round started from, then SETs the views and the new
   checkpoint and PUBLISHes ``<table_id> <version>`` on ``<ns>:views`` per table, all or none.

Scripts run by EVALSHA and are loaded when the server answers NOSCRIPT (a restart, a flush).

Re-applying entries whose versions the views already reflect changes nothing: a table whose
cached fold is at or past an entry's last version is skipped, and the compare-and-set on the
checkpoint refuses a write from a projector whose idea of the feed position is stale.

Several processes: each shard is followed by one projector at a time, the holder of the lease
``<ns>:{sNN}:projlease`` (``SET NX PX``, renewed every third of ``lease_ms``).  A process takes
every shard whose lease is free, so a second projector is a hot standby that takes over the
shards of one that stops or dies (after at most ``lease_ms``); the write script checks the
lease, so a projector that lost its lease while working writes nothing.  One projector keeps
up with the whole deployment (docs/services.md); more shards than projectors is the normal case.

``--rebuild`` (:meth:`Projector.rebuild`) needs every lease of the namespace (stop the running
projectors first, or wait for their leases to lapse): it drops the checkpoints, rebuilds every
table's views from the event streams as of the current end of each feed, deletes projector view
keys of tables that have no stream, and writes the checkpoints.  Other keys under ``view:`` (a
lobby, …) are left alone.  An interrupted rebuild leaves the views correct but possibly ahead
of a missing checkpoint; run it again.

Metrics (``prometheus_client`` default registry): ``conquian_projector_lag_seconds`` (now minus
the time of the newest event applied; 0 when a blocking read finds the feeds caught up) and
``conquian_projector_events_applied_total``.  Logs: structlog with ``table`` and ``version``.

Redis Cluster: every script call touches the keys of one shard only, but the ``XREAD BLOCK``
over all followed feeds that starts each round spans slots; on a cluster, read the shards of one
node per call (not done yet).

``python -m services.projector`` and ``conquian project`` run on uvloop when it is installed
(it comes with ``uvicorn[standard]``), as the engine worker does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import re
import signal
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import Counter, Gauge
from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

from services.log import get_logger
from services.project_cli import arguments
from services.settings import Settings, load_settings
from services.store.base import StoredEvent, StoreError
from services.store.client import connect
from services.store.keys import KeySpace
from services.store.redis_store import READ_CHUNK, READ_LUA, decode_packed
from services.views_fold import PUBLIC, VIEW_PARTS, FoldError, TableFold

__all__ = [
    "APPLIED",
    "CHECKPOINT",
    "LAG",
    "LEASE_LUA",
    "WRITE_LUA",
    "Projector",
    "ProjectorBusy",
    "RebuildStats",
    "RoundStats",
    "catch_up",
    "main",
    "project_once",
    "run_command",
    "run_projector",
]

CHECKPOINT = "projector"
"""The projector's name in its checkpoint key ``<ns>:{sNN}:ckpt:projector``."""
LEASE = "projlease"
"""The last part of a shard's projector lease key ``<ns>:{sNN}:projlease``."""

LAG = Gauge(
    "conquian_projector_lag_seconds",
    "Now minus the time of the newest event the projector applied (0 when caught up).",
)
APPLIED = Counter(
    "conquian_projector_events_applied", "Table events the projector folded into views."
)

WRITE_LUA = """#!lua
-- One shard's views and checkpoint, all or nothing.  KEYS[1] checkpoint, KEYS[2] lease, then
-- the view keys.  ARGV[1] the checkpoint the batch started from ('' none), ARGV[2] the new one
-- ('' keeps it), ARGV[3] lease owner ('' no lease check), ARGV[4] hint channel, ARGV[5] number
-- of hints, then one value per view key, then the hints.
-- Returns {0, ''} written, {1, holder} lease not ours, {2, checkpoint} checkpoint moved.
if ARGV[3] ~= '' then
  local holder = redis.call('GET', KEYS[2])
  if holder ~= ARGV[3] then return {1, holder or ''} end
end
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return {2, current} end
local n = #KEYS - 2
for i = 1, n do redis.call('SET', KEYS[i + 2], ARGV[5 + i]) end
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2]) end
for j = 1, tonumber(ARGV[5]) do redis.call('PUBLISH', ARGV[4], ARGV[5 + n + j]) end
return {0, ''}
"""

LEASE_LUA = """#!lua
-- Take or renew a lease: KEYS[1] lease, ARGV[1] owner, ARGV[2] ms.  1 when held by owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""

RELEASE_LUA = """#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

FEED_LUA = """#!lua flags=no-writes
-- Up to ARGV[2] entries of one shard feed (KEYS[1]) after ARGV[1] ('' from the start), as one
-- string: lines '<id> <table> <first> <last>' (one reply to parse instead of ten per entry).
local start = '-'
if ARGV[1] ~= '' then start = '(' .. ARGV[1] end
local e = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', ARGV[2])
local out = {}
for i = 1, #e do
  local f = e[i][2]
  local t, a, b = '', '', ''
  for j = 1, #f, 2 do
    local k, v = f[j], f[j + 1]
    if k == 't' then t = v elseif k == 'f' then a = v elseif k == 'l' then b = v end
  end
  out[i] = e[i][1] .. ' ' .. t .. ' ' .. a .. ' ' .. b
end
return table.concat(out, '\\n')
"""


def _read_many_lua(read_one: str) -> str:
    """Wrap the store's one-stream read script (``READ_LUA``) into one that reads several
    streams of a shard: KEYS the streams, ARGV three per key (start id, end id, COUNT), one
    reply string per key.  Built from the store's own text, so the framing always matches
    ``decode_packed``; the wrapped body sees its key and arguments as ``KEYS``/``ARGV``."""
    body = "\n".join(line for line in read_one.splitlines() if not line.startswith("#!"))
    return (
        "#!lua flags=no-writes\n"
        "local function read_one(KEYS, ARGV)\n"
        f"{body}\n"
        "end\n"
        "local out = {}\n"
        "for k = 1, #KEYS do\n"
        "  local a = (k - 1) * 3\n"
        "  out[k] = read_one({KEYS[k]}, {ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]})\n"
        "end\n"
        "return out\n"
    )


READ_MANY_LUA = _read_many_lua(READ_LUA)
"""Ranges of several table streams of one shard in one call (see :func:`_read_many_lua`)."""

_SCRIPTS = {
    "write": WRITE_LUA,
    "lease": LEASE_LUA,
    "release": RELEASE_LUA,
    "feed": FEED_LUA,
    "read": READ_MANY_LUA,
}
_SHA = {name: hashlib.sha1(source.encode("utf-8")).hexdigest() for name, source in _SCRIPTS.items()}

_WRITTEN, _LEASE_LOST, _MOVED = 0, 1, 2
_ZERO = "0-0"
_GLOB = re.compile(r"([*?\[\]\\])")


class ProjectorBusy(RuntimeError):
    """Another projector holds the lease of some shards (``shards``); ``code`` is stable."""

    code = "projector/busy"

    def __init__(self, shards: Sequence[int]) -> None:
        super().__init__(
            f"shards {', '.join(map(str, shards))} are held by another projector: stop it first"
        )
        self.shards = tuple(shards)


@dataclass
class RoundStats:
    """What a round did: feed entries read, events folded, tables whose views were written."""

    entries: int = 0
    events: int = 0
    tables: int = 0
    failed: int = 0

    def add(self, other: RoundStats) -> None:
        """Add another round's counts to these."""
        self.entries += other.entries
        self.events += other.events
        self.tables += other.tables
        self.failed += other.failed


@dataclass
class RebuildStats:
    """What a rebuild did: tables rebuilt, events folded, orphan view keys deleted, positions."""

    tables: int = 0
    events: int = 0
    deleted: int = 0
    failed: int = 0
    positions: dict[int, str] = field(default_factory=dict)


@dataclass
class _Write:
    """One shard's pending write: views by key, hints, the checkpoint before and after."""

    shard: int
    expected: str
    position: str
    views: dict[str, str] = field(default_factory=dict)
    hints: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)


@dataclass
class _Read:
    """A table's events to read this round: ``first``..``last`` (``None``: to the end)."""

    table_id: str
    first: int
    last: int | None
    stored: int | None = None  # version of the stored public view, for a table not cached


_Entry = tuple[str, str, int, int]
"""A feed entry: position, table id, first and last version."""
_Call = Callable[[Any], Any]
"""Queues one command on a pipeline."""


def _field(info: dict[Any, Any], name: str) -> Any:
    value = info.get(name)
    return info.get(name.encode("ascii")) if value is None else value


def _mget(keys: list[str]) -> _Call:
    return lambda pipe: pipe.mget(keys)


def _entry(line: str) -> _Entry:
    position, table_id, first, last = line.split(" ")
    return position, table_id, int(first), int(last)


def _b(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _id_key(position: str) -> tuple[int, int]:
    ms, _, seq = position.partition("-")
    return int(ms), int(seq or 0)


def _view_version(raw: bytes | str | None) -> int:
    if raw is None:
        return 0
    try:
        version = json.loads(raw).get("version")
    except (ValueError, AttributeError):
        return 0
    return version if isinstance(version, int) and not isinstance(version, bool) else 0


class Projector:
    """Follows shard feeds and writes table views (see the module docstring).

    ``client`` is a ``redis.asyncio.Redis`` with ``decode_responses=False``.  ``owner`` names
    this process in the shard leases; with ``owner=None`` no lease is taken or checked (one
    projector, tests).  ``cache_size`` bounds the folded tables kept in memory; a table that
    falls out is folded again from its stream the next time it moves.
    """

    def __init__(
        self,
        client: Redis,
        keys: KeySpace,
        *,
        owner: str | None = None,
        batch_size: int = 200,
        cache_size: int = 50_000,
        lease_ms: int = 10_000,
        read_chunk: int = READ_CHUNK,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.keys = keys
        self.owner = owner
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.lease_ms = lease_ms
        self.read_chunk = read_chunk
        self.clock = clock
        self.channel = f"{keys.ns}:views"
        self.positions: dict[int, str] = {}
        """The checkpoint of each shard as this projector knows it ('' when none yet)."""
        self.owned: set[int] = set()
        """The shards whose lease this projector holds (with an ``owner``)."""
        self.gaps: dict[int, str] = {}
        """Shards whose feed was trimmed past the checkpoint: the newest id trimmed away."""
        self._claimed_at = 0.0
        self._cache: OrderedDict[str, TableFold] = OrderedDict()
        self._feed_shard = {keys.feed(s): s for s in range(keys.shards)}
        self.log = get_logger("projector", owner=owner)

    # --- keys ----------------------------------------------------------------------------------

    def checkpoint_key(self, shard: int) -> str:
        """``<ns>:{sNN}:ckpt:projector``."""
        return self.keys.ckpt(shard, CHECKPOINT)

    def lease_key(self, shard: int) -> str:
        """``<ns>:{sNN}:projlease``."""
        return self.keys.shard_key(shard, LEASE)

    def view_keys(self, table_id: str) -> list[str]:
        """The keys of a table's view parts, in the order of ``VIEW_PARTS``."""
        base = self.keys.table_view(table_id)  # = table_view(table_id, part) without the part
        return [f"{base}:{part}" for part in VIEW_PARTS]

    def cached(self, table_id: str) -> TableFold | None:
        """Return the folded table in the cache, if any."""
        return self._cache.get(table_id)

    # --- scripts -------------------------------------------------------------------------------

    async def _run(self, calls: Sequence[_Call]) -> list[Any]:
        """Run commands in one pipeline (no transaction); scripts by EVALSHA, loaded and run
        again when the server does not know them.  Errors come back in place of replies."""
        replies: list[Any] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in range(2):
            async with self.client.pipeline(transaction=False) as pipe:
                for i in todo:
                    calls[i](pipe)
                got = await pipe.execute(raise_on_error=False)
            missing = []
            for i, reply in zip(todo, got, strict=True):
                replies[i] = reply
                if isinstance(reply, NoScriptError):
                    missing.append(i)
            if not missing or attempt:
                break
            for source in _SCRIPTS.values():
                await self.client.script_load(source)
            todo = missing
        return replies

    @staticmethod
    def _script(name: str, keys: Sequence[str], args: Sequence[Any]) -> _Call:
        sha = _SHA[name]
        return lambda pipe: pipe.evalsha(sha, len(keys), *keys, *args)

    # --- leases --------------------------------------------------------------------------------

    async def claim(self, shards: Iterable[int] | None = None) -> set[int]:
        """Take or renew the lease of each shard that is free or ours; return the shards held.

        Without an ``owner`` every shard asked for counts as held.  A shard lost since the last
        claim drops its checkpoint and its tables from memory.
        """
        wanted = list(range(self.keys.shards) if shards is None else shards)
        if self.owner is None:
            self.owned = set(wanted)
            return set(self.owned)
        replies = await self._run(
            [
                self._script("lease", [self.lease_key(s)], [self.owner, self.lease_ms])
                for s in wanted
            ]
        )
        self._claimed_at = time.monotonic()
        held = {s for s, ok in zip(wanted, replies, strict=True) if ok == 1}
        for s in self.owned - held:
            self._lose(s)
        for s in sorted(held - self.owned):
            self.log.info("lease_taken", shard=s)
        self.owned = held | (self.owned - set(wanted))
        return set(self.owned)

    async def release(self) -> None:
        """Give back every lease this projector holds."""
        if self.owner is None or not self.owned:
            self.owned = set()
            return
        owner = self.owner
        await self._run(
            [self._script("release", [self.lease_key(s)], [owner]) for s in sorted(self.owned)]
        )
        self.owned = set()

    def _lose(self, shard: int) -> None:
        """Forget a shard whose lease went to another projector."""
        self.log.warning("lease_lost", shard=shard)
        self.owned.discard(shard)
        self.positions.pop(shard, None)
        self._forget(t for t in list(self._cache) if self.keys.shard_of(t) == shard)

    def reset(self) -> None:
        """Forget the checkpoints and every folded table (after a round failed half-way, when
        the cache may be ahead of what was written): the next round starts from Redis again."""
        self.positions.clear()
        self._cache.clear()

    def _forget(self, tables: Iterable[str]) -> None:
        for t in tables:
            self._cache.pop(t, None)

    # --- following -----------------------------------------------------------------------------

    async def load_positions(self, shards: Iterable[int]) -> None:
        """Read the checkpoints of shards not yet known; warn when a feed was trimmed past one
        (entries were trimmed and the oldest one kept is newer than the checkpoint)."""
        missing = [s for s in shards if s not in self.positions]
        if not missing:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for s in missing:
                pipe.get(self.checkpoint_key(s))
            values = await pipe.execute()
        for s, raw in zip(missing, values, strict=True):
            self.positions[s] = "" if raw is None else _b(raw)
        await self._check_trimmed(missing)

    async def _check_trimmed(self, shards: Sequence[int]) -> None:
        for s in shards:
            try:
                info: dict[Any, Any] = await self.client.xinfo_stream(self.keys.feed(s))
            except RedisError:  # no feed yet
                continue
            added, length, first = (
                _field(info, k) for k in ("entries-added", "length", "first-entry")
            )
            if not first or added is None or length is None or int(added) <= int(length):
                continue  # nothing was ever trimmed (or this server does not say)
            first_id = _b(first[0])
            if _id_key(first_id) > _id_key(self.positions[s] or _ZERO):
                self.gaps[s] = first_id
                self.log.warning(
                    "feed_trimmed_past_checkpoint",
                    shard=s,
                    checkpoint=self.positions[s],
                    oldest_kept=first_id,
                    hint="tables untouched since then keep older views: conquian project --rebuild",
                )

    async def step(
        self, shards: Iterable[int] | None = None, block_ms: int | None = None
    ) -> RoundStats:
        """One round over ``shards`` (default: the owned ones, or all without an owner).

        Reads up to ``batch_size`` entries per feed (waiting up to ``block_ms`` when there is
        none; ``None`` does not wait), applies them and writes views and checkpoints.
        """
        if shards is None:
            shards = self.owned if self.owner is not None else range(self.keys.shards)
        followed = sorted(shards)
        if not followed:
            return RoundStats()
        await self.load_positions(followed)
        if block_ms is None:
            batches = await self._read_feeds(followed)
        else:  # one command, whatever the number of shards (a script per shard cost 16 calls)
            batches = await self._wait_feeds(followed, block_ms)
            if not batches:
                LAG.set(0)
        if not batches:
            return RoundStats()
        return await self.apply(batches)

    async def _read_feeds(self, shards: Sequence[int]) -> dict[int, list[_Entry]]:
        """Up to ``batch_size`` entries of each feed after its checkpoint, without waiting."""
        replies = await self._run(
            [
                self._script("feed", [self.keys.feed(s)], [self.positions[s], self.batch_size])
                for s in shards
            ]
        )
        batches: dict[int, list[_Entry]] = {}
        for s, reply in zip(shards, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            if reply:
                batches[s] = [_entry(line) for line in _b(reply).split("\n")]
        return batches

    async def _wait_feeds(self, shards: Sequence[int], block_ms: int) -> dict[int, list[_Entry]]:
        """Wait up to ``block_ms`` for an entry on any feed (XREAD BLOCK); return what came."""
        streams: dict[Any, Any] = {self.keys.feed(s): self.positions[s] or _ZERO for s in shards}
        reply: Any = await self.client.xread(streams, count=self.batch_size, block=block_ms)
        batches: dict[int, list[_Entry]] = {}
        for key, entries in reply.items() if isinstance(reply, dict) else reply or ():
            rows = entries[0] if isinstance(reply, dict) else entries  # RESP3 wraps them once more
            batches[self._feed_shard[_b(key)]] = [
                (_b(entry_id), _b(fields[b"t"]), int(fields[b"f"]), int(fields[b"l"]))
                for entry_id, fields in rows
            ]
        return batches

    async def apply(self, batches: dict[int, list[_Entry]]) -> RoundStats:
        """Apply feed entries ``(position, table, first, last)`` by shard; write once per shard."""
        stats = RoundStats()
        targets: dict[str, int] = {}
        writes: dict[int, _Write] = {}
        for shard, entries in batches.items():
            if not entries:
                continue
            stats.entries += len(entries)
            expected = self.positions.get(shard, "")
            position = max(expected or _ZERO, entries[-1][0], key=_id_key)  # never backwards
            write = _Write(shard, expected, position)
            writes[shard] = write
            for _, table_id, _, last in entries:
                if table_id not in targets:
                    write.tables.append(table_id)
                targets[table_id] = max(last, targets.get(table_id, 0))
        reads = [r for t, v in targets.items() if (r := self._plan(t, v)) is not None]
        events = await self._fetch(reads)
        newest = 0
        for r in reads:
            fold = self._fold(r, targets[r.table_id], events.get(r.table_id, []), stats)
            if fold is None:
                continue
            write = writes[self.keys.shard_of(r.table_id)]
            try:
                views = fold.views()
            except FoldError as exc:
                self._failed(r.table_id, fold.version, exc, stats)
                continue
            write.views.update(zip(self.view_keys(r.table_id), views.values(), strict=True))
            write.hints.append(f"{r.table_id} {fold.version}")
            newest = max(newest, fold.updated_at or 0)
            self.log.debug("view", table=r.table_id, version=fold.version)
        await self._commit(list(writes.values()), stats)
        APPLIED.inc(stats.events)
        if newest:
            LAG.set(max(0.0, self.clock() - newest / 1000))
        return stats

    def _plan(self, table_id: str, target: int) -> _Read | None:
        fold = self._cache.get(table_id)
        if fold is None:
            return _Read(table_id, 1, None)
        self._cache.move_to_end(table_id)
        if fold.version >= target:
            return None  # already reflected: re-applying changes nothing
        return _Read(table_id, fold.version + 1, target)

    async def _fetch(self, reads: Sequence[_Read]) -> dict[str, list[StoredEvent]]:
        """Read every table's missing events in one round trip: one script call per shard (its
        streams share the shard's hash tag), and the stored view versions of tables not cached."""
        if not reads:
            return {}
        by_shard: dict[int, list[_Read]] = {}
        for r in reads:
            by_shard.setdefault(self.keys.shard_of(r.table_id), []).append(r)
        calls: list[_Call] = []
        for rs in by_shard.values():
            keys = [self.keys.events(r.table_id) for r in rs]
            args: list[Any] = []
            for r in rs:
                args += [f"{r.first}-1", "+" if r.last is None else f"{r.last}-1", self.read_chunk]
            calls.append(self._script("read", keys, args))
            misses = [self.keys.table_view(r.table_id, PUBLIC) for r in rs if r.last is None]
            if misses:
                calls.append(_mget(misses))
        replies = iter(await self._run(calls))
        out: dict[str, list[StoredEvent]] = {}
        for rs in by_shard.values():
            bufs = next(replies)
            if isinstance(bufs, Exception):
                raise bufs
            if any(r.last is None for r in rs):
                stored = iter(next(replies))
                for r in rs:
                    if r.last is None:
                        r.stored = _view_version(next(stored))
            for r, buf in zip(rs, bufs, strict=True):
                out[r.table_id] = await self._decode(r, _b_bytes(buf))
        return out

    async def _decode(self, r: _Read, buf: bytes) -> list[StoredEvent]:
        """Decode a table's range, reading on chunk by chunk when the range was cut short."""
        events: list[StoredEvent] = []
        try:
            n, last, _ = decode_packed(r.table_id, buf, r.first, "", events)
            while n == self.read_chunk:
                end = "+" if r.last is None else f"{r.last}-1"
                call = self._script(
                    "read", [self.keys.events(r.table_id)], [f"({last}-1", end, self.read_chunk]
                )
                (more,) = await self._run([call])
                if isinstance(more, Exception):
                    raise more
                n, last, _ = decode_packed(r.table_id, _b_bytes(more[0]), last + 1, "", events)
        except StoreError as exc:
            self.log.error("read_failed", table=r.table_id, error=str(exc))
            return []
        return events

    def _fold(
        self, r: _Read, target: int, events: list[StoredEvent], stats: RoundStats
    ) -> TableFold | None:
        """Fold a table's new events; the fold when its views must be written, else None."""
        fold = self._cache.get(r.table_id)
        if fold is None:
            fold = TableFold(r.table_id)
        stored = r.stored or 0
        goal = max(target, stored)
        try:
            for e in events:
                if e.version > goal:
                    break
                if fold.apply_body(e.version, e.body):
                    stats.events += 1
        except FoldError as exc:
            self._failed(r.table_id, fold.version, exc, stats)
            return None
        self._remember(fold)
        if fold.version < target:
            self.log.warning(
                "events_missing", table=r.table_id, version=fold.version, expected=target
            )
        if fold.version <= stored or fold.match is None:
            return None  # the stored views already reflect this version (or there are none)
        return fold

    def _failed(self, table_id: str, version: int, exc: Exception, stats: RoundStats) -> None:
        stats.failed += 1
        self._cache.pop(table_id, None)
        self.log.error("fold_failed", table=table_id, version=version, error=str(exc))

    def _remember(self, fold: TableFold) -> None:
        self._cache[fold.table_id] = fold
        self._cache.move_to_end(fold.table_id)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    async def _commit(self, writes: Sequence[_Write], stats: RoundStats) -> None:
        """Run each shard's write script, all in one pipeline, and take in the outcomes."""
        if not writes:
            return
        replies = await self._run([self._write_call(w) for w in writes])
        for w, reply in zip(writes, replies, strict=True):
            if isinstance(reply, Exception):
                self.log.error("write_failed", shard=w.shard, error=str(reply))
                self.positions.pop(w.shard, None)
                self._forget(w.tables)
                continue
            code = int(reply[0])
            if code == _WRITTEN:
                self.positions[w.shard] = w.position
                stats.tables += len(w.hints)
            elif code == _LEASE_LOST:
                self._lose(w.shard)
            else:  # the checkpoint moved under us: read it again, fold these tables again
                self.log.warning(
                    "checkpoint_moved", shard=w.shard, expected=w.expected, found=_b(reply[1])
                )
                self.positions.pop(w.shard, None)
                self._forget(w.tables)

    def _write_call(self, w: _Write) -> _Call:
        keys = [self.checkpoint_key(w.shard), self.lease_key(w.shard), *w.views]
        args: list[Any] = [w.expected, w.position, self.owner or "", self.channel, len(w.hints)]
        return self._script("write", keys, [*args, *w.views.values(), *w.hints])

    async def catch_up(self, shards: Iterable[int] | None = None) -> RoundStats:
        """Apply every feed entry there is now, round after round, without waiting."""
        total = RoundStats()
        followed = list(shards) if shards is not None else None
        while True:
            stats = await self.step(followed)
            total.add(stats)
            if stats.entries == 0:
                return total

    # --- rebuilding ----------------------------------------------------------------------------

    async def rebuild(self, shards: Iterable[int] | None = None, chunk: int = 100) -> RebuildStats:
        """Rebuild the views of ``shards`` (default all) from the event streams.

        Raises ProjectorBusy when another projector holds a lease of these shards.
        """
        wanted = sorted(range(self.keys.shards) if shards is None else set(shards))
        if self.owner is not None:
            held = await self.claim(wanted)
            busy = [s for s in wanted if s not in held]
            if busy:
                raise ProjectorBusy(busy)
        out = RebuildStats()
        ends = await self._feed_ends(wanted)
        existing = await self._view_keys(set(wanted))
        async with self.client.pipeline(transaction=False) as pipe:
            for s in wanted:
                pipe.delete(self.checkpoint_key(s))
            await pipe.execute()
        for s in wanted:
            self.positions[s] = ""
        self._forget(t for t in list(self._cache) if self.keys.shard_of(t) in ends)
        self.log.info("rebuild_started", shards=len(wanted), views=len(existing))
        tables = [t async for t in self._tables(set(wanted))]
        cursors = dict(ends)
        caps: dict[str, int] = {}
        written: set[str] = set()
        for i in range(0, len(tables), chunk):
            await self._keep_leases(wanted)
            part = tables[i : i + chunk]
            events = await self._fetch([_Read(t, 1, None) for t in part])
            await self._advance_caps(sorted({self.keys.shard_of(t) for t in part}), cursors, caps)
            by_shard: dict[int, _Write] = {}
            for t in part:
                fold = TableFold(t)
                try:
                    for e in events.get(t, []):
                        if e.version > caps.get(t, e.version):
                            break
                        fold.apply_body(e.version, e.body)
                        out.events += 1
                    views = fold.views() if fold.match is not None else None
                except FoldError as exc:
                    out.failed += 1
                    self.log.error("fold_failed", table=t, version=fold.version, error=str(exc))
                    continue
                self._remember(fold)
                if views is None:
                    continue
                shard = self.keys.shard_of(t)
                w = by_shard.setdefault(shard, _Write(shard, "", ""))
                w.views.update(zip(self.view_keys(t), views.values(), strict=True))
                written.update(w.views)
                out.tables += 1
            await self._write_or_raise(list(by_shard.values()))
        orphans = sorted(existing - written)
        for i in range(0, len(orphans), 500):
            await self.client.unlink(*orphans[i : i + 500])
        out.deleted = len(orphans)
        await self._write_or_raise([_Write(s, "", ends[s]) for s in wanted if ends[s]])
        for s in wanted:
            self.positions[s] = ends[s]
        out.positions = {s: ends[s] for s in wanted}
        APPLIED.inc(out.events)
        self.log.info("rebuild_done", tables=out.tables, events=out.events, deleted=out.deleted)
        return out

    async def _keep_leases(self, shards: Sequence[int]) -> None:
        """Renew the leases of a long rebuild every third of ``lease_ms``; raise if one is lost."""
        if self.owner is None or time.monotonic() - self._claimed_at < self.lease_ms / 3000:
            return
        held = await self.claim(shards)
        lost = [s for s in shards if s not in held]
        if lost:
            raise ProjectorBusy(lost)

    async def _write_or_raise(self, writes: Sequence[_Write]) -> None:
        if not writes:
            return
        replies = await self._run([self._write_call(w) for w in writes])
        for w, reply in zip(writes, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            if int(reply[0]) == _LEASE_LOST:
                raise ProjectorBusy([w.shard])
            if int(reply[0]) != _WRITTEN:
                raise RuntimeError(
                    f"shard {w.shard}: the checkpoint was written during the rebuild"
                )

    async def _feed_ends(self, shards: Sequence[int]) -> dict[int, str]:
        """The id of each feed's newest entry ('' for an empty feed)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for s in shards:
                pipe.xrevrange(self.keys.feed(s), "+", "-", count=1)
            replies = await pipe.execute()
        return {s: _b(r[0][0]) if r else "" for s, r in zip(shards, replies, strict=True)}

    async def _advance_caps(
        self, shards: Sequence[int], cursors: dict[int, str], caps: dict[str, int]
    ) -> None:
        """Read the feed entries appended since the rebuild began: a table's events from the
        first such entry on are past the feed position the rebuild stands for, and left out."""
        async with self.client.pipeline(transaction=False) as pipe:
            for s in shards:
                start = f"({cursors[s]}" if cursors[s] else "-"
                pipe.xrange(self.keys.feed(s), start, "+")
            replies = await pipe.execute()
        for s, entries in zip(shards, replies, strict=True):
            for entry_id, fields in entries:
                t = _b(fields[b"t"])
                caps[t] = min(caps.get(t, 1 << 62), int(fields[b"f"]) - 1)
                cursors[s] = _b(entry_id)

    async def _tables(self, shards: set[int]) -> Any:
        seen: set[str] = set()
        async for key in self.client.scan_iter(match=self.keys.head_pattern(), count=1000):
            t = self.keys.table_of_head(_b(key))
            if t is not None and t not in seen and self.keys.shard_of(t) in shards:
                seen.add(t)
                yield t

    async def _view_keys(self, shards: set[int]) -> set[str]:
        """Every key of these shards that is one of a table's projector view parts."""
        ns = _GLOB.sub(r"\\\1", self.keys.ns)
        pattern = f"{ns}:{{s*}}:view:*"
        found: set[str] = set()
        async for raw in self.client.scan_iter(match=pattern, count=1000):
            key = _b(raw)
            for part in VIEW_PARTS:
                if not key.endswith(":" + part):
                    continue
                _, sep, rest = key.partition("}:view:")
                table_id = rest[: -len(part) - 1]
                try:
                    ok = sep and self.keys.table_view(table_id, part) == key
                except ValueError:
                    ok = False
                if ok and self.keys.shard_of(table_id) in shards:
                    found.add(key)
        return found


def _b_bytes(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


# --- entry points ----------------------------------------------------------------------------


async def catch_up(
    client: Redis, keys: KeySpace, shards: Iterable[int] | None = None, **options: Any
) -> RoundStats:
    """Apply every feed entry after the checkpoints of ``shards`` with a fresh projector."""
    return await Projector(client, keys, **options).catch_up(shards)


project_once = catch_up


def _owner(settings: Settings) -> str:
    return f"{settings.worker_id}:{uuid.uuid4().hex[:8]}"


async def run_projector(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    client: Redis | None = None,
    rebuild: bool = False,
) -> Projector:
    """Follow every shard whose lease is free until ``stop`` is set; return the projector.

    With ``rebuild`` the views are rebuilt first (raises ProjectorBusy when another projector
    holds a lease).  Leases are renewed every third of ``settings.lease_ms`` and given back at
    the end.
    """
    stop = stop or asyncio.Event()
    own_client = client is None
    redis = client or connect(settings.redis_url)
    projector = Projector(
        redis,
        settings.keys,
        owner=_owner(settings),
        batch_size=settings.batch_size,
        lease_ms=settings.lease_ms,
    )
    log = projector.log
    interval = settings.lease_ms / 3000
    block_ms = int(min(500, settings.lease_ms / 3))
    try:
        if rebuild:
            await projector.rebuild()
        next_claim = 0.0
        log.info("projector_started", shards=settings.shards, namespace=settings.namespace)
        while not stop.is_set():
            try:
                now = time.monotonic()
                if now >= next_claim:
                    await projector.claim()
                    next_claim = now + interval
                if projector.owned:
                    await projector.step(block_ms=block_ms)
                    continue
                pause = interval
            except (RedisError, OSError) as exc:  # Redis away: start again from what it holds
                log.error("round_failed", error=str(exc))
                projector.reset()
                pause = 0.5
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=pause)
    finally:
        with contextlib.suppress(Exception):
            await projector.release()
        log.info("projector_stopped")
        if own_client:
            await redis.aclose()
    return projector


# --- command line ----------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, object] = {}
    if args.redis_url:
        overrides["redis_url"] = args.redis_url
    if args.namespace:
        overrides["namespace"] = args.namespace
    if args.shards:
        overrides["shards"] = args.shards
    return load_settings(**overrides)


def run_command(args: argparse.Namespace) -> int:
    """Run ``conquian project`` with its parsed arguments (``services.project_cli``)."""
    from services.log import configure

    settings = _settings(args)
    configure(settings.log_level)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
    try:
        return _run_loop(_run(args, settings))
    except ProjectorBusy as exc:
        sys.stderr.write(f"conquian project: {exc}\n")
        return 1


def _run_loop(main: Any) -> int:
    """Run the projector's coroutine on uvloop if installed (less CPU per round), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)  # type: ignore[no-any-return]
    return uvloop.run(main)  # type: ignore[no-any-return]


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.follow or not (args.once or args.rebuild):
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        await run_projector(settings, stop, rebuild=args.rebuild)
        return 0
    redis = connect(settings.redis_url)
    projector = Projector(
        redis,
        settings.keys,
        owner=_owner(settings),
        batch_size=settings.batch_size,
        lease_ms=settings.lease_ms,
    )
    try:
        if args.rebuild:
            rebuilt = await projector.rebuild()
            sys.stdout.write(
                f"rebuilt {rebuilt.tables} tables from {rebuilt.events} events "
                f"({rebuilt.deleted} stale view keys deleted, {rebuilt.failed} failed)\n"
            )
            return 1 if rebuilt.failed else 0
        held = await projector.claim()
        busy = sorted(set(range(settings.shards)) - held)
        stats = await projector.catch_up(held)
        skipped = f"; shards {', '.join(map(str, busy))} held by another projector" if busy else ""
        sys.stdout.write(
            f"applied {stats.entries} feed entries, {stats.events} events, "
            f"{stats.tables} tables written{skipped}\n"
        )
        return 1 if stats.failed else 0
    finally:
        with contextlib.suppress(Exception):
            await projector.release()
        await redis.aclose()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m services.projector``: the same arguments as ``conquian project``."""
    parser = argparse.ArgumentParser(prog="python -m services.projector")
    arguments(parser)
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
