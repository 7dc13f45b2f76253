"""``services.tasks.cancel_and_wait``: a task ends even when a cancellation is lost.

The loss is real on CPython 3.11: a task cancelled while redis-py sends a command (through
``asyncio.wait_for``, with a socket timeout) often goes on.  Before the helper, a gateway's
table room cancelled so went on waiting for a hint that never came, and the gateway never
finished its shutdown (``conquian serve`` killed it after 15 s).
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio
import structlog

from services.gateway.feed import DealTracker
from services.gateway.hub import Hub
from services.gateway.live import Connection, Rooms
from services.gateway.view_reader import ViewReader
from services.store import KeySpace, RedisEventStore
from services.store.client import connect
from services.tasks import cancel_and_wait


async def test_a_task_that_swallows_a_cancellation_is_cancelled_again() -> None:
    woken = asyncio.Event()
    swallowed = 0

    async def stubborn() -> None:
        nonlocal swallowed
        while True:
            try:
                await woken.wait()  # never set: only a cancellation ends the wait
            except asyncio.CancelledError:
                swallowed += 1
                if swallowed > 2:
                    raise  # the third one is taken

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled() and swallowed == 3


async def test_the_tasks_own_failure_is_raised_and_a_finished_task_is_left_as_it_is() -> None:
    async def failing() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            raise ValueError("broken on the way out")

    task = asyncio.create_task(failing())
    await asyncio.sleep(0)
    with pytest.raises(ValueError, match="broken on the way out"):
        await cancel_and_wait(task)

    done = asyncio.create_task(asyncio.sleep(0, result=7))
    await done
    await cancel_and_wait(done)
    assert done.result() == 7


@pytest.mark.redis
async def test_a_loop_of_redis_commands_always_ends(redis_url: str, redis_ns: str) -> None:
    """Loops that send command after command, cancelled at random moments 300 times: each
    ends within a second, whichever of its awaits the cancellation meets."""
    client: redis.asyncio.Redis = connect(redis_url)
    key = f"{redis_ns}:k"
    await client.set(key, b"x" * 600)
    try:
        for round_ in range(300):

            async def reading() -> None:
                while True:
                    await client.get(key)

            task = asyncio.create_task(reading())
            await asyncio.sleep((round_ % 7) * 0.0002)
            started = time.monotonic()
            await asyncio.wait_for(cancel_and_wait(task), 5)
            assert task.done() and time.monotonic() - started < 1.0
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_a_room_left_while_it_reads_the_store_stops(redis_url: str, redis_ns: str) -> None:
    """The gateway's case: the last socket of a table leaves while the table's room reads the
    store (a hint just came).  Its task was cancelled once, the cancellation was lost in a
    send, the task went back to waiting for hints, and the socket's handler, which waits for
    it, never ended: nor did the gateway's shutdown."""
    client: redis.asyncio.Redis = connect(redis_url)
    keys = KeySpace(redis_ns, shards=2)
    store = RedisEventStore(client, keys)
    log = structlog.get_logger("test")
    hub = Hub(client, redis_ns, log)
    rooms = Rooms(hub, store, ViewReader(client, keys, hub, None), DealTracker(store), 50, log)
    try:
        for round_ in range(100):
            connection = Connection(seat=None)
            room = await rooms.enter("t-rooms", connection, None)
            room.poke(1)  # a view hint: the room reads the events, then the views
            await asyncio.sleep((round_ % 10) * 0.0001)
            started = time.monotonic()
            # (a wait_for that times out here may return quietly on 3.11: hence the clock)
            await asyncio.wait_for(rooms.leave(room, connection), 5)
            assert time.monotonic() - started < 1.0, f"round {round_}: the room went on"
            assert rooms.rooms == {}
    finally:
        await rooms.close()
        await client.aclose()
