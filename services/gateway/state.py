"""The gateway's parts, opened once per process and shared by every request and socket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from starlette.requests import HTTPConnection

from services.archive.reads import ArchiveBackedStore, ArchiveReader, open_archive
from services.gateway.admission import Admission
from services.gateway.feed import DealTracker
from services.gateway.hub import Hub
from services.gateway.intake import Intake
from services.gateway.live import Rooms
from services.gateway.rate_limit import RateLimits, exempt_networks
from services.gateway.view_reader import ViewReader
from services.log import get_logger
from services.settings import Settings
from services.store.base import EventStore
from services.store.outage import OUTAGE_ERRORS, Outage, connect_when_up
from services.store.redis_store import RedisEventStore
from services.tables.tokens import SeatTokens, load_secret


@dataclass
class Gateway:
    """Redis, the store, seat tokens, the admission and intake of commands, the hub, the view
    reader, live rooms and a logger."""

    settings: Settings
    redis: Redis
    store: EventStore
    tokens: SeatTokens
    admission: Admission
    intake: Intake
    hub: Hub
    view_reader: ViewReader
    tracker: DealTracker
    rooms: Rooms
    log: Any

    async def close(self) -> None:
        """Stop the rooms and the hub, and close the Redis client."""
        await self.rooms.close()
        await self.hub.stop()
        await self.redis.aclose()


async def open_gateway(settings: Settings) -> Gateway:
    """Connect to Redis, load the token secret and start the hub; while Redis does not answer,
    wait (``services.store.outage``) rather than fail the start."""
    log = get_logger("gateway")
    redis = await connect_when_up(settings.redis_url, log)
    assert redis is not None  # without a stop event it returns only once connected
    keys = settings.keys
    store: EventStore = RedisEventStore(redis, keys)
    archive = open_archive(settings.archive_dir, settings.namespace)
    archived = None if archive is None else ArchiveReader(archive)
    if archived is not None:  # finished tables that left Redis are read from the archive
        store = ArchiveBackedStore(RedisEventStore(redis, keys), archived)
    outage = Outage(log, "start")
    while True:
        try:
            secret = await load_secret(redis, settings.namespace, settings.token_secret)
            break
        except OUTAGE_ERRORS as error:
            await outage.wait(error)
    outage.ok()
    tokens = SeatTokens(secret)
    hub = Hub(redis, settings.namespace, log)
    await hub.start()
    view_reader = ViewReader(redis, keys, hub, archived)
    tracker = DealTracker(store)
    return Gateway(
        settings=settings,
        redis=redis,
        store=store,
        tokens=tokens,
        admission=Admission(redis, keys, tokens, limits=rate_limits(settings), archived=archived),
        intake=Intake(redis, keys, hub, settings.result_wait_ms, log),
        hub=hub,
        view_reader=view_reader,
        tracker=tracker,
        rooms=Rooms(hub, store, view_reader, tracker, settings.resume_gap, log),
        log=log,
    )


def rate_limits(settings: Settings) -> RateLimits:
    """The rate limits of the settings ``CONQUIAN_RATE_*``."""
    return RateLimits(
        seat=(settings.rate_seat_per_s, settings.rate_seat_burst),
        address=(settings.rate_address_per_s, settings.rate_address_burst),
        create=(settings.rate_create_per_s, settings.rate_create_burst),
        exempt=exempt_networks(settings.rate_exempt),
    )


def gateway_of(connection: HTTPConnection) -> Gateway:
    """Return the gateway of the app serving a request or a WebSocket."""
    gateway: Gateway = connection.app.state.gateway
    return gateway
