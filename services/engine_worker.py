"""The engine worker: command streams in, decided and appended events out, one owner per shard.

``python -m services.engine_worker`` (settings from the environment, ``services.settings``) or
``await run_worker(settings, stop)``.  What it does, for every shard it owns:

1. reads the shard's command stream ``<ns>:{sNN}:cmd`` in the consumer group ``engine`` (as
   consumer ``settings.worker_id``), up to ``batch_size`` entries per XREADGROUP;
2. parses each entry (``docs/services.md``: fields ``c`` command JSON, ``s`` seat, ``r``
   received ms); what does not parse is acknowledged at once and its rejection published;
3. decides the batch with :func:`services.table_batch.execute_many`: commands of one table in
   stream order, one after the other; different tables appended together, one pipelined round
   trip per round (each append is the store's atomic Lua call with the command id, so a
   redelivered or retried command is applied once and gets its first result);
4. XACKs the batch, then PUBLISHes a hint per command on ``<ns>:results`` (one round trip).

**Ownership.**  A shard is decided for by the holder of its lease (:mod:`services.shard_leases`):
``SET NX PX lease_ms``, renewed every ``lease_ms / 3`` by compare-and-renew, released on a clean
stop.  Each worker heartbeats in ``<ns>:workers`` and holds at most ``ceil(shards / live
workers)`` shards: it takes free shards (released, or orphaned when a dead owner's lease
expired) up to that share and releases the excess, so adding worker processes adds capacity.
A worker appends for a shard only while it *knows* it holds the lease (the local deadline of the
last renewal); on lease loss it stops consuming that shard at once, leaving what it has not
appended pending for the next owner.  Two workers can still overlap for a moment (a paused
process that has not noticed its lease expired): the store makes that harmless, because an
append checks the command id, then the expected version and head hash, in one Lua call.

**Crash safety.**  Nothing is acknowledged before it is appended.  When a worker takes a shard it
first claims *every* pending entry of the group (XAUTOCLAIM, min idle 0: only the lease holder
consumes a shard, so whatever is pending belongs to a previous owner that died or gave up) and
processes them, in stream order, before it reads new entries.  A SIGKILLed worker's in-flight
commands are thus applied exactly once: those it had appended come back as duplicates with their
first result; the others are decided now.  While it owns a shard, a worker also sweeps entries
idle for ``claim_idle_ms`` (XAUTOCLAIM) that it does not hold in memory, a safety net for
entries read by a consumer that stopped between reading and processing.

**Bad input** (``docs/services.md``): an entry that does not parse (bad JSON, unknown type, too
large, missing fields, a seat that is not ``0``/``1``/empty, a table of another shard) is
acknowledged, never recorded (there is no trustworthy command id to record it under), and its
rejection is published when a command id can be read.  A command that parses but is refused
(illegal move, wrong seat, stale version, no such table) is recorded under its id by the table
service and changes nothing else.

**Failures and poison.**  A command whose execution raises unexpectedly stays pending; it and
the commands after it on the same table wait in memory (order kept) and are retried with a
backoff.  Redis being unreachable does not count as an attempt; anything else does, and so does
each earlier delivery (XPENDING's delivery count of a claimed entry, which grows when a poison
command kills the workers that read it): after :data:`MAX_DELIVERIES` the command is
acknowledged with a ``command/failed`` rejection recorded under its id, so a poison command never
blocks its shard.

**FastStream.**  The process is a ``FastStream`` app around a ``RedisBroker`` (start, stop,
logging).  Each owned shard gets a dynamically created batch subscriber (``StreamSub(group=
"engine", consumer=<worker id>, batch=True, max_records=batch_size)``, ``persistent=False``),
started when the lease is taken and stopped when it is lost or released (``stop`` waits for
the batch in hand).  The subscriber uses a parser that keeps the raw entries (FastStream's own
parser decodes every field and fails the whole batch on one non-UTF-8 entry), a decoder that
passes them to the handler as its argument (the broker has ``apply_types=False``: FastDepends
resolved a ``Context`` argument in a worker thread, a thread hop for every batch), and the manual
ack policy: the handler XACKs with redis-py, in the pipeline that also publishes the hints, since
FastStream's ``msg.ack()`` sends no XACK unless given the client and group.  Claims and sweeps
are redis-py calls run beside the subscriber, under the same per-shard lock as the handler.

**After an append.**  :meth:`EngineWorker.after_append` is called after every accepted (not
duplicate) command with the new table: an observer hook (the tests use it to see which worker
appended).  The turn clock is its own process that follows the feeds (docs/turn-clock.md).

**Metrics.**  ``conquian_commands_total{result="accepted|rejected|duplicate"}`` and the histogram
``conquian_append_seconds`` (one pipelined append round trip) in the default Prometheus
registry; ``python -m services.engine_worker`` serves them on ``CONQUIAN_METRICS_PORT`` when set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio
import redis.exceptions
from faststream import FastStream
from faststream.middlewares import AckPolicy
from faststream.redis import RedisBroker, StreamSub
from faststream.redis.message import FAKE_CONSUMER, RedisBatchStreamMessage
from faststream.redis.subscriber.usecases import LogicSubscriber
from prometheus_client import Counter, Histogram

from events.commands import Command, parse_command
from services import compact_json
from services.log import configure, get_logger
from services.settings import Settings, load_settings
from services.shard_leases import ShardLeases
from services.store.base import VersionConflict
from services.store.client import connect
from services.store.redis_store import RedisEventStore
from services.table import Table
from services.table_batch import BatchResult, execute_many
from services.table_service import MAX_CONFLICT_RETRIES, Outcome, TableError, TableService
from services.tokens import SeatTokens, load_secret

__all__ = [
    "APPEND_SECONDS",
    "COMMANDS",
    "GROUP",
    "MAX_DELIVERIES",
    "EngineWorker",
    "main",
    "results_channel",
    "run_worker",
]

GROUP = "engine"
"""The consumer group of the engine workers on every command stream."""

MAX_DELIVERIES = 5
"""Deliveries (and failed attempts) after which a command is given up as ``command/failed``."""

ID_PEEK_BYTES = 64 * 1024
"""A malformed command up to this size is searched for a command id to publish its rejection."""

POLL_MS = 100
"""How long one XREADGROUP blocks for new entries."""

COMMANDS = Counter(
    "conquian_commands", "Commands decided by the engine workers, by result.", ["result"]
)
APPEND_SECONDS = Histogram(
    "conquian_append_seconds",
    "One pipelined append round trip of an engine worker (all tables of one round).",
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
_ACCEPTED = COMMANDS.labels(result="accepted")
_REJECTED = COMMANDS.labels(result="rejected")
_DUPLICATE = COMMANDS.labels(result="duplicate")

_RawEntry = tuple[bytes, Mapping[bytes, bytes]]


def results_channel(settings: Settings) -> str:
    """The channel of result hints: ``<ns>:results``."""
    return f"{settings.namespace}:results"


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _transient(error: BaseException) -> bool:
    """Say whether a failure is the infrastructure's (retry without counting an attempt)."""
    if isinstance(error, TableError):
        return error.code == "table/busy"
    return isinstance(
        error,
        redis.exceptions.ConnectionError
        | redis.exceptions.TimeoutError
        | redis.exceptions.BusyLoadingError
        | OSError
        | TimeoutError,
    )


# -- entries ----------------------------------------------------------------------------------
@dataclass
class _Entry:
    """A command read from the stream, with the deliveries it had before this one."""

    entry_id: bytes
    command: Command
    seat: int | None
    tries: int = 0
    error: str = ""


@dataclass(frozen=True)
class _Malformed:
    """An entry that is not a command: its rejection, and the ids read from it if any."""

    entry_id: bytes
    code: str
    message: str
    table_id: str | None
    command_id: str | None


_no: tuple[None, None] = (None, None)


def _peek_ids(raw: bytes | None) -> tuple[str | None, str | None]:
    """The ``table_id`` and ``command_id`` of raw JSON that failed to parse, when readable."""
    if raw is None or len(raw) > ID_PEEK_BYTES:
        return None, None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and 0 < len(value) <= 128 else None

    return text("table_id"), text("command_id")


def parse_entry(
    entry_id: bytes, fields: Mapping[bytes, bytes], shard: int, settings: Settings
) -> _Entry | _Malformed:
    """Turn a command-stream entry into a command and its seat, or say why it is not one."""
    raw = fields.get(b"c")
    if raw is None:
        return _Malformed(entry_id, "command/invalid", "the entry has no command (field c)", *_no)
    try:
        command = parse_command(raw)
    except Exception as error:  # ContractError, and anything else the input can provoke
        code = getattr(error, "code", None)
        if not isinstance(code, str):
            code = "command/malformed_json"
        return _Malformed(entry_id, code, str(error)[:500], *_peek_ids(raw))
    ids = (command.table_id, command.command_id)
    seat_text = fields.get(b"s", b"")
    if seat_text == b"":
        seat = None
    elif seat_text in (b"0", b"1"):
        seat = int(seat_text)
    else:
        return _Malformed(entry_id, "command/invalid", f"bad seat field {seat_text[:20]!r}", *ids)
    if settings.keys.shard_of(command.table_id) != shard:
        message = f"table {command.table_id} is not on shard {shard}"
        return _Malformed(entry_id, "command/wrong_shard", message, *ids)
    return _Entry(entry_id, command, seat)


async def _raw_batch(message: Mapping[str, Any]) -> RedisBatchStreamMessage:
    """FastStream parser: keep the raw entries (ids and field maps), decode nothing."""
    return RedisBatchStreamMessage(
        raw_message=message, body=b"", consumer=FAKE_CONSUMER, group=None
    )


async def _raw_entries(message: RedisBatchStreamMessage) -> Mapping[str, Any]:
    """FastStream decoder: the raw entries (``message_ids`` and ``data``) are the body."""
    return message.raw_message  # type: ignore[no-any-return]


# -- one shard --------------------------------------------------------------------------------
class ShardRunner:
    """Consumes one owned shard: claims its pending entries, then a FastStream subscriber."""

    def __init__(self, worker: EngineWorker, shard: int, valid_until: float) -> None:
        self.worker = worker
        self.shard = shard
        self.stream = worker.settings.keys.cmd(shard)
        self.valid_until = valid_until
        self.lost = False
        self.releasing = False
        self.lock = asyncio.Lock()
        self.backlog: dict[str, deque[_Entry]] = {}
        self.retry_at: dict[str, float] = {}
        self.held: set[bytes] = set()
        self.subscriber: LogicSubscriber | None = None
        self.stopping = asyncio.Event()
        self.wake = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.claimed = 0
        self.log = get_logger("engine_worker", worker=worker.worker_id, shard=shard)

    def may_append(self) -> bool:
        """Say whether the lease is known to be ours (checked before every append round)."""
        return not self.lost and time.monotonic() < self.valid_until

    def start(self) -> None:
        """Start consuming (claims first) in a task of its own."""
        self.task = asyncio.create_task(self._run(), name=f"shard-{self.shard}")

    async def stop(self) -> None:
        """Stop consuming: finish the batch in hand (abandon it if the lease was lost)."""
        self.stopping.set()
        self.wake.set()
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        if self.subscriber is not None:
            reads = list(self.subscriber.tasks)
            await self.subscriber.stop()
            self.subscriber = None
            # FastStream cancels its read task, but a cancel that lands inside redis-py's
            # blocking XREADGROUP can be swallowed; the loop then ends after that read (it sees
            # the subscriber stopped).  Wait for it: no read of ours may still be in flight
            # when the lease is released (it would park entries in our pending list).
            if reads:
                _, late = await asyncio.wait(reads, timeout=3 * self.worker.poll_ms / 1000 + 1)
                for task in late:
                    task.cancel()

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        settings = self.worker.settings
        backoff = 0.05
        while not self.stopping.is_set():  # take over: everything pending, before new entries
            try:
                self.claimed += await self.claim(0)
                break
            except Exception:
                self.log.exception("claim failed")
                await self._sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        if self.stopping.is_set():
            return
        if self.claimed:
            self.log.info("claimed pending entries", count=self.claimed)
        backoff = 0.05
        while not self.stopping.is_set():
            try:
                if self.subscriber is None:
                    self.subscriber = self.worker.subscribe(self)
                await self.subscriber.start()
                break
            except Exception:
                self.log.exception("subscriber start failed")
                await self._sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        sweep_every = settings.claim_idle_ms / 1000
        next_sweep = time.monotonic() + sweep_every
        while not self.stopping.is_set():
            due = min([next_sweep, *self.retry_at.values()])
            wait = due - time.monotonic()
            if wait > 0:  # sleep until then, or until a retry is scheduled or we stop
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), wait)
                continue
            try:
                if self.retry_at:
                    await self.retry_backlog()
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + sweep_every
                    swept = await self.claim(settings.claim_idle_ms)
                    if swept:
                        self.log.info("claimed idle entries", count=swept)
            except Exception:
                self.log.exception("shard maintenance failed")
                await self._sleep(0.1)

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    # -- claiming -----------------------------------------------------------------------------
    async def claim(self, min_idle_ms: int) -> int:
        """Claim and process the group's pending entries idle >= ``min_idle_ms`` that this
        runner does not hold in memory; return how many were processed."""
        client = self.worker.client
        settings = self.worker.settings
        cursor: bytes | str = "0-0"
        total = 0
        while self.may_append() and not self.stopping.is_set():
            reply = await client.xautoclaim(
                self.stream,
                GROUP,
                self.worker.worker_id,
                min_idle_ms,
                start_id=cursor,
                count=settings.batch_size,
            )
            cursor = reply[0]
            entries = [(i, f) for i, f in reply[1] if f is not None and i not in self.held]
            if entries:
                tries = await self._deliveries([i for i, _ in entries])
                await self.process(entries, tries)
                total += len(entries)
            if cursor in (b"0-0", "0-0"):
                break
        return total

    async def _deliveries(self, ids: Sequence[bytes]) -> dict[bytes, int]:
        """Earlier deliveries of claimed entries (XPENDING's count, less this claim)."""
        pending = await self.worker.client.xpending_range(
            self.stream,
            GROUP,
            min=ids[0],
            max=ids[-1],
            count=len(ids) + len(self.held) + 16,
            consumername=self.worker.worker_id,
        )
        return {_b(p["message_id"]): max(int(p["times_delivered"]) - 1, 0) for p in pending}

    # -- processing ---------------------------------------------------------------------------
    async def handle(self, raw: Mapping[str, Any]) -> None:
        """The FastStream handler: one XREADGROUP batch of the shard's command stream (the raw
        entries, see :func:`_raw_entries`)."""
        await self.process(list(zip(raw["message_ids"], raw["data"], strict=True)))

    async def process(
        self, entries: Sequence[_RawEntry], tries: Mapping[bytes, int] | None = None
    ) -> None:
        """Decide, append, acknowledge and publish a batch of entries (never raises)."""
        try:
            async with self.lock:
                if not self.may_append():
                    return  # not ours any more: the entries stay pending for the next owner
                acks: list[bytes] = []
                hints: list[str] = []
                items: list[_Entry] = []
                for entry_id, fields in entries:
                    if entry_id in self.held:
                        continue
                    parsed = parse_entry(entry_id, fields, self.shard, self.worker.settings)
                    if isinstance(parsed, _Malformed):
                        acks.append(entry_id)
                        self._malformed(parsed, hints)
                        continue
                    parsed.tries = tries.get(entry_id, 0) if tries else 0
                    items.append(parsed)
                self.held.update(e.entry_id for e in items)
                await self._execute(items, acks, hints)
        except Exception:
            self.log.exception("batch failed", entries=len(entries))

    async def retry_backlog(self) -> None:
        """Run again, in order, the waiting commands of every table whose retry is due."""
        async with self.lock:
            now = time.monotonic()
            items: list[_Entry] = []
            for table_id in [t for t, at in self.retry_at.items() if at <= now]:
                del self.retry_at[table_id]
                items.extend(self.backlog.pop(table_id, ()))
            if items:
                acks: list[bytes] = []
                hints: list[str] = []
                await self._execute(items, acks, hints)

    async def _execute(self, items: list[_Entry], acks: list[bytes], hints: list[str]) -> None:
        """The common part of a batch and a retry: decide, append, ack, publish (under lock)."""
        worker = self.worker
        run: list[_Entry] = []
        for entry in items:
            table_id = entry.command.table_id
            if table_id in self.backlog:  # an earlier command of the table is waiting
                self.backlog[table_id].append(entry)
            elif entry.tries >= worker.max_deliveries:
                outcome = await self._give_up(entry)
                if outcome is None:
                    self._defer(entry)
                else:
                    acks.append(entry.entry_id)
                    await self._answered(entry, outcome, hints)
            else:
                run.append(entry)
        results: list[BatchResult] = []
        if run:
            results = await execute_many(
                worker.service,
                [(e.command, e.seat) for e in run],
                proceed=self.may_append,
                on_append=APPEND_SECONDS.observe,
            )
        dropped: list[bytes] = []
        for entry, result in zip(run, results, strict=True):
            if isinstance(result, Outcome):
                acks.append(entry.entry_id)
                await self._answered(entry, result, hints)
            elif result is None and not self.may_append():
                dropped.append(entry.entry_id)  # lease lost: pending for the next owner
            else:
                if result is not None:
                    entry.error = f"{type(result).__name__}: {result}"[:300]
                    if not _transient(result):
                        entry.tries += 1
                    self.log.warning(
                        "command failed, will retry",
                        table=entry.command.table_id,
                        command_id=entry.command.command_id,
                        tries=entry.tries,
                        error=entry.error,
                    )
                self._defer(entry)
        try:
            await self._acknowledge(acks, hints)
        finally:
            self.held.difference_update(acks)
            self.held.difference_update(dropped)

    def _defer(self, entry: _Entry) -> None:
        """Keep a command (and the later ones of its table) for a retry with backoff."""
        table_id = entry.command.table_id
        self.backlog.setdefault(table_id, deque()).append(entry)
        if table_id not in self.retry_at:
            delay = min(0.05 * 2 ** min(entry.tries, 10), self.worker.settings.claim_idle_ms / 1e3)
            self.retry_at[table_id] = time.monotonic() + delay
            self.wake.set()

    async def _give_up(self, entry: _Entry) -> Outcome | None:
        """Record ``command/failed`` under the command id (None if that failed too)."""
        command = entry.command
        result = {
            "ok": False,
            "code": "command/failed",
            "message": f"given up after {entry.tries} deliveries; {entry.error or 'no error'}",
        }
        store = self.worker.store
        try:
            for _ in range(MAX_CONFLICT_RETRIES):
                if not self.may_append():
                    return None
                head = await store.head(command.table_id)
                try:
                    appended = await store.append(
                        command.table_id,
                        head.version,
                        head.hash,
                        command.command_id,
                        (),
                        compact_json.dumps(result),
                    )
                except VersionConflict:
                    continue
                if appended.duplicate:
                    first = json.loads(appended.result) if appended.result else {}
                    return Outcome(bool(first.get("ok")), first, True)
                self.log.error(
                    "command given up",
                    table=command.table_id,
                    command_id=command.command_id,
                    seat=entry.seat,
                    tries=entry.tries,
                    error=entry.error,
                )
                return Outcome(False, result)
        except Exception:
            self.log.exception("could not record a failed command", command_id=command.command_id)
        return None

    def _malformed(self, bad: _Malformed, hints: list[str]) -> None:
        _REJECTED.inc()
        self.log.info(
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

    async def _answered(self, entry: _Entry, outcome: Outcome, hints: list[str]) -> None:
        command = entry.command
        hints.append(
            compact_json.dumps(
                {
                    "table_id": command.table_id,
                    "command_id": command.command_id,
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
        log = self.worker.command_log
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
        if outcome.ok and not outcome.duplicate and outcome.table is not None:
            try:
                await self.worker.after_append(outcome.table, outcome)
            except Exception:
                log.exception("after_append failed", table=command.table_id)

    async def _acknowledge(self, acks: Sequence[bytes], hints: Sequence[str]) -> None:
        """XACK the answered entries, then publish their hints: one round trip."""
        if not acks and not hints:
            return
        channel = self.worker.results_channel
        async with self.worker.client.pipeline(transaction=False) as pipe:
            if acks:
                pipe.xack(self.stream, GROUP, *acks)
            for hint in hints:
                pipe.publish(channel, hint)
            await pipe.execute()


# -- the worker -------------------------------------------------------------------------------
class EngineWorker:
    """One engine worker process: leases, one :class:`ShardRunner` per owned shard.

    ``service_factory`` builds the table service on the worker's store (tests inject seeds and
    faults; default: a ``TableService`` with the deployment's seat tokens); ``max_deliveries``
    is the poison threshold; ``poll_ms`` how long one XREADGROUP blocks.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        service_factory: Callable[[RedisEventStore], TableService] | None = None,
        max_deliveries: int = MAX_DELIVERIES,
        poll_ms: int = POLL_MS,
    ) -> None:
        self.settings = settings
        self.worker_id = settings.worker_id
        self.max_deliveries = max_deliveries
        self.poll_ms = poll_ms
        self.results_channel = results_channel(settings)
        self.client: redis.asyncio.Redis = connect(settings.redis_url)
        self.store = RedisEventStore(self.client, settings.keys)
        self._service_factory = service_factory
        self._service: TableService | None = None
        self.leases = ShardLeases(self.client, settings.keys, self.worker_id, settings.lease_ms)
        self.runners: dict[int, ShardRunner] = {}
        self._retiring: dict[int, asyncio.Task[None]] = {}
        self.log = get_logger("engine_worker", worker=self.worker_id)
        self.command_log = get_logger("engine_worker.commands", worker=self.worker_id)
        faststream_log = get_logger("faststream", worker=self.worker_id)
        self.broker = RedisBroker(
            settings.redis_url,
            graceful_timeout=max(2 * settings.lease_ms / 1000, 5.0),
            logger=faststream_log,
            log_level=logging.DEBUG,
            apply_types=False,  # no injection: FastDepends ran each batch through a thread
        )
        self.app = FastStream(self.broker, logger=faststream_log)
        self.started = False

    @property
    def service(self) -> TableService:
        """The table service (available after :meth:`start`)."""
        if self._service is None:
            raise RuntimeError("the worker has not started")
        return self._service

    @property
    def owned(self) -> set[int]:
        """The shards this worker consumes now."""
        return {s for s, r in self.runners.items() if not r.lost and not r.releasing}

    async def after_append(self, table: Table, outcome: Outcome) -> None:
        """Observe an accepted command with the new table (a subclass hook; does nothing here).

        It runs after the append and before the XACK of the batch; a crash in between redelivers
        the command, which then comes back as a duplicate and does not call this hook again.
        """
        return None

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, create the consumer groups, start the FastStream app and register."""
        settings = self.settings
        if self._service_factory is not None:
            self._service = self._service_factory(self.store)
        else:
            secret = await load_secret(self.client, settings.namespace, settings.token_secret)
            deal_key = settings.insecure_deal_key
            self._service = TableService(
                self.store,
                token_hasher=SeatTokens(secret).token_hash,
                insecure_deal_key=bytes.fromhex(deal_key) if deal_key else None,
            )
            if deal_key:
                self.log.warning("insecure deal key set: every deck is predictable")
        await self.create_groups()
        await self.app.start()
        await self.leases.heartbeat()
        self.started = True
        self.log.info("engine worker started", shards=settings.shards, lease_ms=settings.lease_ms)

    async def create_groups(self) -> None:
        """XGROUP CREATE MKSTREAM at id 0 on every command stream (an existing group stays)."""
        for shard in range(self.settings.shards):
            try:
                await self.client.xgroup_create(
                    self.settings.keys.cmd(shard), GROUP, id="0", mkstream=True
                )
            except redis.exceptions.ResponseError as error:
                if "BUSYGROUP" not in str(error):
                    raise

    async def run(self, stop: asyncio.Event) -> None:
        """Hold leases and consume until ``stop`` is set."""
        tick = self.settings.lease_ms / 3000
        await _wait(stop, min(tick, 0.2))  # workers started together see each other first
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                self.log.exception("lease tick failed")
            await _wait(stop, tick)

    async def tick(self) -> None:
        """Heartbeat, renew our leases, then release or take shards toward the fair share."""
        live = await self.leases.heartbeat()
        renewing = [s for s, r in self.runners.items() if not r.lost]
        renewed, sent = await self.leases.renew(renewing)
        valid_until = sent + self.settings.lease_ms / 1000
        for shard, ok in renewed.items():
            runner = self.runners[shard]
            if ok:
                runner.valid_until = valid_until
            else:
                runner.lost = True
                self.log.warning("lease lost", shard=shard)
                self._retire(shard, release=False)
        share = self.leases.fair_share(live)
        owned = self.leases.preference(self.owned)
        if len(owned) > share:
            for shard in owned[share:]:
                self.log.info("releasing shard", shard=shard, share=share, live=live)
                self._retire(shard, release=True)
        elif len(owned) < share:
            owners = await self.leases.owners()
            free = [
                s
                for s in self.leases.preference(range(self.settings.shards))
                if owners[s] is None and s not in self.runners
            ]
            taken, sent = await self.leases.acquire(free[: share - len(owned)])
            for shard in taken:
                runner = ShardRunner(self, shard, sent + self.settings.lease_ms / 1000)
                self.runners[shard] = runner
                runner.start()
                self.log.info("shard taken", shard=shard, share=share, live=live)

    def _retire(self, shard: int, *, release: bool) -> None:
        runner = self.runners[shard]
        if shard in self._retiring:
            return
        runner.releasing = release
        self._retiring[shard] = asyncio.create_task(self._stop_runner(runner, release=release))

    async def _stop_runner(self, runner: ShardRunner, *, release: bool) -> None:
        try:
            await runner.stop()
            if release and not runner.lost:
                await self.leases.release([runner.shard])
        except Exception:
            runner.log.exception("stopping the shard failed")
        finally:
            self.runners.pop(runner.shard, None)
            self._retiring.pop(runner.shard, None)

    def subscribe(self, runner: ShardRunner) -> LogicSubscriber:
        """A FastStream batch subscriber on the runner's command stream (not started)."""
        subscriber = self.broker.subscriber(
            stream=StreamSub(
                runner.stream,
                group=GROUP,
                consumer=self.worker_id,
                batch=True,
                max_records=self.settings.batch_size,
                polling_interval=self.poll_ms,
            ),
            ack_policy=AckPolicy.MANUAL,
            no_reply=True,
            persistent=False,
            include_in_schema=False,
            parser=_raw_batch,
            decoder=_raw_entries,
        )
        subscriber(runner.handle)
        return subscriber

    async def close(self) -> None:
        """Finish the batches in hand, release every lease, leave the registry, disconnect."""
        for shard in list(self.runners):
            self._retire(shard, release=True)
        if self._retiring:
            await asyncio.gather(*self._retiring.values(), return_exceptions=True)
        try:
            if self.started:
                await self.leases.deregister()
        except Exception:
            self.log.exception("could not leave the registry")
        try:
            await self.app.stop()
        finally:
            await self.client.aclose()
        self.log.info("engine worker stopped")


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run an engine worker until ``stop`` is set (forever when None), then stop cleanly."""
    worker = EngineWorker(settings)
    try:
        await worker.start()
        await worker.run(stop or asyncio.Event())
    finally:
        await worker.close()


def main() -> int:
    """``python -m services.engine_worker``: run until SIGTERM or SIGINT (on uvloop if there)."""
    settings = load_settings()
    configure(settings.log_level)
    port = os.environ.get("CONQUIAN_METRICS_PORT")
    if port:
        from prometheus_client import start_http_server

        start_http_server(int(port), addr=settings.http_host)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    try:  # uvloop (installed with uvicorn[standard]) cuts the event loop's share of the CPU
        import uvloop
    except ImportError:
        asyncio.run(serve())
    else:
        uvloop.run(serve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
