"""Many commands, many tables, few round trips: ``execute_many`` beside ``TableService.execute``.

Each command gets exactly the result ``execute`` would give it; rounds and the answer's shape
are in ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import defaultdict, deque
from collections.abc import Callable, Sequence

from events.commands import Command
from services.store.base import VersionConflict
from services.tables.service import CommandResult, Plan, TableService
from services.tables.table import Table

__all__ = ["BatchItem", "BatchResult", "execute_many"]

BatchItem = tuple[Command, int | None]
"""A command and the seat that sent it (None for table-level commands)."""

BatchResult = CommandResult | BaseException | None
"""What ``execute_many`` answers for one command (see the module docstring)."""


LOAD_CONCURRENCY = 4
"""Tables one service folds from the store at once (each load is three round trips)."""

_load_slots: weakref.WeakKeyDictionary[TableService, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


async def _load(service: TableService, table_id: str) -> Table:
    """Fold a table, at most :data:`LOAD_CONCURRENCY` at once per service (all shards of an
    engine worker share its connection pool)."""
    slots = _load_slots.get(service)
    if slots is None:
        slots = _load_slots[service] = asyncio.Semaphore(LOAD_CONCURRENCY)
    async with slots:
        return await service.load(table_id)


async def execute_many(
    service: TableService,
    items: Sequence[BatchItem],
    *,
    proceed: Callable[[str], bool] = lambda table_id: True,
    on_append: Callable[[float], None] | None = None,
) -> list[BatchResult]:
    """Execute ``items`` (see the module docstring); commands of a table run in input order.

    Tables not in the service's cache are loaded at the start of a round, a few at a time.
    ``proceed(table_id)`` is asked for every table before each round: when it says no, the rest
    of that table is left unattempted (the engine worker stops a shard's tables when it loses
    the shard's lease, and goes on with the others).  ``on_append`` gets the duration
    in seconds of each round's pipelined append (for a histogram).
    """
    results: list[BatchResult] = [None] * len(items)
    queues: dict[str, deque[int]] = defaultdict(deque)
    for index, (command, _) in enumerate(items):
        queues[command.table_id].append(index)
    store = service.store
    while queues:
        for table_id in [t for t in queues if not proceed(t)]:
            del queues[table_id]
        if not queues:
            break
        heads = [(table_id, queue.popleft()) for table_id, queue in queues.items()]
        for table_id, _ in heads:
            if not queues[table_id]:
                del queues[table_id]
        missing = [t for t, _ in heads if service.cached(t) is None]
        loaded = dict(
            zip(
                missing,
                await asyncio.gather(*(_load(service, t) for t in missing), return_exceptions=True),
                strict=True,
            )
        )
        plans: list[tuple[int, Plan]] = []  # (index of the command, its plan)
        now = service.clock()
        for table_id, index in heads:
            try:
                table = service.cached(table_id) or loaded.get(table_id)
                if isinstance(table, BaseException):
                    raise table
                if table is None:  # evicted from a full cache meanwhile
                    table = await service.load(table_id)
                plans.append((index, service.plan(table, *items[index], now)))
            except Exception as exc:  # reported per command, table stops here
                results[index] = exc
                queues.pop(table_id, None)
        if not plans:
            continue
        started = time.perf_counter()
        try:
            replies = await store.append_many([plan.request for _, plan in plans])
        except Exception as exc:  # e.g. Redis unreachable: the round failed
            for index, plan in plans:
                results[index] = exc
                queues.pop(plan.table.table_id, None)
            continue
        finally:
            if on_append is not None:
                on_append(time.perf_counter() - started)
        for (index, plan), reply in zip(plans, replies, strict=True):
            try:
                if isinstance(reply, VersionConflict):
                    results[index] = await service.execute(plan.command, plan.seat)
                else:
                    results[index] = service.finish(plan, reply)
            except Exception as exc:  # reported per command, table stops here
                results[index] = exc
                queues.pop(plan.table.table_id, None)
    return results
