"""Hints are only hints: with the gateway's subscription killed, or its hub stopped, every
waiter still finishes from the store within its re-check interval.

* a subscription Redis closes is made again and wakes every waiter and watcher;
* a gateway that hears no hint at all still answers commands (from the store) and brings its
  WebSocket clients the events and views (the rooms' re-check).
"""

from __future__ import annotations

import asyncio
import time

import structlog
from test_engine_worker import eventually  # the test folder is on sys.path

from services.gateway.hub import Hub
from services.gateway.intake import MAX_POLL
from services.gateway.live import RECHECK_SECONDS
from services.gateway.testing import Listener, Stack
from services.settings import load_settings
from services.store.client import connect


async def test_a_killed_subscription_is_made_again_and_wakes_every_waiter(
    private_redis: str,
) -> None:
    client = connect(private_redis)
    hub = Hub(client, "kill", structlog.get_logger("test"))
    await hub.start()
    seen: list[int | None] = []
    hub.watch("t-k", seen.append)
    try:
        with hub.result_waiter("t-k", "cmd-1") as waiter:
            await client.client_kill_filter(_type="pubsub")  # as Redis drops a slow subscriber
            await asyncio.wait_for(waiter.event.wait(), 10)  # woken: its result may be missed
            assert waiter.result is None and seen == [-1]
        await eventually(lambda: bool(seen) and seen[-1] == -1, 5)
        await client.publish("kill:views", "t-k 4")  # and the new subscription hears hints
        await eventually(lambda: seen[-1:] == [4], 5)
    finally:
        await hub.stop()
        await client.aclose()


async def test_a_socket_catches_up_when_its_gateway_hears_no_hint(
    redis_url: str, redis_ns: str
) -> None:
    """The gateway's hub is stopped (its subscription gone, nobody woken): commands are still
    answered, and a spectator's socket still gets the events and the view (a room re-check)."""
    settings = load_settings(redis_url=redis_url, namespace=redis_ns, shards=2, lease_ms=1000)
    async with Stack(settings, serve=True) as stack:
        await stack.create(table_id="deaf", deals=1)
        async with Listener(f"{stack.ws_base}/tables/deaf/ws?after=0") as spectator:
            await spectator.wait_version(1)
            await stack.app.state.gateway.hub.stop()
            started = time.perf_counter()
            seat = await stack.join("deaf", "ann", seat=0)  # answered from the store
            answered = time.perf_counter() - started
            await spectator.wait_for(
                lambda m: m.get("kind") == "view" and m["view"]["version"] == seat.version,
                timeout=RECHECK_SECONDS + 5,
            )
            caught_up = time.perf_counter() - started
        assert answered < MAX_POLL + 1.0 and caught_up < answered + RECHECK_SECONDS + 1.0
        assert [e["version"] for e in spectator.events()] == list(range(1, seat.version + 1))
