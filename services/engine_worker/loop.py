"""The shard loop: what the engine worker does with the entries it reads, in order.

:meth:`ShardLoop.handle` splits one read's entries by owned shard; :meth:`ShardLoop.process`
then, under each shard's lock, parses them, triages them, decides and appends them with the
table service, writes the lobby rows they changed, answers them and acknowledges them: one
``execute_many`` and one acknowledgement for every shard of the moment.  The rules (crash
safety, poison commands, leases): ``docs/services.md`` ("Engine worker").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.exceptions
from redis.asyncio import Redis

from engine.codes import Code
from services.engine_worker.answers import (
    AcksInFlight,
    HintChannels,
    acknowledge,
    answered,
    malformed,
    view_hints,
)
from services.engine_worker.metrics import APPEND_SECONDS
from services.engine_worker.reader import STREAMS_FIELD, Entry, Malformed, RawEntry, parse_entry
from services.lobby.listing import LobbyRow, lobby_row, write_rows
from services.serve.gc_tuning import collect_at_rest
from services.store import compact_json
from services.store.base import VersionConflict
from services.store.keys import KeySpace, command_key
from services.store.redis_store import RedisEventStore
from services.tables.decide import TableError
from services.tables.results import BatchResult, CommandResult
from services.tables.service import MAX_CONFLICT_RETRIES, TableService
from services.tables.table import Table

AfterAppend = Callable[[Table, CommandResult], Awaitable[None]]
"""Called with the new table after each accepted (not duplicate) command, before the XACK."""

LOBBY_COMMANDS = frozenset({"create_table", "join", "leave_table"})
"""Commands whose acceptance changes a table's lobby row; any command that ends a match does
too (the table leaves the lobby)."""


CHUNK_ENTRIES = 500
"""The most entries one :meth:`ShardLoop.process` takes from a read.  A read holds up to
``batch_size`` entries a stream of every owned shard (4,800 for 8 shards of 600); decided at
once, they held the event loop for seconds on a full machine, the lease renewals waited, and
the leases ran out under load (``docs/performance.md``, "Leases lost under load")."""


class OwnedShard:
    """A shard this worker owns, as the loop keeps it: its lease deadline, its lock, the entries
    in hand and the commands waiting for a retry."""

    def __init__(self, shard: int, stream: str, valid_until: float, log: Any) -> None:
        self.shard = shard
        self.stream = stream
        self.valid_until = valid_until
        """The monotonic time until which the lease is known to be ours."""
        self.lost = False
        """Set once a renewal of the lease failed."""
        self.lock = asyncio.Lock()
        """Held by a batch for each of its shards, and by the shard's claims and retries."""
        self.held: set[bytes] = set()
        """Ids of the entries in hand (deciding, waiting, or not yet acknowledged): claims skip
        them."""
        self.backlog: dict[str, deque[Entry]] = {}
        """The commands waiting for a retry, by table, in stream order."""
        self.retry_at: dict[str, float] = {}
        """When each table of the backlog is retried (monotonic time)."""
        self.wake = asyncio.Event()
        """Set when a retry is scheduled."""
        self.log = log

    def may_append(self) -> bool:
        """Say whether the lease is known to be ours (checked before every append round)."""
        return not self.lost and time.monotonic() < self.valid_until


@dataclass
class _Part:
    """One shard's share of a batch: its commands, and its entries to acknowledge."""

    shard: OwnedShard
    items: list[Entry]
    acks: list[bytes] = field(default_factory=list)
    run: list[Entry] = field(default_factory=list)


class ShardLoop:
    """Parse, triage, decide, append, answer and acknowledge command entries of owned shards.

    ``shards`` are the worker's owned shards by number (kept up to date by the worker);
    ``max_deliveries`` is the poison threshold; ``retry_cap_s`` the longest wait before a
    failed command is retried; ``after_append`` an observer of accepted commands.
    """

    def __init__(
        self,
        service: TableService,
        store: RedisEventStore,
        client: Redis,
        keys: KeySpace,
        shards: Mapping[int, OwnedShard],
        *,
        channels: HintChannels,
        acks: AcksInFlight,
        max_deliveries: int,
        retry_cap_s: float,
        log: Any,
        command_log: Any,
        after_append: AfterAppend,
    ) -> None:
        self.service = service
        self.store = store
        self.client = client
        self.keys = keys
        self.shards = shards
        self.channels = channels
        self.acks = acks
        self.max_deliveries = max_deliveries
        self.retry_cap_s = retry_cap_s
        self.log = log
        self.command_log = command_log
        self.after_append = after_append

    async def handle(self, raw: Mapping[str, Any]) -> None:
        """The reader's handler: one read's entries, of every shard read (see :mod:`.reader`),
        processed together.

        The entries go to :meth:`process` in chunks of :data:`CHUNK_ENTRIES`, in read order;
        an entry of a shard no longer ours stays pending: its next owner claims it."""
        owned = {s.stream: s for s in self.shards.values()}
        batches: dict[OwnedShard, list[RawEntry]] = {}
        count = 0
        for entry_id, fields, stream in zip(
            raw["message_ids"], raw["data"], raw[STREAMS_FIELD], strict=True
        ):
            shard = owned.get(stream)
            if shard is None:
                continue
            batches.setdefault(shard, []).append((entry_id, fields))
            count += 1
            if count == CHUNK_ENTRIES:
                await self.process(batches)
                batches, count = {}, 0
        if batches:
            await self.process(batches)
        collect_at_rest()  # the batch's objects are gone: what is young now is what it kept

    async def process(
        self,
        batches: Mapping[OwnedShard, Sequence[RawEntry]],
        tries: Mapping[bytes, int] | None = None,
    ) -> None:
        """Take the entries of each shard from parse to acknowledgement (never raises).

        The shards' locks are taken in shard order; a shard whose lease is not known to be ours
        is left out (its entries stay pending for the next owner).  ``tries`` are earlier
        deliveries by entry id (claimed entries).
        """
        try:
            async with contextlib.AsyncExitStack() as locks:
                for shard in sorted(batches, key=lambda s: s.shard):
                    await locks.enter_async_context(shard.lock)
                hints: list[str] = []
                parts: list[_Part] = []
                for shard, entries in batches.items():
                    if not shard.may_append():
                        continue  # not ours any more: the entries stay pending for the next owner
                    acks: list[bytes] = []
                    items = self._parse(shard, entries, tries, acks, hints)
                    parts.append(_Part(shard, items, acks))
                await self._run(parts, hints)
        except Exception:
            self.log.exception(
                "batch failed",
                shards=sorted(s.shard for s in batches),
                entries=sum(len(e) for e in batches.values()),
            )

    async def retry_due(self, shard: OwnedShard) -> None:
        """Run again, in order, the waiting commands of every table whose retry is due."""
        async with shard.lock:
            now = time.monotonic()
            items: list[Entry] = []
            for table_id in [t for t, at in shard.retry_at.items() if at <= now]:
                del shard.retry_at[table_id]
                items.extend(shard.backlog.pop(table_id, ()))
            if items:
                await self._run([_Part(shard, items)], [])

    async def _run(self, parts: list[_Part], hints: list[str]) -> None:
        """The parsed commands of every part, from triage to acknowledgement (every part's lock
        held)."""
        for part in parts:  # what waits, what is given up, what runs now
            part.run = await self._triage(part.shard, part.items, part.acks, hints)
        run = [e for part in parts for e in part.run]
        results = await self._decide(parts, run)  # appended, with their views
        views = view_hints(results)
        results = await self._write_lobby(run, results)
        dropped: list[list[bytes]] = []  # answered, deferred, or left to the next owner
        start = 0
        for part in parts:
            end = start + len(part.run)
            dropped.append(await self._answer(part, results[start:end], hints))
            start = end

        def release() -> None:  # the entries leave memory once their XACK is answered
            for part, gone in zip(parts, dropped, strict=True):
                part.shard.held.difference_update(part.acks)
                part.shard.held.difference_update(gone)

        acks = {p.shard.stream: p.acks for p in parts}
        await self.acks.send(acknowledge(self.client, self.channels, acks, hints, views), release)

    # -- parse --------------------------------------------------------------------------------
    def _parse(
        self,
        shard: OwnedShard,
        entries: Sequence[RawEntry],
        tries: Mapping[bytes, int] | None,
        acks: list[bytes],
        hints: list[str],
    ) -> list[Entry]:
        """The commands of the entries not held yet; malformed ones are acked and answered."""
        items: list[Entry] = []
        for entry_id, fields in entries:
            if entry_id in shard.held:
                continue
            parsed = parse_entry(entry_id, fields, shard.shard, self.keys)
            if isinstance(parsed, Malformed):
                acks.append(entry_id)
                hint = malformed(parsed, shard.log)
                if hint is not None:
                    hints.append(hint)
                continue
            parsed.tries = tries.get(entry_id, 0) if tries else 0
            items.append(parsed)
        shard.held.update(e.entry_id for e in items)
        return items

    # -- triage -------------------------------------------------------------------------------
    async def _triage(
        self, shard: OwnedShard, items: list[Entry], acks: list[bytes], hints: list[str]
    ) -> list[Entry]:
        """The commands to run now: the others wait behind their table's backlog or, past
        ``max_deliveries``, are given up (or deferred if even that fails)."""
        run: list[Entry] = []
        for entry in items:
            table_id = entry.command.table_id
            if table_id in shard.backlog:  # an earlier command of the table is waiting
                shard.backlog[table_id].append(entry)
            elif entry.tries >= self.max_deliveries:
                outcome = await self._give_up(shard, entry)
                if outcome is None:
                    self._defer(shard, entry)
                else:
                    acks.append(entry.entry_id)
                    await self._answered(entry, outcome, hints)
            else:
                run.append(entry)
        return run

    async def _give_up(self, shard: OwnedShard, entry: Entry) -> CommandResult | None:
        """Record ``command/failed`` under the command id (None if that failed too)."""
        result = {
            "ok": False,
            "code": Code.COMMAND_FAILED,
            "message": f"given up after {entry.tries} deliveries; {entry.error or 'no error'}",
        }
        try:
            return await self._record_failure(shard, entry, result)
        except Exception:
            shard.log.exception(
                "could not record a failed command", command_id=entry.command.command_id
            )
        return None

    async def _record_failure(
        self, shard: OwnedShard, entry: Entry, result: dict[str, Any]
    ) -> CommandResult | None:
        """Append ``result`` with no events under the command id, retrying version conflicts."""
        command = entry.command
        for _ in range(MAX_CONFLICT_RETRIES):
            if not shard.may_append():
                return None
            head = await self.store.head(command.table_id)
            try:
                appended = await self.store.append(
                    command.table_id,
                    head.version,
                    head.hash,
                    command_key(command.command_id, entry.seat),
                    (),
                    compact_json.dumps(result),
                )
            except VersionConflict:
                continue
            if appended.duplicate:
                first = json.loads(appended.result) if appended.result else {}
                return CommandResult(bool(first.get("ok")), first, True)
            shard.log.error(
                "command given up",
                table=command.table_id,
                command_id=command.command_id,
                seat=entry.seat,
                tries=entry.tries,
                error=entry.error,
            )
            return CommandResult(False, result)
        return None

    # -- decide and append --------------------------------------------------------------------
    async def _decide(self, parts: list[_Part], run: list[Entry]) -> list[BatchResult]:
        """Decide and append the commands together, each table's in order; a table whose
        shard's lease is not known to be ours any more is not appended (its result is None)."""
        if not run:
            return []
        owner = {e.command.table_id: part.shard for part in parts for e in part.run}
        return await self.service.execute_many(
            [(e.command, e.seat) for e in run],
            proceed=lambda table_id: owner[table_id].may_append(),
            on_append=APPEND_SECONDS.observe,
        )

    async def _write_lobby(
        self, run: Sequence[Entry], results: Sequence[BatchResult]
    ) -> list[BatchResult]:
        """Write the lobby rows the batch changed, before its acknowledgement; return the results
        to answer.  When the write fails, the commands of those tables are answered as failed:
        they are retried, come back as duplicates and write their rows again, and are
        acknowledged then."""
        rows = lobby_rows(self.service, run, results)
        if not rows:
            return list(results)
        try:
            await write_rows(self.client, self.keys, rows, self.service.clock())
        except Exception as exc:
            tables = {r.table_id for r in rows}
            self.log.warning(
                "lobby write failed, will retry", tables=sorted(tables), error=str(exc)
            )
            return [
                exc if isinstance(r, CommandResult) and e.command.table_id in tables else r
                for e, r in zip(run, results, strict=True)
            ]
        return list(results)

    # -- answer -------------------------------------------------------------------------------
    async def _answer(
        self, part: _Part, results: Sequence[BatchResult], hints: list[str]
    ) -> list[bytes]:
        """Answer the part's decided commands and defer its failed ones; return the ids dropped
        because the lease was lost (left pending for the next owner)."""
        shard = part.shard
        dropped: list[bytes] = []
        for entry, result in zip(part.run, results, strict=True):
            if isinstance(result, CommandResult):
                part.acks.append(entry.entry_id)
                await self._answered(entry, result, hints)
            elif result is None and not shard.may_append():
                dropped.append(entry.entry_id)  # lease lost: pending for the next owner
            else:
                if result is not None:
                    _failed(shard, entry, result)
                self._defer(shard, entry)
        return dropped

    async def _answered(self, entry: Entry, outcome: CommandResult, hints: list[str]) -> None:
        """Add the hint of a decided command, count and log it, call the after-append hook."""
        hints.append(answered(entry, outcome, self.command_log))
        if outcome.ok and not outcome.duplicate and outcome.table is not None:
            try:
                await self.after_append(outcome.table, outcome)
            except Exception:
                self.command_log.exception("after_append failed", table=entry.command.table_id)

    def _defer(self, shard: OwnedShard, entry: Entry) -> None:
        """Keep a command (and the later ones of its table) for a retry with backoff."""
        table_id = entry.command.table_id
        shard.backlog.setdefault(table_id, deque()).append(entry)
        if table_id not in shard.retry_at:
            delay = min(0.05 * 2 ** min(entry.tries, 10), self.retry_cap_s)
            shard.retry_at[table_id] = time.monotonic() + delay
            shard.wake.set()


def _failed(shard: OwnedShard, entry: Entry, error: BaseException) -> None:
    """Note an execution failure on the entry (an attempt unless transient) and log it."""
    entry.error = f"{type(error).__name__}: {error}"[:300]
    if not _transient(error):
        entry.tries += 1
    shard.log.warning(
        "command failed, will retry",
        table=entry.command.table_id,
        command_id=entry.command.command_id,
        tries=entry.tries,
        error=entry.error,
    )


def _transient(error: BaseException) -> bool:
    """Say whether a failure is the infrastructure's (retry without counting an attempt)."""
    if isinstance(error, TableError):
        return error.code == Code.TABLE_BUSY
    return isinstance(
        error,
        redis.exceptions.ConnectionError
        | redis.exceptions.TimeoutError
        | redis.exceptions.BusyLoadingError
        | OSError
        | TimeoutError,
    )


def lobby_rows(
    service: TableService, run: Sequence[Entry], results: Sequence[BatchResult]
) -> list[LobbyRow]:
    """The lobby rows the batch changed: of each table a lobby command or a match's end was
    accepted on, and of each table a duplicate came for (its row may be the one a crash kept
    from being written; the store keeps the newest), built from the tables as they now are."""
    tables: dict[str, LobbyRow] = {}
    for entry, outcome in zip(run, results, strict=True):
        if not isinstance(outcome, CommandResult) or not outcome.ok:
            continue
        table = outcome.table if not outcome.duplicate else service.cached(entry.command.table_id)
        if table is None or table.version < outcome.last_version:
            continue
        over = table.match is not None and table.match.over
        kind = entry.command.type
        if outcome.duplicate or kind in LOBBY_COMMANDS or (over and kind != "rematch"):
            tables[table.table_id] = lobby_row(table)
    return list(tables.values())
