"""The projector class and running it: catch up once, or follow the shards until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from services.log import get_logger
from services.projector.rebuild import ProjectorRebuild
from services.projector.records import RoundStats
from services.projector.round import ProjectorRound
from services.serve.gc_tuning import collect_at_rest
from services.settings import Settings
from services.store.keys import KeySpace
from services.store.outage import OUTAGE_ERRORS, Outage, connect_when_up

ROUND_ERRORS: tuple[type[BaseException], ...] = (RedisError, *OUTAGE_ERRORS)
"""What makes a round start again from what Redis holds (an outage: after a pause)."""


class Projector(ProjectorRound, ProjectorRebuild):
    """Follows shard feeds and writes table views (see :mod:`services.projector`).

    ``client`` is a ``redis.asyncio.Redis`` with ``decode_responses=False``.  ``owner`` names
    this process in the shard leases; with ``owner=None`` no lease is taken or checked (one
    projector, tests).  ``cache_size`` bounds the folded tables kept in memory; a table that
    falls out is folded again from its stream the next time it moves.
    """


async def catch_up(
    client: Redis, keys: KeySpace, shards: Iterable[int] | None = None, **options: Any
) -> RoundStats:
    """Apply every feed entry after the checkpoints of ``shards`` with a fresh projector."""
    return await Projector(client, keys, **options).catch_up(shards)


project_once = catch_up


def _owner(settings: Settings) -> str:
    return f"{settings.worker_id}:{uuid.uuid4().hex[:8]}"


def projector_for(client: Redis, settings: Settings) -> Projector:
    """A projector with its own lease owner name and the batch and lease settings."""
    return Projector(
        client,
        settings.keys,
        owner=_owner(settings),
        batch_size=settings.batch_size,
        lease_ms=settings.lease_ms,
        drop_hints=settings.drop_hints,
    )


async def run_projector(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    client: Redis | None = None,
    rebuild: bool = False,
) -> Projector | None:
    """Follow every shard whose lease is free until ``stop`` is set; return the projector
    (None when stopped while waiting for Redis to answer at start).

    With ``rebuild`` the views are rebuilt first (raises ProjectorBusy when another projector
    holds a lease).  Leases are renewed every third of ``settings.lease_ms`` and given back at
    the end.
    """
    stop = stop or asyncio.Event()
    own_client = client is None
    redis = client or await connect_when_up(
        settings.redis_url, get_logger("projector"), stop, call_timeouts=False
    )
    if redis is None:  # stopped while waiting for Redis
        return None
    projector = projector_for(redis, settings)
    log = projector.log
    try:
        if rebuild:
            await projector.rebuild()
        log.info("projector_started", shards=settings.shards, namespace=settings.namespace)
        await _follow(projector, stop, settings.lease_ms, settings.projector_linger_ms)
    finally:
        with contextlib.suppress(Exception):
            await projector.release()
        with contextlib.suppress(Exception):
            await projector.deregister()
        log.info("projector_stopped")
        if own_client:
            await redis.aclose()
    return projector


async def _follow(
    projector: Projector, stop: asyncio.Event, lease_ms: int, linger_ms: int = 0
) -> None:
    """Balance the leases every third of ``lease_ms`` (:meth:`Projector.balance`) and run rounds
    on the shards held until ``stop`` is set; a round that fails on Redis starts again from
    what Redis holds.

    A round whose tables all had their views stored already (by the engine workers' appends)
    is followed by a pause of ``linger_ms``: nothing waits for this projector then, and the
    next round reads what came meanwhile at once (fewer, bigger rounds).  A round that folded
    a table goes straight on.
    """
    interval = lease_ms / 3000
    block_ms = int(min(500, lease_ms / 3))
    next_claim = 0.0
    outage = Outage(get_logger("projector"), "rounds")
    while not stop.is_set():
        try:
            now = time.monotonic()
            if now >= next_claim or outage.ongoing:  # after an outage: the leases first
                await projector.balance()
                next_claim = now + interval
                outage.ok()
            if projector.owned:
                stats = await projector.step(block_ms=block_ms)
                collect_at_rest()  # between rounds: what is young now is what the round kept
                if not stats.entries or stats.tables or stats.failed or not linger_ms:
                    continue
                pause = linger_ms / 1000
            else:
                pause = interval
        except ROUND_ERRORS as exc:  # Redis away, or refused a write: start again from it
            if not outage.ongoing:
                projector.log.error("round_failed", error=str(exc))
            projector.reset()
            pause = outage.failed(exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=pause)
