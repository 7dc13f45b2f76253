"""How the engine worker answers its entries: hints, metrics, logs, the give-up record, the XACK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from services import compact_json
from services.engine_worker.entries import _Entry, _Malformed
from services.engine_worker.metrics import _ACCEPTED, _DUPLICATE, _REJECTED
from services.engine_worker.streams import GROUP
from services.hint_channels import hint_dropped
from services.store.base import VersionConflict
from services.store.keys import command_key
from services.table_service import MAX_CONFLICT_RETRIES, Outcome

if TYPE_CHECKING:
    from services.engine_worker.runner import ShardRunner
    from services.engine_worker.worker import EngineWorker


# -- poison -----------------------------------------------------------------------------------
async def give_up(runner: ShardRunner, entry: _Entry) -> Outcome | None:
    """Record ``command/failed`` under the command id (None if that failed too)."""
    result = {
        "ok": False,
        "code": "command/failed",
        "message": f"given up after {entry.tries} deliveries; {entry.error or 'no error'}",
    }
    try:
        return await _record_failure(runner, entry, result)
    except Exception:
        runner.log.exception(
            "could not record a failed command", command_id=entry.command.command_id
        )
    return None


async def _record_failure(
    runner: ShardRunner, entry: _Entry, result: dict[str, Any]
) -> Outcome | None:
    """Append ``result`` with no events under the command id, retrying version conflicts."""
    command = entry.command
    store = runner.worker.store
    for _ in range(MAX_CONFLICT_RETRIES):
        if not runner.may_append():
            return None
        head = await store.head(command.table_id)
        try:
            appended = await store.append(
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
            return Outcome(bool(first.get("ok")), first, True)
        runner.log.error(
            "command given up",
            table=command.table_id,
            command_id=command.command_id,
            seat=entry.seat,
            tries=entry.tries,
            error=entry.error,
        )
        return Outcome(False, result)
    return None


# -- answers ----------------------------------------------------------------------------------
def malformed(runner: ShardRunner, bad: _Malformed, hints: list[str]) -> None:
    """Count and log an entry that is not a command; add its hint when it has a command id."""
    _REJECTED.inc()
    runner.log.info(
        "malformed command entry",
        entry=bad.entry_id.decode("ascii", "replace"),
        table=bad.table_id,
        command_id=bad.command_id,
        code=bad.code,
        message=bad.message[:200],
    )
    if bad.command_id is not None:
        result = {"ok": False, "code": bad.code, "message": bad.message}
        hints.append(
            compact_json.dumps(
                {"table_id": bad.table_id, "command_id": bad.command_id, "result": result}
            )
        )


async def answered(runner: ShardRunner, entry: _Entry, outcome: Outcome, hints: list[str]) -> None:
    """Add the hint of a decided command, count and log it, call the after-append hook."""
    command = entry.command
    hints.append(
        compact_json.dumps(
            {
                "table_id": command.table_id,
                "command_id": command.command_id,
                "seat": entry.seat,
                "result": outcome.result,
            }
        )
    )
    if outcome.duplicate:
        _DUPLICATE.inc()
    elif outcome.ok:
        _ACCEPTED.inc()
    else:
        _REJECTED.inc()
    log = runner.worker.command_log
    _log_outcome(log, entry, outcome)
    if outcome.ok and not outcome.duplicate and outcome.table is not None:
        try:
            await runner.worker.after_append(outcome.table, outcome)
        except Exception:
            log.exception("after_append failed", table=command.table_id)


def _log_outcome(log: Any, entry: _Entry, outcome: Outcome) -> None:
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


async def acknowledge(
    worker: EngineWorker,
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
    drop = worker.settings.drop_hints  # a fault for tests
    messages = [
        (channel, lines)
        for channel, lines in ((worker.results_channel, hints), (worker.views_channel, views))
        if lines and not hint_dropped(drop)
    ]
    async with worker.client.pipeline(transaction=False) as pipe:
        for stream, ids in streams.items():
            pipe.xack(stream, GROUP, *ids)
        if isinstance(worker.client, RedisCluster):  # its pipelines refuse PUBLISH: beside it
            publish = (worker.client.publish(c, "\n".join(lines)) for c, lines in messages)
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
