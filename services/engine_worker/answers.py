"""How the engine worker answers its entries: each command's hint, count and log line, then the
batch's XACK and hints in one round trip, sent while the next batch is read (AcksInFlight)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from services.engine_worker.metrics import ACCEPTED, DUPLICATE, REJECTED
from services.engine_worker.reader import GROUP, Entry, Malformed
from services.store import compact_json
from services.store.keys import hint_dropped
from services.tables.results import BatchResult, CommandResult


@dataclass(frozen=True)
class HintChannels:
    """Where the hints go (``services.store.keys``: ``results_channel``, ``views_channel``), and
    the share of hint messages dropped on purpose (``Settings.drop_hints``, a fault for tests:
    every waiter must finish without hints)."""

    results: str
    views: str
    drop: float = 0.0

    def dropped(self) -> bool:
        """Say whether this hint message is dropped (true for about ``drop`` of them)."""
        return hint_dropped(self.drop)


def malformed(bad: Malformed, log: Any) -> str | None:
    """Count and log an entry that is not a command; return its hint when it has a command id."""
    REJECTED.inc()
    log.info(
        "malformed command entry",
        entry=bad.entry_id.decode("ascii", "replace"),
        table=bad.table_id,
        command_id=bad.command_id,
        code=bad.code,
        message=bad.message[:200],
    )
    if bad.command_id is None:
        return None
    result = {"ok": False, "code": bad.code, "message": bad.message}
    return compact_json.dumps(
        {"table_id": bad.table_id, "command_id": bad.command_id, "result": result}
    )


def answered(entry: Entry, outcome: CommandResult, log: Any) -> str:
    """Count and log a decided command; return its hint."""
    if outcome.duplicate:
        DUPLICATE.inc()
    elif outcome.ok:
        ACCEPTED.inc()
    else:
        REJECTED.inc()
    _log_outcome(log, entry, outcome)
    command = entry.command
    return compact_json.dumps(
        {
            "table_id": command.table_id,
            "command_id": command.command_id,
            "seat": entry.seat,
            "result": outcome.result,
        }
    )


def _log_outcome(log: Any, entry: Entry, outcome: CommandResult) -> None:
    """Log a rejection at info, an acceptance or a duplicate at debug."""
    command = entry.command
    if not outcome.ok and not outcome.duplicate:
        log.info(
            "command rejected",
            table=command.table_id,
            seat=entry.seat,
            command_id=command.command_id,
            type=command.type,
            version=outcome.table.version if outcome.table else None,
            code=outcome.code,
        )
    else:
        log.debug(
            "command duplicate" if outcome.duplicate else "command accepted",
            table=command.table_id,
            seat=entry.seat,
            command_id=command.command_id,
            type=command.type,
            version=outcome.last_version,
        )


def view_hints(results: Sequence[BatchResult]) -> list[str]:
    """The view hints of the views the batch's appends stored: ``<table_id> <version>``, the
    newest version of each table once."""
    newest: dict[str, int] = {}
    for outcome in results:
        if isinstance(outcome, CommandResult) and outcome.viewed and outcome.table is not None:
            newest[outcome.table.table_id] = outcome.last_version
    return [f"{table_id} {version}" for table_id, version in newest.items()]


async def acknowledge(
    client: Redis,
    channels: HintChannels,
    acks: Mapping[str, Sequence[bytes]],
    hints: Sequence[str],
    views: Sequence[str] = (),
) -> None:
    """XACK the answered entries of each stream, then publish their result hints (one message,
    a JSON object a line) and the hints of the views their appends stored (one message,
    ``<table_id> <version>`` a line): one round trip."""
    streams = {stream: ids for stream, ids in acks.items() if ids}
    if not streams and not hints and not views:
        return
    messages = [
        (channel, lines)
        for channel, lines in ((channels.results, hints), (channels.views, views))
        if lines and not channels.dropped()
    ]
    async with client.pipeline(transaction=False) as pipe:
        for stream, ids in streams.items():
            pipe.xack(stream, GROUP, *ids)
        if isinstance(client, RedisCluster):  # its pipelines refuse PUBLISH: beside it
            publish = (client.publish(c, "\n".join(lines)) for c, lines in messages)
            await asyncio.gather(pipe.execute(), *publish)
            return
        for channel, lines in messages:
            pipe.publish(channel, "\n".join(lines))
        await pipe.execute()


class AcksInFlight:
    """Acknowledgements on their way while the worker reads its next batch.

    A batch's XACK and hints are the last round trip of the batch, and nothing after it waits
    for their answer: the next XREADGROUP asks for new entries (``>``), whatever the XACK.  So
    :meth:`send` starts the acknowledgement in a task of its own and returns; the reader's next
    read goes out at once instead of a round trip later.  Nothing is acknowledged any earlier
    (the appends of the batch have been answered), and the entries stay held in memory
    (``ShardRunner.held``, which claims skip) until their XACK is answered: ``after`` runs then.
    A failed acknowledgement is logged and leaves its entries pending, to be claimed and
    answered as duplicates, as before.  ``send`` first waits for the acknowledgements still in
    flight (at most one a batch in hand), and :meth:`drain` waits for all of them: a shard is
    given up, and the worker disconnects, only after its acknowledgements are answered.
    """

    def __init__(self, log: Any) -> None:
        self.log = log
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, ack: Coroutine[Any, Any, None], after: Callable[[], None]) -> None:
        """Start ``ack`` (after those in flight are answered); ``after`` runs when it ends."""
        try:
            await self.drain()
        except BaseException:
            ack.close()
            after()
            raise
        task = asyncio.create_task(self._run(ack, after), name="acknowledge")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, ack: Coroutine[Any, Any, None], after: Callable[[], None]) -> None:
        try:
            await ack
        except Exception:
            self.log.exception("acknowledgement failed; its entries stay pending")
        finally:
            after()

    async def drain(self) -> None:
        """Wait until every acknowledgement sent so far is answered (or has failed)."""
        while self._tasks:
            await asyncio.gather(*self._tasks)

    @property
    def in_flight(self) -> int:
        """Acknowledgements not answered yet."""
        return len(self._tasks)
