"""A batch of command entries from one or more owned shards: decided and acknowledged together.

One ``execute_many`` call and one acknowledgement pipeline carry every shard's commands of the
moment, while each shard keeps its lock, lease check and backlog (``docs/services.md``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.engine_worker.answers import acknowledge
from services.engine_worker.entries import _Entry, _RawEntry
from services.engine_worker.metrics import APPEND_SECONDS
from services.lobby import LobbyRow, lobby_row, write_rows
from services.table_batch import BatchResult, execute_many
from services.table_service import Outcome, TableService

if TYPE_CHECKING:
    from services.engine_worker.runner import ShardRunner
    from services.engine_worker.worker import EngineWorker


@dataclass
class ShardPart:
    """One shard's share of a batch: the commands to decide, and its entries to acknowledge."""

    runner: ShardRunner
    items: list[_Entry]
    acks: list[bytes] = field(default_factory=list)
    run: list[_Entry] = field(default_factory=list)


async def process_batches(
    worker: EngineWorker,
    batches: Mapping[ShardRunner, Sequence[_RawEntry]],
    tries: Mapping[bytes, int] | None = None,
) -> None:
    """Decide, append, acknowledge and publish the entries of each shard (never raises).

    The shards' locks are taken in shard order; a shard whose lease is not known to be ours is
    left out (its entries stay pending for the next owner).  ``tries`` are earlier deliveries
    by entry id (claimed entries).
    """
    try:
        async with contextlib.AsyncExitStack() as locks:
            for runner in sorted(batches, key=lambda r: r.shard):
                await locks.enter_async_context(runner.lock)
            hints: list[str] = []
            parts: list[ShardPart] = []
            for runner, entries in batches.items():
                if not runner.may_append():
                    continue  # not ours any more: the entries stay pending for the next owner
                acks: list[bytes] = []
                parts.append(ShardPart(runner, runner.parse(entries, tries, acks, hints), acks))
            await execute_parts(worker, parts, hints)
    except Exception:
        worker.log.exception(
            "batch failed",
            shards=sorted(r.shard for r in batches),
            entries=sum(len(e) for e in batches.values()),
        )


async def execute_parts(worker: EngineWorker, parts: list[ShardPart], hints: list[str]) -> None:
    """Decide the parts' commands together, answer them, acknowledge them in one round trip
    (called with every part's lock held)."""
    for part in parts:
        part.run = await part.runner.triage(part.items, part.acks, hints)
    owner = {e.command.table_id: part.runner for part in parts for e in part.run}
    run = [e for part in parts for e in part.run]
    results: list[BatchResult] = []
    if run:
        results = await execute_many(
            worker.service,
            [(e.command, e.seat) for e in run],
            proceed=lambda table_id: owner[table_id].may_append(),
            on_append=APPEND_SECONDS.observe,
        )
    views = view_hints(results)
    results = await write_lobby(worker, run, results)
    dropped: list[list[bytes]] = []
    start = 0
    for part in parts:
        end = start + len(part.run)
        dropped.append(await part.runner.settle(part.run, results[start:end], part.acks, hints))
        start = end

    def release() -> None:  # the entries leave memory once their XACK is answered
        for part, gone in zip(parts, dropped, strict=True):
            part.runner.held.difference_update(part.acks)
            part.runner.held.difference_update(gone)

    await worker.acks.send(
        acknowledge(worker, {p.runner.stream: p.acks for p in parts}, hints, views), release
    )


def view_hints(results: Sequence[BatchResult]) -> list[str]:
    """The view hints of the views the batch's appends stored: ``<table_id> <version>``, the
    newest version of each table once."""
    newest: dict[str, int] = {}
    for outcome in results:
        if isinstance(outcome, Outcome) and outcome.viewed and outcome.table is not None:
            newest[outcome.table.table_id] = outcome.last_version
    return [f"{table_id} {version}" for table_id, version in newest.items()]


LOBBY_COMMANDS = frozenset({"create_table", "join", "leave_table"})
"""Commands whose acceptance changes a table's lobby row; any command that ends a match does
too (the table leaves the lobby)."""


def lobby_rows(
    service: TableService, run: Sequence[_Entry], results: Sequence[BatchResult]
) -> list[LobbyRow]:
    """The lobby rows the batch changed: of each table a lobby command or a match's end was
    accepted on, and of each table a duplicate came for (its row may be the one a crash kept
    from being written; the store keeps the newest), built from the tables as they now are."""
    tables: dict[str, LobbyRow] = {}
    for entry, outcome in zip(run, results, strict=True):
        if not isinstance(outcome, Outcome) or not outcome.ok:
            continue
        table = outcome.table if not outcome.duplicate else service.cached(entry.command.table_id)
        if table is None or table.version < outcome.last_version:
            continue
        over = table.match is not None and table.match.over
        kind = entry.command.type
        if outcome.duplicate or kind in LOBBY_COMMANDS or (over and kind != "rematch"):
            tables[table.table_id] = lobby_row(table)
    return list(tables.values())


async def write_lobby(
    worker: EngineWorker, run: Sequence[_Entry], results: Sequence[BatchResult]
) -> list[BatchResult]:
    """Write the lobby rows the batch changed, before its acknowledgement; return the results
    to settle.  When the write fails, the commands of those tables settle as failed: they are
    retried, come back as duplicates and write their rows again, and are acknowledged then."""
    rows = lobby_rows(worker.service, run, results)
    if not rows:
        return list(results)
    try:
        await write_rows(worker.client, worker.settings.keys, rows, worker.service.clock())
    except Exception as exc:
        tables = {r.table_id for r in rows}
        worker.log.warning("lobby write failed, will retry", tables=sorted(tables), error=str(exc))
        return [
            exc if isinstance(r, Outcome) and e.command.table_id in tables else r
            for e, r in zip(run, results, strict=True)
        ]
    return list(results)
