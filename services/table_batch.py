"""Many commands, many tables, few round trips: ``execute_many`` beside ``TableService.execute``.

The engine worker reads commands in batches.  Commands of one table must run in stream order,
one after the other (each decides on the state the one before left); commands of different
tables are independent.  ``execute_many`` therefore runs in *rounds*: round ``k`` takes the
``k``-th command of every table in the batch, decides each one on its table (cached, else
folded from the store), and appends them all with ``EventStore.append_many`` (one pipelined
round trip on Redis, each append still its own atomic Lua call).  A batch of commands for ``n``
different tables costs about one round trip instead of ``n``.  Each command is planned and its
append's outcome taken as ``execute`` does it (``TableService.plan`` and ``finish``).

Each command gets exactly the outcome ``TableService.execute`` would give it: the same events,
result, secrets and status, the same rejection recorded under the command id, the same answer
for a command id seen before, and a version conflict (another writer moved the table) is
settled by ``TableService.execute`` itself, which reloads the table and decides again.

The answer is one entry per command, in input order:

``Outcome``
    the command was decided (accepted, rejected and recorded, or a duplicate);
``BaseException``
    something unexpected failed for this command (the store was unreachable, a bug); nothing
    after it on the same table was attempted;
``None``
    not attempted: an earlier command of its table failed, or ``proceed`` said stop for it.

An unattempted or failed command may be retried later: a command id already applied returns the
first outcome, so a retry never applies anything twice.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections import defaultdict, deque
from collections.abc import Callable, Sequence

from events import commands as wc
from services.store.base import VersionConflict
from services.table import Table
from services.table_service import Outcome, Plan, TableService

__all__ = ["BatchItem", "BatchResult", "execute_many"]

BatchItem = tuple[wc.Command, int | None]
"""A command and the seat that sent it (None for table-level commands)."""

BatchResult = Outcome | BaseException | None
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
