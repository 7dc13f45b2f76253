"""Commands in, events out: load a table (cached), decide, and append the events with the
table's stored view parts in one atomic store call; one command (``execute``) or many over
many tables in rounds of few round trips (``execute_many``): ``docs/services.md`` ("Module
notes").
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from typing import Any

from engine.codes import Code
from events.commands import Command
from events.domain import DealStarted, MatchEnded, TableCreated, TableEvent
from events.fairness import new_seed
from events.mapping import rejection
from services.log import get_logger
from services.lru import Lru
from services.store import compact_json
from services.store.base import AppendRequest, AppendResult, EventStore, VersionConflict
from services.store.keys import command_key, other_command_keys
from services.tables.decide import (
    DECISION_ERRORS,
    Decision,
    Sources,
    TableError,
    TokenHasher,
    decide,
    draw_dealer,
)
from services.tables.results import BatchItem, BatchResult, CommandResult, Plan
from services.tables.stored_parts import parts_of
from services.tables.table import Table, fold_table

MAX_CONFLICT_RETRIES = 5

_log = get_logger("table_service")


TURN_SECONDS = 0.02
"""The longest stretch of deciding in ``execute_many`` before it gives the event loop a turn:
a round over thousands of tables is seconds of CPU on a busy machine, and the engine worker's
lease renewals run on the same loop (``docs/performance.md``, "Leases lost under load")."""

SEALS_IN_FLIGHT = 4
"""Seals a table service runs at once.  A batch can end hundreds of tables (a flood of 10,000
tables ended 774 on one step); one connection a seal took the client's whole pool (redis-py's
100), and the worker's appends and acknowledgements failed with it (docs/performance.md,
"Lost hints")."""

ID_TAKEN = compact_json.dumps(
    {
        "ok": False,
        "code": Code.COMMAND_ID_TAKEN,
        "message": "another seat used this command id at this table: "
        "send the command with an id of your own",
    }
)
"""The result the store records for a command whose id another seat (or a create or join) used
at the table (``services.store.keys.other_command_keys``)."""


class TableService:
    """Executes wire commands against tables in an event store, with a cache of folded tables."""

    def __init__(
        self,
        store: EventStore,
        *,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
        seed_source: Callable[[], bytes] = new_seed,
        dealer_source: Callable[[], int] = draw_dealer,
        token_hasher: TokenHasher | None = None,
        cache_size: int = 20_000,
        insecure_deal_key: bytes | None = None,
        store_views: bool = True,
    ) -> None:
        self.store = store
        self.store_views = store_views and store.keeps_views
        """Build each append's views for the store to keep with it (``views_after``): on for a
        store that keeps views, unless turned off (the projector then folds every table)."""
        self.clock = clock
        self.sources = Sources(seed_source, dealer_source, insecure_deal_key, token_hasher)
        self._cache: Lru[str, Table] = Lru(cache_size)
        self._sealing: set[asyncio.Task[None]] = set()
        self._seal_slots = asyncio.Semaphore(SEALS_IN_FLIGHT)

    # --- loading -------------------------------------------------------------------------------

    async def load(self, table_id: str, *, fresh: bool = False) -> Table:
        """Return the table at its latest version: the cached fold brought up to date.

        A table the store has no event of (a ``create_table`` about to be decided) costs the
        head alone: with no event there is no stream to read and no secret, since the append
        that writes a table's first events writes its first secrets too.
        """
        table = (await self.load_many([table_id], fresh=fresh))[table_id]
        if isinstance(table, Exception):
            raise table
        return table

    async def load_many(
        self, table_ids: Sequence[str], *, fresh: bool = False
    ) -> dict[str, Table | Exception]:
        """Return each table at its latest version, as :meth:`load` would, in three pipelined
        calls for them all (heads; then the events the cache lacks, and the secrets, of the
        tables that moved) instead of three round trips a table.

        A table whose events do not fold gets its exception in its place; a store error
        raises.  ``fresh`` folds every table from its first event, whatever the cache holds.
        """
        tables = list(dict.fromkeys(table_ids))
        heads = await self.store.heads(tables)
        out: dict[str, Table | Exception] = {}
        behind: dict[str, Table | None] = {}  # table id -> the cached fold to go on from
        for table_id, head in zip(tables, heads, strict=True):
            cached = None if fresh else self._cache.get(table_id)
            if cached is not None and cached.version == head.version and cached.hash == head.hash:
                out[table_id] = cached
            elif head.version == 0:
                out[table_id] = Table(table_id)
            else:
                older = cached is not None and cached.version < head.version
                behind[table_id] = cached if older else None
        if behind:
            after = {t: 0 if start is None else start.version for t, start in behind.items()}
            stored, secrets = await asyncio.gather(
                self.store.read_many(list(behind), after=after),
                self.store.secrets_many(list(behind), tokens=False),
            )
            for table_id, start in behind.items():
                try:
                    out[table_id] = fold_table(
                        table_id,
                        ((e.version, e.hash, e.body) for e in stored[table_id]),
                        secrets[table_id],
                        start,
                    )
                except Exception as exc:  # reported per table: the others fold
                    out[table_id] = exc
        for table in out.values():
            if isinstance(table, Table):
                self._remember(table)
        return {t: out[t] for t in tables}

    def cached(self, table_id: str) -> Table | None:
        """Return the cached table, if any (the engine worker trusts it while it owns the shard)."""
        return self._cache.get(table_id)

    def _remember(self, table: Table) -> None:
        self._cache.remember(table.table_id, table)

    def forget(self, which: Callable[[str], bool]) -> int:
        """Drop the cached tables whose id ``which`` picks; return how many.  An engine worker
        taking a shard forgets the shard's tables: another worker may have appended to them
        since they were cached, and a stale table costs its first command a conflict."""
        stale = [table_id for table_id in self._cache if which(table_id)]
        for table_id in stale:
            del self._cache[table_id]
        return len(stale)

    # --- executing -----------------------------------------------------------------------------

    async def execute(self, command: Command, seat: int | None) -> CommandResult:
        """Apply a command sent by ``seat`` (None for table-level commands such as create/join).

        Retries on a version conflict with the table reloaded; a command id seen before on the
        table returns the first result and appends nothing.
        """
        table = self._cache.get(command.table_id) or await self.load(command.table_id)
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                return await self._attempt(table, command, seat)
            except VersionConflict:
                table = await self.load(command.table_id, fresh=True)
        raise _busy(command.table_id)

    async def execute_many(
        self,
        items: Sequence[BatchItem],
        *,
        proceed: Callable[[str], bool] = lambda table_id: True,
        on_append: Callable[[float], None] | None = None,
    ) -> list[BatchResult]:
        """Execute ``items``, each getting exactly the result :meth:`execute` would give it;
        commands of a table run in input order, one a round, tables side by side.

        Tables not in the cache are loaded at the start of a round, together (:meth:`load_many`).
        ``proceed(table_id)`` is asked for every table before each round: when it says no, the
        rest of that table is left unattempted (the engine worker stops a shard's tables when it
        loses the shard's lease, and goes on with the others).  ``on_append`` gets the duration
        in seconds of each round's pipelined append (for a histogram).
        """
        results: list[BatchResult] = [None] * len(items)
        queues: dict[str, deque[int]] = defaultdict(deque)
        for index, (command, _) in enumerate(items):
            queues[command.table_id].append(index)
        conflicts: dict[int, int] = {}  # version conflicts so far, by command index
        while queues:
            for table_id in [t for t in queues if not proceed(t)]:
                del queues[table_id]
            if not queues:
                break
            heads = [(table_id, queue.popleft()) for table_id, queue in queues.items()]
            for table_id, _ in heads:
                if not queues[table_id]:
                    del queues[table_id]
            plans = await self._plan_round(items, heads, results, queues)
            if plans:
                await self._append_round(plans, results, queues, conflicts, on_append)
        return results

    async def _plan_round(
        self,
        items: Sequence[BatchItem],
        heads: list[tuple[str, int]],
        results: list[BatchResult],
        queues: dict[str, deque[int]],
    ) -> list[tuple[int, Plan]]:
        """Plan the round's command of each table (index of the command, its plan); a table
        whose load or decision raised gets the exception and stops there."""
        missing = [t for t, _ in heads if self.cached(t) is None]
        loaded: dict[str, Table | Exception] = {}
        if missing:
            try:
                loaded = await self.load_many(missing)
            except Exception as exc:  # the store failed: every table to load gets it
                loaded = dict.fromkeys(missing, exc)
        plans: list[tuple[int, Plan]] = []
        now = self.clock()
        turn_at = time.perf_counter() + TURN_SECONDS
        for table_id, index in heads:
            if time.perf_counter() >= turn_at:  # the loop's other tasks (lease ticks) go on
                await asyncio.sleep(0)
                turn_at = time.perf_counter() + TURN_SECONDS
            try:
                table = loaded.get(table_id) or self.cached(table_id)
                if isinstance(table, BaseException):
                    raise table
                if table is None:  # evicted from a full cache meanwhile
                    table = await self.load(table_id)
                plans.append((index, self.plan(table, *items[index], now)))
            except Exception as exc:  # reported per command, table stops here
                results[index] = exc
                queues.pop(table_id, None)
        return plans

    async def _append_round(
        self,
        plans: list[tuple[int, Plan]],
        results: list[BatchResult],
        queues: dict[str, deque[int]],
        conflicts: dict[int, int],
        on_append: Callable[[float], None] | None,
    ) -> None:
        """Append the round's plans in one pipelined call and finish each.  A version conflict
        (another writer appended to the table since it was cached) forgets the cached table
        and puts the command back at the head of its table's queue: the next round loads the
        table with the others missing from the cache, and decides again; after
        :data:`MAX_CONFLICT_RETRIES` conflicts the command fails ``table/busy``, as in
        :meth:`execute`."""
        started = time.perf_counter()
        try:
            replies = await self.store.append_many([plan.request for _, plan in plans])
        except Exception as exc:  # e.g. Redis unreachable: the round failed
            for index, plan in plans:
                results[index] = exc
                queues.pop(plan.table.table_id, None)
            return
        finally:
            if on_append is not None:
                on_append(time.perf_counter() - started)
        for (index, plan), reply in zip(plans, replies, strict=True):
            table_id = plan.table.table_id
            try:
                if isinstance(reply, VersionConflict):
                    self._cache.pop(table_id, None)
                    conflicts[index] = conflicts.get(index, 0) + 1
                    if conflicts[index] >= MAX_CONFLICT_RETRIES:
                        raise _busy(table_id)
                    queues[table_id].appendleft(index)
                else:
                    results[index] = self.finish(plan, reply)
            except Exception as exc:  # reported per command, table stops here
                results[index] = exc
                queues.pop(table_id, None)

    async def _attempt(self, table: Table, command: Command, seat: int | None) -> CommandResult:
        plan = self.plan(table, command, seat, self.clock())
        return self.finish(plan, await self.store.append_request(plan.request))

    def decide(self, table: Table, command: Command, seat: int | None) -> Decision:
        """Return what a command does to a table (``services.tables.decide.decide``)."""
        return decide(table, command, seat, self.sources)

    def plan(self, table: Table, command: Command, seat: int | None, now: int) -> Plan:
        """Decide ``command`` on ``table`` (events timed ``now``): the append of its events,
        with the table's views when the store keeps them, or of its rejection.

        ``execute`` and ``execute_many`` both append what this plans.
        """
        key = command_key(command.command_id, seat)
        taken = other_command_keys(command.command_id, seat)
        try:
            decision = self.decide(table, command, seat)
        except DECISION_ERRORS as error:
            rejected = rejection(command.command_id, error)
            result = {"ok": False, "code": rejected.code, "message": rejected.message}
            request = AppendRequest(
                table.table_id,
                table.version,
                table.hash,
                key,
                (),
                compact_json.dumps(result),
                taken_by=taken,
                taken_result=ID_TAKEN,
            )
            return Plan(table, command, seat, request, result, None)
        result = {"ok": True, **decision.result}
        following = table.next(decision.events, decision.match, decision.secrets)
        request = AppendRequest(
            table.table_id,
            table.version,
            table.hash,
            key,
            [_body(e, command.command_id, now) for e in decision.events],
            compact_json.dumps(result),
            decision.secrets or None,
            _status(table, decision.events),
            self.views_after(following, now) if decision.events else None,
            taken,
            ID_TAKEN,
        )
        return Plan(table, command, seat, request, result, following)

    def finish(self, plan: Plan, appended: AppendResult) -> CommandResult:
        """The result of a planned append, with the table cached at its new version (the
        first result when the command id was seen before); a table whose match it ended is
        sealed (:meth:`seal_soon`)."""
        if appended.duplicate:
            return _replayed(appended)
        if appended.refused:  # the command id is another seat's
            return CommandResult(False, json.loads(appended.result), table=plan.table)
        if plan.following is None:
            return CommandResult(False, plan.result, table=plan.table)
        new = plan.following.stored_as(appended.last_version, appended.last_hash)
        self._remember(new)
        if plan.request.status == "over":  # the table's last event: give memory back
            self.seal_soon(new.table_id)
        return CommandResult(
            True,
            plan.result,
            False,
            appended.first_version,
            appended.last_version,
            new,
            plan.request.views is not None,
        )

    def views_after(self, following: Table, now: int) -> dict[str, str] | None:
        """Return the stored view parts of ``following`` (a decided command's table, its events
        timed ``now``) for the append to store with the events, or None when the store keeps
        no views or they cannot be built (the projector then builds them from the feed).

        Built by ``stored_parts.parts_of``, as the projector builds them: so a view is current
        when the command's answer is, and the projector, finding it current, skips the table.
        """
        if not self.store_views:
            return None
        try:
            return parts_of(following, now)
        except Exception:  # views are derived data: never a reason to refuse a command
            _log.exception("views not built", table=following.table_id, version=following.version)
            return None

    def seal_soon(self, table_id: str) -> None:
        """Give back the memory a finished table's stream keeps for more appends
        (``EventStore.seal``, after its last event), in a task of its own: nothing waits for it
        (no command comes after a table's last event), so a command or a batch does not wait a
        round trip for it.  At most :data:`SEALS_IN_FLIGHT` seals hold a connection at once; the
        others wait their turn.  A failure is logged: the table is whole either way."""
        task = asyncio.create_task(self._seal(table_id), name="seal")
        self._sealing.add(task)
        task.add_done_callback(self._sealing.discard)

    async def _seal(self, table_id: str) -> None:
        async with self._seal_slots:
            try:
                await self.store.seal(table_id)
            except Exception:
                _log.exception("seal failed", table=table_id)

    async def sealed(self) -> None:
        """Wait until the seals started by :meth:`seal_soon` are done."""
        while self._sealing:
            await asyncio.gather(*self._sealing)


def _busy(table_id: str) -> TableError:
    """The error of a command whose table kept moving under it (:data:`MAX_CONFLICT_RETRIES`)."""
    return TableError(Code.TABLE_BUSY, f"table {table_id}: too many concurrent writers")


def _body(event: TableEvent, command_id: str, now: int) -> dict[str, Any]:
    """Return the stored body of a new event: payload, command id and time (events/envelope.py)."""
    body: dict[str, Any] = event.model_dump(mode="json")
    body["command_id"] = command_id
    body["time"] = now
    return body


def _status(table: Table, events: list[TableEvent]) -> str | None:
    for event in reversed(events):
        if isinstance(event, MatchEnded):
            return "over"
        if isinstance(event, TableCreated):
            return "open"
        if isinstance(event, DealStarted):
            return "playing"
    return None


def _replayed(appended: AppendResult) -> CommandResult:
    result: dict[str, Any] = json.loads(appended.result) if appended.result else {}
    return CommandResult(
        bool(result.get("ok")), result, True, appended.first_version, appended.last_version
    )
