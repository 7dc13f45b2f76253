"""One owned shard's upkeep: it claims the shard's pending entries, then has the worker's reader
include its stream, and retries and sweeps it until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.asyncio import Redis

from services.engine_worker.consumed import ConsumedTrim
from services.engine_worker.loop import OwnedShard, ShardLoop
from services.engine_worker.metrics import COMMAND_BACKLOG
from services.engine_worker.reader import GROUP
from services.log import get_logger
from services.settings import Settings
from services.store.outage import MAX_PAUSE_S, OUTAGE_ERRORS, Outage


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class ShardRunner(OwnedShard):
    """Keeps one owned shard: claims its pending entries, then (``reading``) has its stream
    read by the worker's :class:`~services.engine_worker.reader.ShardStreamsSubscriber`, whose
    batches span the worker's shards; retries and sweeps run here, under :attr:`lock`.

    ``consumer`` is the worker's id; ``settled(stream)`` waits until no read or batch of the
    reader involves the stream, for at most ``settle_seconds``.
    """

    def __init__(
        self,
        shard: int,
        valid_until: float,
        *,
        loop: ShardLoop,
        settings: Settings,
        consumer: str,
        trim: ConsumedTrim,
        settled: Callable[[str], Awaitable[None]],
        settle_seconds: float,
    ) -> None:
        log = get_logger("engine_worker", worker=consumer, shard=shard)
        super().__init__(shard, settings.keys.cmd(shard), valid_until, log)
        self.loop = loop
        self.settings = settings
        self.consumer = consumer
        self.trim = trim
        self.settled = settled
        self.settle_seconds = settle_seconds
        self.client: Redis = loop.client
        self.releasing = False
        self.reading = False
        """Set once the pending entries are taken over: the worker's reader reads the stream."""
        self.stopping = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.claimed = 0

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
            await asyncio.wait_for(self.settled(self.stream), self.settle_seconds)
        except TimeoutError:
            self.log.warning("a batch of the shard is still in hand", seconds=self.settle_seconds)
        await self.loop.acks.drain()  # its entries acknowledged before the lease goes
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
        sweep_every = self.settings.claim_idle_ms / 1000
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
                    await self.loop.retry_due(self)
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
        settings = self.settings
        swept = await self.claim(settings.claim_idle_ms)
        if swept:
            self.log.info("claimed idle entries", count=swept)
        if self.may_append():
            trimmed = await self.trim(self.stream, settings.command_retention_ms)
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
        cursor: bytes | str = "0-0"
        total = 0
        while self.may_append() and not self.stopping.is_set():
            reply = await self.client.xautoclaim(
                self.stream,
                GROUP,
                self.consumer,
                min_idle_ms,
                start_id=cursor,
                count=self.settings.batch_size,
            )
            cursor = reply[0]
            entries = [(i, f) for i, f in reply[1] if f is not None and i not in self.held]
            if entries:
                tries = await self._deliveries([i for i, _ in entries])
                await self.loop.process({self: entries}, tries)
                total += len(entries)
            if cursor in (b"0-0", "0-0"):
                break
        return total

    async def _deliveries(self, ids: Sequence[bytes]) -> dict[bytes, int]:
        """Earlier deliveries of claimed entries (XPENDING's count, less this claim)."""
        pending = await self.client.xpending_range(
            self.stream,
            GROUP,
            min=ids[0],
            max=ids[-1],
            count=len(ids) + len(self.held) + 16,
            consumername=self.consumer,
        )
        return {_b(p["message_id"]): max(int(p["times_delivered"]) - 1, 0) for p in pending}
