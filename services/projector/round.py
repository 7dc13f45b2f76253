"""One projector round: read the feeds, fetch the events, fold, commit views and checkpoints."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from redis.exceptions import RedisError

from services.projector.fetch import ProjectorFetch
from services.projector.leases import ProjectorLeases
from services.projector.metrics import APPLIED, LAG
from services.projector.records import RoundStats, ShardWrite, TableRead
from services.projector.scripts import LEASE_LOST, WRITTEN
from services.store.base import StoredEvent
from services.store.client import as_text
from services.store.stream_watch import xread_split
from services.tables.stored_parts import PUBLIC, TableFold
from services.tables.table import FoldError

_ZERO = "0-0"

FeedEntry = tuple[str, str, int, int]
"""A feed entry: position, table id, first and last version."""


def _field(info: dict[Any, Any], name: str) -> Any:
    value = info.get(name)
    return info.get(name.encode("ascii")) if value is None else value


def _entry(line: str) -> FeedEntry:
    position, table_id, first, last = line.split(" ")
    return position, table_id, int(first), int(last)


def _id_key(position: str) -> tuple[int, int]:
    ms, _, seq = position.partition("-")
    return int(ms), int(seq or 0)


class ProjectorRound(ProjectorLeases, ProjectorFetch):
    """Follows the shard feeds round by round (see :meth:`step`)."""

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
            self.positions[s] = "" if raw is None else as_text(raw)
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
            first_id = as_text(first[0])
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

    async def _read_feeds(self, shards: Sequence[int]) -> dict[int, list[FeedEntry]]:
        """Up to ``batch_size`` entries of each feed after its checkpoint, without waiting."""
        replies = await self._run(
            [
                self._script("feed", [self.keys.feed(s)], [self.positions[s], self.batch_size])
                for s in shards
            ]
        )
        batches: dict[int, list[FeedEntry]] = {}
        for s, reply in zip(shards, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            if reply:
                batches[s] = [_entry(line) for line in as_text(reply).split("\n")]
        return batches

    async def _wait_feeds(self, shards: Sequence[int], block_ms: int) -> dict[int, list[FeedEntry]]:
        """Wait up to ``block_ms`` for an entry on any feed (XREAD BLOCK); return what came."""
        streams: dict[Any, Any] = {self.keys.feed(s): self.positions[s] or _ZERO for s in shards}
        reply: Any
        if self.watch is not None:  # a cluster: an XREAD a feed (docs/deploy.md)
            reply = await xread_split(self.client, streams, self.batch_size, block_ms, self.watch)
        else:
            reply = await self.client.xread(streams, count=self.batch_size, block=block_ms)
        batches: dict[int, list[FeedEntry]] = {}
        for key, entries in reply.items() if isinstance(reply, dict) else reply or ():
            rows = entries[0] if isinstance(reply, dict) else entries  # RESP3 wraps them once more
            batches[self._feed_shard[as_text(key)]] = [
                (as_text(entry_id), as_text(fields[b"t"]), int(fields[b"f"]), int(fields[b"l"]))
                for entry_id, fields in rows
            ]
        return batches

    async def apply(self, batches: dict[int, list[FeedEntry]]) -> RoundStats:
        """Apply feed entries ``(position, table, first, last)`` by shard; write once per shard."""
        stats = RoundStats()
        targets: dict[str, int] = {}
        writes = self._writes(batches, targets, stats)
        behind = await self._behind(targets)
        reads = [self._plan(t, targets[t], stored) for t, stored in behind.items()]
        events = await self._fetch(reads)
        newest = 0
        for r in reads:
            fold = self._fold(r, targets[r.table_id], events.get(r.table_id, []), stats)
            if fold is None:
                continue
            if self._stage(writes[self.keys.shard_of(r.table_id)], r.table_id, fold, stats):
                newest = max(newest, fold.updated_at or 0)
        await self._commit(list(writes.values()), stats)
        APPLIED.inc(stats.events)
        if newest:
            LAG.set(max(0.0, self.clock() - newest / 1000))
        elif targets and not behind:
            LAG.set(0)  # every view of the round was current (stored with its append)
        return stats

    def _writes(
        self, batches: dict[int, list[FeedEntry]], targets: dict[str, int], stats: RoundStats
    ) -> dict[int, ShardWrite]:
        """One pending write per shard with entries (its checkpoint before and after); fills
        ``targets`` with the newest version each table must reach."""
        writes: dict[int, ShardWrite] = {}
        for shard, entries in batches.items():
            if not entries:
                continue
            stats.entries += len(entries)
            expected = self.positions.get(shard, "")
            position = max(expected or _ZERO, entries[-1][0], key=_id_key)  # never backwards
            write = ShardWrite(shard, expected, position)
            writes[shard] = write
            for _, table_id, _, last in entries:
                if table_id not in targets:
                    write.tables.append(table_id)
                targets[table_id] = max(last, targets.get(table_id, 0))
        return writes

    def _stage(self, write: ShardWrite, table_id: str, fold: TableFold, stats: RoundStats) -> bool:
        """Add a table's views and its hint to its shard's write; False when the views fail."""
        try:
            views = fold.views()
        except FoldError as exc:
            self._failed(table_id, fold.version, exc, stats)
            return False
        write.views.update(zip(self.view_keys(table_id), views.values(), strict=True))
        write.hints.append(f"{table_id} {fold.version}")
        self.log.debug("view", table=table_id, version=fold.version)
        return True

    async def _behind(self, targets: dict[str, int]) -> dict[str, int]:
        """The tables whose stored views are older than their target, with the version of
        their stored public part (0: none).

        The engine workers store a table's views with each append, so most tables of a round
        are current already: their versions are read in one call per shard (no events), and
        only the others are folded.  A table this projector folded to its target itself is
        known current without asking; a cached fold older than the stored views is dropped
        (what it would fold again is in the views already).
        """
        asked: dict[int, list[str]] = {}
        folds: dict[str, TableFold] = {}  # the cached folds of the tables asked about
        for table_id, target in targets.items():
            fold = self._cache.recall(table_id)
            if fold is None or fold.version < target:
                asked.setdefault(self.keys.shard_of(table_id), []).append(table_id)
                if fold is not None:
                    folds[table_id] = fold
        if not asked:
            return {}
        calls = [
            self._script("versions", [self.keys.table_view(t, PUBLIC) for t in tables], [])
            for tables in asked.values()
        ]
        behind: dict[str, int] = {}
        for tables, reply in zip(asked.values(), await self._run(calls), strict=True):
            if isinstance(reply, Exception):
                raise reply
            for table_id, stored in zip(tables, reply, strict=True):
                if int(stored) < targets[table_id]:
                    behind[table_id] = int(stored)
                    continue
                fold = folds.get(table_id)
                if fold is not None and fold.version < int(stored):
                    self._cache.pop(table_id, None)
        return behind

    def _plan(self, table_id: str, target: int, stored: int) -> TableRead:
        """The events to read for a table behind its target (``stored``: its views' version)."""
        fold = self._cache.recall(table_id)
        if fold is None:
            return TableRead(table_id, 1, None, stored)
        return TableRead(table_id, fold.version + 1, target, stored)

    def _fold(
        self, r: TableRead, target: int, events: list[StoredEvent], stats: RoundStats
    ) -> TableFold | None:
        """Fold a table's new events; the fold when its views must be written, else None."""
        fold = self._cache.get(r.table_id)
        if fold is None:
            fold = TableFold(r.table_id)
        stored = r.stored
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

    async def _commit(self, writes: Sequence[ShardWrite], stats: RoundStats) -> None:
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
            if code == WRITTEN:
                self.positions[w.shard] = w.position
                stats.tables += len(w.hints)
            elif code == LEASE_LOST:
                self._lose(w.shard)
            else:  # the checkpoint moved under us: read it again, fold these tables again
                self.log.warning(
                    "checkpoint_moved", shard=w.shard, expected=w.expected, found=as_text(reply[1])
                )
                self.positions.pop(w.shard, None)
                self._forget(w.tables)

    async def catch_up(self, shards: Iterable[int] | None = None) -> RoundStats:
        """Apply every feed entry there is now, round after round, without waiting."""
        total = RoundStats()
        followed = list(shards) if shards is not None else None
        while True:
            stats = await self.step(followed)
            total.add(stats)
            if stats.entries == 0:
                return total
