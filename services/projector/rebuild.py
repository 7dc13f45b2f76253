"""``--rebuild``: every table's views again from the event streams, as of the end of each feed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from services.projector.fetch import ProjectorFetch
from services.projector.leases import ProjectorLeases
from services.projector.metrics import APPLIED
from services.projector.records import ProjectorBusy, RebuildStats, ShardWrite, TableRead
from services.projector.scripts import LEASE_LOST, WRITTEN
from services.store.base import StoredEvent
from services.store.client import as_text
from services.tables.stored_parts import RETIRED_PARTS, STORED_PARTS, TableFold
from services.tables.table import FoldError

_GLOB = re.compile(r"([*?\[\]\\])")


class ProjectorRebuild(ProjectorLeases, ProjectorFetch):
    """Rebuilds the views of whole shards (see :meth:`rebuild`)."""

    async def rebuild(self, shards: Iterable[int] | None = None, chunk: int = 100) -> RebuildStats:
        """Rebuild the views of ``shards`` (default all) from the event streams.

        Raises ProjectorBusy when another projector holds a lease of these shards.
        """
        wanted = sorted(range(self.keys.shards) if shards is None else set(shards))
        await self._claim_or_raise(wanted)
        out = RebuildStats()
        ends = await self._feed_ends(wanted)
        existing = await self._view_keys(set(wanted))
        await self._drop_checkpoints(wanted)
        self._forget(t for t in list(self._cache) if self.keys.shard_of(t) in ends)
        self.log.info("rebuild_started", shards=len(wanted), views=len(existing))
        tables = [t async for t in self._tables(set(wanted))]
        cursors = dict(ends)
        caps: dict[str, int] = {}
        written: set[str] = set()
        for i in range(0, len(tables), chunk):
            await self._keep_leases(wanted)
            await self._rebuild_chunk(tables[i : i + chunk], cursors, caps, written, out)
        out.deleted = await self._unlink(sorted(existing - written))
        await self._write_or_raise([ShardWrite(s, "", ends[s]) for s in wanted if ends[s]])
        for s in wanted:
            self.positions[s] = ends[s]
        out.positions = {s: ends[s] for s in wanted}
        APPLIED.inc(out.events)
        self.log.info("rebuild_done", tables=out.tables, events=out.events, deleted=out.deleted)
        return out

    async def _drop_checkpoints(self, shards: Sequence[int]) -> None:
        """Delete the checkpoints of these shards, in Redis and in memory."""
        async with self.client.pipeline(transaction=False) as pipe:
            for s in shards:
                pipe.delete(self.checkpoint_key(s))
            await pipe.execute()
        for s in shards:
            self.positions[s] = ""

    async def _rebuild_chunk(
        self,
        part: Sequence[str],
        cursors: dict[int, str],
        caps: dict[str, int],
        written: set[str],
        out: RebuildStats,
    ) -> None:
        """Fold some tables from their first event and write their views (one write per shard),
        adding the keys written to ``written``."""
        events = await self._fetch([TableRead(t, 1, None) for t in part])
        await self._advance_caps(sorted({self.keys.shard_of(t) for t in part}), cursors, caps)
        by_shard: dict[int, ShardWrite] = {}
        for t in part:
            views = self._rebuild_table(t, events.get(t, []), caps, out)
            if views is None:
                continue
            shard = self.keys.shard_of(t)
            w = by_shard.setdefault(shard, ShardWrite(shard, "", ""))
            w.views.update(zip(self.view_keys(t), views.values(), strict=True))
            written.update(w.views)
            out.tables += 1
        await self._write_or_raise(list(by_shard.values()))

    def _rebuild_table(
        self, t: str, events: list[StoredEvent], caps: dict[str, int], out: RebuildStats
    ) -> dict[str, str] | None:
        """Fold a table's events up to its cap; its views, or None (no match, or a fold error)."""
        fold = TableFold(t)
        try:
            for e in events:
                if e.version > caps.get(t, e.version):
                    break
                fold.apply_body(e.version, e.body)
                out.events += 1
            views = fold.views() if fold.match is not None else None
        except FoldError as exc:
            out.failed += 1
            self.log.error("fold_failed", table=t, version=fold.version, error=str(exc))
            return None
        self._remember(fold)
        return views

    async def _unlink(self, keys: Sequence[str]) -> int:
        """Delete keys, 500 per command; return how many."""
        for i in range(0, len(keys), 500):
            await self.client.unlink(*keys[i : i + 500])
        return len(keys)

    async def _write_or_raise(self, writes: Sequence[ShardWrite]) -> None:
        if not writes:
            return
        replies = await self._run([self._write_call(w) for w in writes])
        for w, reply in zip(writes, replies, strict=True):
            if isinstance(reply, Exception):
                raise reply
            if int(reply[0]) == LEASE_LOST:
                raise ProjectorBusy([w.shard])
            if int(reply[0]) != WRITTEN:
                raise RuntimeError(
                    f"shard {w.shard}: the checkpoint was written during the rebuild"
                )

    async def _feed_ends(self, shards: Sequence[int]) -> dict[int, str]:
        """The id of each feed's newest entry ('' for an empty feed)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for s in shards:
                pipe.xrevrange(self.keys.feed(s), "+", "-", count=1)
            replies = await pipe.execute()
        return {s: as_text(r[0][0]) if r else "" for s, r in zip(shards, replies, strict=True)}

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
                t = as_text(fields[b"t"])
                caps[t] = min(caps.get(t, 1 << 62), int(fields[b"f"]) - 1)
                cursors[s] = as_text(entry_id)

    async def _tables(self, shards: set[int]) -> Any:
        seen: set[str] = set()
        async for key in self.client.scan_iter(match=self.keys.head_pattern(), count=1000):
            t = self.keys.table_of_head(as_text(key))
            if t is not None and t not in seen and self.keys.shard_of(t) in shards:
                seen.add(t)
                yield t

    async def _view_keys(self, shards: set[int]) -> set[str]:
        """Every key of these shards that is one of a table's projector view parts (or a part
        that projectors stored before, which no projector writes now)."""
        ns = _GLOB.sub(r"\\\1", self.keys.ns)
        pattern = f"{ns}:{{s*}}:view:*"
        found: set[str] = set()
        async for raw in self.client.scan_iter(match=pattern, count=1000):
            key = as_text(raw)
            for part in (*STORED_PARTS, *RETIRED_PARTS):
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
