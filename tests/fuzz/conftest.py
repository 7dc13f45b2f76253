"""Fixtures of the fuzz tests: a served stack with known tables, and the truth about them.

Each test gets the real gateway on a uvicorn port with an engine worker and a projector
(``tests.services.gateway_stack.Stack``) on the test Redis, fixed deal seeds, and two tables:
``fz-play`` (both seats taken, a deal in play: cards hidden from everyone) and ``fz-open``
(seat 0 taken).  The bounded Hypothesis settings are in ``fuzz_stack``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from fuzz_stack import Tables, fixed_seeds
from fuzz_truth import Truth
from redis.asyncio import Redis

from services.settings import Settings, load_settings
from services.store import RedisEventStore
from tests.services.gateway_stack import Stack


@pytest.fixture
def fuzz_settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret="fuzz-secret-0123456789abcdef",
        result_wait_ms=300,  # a ?min_version past the head waits this long
    )


@pytest.fixture
async def stack(fuzz_settings: Settings) -> AsyncIterator[Stack]:
    async with Stack(fuzz_settings, seeds=fixed_seeds(), serve=True) as running:
        yield running


@pytest.fixture
async def tables(stack: Stack) -> Tables:
    await stack.create(table_id="fz-play", deals=3)
    seats = {0: await stack.join("fz-play", "Ana", 0), 1: await stack.join("fz-play", "Bo", 1)}
    await stack.create(table_id="fz-open", deals=1)
    waiting = await stack.join("fz-open", "Cy", 0)
    for seat in seats.values():
        await seat.view(seats[1].version)  # the views of the deal are stored
    tokens = {
        "fz-play": {s: seat.token for s, seat in seats.items()},
        "fz-open": {0: waiting.token},
    }
    return Tables("fz-play", "fz-open", tokens)


@pytest.fixture
async def truth(stack: Stack, redis_client: Redis) -> Truth:
    store = RedisEventStore(redis_client, stack.settings.keys)
    return Truth(store, asyncio.get_running_loop())
