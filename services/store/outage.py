"""Waiting out a Redis outage: the one backoff every long-running service uses.

A service that loses Redis logs ``redis_unavailable`` once, retries with a pause that doubles
from :data:`FIRST_PAUSE_S` up to :data:`MAX_PAUSE_S`, never exits, and logs ``redis_back`` when
a call succeeds again, so it resumes within about a second of Redis answering.  The rule and
the measured times: ``docs/services.md`` ("Redis away") and ``docs/performance.md`` ("Recovery").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    ReadOnlyError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from services.store.client import connect

__all__ = ["FIRST_PAUSE_S", "MAX_PAUSE_S", "OUTAGE_ERRORS", "Outage", "connect_when_up", "pause"]

FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 1.0
"""The longest pause between two attempts while Redis is away."""

OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    RedisConnectionError,  # refused, reset, closed (BusyLoadingError too: loading its AOF)
    RedisTimeoutError,
    BusyLoadingError,
    ClusterDownError,  # a cluster without a master for some slot, failing over
    TryAgainError,
    ReadOnlyError,  # a primary demoted under a client during a failover
    OSError,
)
"""What a call to an absent, restarting, loading or failing-over Redis raises (the gateway's
``store/unavailable`` errors, and a failover's); any other error is a fault of its own."""


async def pause(stop: asyncio.Event | None, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


class Outage:
    """The state of one loop facing Redis: the next pause and whether an outage is under way.

    ``failed(error)`` after a failed attempt returns the pause to take (and logs the start of
    the outage once); ``ok()`` after a successful one logs its end, with how long it lasted.
    """

    def __init__(self, log: Any, what: str, *, cap: float = MAX_PAUSE_S) -> None:
        self.log = log
        self.what = what
        self.cap = cap
        self.next_pause = FIRST_PAUSE_S
        self.since: float | None = None
        self.failures = 0

    @property
    def ongoing(self) -> bool:
        """Whether the last attempt failed."""
        return self.since is not None

    def failed(self, error: BaseException) -> float:
        """Note a failed attempt; return the pause before the next one (at most ``cap``)."""
        if self.since is None:
            self.since = time.monotonic()
            self.log.warning("redis_unavailable", loop=self.what, error=_brief(error))
        self.failures += 1
        seconds = min(self.next_pause, self.cap)
        self.next_pause = min(self.next_pause * 2, self.cap)
        return seconds

    def ok(self) -> None:
        """Note a successful attempt: the pause starts small again."""
        if self.since is not None:
            self.log.info(
                "redis_back",
                loop=self.what,
                down_s=round(time.monotonic() - self.since, 3),
                failures=self.failures,
            )
        self.since = None
        self.failures = 0
        self.next_pause = FIRST_PAUSE_S

    async def wait(self, error: BaseException, stop: asyncio.Event | None = None) -> None:
        """Note a failed attempt and pause (returns early when ``stop`` is set)."""
        await pause(stop, self.failed(error))


async def connect_when_up(
    url: str, log: Any, stop: asyncio.Event | None = None, **options: Any
) -> Redis | None:
    """Return a client of ``url`` (:func:`services.store.client.connect`) once the server
    answers a PING, waiting out an outage at start; None if ``stop`` is set first."""
    outage = Outage(log, "start")
    while stop is None or not stop.is_set():
        try:
            client = connect(url, **options)
        except OUTAGE_ERRORS as error:  # connect asks a plain server whether it is a cluster
            await outage.wait(error, stop)
            continue
        try:
            await client.ping()
        except OUTAGE_ERRORS as error:
            await client.aclose()
            await outage.wait(error, stop)
            continue
        outage.ok()
        return client
    return None


def _brief(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:200]
