"""The engine worker process: shard leases, one runner per owned shard, one reader of their
streams feeding the shard loop (``.loop``), the FastStream app and broker; ``run_worker``.
Nothing here runs per command."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import redis.asyncio
import redis.exceptions
from faststream import FastStream
from faststream.redis import RedisBroker

from services.engine_worker.answers import AcksInFlight, HintChannels
from services.engine_worker.consumed import ConsumedTrim
from services.engine_worker.loop import ShardLoop
from services.engine_worker.reader import GROUP, ShardStreamsSubscriber, subscribe_shards
from services.engine_worker.runner import ShardRunner
from services.log import get_logger
from services.settings import Settings
from services.store.client import connect, make_broker
from services.store.keys import results_channel, views_channel
from services.store.outage import OUTAGE_ERRORS, Outage, connect_when_up
from services.store.redis_store import RedisEventStore
from services.store.shard_leases import ShardLeases
from services.store.token_digests import move_token_digests
from services.tables.results import CommandResult
from services.tables.service import TableService
from services.tables.table import Table
from services.tables.tokens import SeatTokens, load_secret

MAX_DELIVERIES = 5
"""Deliveries (and failed attempts) after which a command is given up as ``command/failed``."""

POLL_MS = 100
"""How long one XREADGROUP blocks for new entries."""

MAX_TICK_S = 0.25
"""The longest pause between two lease ticks (heartbeat, renewals, taking free shards): a
dead owner's shard is taken at most this long after its lease expires."""


class EngineWorker:
    """One engine worker process: leases, one :class:`ShardRunner` per owned shard, and one
    FastStream subscriber (:mod:`.reader`) reading the streams of every owned shard at once.

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
        self.channels = HintChannels(
            results_channel(settings.namespace),
            views_channel(settings.namespace),
            settings.drop_hints,
        )
        self.client: redis.asyncio.Redis = connect(settings.redis_url, call_timeouts=False)
        self.store = RedisEventStore(
            self.client, settings.keys, finished_ids_ms=settings.finished_command_ids_ms or None
        )
        self._service_factory = service_factory
        self._service: TableService | None = None
        self._loop: ShardLoop | None = None
        self.leases = ShardLeases(self.client, settings.keys, self.worker_id, settings.lease_ms)
        self.trim_consumed = ConsumedTrim(self.client, GROUP)
        self.runners: dict[int, ShardRunner] = {}
        self._retiring: dict[int, asyncio.Task[None]] = {}
        self.log = get_logger("engine_worker", worker=self.worker_id)
        self.command_log = get_logger("engine_worker.commands", worker=self.worker_id)
        faststream_log = get_logger("faststream", worker=self.worker_id)
        graceful = max(2 * settings.lease_ms / 1000, 5.0)  # a stop waits this for a batch
        self.broker: RedisBroker = make_broker(  # packed in C, no call timeouts (as self.client)
            settings.redis_url,
            graceful_timeout=graceful,
            logger=faststream_log,
            log_level=logging.DEBUG,
            apply_types=False,  # no injection: FastDepends ran each batch through a thread
        )
        self.app = FastStream(self.broker, logger=faststream_log)
        self.acks = AcksInFlight(self.log)
        """Each batch's XACK and hints, answered while the next batch is read."""
        self.settle_seconds = graceful + 3 * poll_ms / 1000
        """How long giving up a shard waits for a read or batch of it in hand."""
        self._reader: ShardStreamsSubscriber | None = None
        self.started = False

    @property
    def service(self) -> TableService:
        """The table service (available after :meth:`start`)."""
        if self._service is None:
            raise RuntimeError("the worker has not started")
        return self._service

    @property
    def loop(self) -> ShardLoop:
        """The shard loop that decides every batch (available after :meth:`start`)."""
        if self._loop is None:
            raise RuntimeError("the worker has not started")
        return self._loop

    @property
    def reader(self) -> ShardStreamsSubscriber:
        """The subscriber reading the owned shards' streams into the loop (after :meth:`start`)."""
        if self._reader is None:
            raise RuntimeError("the worker has not started")
        return self._reader

    @property
    def owned(self) -> set[int]:
        """The shards this worker consumes now."""
        return {s for s, r in self.runners.items() if not r.lost and not r.releasing}

    async def after_append(self, table: Table, outcome: CommandResult) -> None:
        """Observe an accepted command with the new table (a subclass hook; does nothing here).

        It runs after the append and before the XACK of the batch; a crash in between redelivers
        the command, which then comes back as a duplicate and does not call this hook again.
        """
        return None

    def reading(self) -> list[str]:
        """The command streams the reader reads now: those of runners past their take-over."""
        return [r.stream for r in self.runners.values() if r.reading and not r.lost]

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Connect, create the consumer groups, subscribe the loop to the owned shards' streams,
        start the FastStream app; while Redis does not answer, wait (``services.store.outage``)
        unless ``stop`` is set."""
        settings = self.settings
        outage = Outage(self.log, "start")
        while True:
            try:
                self._service = await self._build_service()
                self._loop = self._build_loop(self._service)
                await self.create_groups()
                await move_token_digests(self.client, settings.keys, self.log)
                await self.leases.heartbeat()
                break
            except OUTAGE_ERRORS as error:
                if stop is not None and stop.is_set():
                    raise
                await outage.wait(error, stop)
        outage.ok()
        self._reader = subscribe_shards(
            self.broker,
            self.loop.handle,
            name=f"{settings.keys.ns}:{{s*}}:cmd",  # a label for FastStream's logs
            streams=self.reading,
            group=GROUP,
            consumer=self.worker_id,
            max_records=settings.batch_size,
            polling_ms=self.poll_ms,
        )
        await self.app.start()
        self.started = True
        self.log.info("engine worker started", shards=settings.shards, lease_ms=settings.lease_ms)
        if settings.drop_hints:
            self.log.warning("hints dropped on purpose: a fault", share=settings.drop_hints)

    async def _build_service(self) -> TableService:
        """The injected factory's table service, or one with the deployment's seat tokens."""
        if self._service_factory is not None:
            return self._service_factory(self.store)
        settings = self.settings
        secret = await load_secret(self.client, settings.namespace, settings.token_secret)
        deal_key = settings.insecure_deal_key
        service = TableService(
            self.store,
            token_hasher=SeatTokens(secret).token_hash,
            insecure_deal_key=bytes.fromhex(deal_key) if deal_key else None,
        )
        if deal_key:
            self.log.warning("insecure deal key set: every deck is predictable")
        return service

    def _build_loop(self, service: TableService) -> ShardLoop:
        return ShardLoop(
            service,
            self.store,
            self.client,
            self.settings.keys,
            self.runners,
            channels=self.channels,
            acks=self.acks,
            max_deliveries=self.max_deliveries,
            retry_cap_s=self.settings.claim_idle_ms / 1e3,
            log=self.log,
            command_log=self.command_log,
            after_append=self.after_append,
        )

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
        tick = min(self.settings.lease_ms / 3000, MAX_TICK_S)
        await _wait(stop, min(tick, 0.2))  # workers started together see each other first
        outage = Outage(self.log, "leases")
        while not stop.is_set():
            try:
                await self.tick()
            except OUTAGE_ERRORS as error:  # the leases run out; the runners stop appending
                await _wait(stop, min(outage.failed(error), tick))
                continue
            except Exception:
                self.log.exception("lease tick failed")
            else:
                outage.ok()
            await _wait(stop, tick)

    async def tick(self) -> None:
        """Heartbeat, renew our leases, then release or take shards toward the fair share."""
        live = await self.leases.heartbeat()
        await self._renew()
        share = self.leases.fair_share(live)
        owned = self.leases.preference(self.owned)
        if len(owned) > share:
            for shard in owned[share:]:
                self.log.info("releasing shard", shard=shard, share=share, live=live)
                self._retire(shard, release=True)
        elif len(owned) < share:
            await self._take(share - len(owned), share, live)

    async def _renew(self) -> None:
        """Renew the leases not lost yet; a runner whose renewal failed has lost its shard."""
        renewing = [s for s, r in self.runners.items() if not r.lost]
        renewed, sent = await self.leases.renew(renewing)
        valid_until = sent + self.settings.lease_ms / 1000
        for shard, ok in renewed.items():
            runner = self.runners.get(shard)
            if runner is None:  # retired while the renewal was in flight
                continue
            if ok:
                runner.valid_until = valid_until
            else:
                runner.lost = True
                self.log.warning("lease lost", shard=shard)
                self._retire(shard, release=False)

    async def _take(self, wanted: int, share: int, live: int) -> None:
        """Acquire up to ``wanted`` shards, first those still leased under our id (a previous
        process of this worker id died holding them), then free ones, and start a runner on
        each."""
        owners = await self.leases.owners()
        candidates = [s for s in self.leases.preference(range(self.settings.shards))
                      if s not in self.runners]  # fmt: skip
        mine = [s for s in candidates if owners[s] == self.worker_id]  # a previous process's
        free = mine + [s for s in candidates if owners[s] is None]
        taken, sent = await self.leases.acquire(free[:wanted])
        if taken and self._service is not None:  # what we cached of them may be stale now
            shard_of, new = self.settings.keys.shard_of, set(taken)
            self._service.forget(lambda table_id: shard_of(table_id) in new)
        for shard in taken:
            runner = ShardRunner(
                shard,
                sent + self.settings.lease_ms / 1000,
                loop=self.loop,
                settings=self.settings,
                consumer=self.worker_id,
                trim=self.trim_consumed,
                settled=self.reader.settled,
                settle_seconds=self.settle_seconds,
            )
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
            await self.acks.drain()
            if self._service is not None:
                await self._service.sealed()  # finished tables' memory, given back
            await self.client.aclose()
        self.log.info("engine worker stopped")


async def _wait(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run an engine worker until ``stop`` is set (forever when None), then stop cleanly."""
    stop = stop or asyncio.Event()
    probe = await connect_when_up(settings.redis_url, get_logger("engine_worker"), stop)
    if probe is None:  # stopped before Redis answered
        return
    await probe.aclose()
    worker = EngineWorker(settings)
    try:
        await worker.start(stop)
        await worker.run(stop)
    finally:
        await worker.close()
