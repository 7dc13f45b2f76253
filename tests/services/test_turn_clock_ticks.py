"""When the turn clock asks Redis for due timers: at a deadline it knows of, or once a sweep's
time has passed, never at every tick in between (docs/turn-clock.md, "Firing")."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest
from redis.asyncio import Redis
from test_turn_clock import (  # the test folder is on sys.path (like tests/engine/positions)
    FakeClock,
    arm_from_feeds,
    seat_two_humans,
    timer,
)

from services.followers.feed import FeedFollower
from services.followers.turn_clock import LEASE_LUA, SWEEP_MS, TurnClock, clock_command_id
from services.settings import Settings, load_settings
from services.store.redis_store import RedisEventStore
from services.tables.service import TableService


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(redis_url=redis_url, namespace=redis_ns, shards=4, batch_size=100)


class CountedClock(TurnClock):
    """A turn clock that counts its looks at the shards (:meth:`TurnClock.due`)."""

    looks = 0

    async def due(self, shards: Sequence[int] | None = None) -> list[tuple[str, int]]:
        self.looks += 1
        return await super().due(shards)


async def test_the_clock_looks_at_known_deadlines_and_sweeps_now_and_then(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    fake = FakeClock()
    service = TableService(RedisEventStore(redis_client, keys), clock=fake)
    table = await seat_two_humans(service, "sweeps")
    clock = CountedClock(redis_client, keys, clock=fake)
    assert await clock.tick_if_due() == [] and clock.looks == 1  # a first look at every shard
    await arm_from_feeds(FeedFollower(redis_client, keys, "clock-test", block_ms=10), clock)
    deadline, version = await timer(redis_client, keys, "sweeps")
    assert deadline is not None and version == table.version
    assert clock.next_due == deadline  # known from arming it

    fake.now += SWEEP_MS - 1
    assert await clock.tick_if_due() == [] and clock.looks == 1  # nothing due: no call
    fake.now += 1
    assert await clock.tick_if_due() == [] and clock.looks == 2  # the sweep
    other = CountedClock(redis_client, keys, clock=fake)  # armed nothing itself
    assert await other.tick_if_due() == [] and other.looks == 1
    assert other.next_due == deadline  # the earliest timer left on the shards

    fake.now = deadline
    fired = await clock.tick_if_due()
    assert [t.command.command_id for t in fired] == [clock_command_id(version)]
    assert clock.looks == 3
    # what the look saw left: the lease of the timer it took (gone once fired: one idle look)
    assert clock.next_due == deadline + clock.lease_ms
    assert await timer(redis_client, keys, "sweeps") == (None, version)


async def test_a_server_without_the_lease_script_gets_it_and_the_timer_fires(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    fake = FakeClock()
    service = TableService(RedisEventStore(redis_client, keys), clock=fake)
    await seat_two_humans(service, "noscript")
    clock = TurnClock(redis_client, keys, clock=fake)
    await arm_from_feeds(FeedFollower(redis_client, keys, "clock-test", block_ms=10), clock)
    deadline, version = await timer(redis_client, keys, "noscript")
    assert deadline is not None
    # a script no server has seen (a comment of its own): the first pipeline meets NOSCRIPT
    clock._lease = redis_client.register_script(f"{LEASE_LUA}-- {uuid.uuid4().hex}\n")
    assert not (await redis_client.script_exists(clock._lease.sha))[0]
    fake.now = deadline
    fired = await clock.tick()
    assert [t.command.command_id for t in fired] == [clock_command_id(version)]
    assert (await redis_client.script_exists(clock._lease.sha))[0]
