"""One owned shard: claims its pending entries, then has the worker's reader include its stream."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis.exceptions

from services.engine_worker.answers import answered, give_up, malformed
from services.engine_worker.batch import ShardPart, execute_parts, process_batches
from services.engine_worker.entries import _Entry, _Malformed, _RawEntry, parse_entry
from services.engine_worker.metrics import COMMAND_BACKLOG
from services.engine_worker.streams import GROUP
from services.log import get_logger
from services.outage import MAX_PAUSE_S, OUTAGE_ERRORS, Outage
from services.table_batch import BatchResult
from services.table_service import Outcome, TableError

if TYPE_CHECKING:
    from services.engine_worker.worker import EngineWorker


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


class ShardRunner:
    """Consumes one owned shard: claims its pending entries, then (``reading``) has its stream
    read by the worker's :class:`~services.engine_worker.reader.ShardStreamsSubscriber`, whose
    batches span the worker's shards; retries and sweeps run here, under :attr:`lock`."""

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
        self.reading = False
        """Set once the pending entries are taken over: the worker's reader reads the stream."""
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
        self.reading = False
        # No read of ours may still be in flight when the lease is released (it would park
        # entries in our pending list), nor a batch holding entries of the stream.
        try:
            await asyncio.wait_for(
                self.worker.reader.settled(self.stream), self.worker.settle_seconds
            )
        except TimeoutError:
            self.log.warning(
                "a batch of the shard is still in hand", seconds=self.worker.settle_seconds
            )
        await self.worker.acks.drain()  # its entries acknowledged before the lease goes
        with contextlib.suppress(KeyError):  # the next owner reports the shard's backlog
            COMMAND_BACKLOG.remove(str(self.shard))

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        """Take over what is pending, join the worker's reads, then retry and sweep until
        stopped."""
        await self._take_over()
        if self.stopping.is_set():
            return
        if self.claimed:
            self.log.info("claimed pending entries", count=self.claimed)
        self.reading = True
        await self._maintain()

    async def _take_over(self) -> None:
        """Claim and process every pending entry, before new ones (retried with backoff)."""
        outage = Outage(self.log, "claim")
        while not self.stopping.is_set():
            try:
                self.claimed += await self.claim(0)
                break
            except OUTAGE_ERRORS as error:  # Redis away: at most a second between tries
                await self._sleep(outage.failed(error))
            except Exception:
                self.log.exception("claim failed")
                await self._sleep(MAX_PAUSE_S)
        outage.ok()

    async def _maintain(self) -> None:
        """Retry the backlog when due and sweep idle entries every ``claim_idle_ms``."""
        sweep_every = self.worker.settings.claim_idle_ms / 1000
        next_sweep = time.monotonic() + sweep_every
        outage = Outage(self.log, "maintenance")
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
                    await self._sweep()
            except OUTAGE_ERRORS as error:  # Redis away: logged once, retried within a second
                await self._sleep(outage.failed(error))
            except Exception:
                self.log.exception("shard maintenance failed")
                await self._sleep(0.1)
            else:
                outage.ok()

    async def _sweep(self) -> None:
        """Claim and process the entries idle for ``claim_idle_ms`` that we do not hold, then
        delete the entries consumed more than ``command_retention_ms`` ago (``.consumed``)."""
        settings = self.worker.settings
        swept = await self.claim(settings.claim_idle_ms)
        if swept:
            self.log.info("claimed idle entries", count=swept)
        if self.may_append():
            trimmed = await self.worker.trim_consumed(self.stream, settings.command_retention_ms)
            if trimmed.deleted:
                self.log.debug("trimmed consumed commands", count=trimmed.deleted)
            if trimmed.backlog is not None:
                COMMAND_BACKLOG.labels(shard=str(self.shard)).set(trimmed.backlog)

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
    async def process(
        self, entries: Sequence[_RawEntry], tries: Mapping[bytes, int] | None = None
    ) -> None:
        """Decide, append, acknowledge and publish entries of this shard (never raises)."""
        await process_batches(self.worker, {self: entries}, tries)

    def parse(
        self,
        entries: Sequence[_RawEntry],
        tries: Mapping[bytes, int] | None,
        acks: list[bytes],
        hints: list[str],
    ) -> list[_Entry]:
        """The commands of the entries not held yet; malformed ones are acked and answered."""
        items: list[_Entry] = []
        for entry_id, fields in entries:
            if entry_id in self.held:
                continue
            parsed = parse_entry(entry_id, fields, self.shard, self.worker.settings)
            if isinstance(parsed, _Malformed):
                acks.append(entry_id)
                malformed(self, parsed, hints)
                continue
            parsed.tries = tries.get(entry_id, 0) if tries else 0
            items.append(parsed)
        self.held.update(e.entry_id for e in items)
        return items

    async def retry_backlog(self) -> None:
        """Run again, in order, the waiting commands of every table whose retry is due."""
        async with self.lock:
            now = time.monotonic()
            items: list[_Entry] = []
            for table_id in [t for t, at in self.retry_at.items() if at <= now]:
                del self.retry_at[table_id]
                items.extend(self.backlog.pop(table_id, ()))
            if items:
                await execute_parts(self.worker, [ShardPart(self, items)], [])

    async def triage(
        self, items: list[_Entry], acks: list[bytes], hints: list[str]
    ) -> list[_Entry]:
        """The commands to run now: the others wait behind their table's backlog or, past
        ``max_deliveries``, are given up (or deferred if even that fails)."""
        run: list[_Entry] = []
        for entry in items:
            table_id = entry.command.table_id
            if table_id in self.backlog:  # an earlier command of the table is waiting
                self.backlog[table_id].append(entry)
            elif entry.tries >= self.worker.max_deliveries:
                outcome = await give_up(self, entry)
                if outcome is None:
                    self._defer(entry)
                else:
                    acks.append(entry.entry_id)
                    await answered(self, entry, outcome, hints)
            else:
                run.append(entry)
        return run

    async def settle(
        self,
        run: Sequence[_Entry],
        results: Sequence[BatchResult],
        acks: list[bytes],
        hints: list[str],
    ) -> list[bytes]:
        """Answer the decided commands, defer the failed ones; return the ids dropped because
        the lease was lost (left pending for the next owner)."""
        dropped: list[bytes] = []
        for entry, result in zip(run, results, strict=True):
            if isinstance(result, Outcome):
                acks.append(entry.entry_id)
                await answered(self, entry, result, hints)
            elif result is None and not self.may_append():
                dropped.append(entry.entry_id)  # lease lost: pending for the next owner
            else:
                if result is not None:
                    self._failed(entry, result)
                self._defer(entry)
        return dropped

    def _failed(self, entry: _Entry, error: BaseException) -> None:
        """Note an execution failure on the entry (an attempt unless transient) and log it."""
        entry.error = f"{type(error).__name__}: {error}"[:300]
        if not _transient(error):
            entry.tries += 1
        self.log.warning(
            "command failed, will retry",
            table=entry.command.table_id,
            command_id=entry.command.command_id,
            tries=entry.tries,
            error=entry.error,
        )

    def _defer(self, entry: _Entry) -> None:
        """Keep a command (and the later ones of its table) for a retry with backoff."""
        table_id = entry.command.table_id
        self.backlog.setdefault(table_id, deque()).append(entry)
        if table_id not in self.retry_at:
            delay = min(0.05 * 2 ** min(entry.tries, 10), self.worker.settings.claim_idle_ms / 1e3)
            self.retry_at[table_id] = time.monotonic() + delay
            self.wake.set()
