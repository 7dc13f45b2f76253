"""Hints are only hints: with every hint message dropped by its publishers (the engine worker's
and the projector's ``Settings.drop_hints``), the gateway's subscription killed, or its hub
stopped, every waiter still finishes from the store within its re-check interval.

* HTTP and WebSocket commands get their results, never ``pending``; views asked with
  ``min_version`` come at that version; WebSocket seats and spectators get every event and the
  final views (the rooms' re-check);
* bot tables play to the end (the bots runner follows the feeds, not the hints);
* a subscription Redis closes is made again and wakes every waiter and watcher.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import structlog
from prometheus_client import REGISTRY
from redis.asyncio import Redis
from test_e2e import check_streams, play  # the test folder is on sys.path
from test_engine_worker import eventually

from services.followers.bots_runner import run_bots
from services.gateway.hub import Hub
from services.gateway.intake import MAX_POLL
from services.gateway.live import RECHECK_SECONDS
from services.settings import Settings, load_settings
from services.store import RedisEventStore
from services.store.client import connect
from tests.services.gateway_stack import Listener, Stack, refuser


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret="lost-hints-secret-0123456789ab",
        result_wait_ms=5000,
        drop_hints=1.0,
    )


@pytest.fixture
async def redis_store(redis_client: Redis, settings: Settings) -> AsyncIterator[RedisEventStore]:
    yield RedisEventStore(redis_client, settings.keys)


def counted(name: str, **labels: str) -> float:
    """The value of a gateway counter (the gateway in the test's process counts there)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_commands_views_and_sockets_finish_when_every_hint_is_dropped(
    settings: Settings, redis_store: RedisEventStore
) -> None:
    hints_before = sum(
        counted("conquian_gateway_hints_total", channel=c) for c in ("results", "views")
    )
    found_before = {
        w: counted("conquian_gateway_rechecked_total", waiter=w) for w in ("result", "room")
    }
    async with Stack(settings, serve=True) as stack:
        slowest = 0.0
        for n in range(3):  # each answer comes from a re-read: bounded, far from 'pending'
            started = time.perf_counter()
            created = await stack.create(table_id=f"lost-{n}", deals=1)
            slowest = max(slowest, time.perf_counter() - started)
            assert created["ok"] is True and created["version"] == 1
        assert slowest < MAX_POLL + 1.0  # pending would take result_wait_ms, 5 s

        # a whole deal: seat 0 over its socket, seat 1 over HTTP, views by min_version, and
        # three sockets that must end with every event they may see and the final views
        table, sockets, views = await play(stack, redis_store, "lost-draw", refuser)
        try:
            for socket in sockets.values():  # the last view comes with a re-check
                await socket.wait_for(
                    lambda m: m.get("kind") == "view" and m["view"]["version"] == table.version,
                    timeout=RECHECK_SECONDS + 5,
                )
            await check_streams(stack, table, sockets, views, redis_store)
        finally:
            for socket in sockets.values():
                await socket.close()
    hints_after = sum(
        counted("conquian_gateway_hints_total", channel=c) for c in ("results", "views")
    )
    assert hints_after == hints_before  # not one hint reached the gateway
    for waiter, before in found_before.items():
        assert counted("conquian_gateway_rechecked_total", waiter=waiter) > before, waiter


async def test_bot_tables_finish_and_their_spectators_see_the_end_without_hints(
    settings: Settings, redis_store: RedisEventStore
) -> None:
    bots = asyncio.Event()
    async with Stack(settings, serve=True) as stack:
        runner = asyncio.create_task(run_bots(settings, bots, block_ms=50))
        try:
            response = await stack.http.post(
                "/tables", json={"table_id": "lost-bots", "deals": 1, "bots": {"0": "greedy"}}
            )
            assert response.status_code == 201, response.text
            seat = await stack.join("lost-bots", "human", seat=1)
            assert seat.seat == 1
            url = f"{stack.ws_base}/tables/lost-bots/ws?after=0"
            async with Listener(url) as spectator:
                version = seat.version
                while True:  # the human refuses whenever it is to act; the bot plays itself
                    view = await seat.view(version)
                    head = await redis_store.head("lost-bots")
                    if head.status == "over":
                        break
                    if view["legal_actions"]:
                        answer = await seat.act(refuser(view["legal_actions"]), head.version)
                        version = answer["version"]
                    else:
                        version = head.version + 1  # wait for the bot's move
                final = await redis_store.head("lost-bots")
                last = await spectator.wait_for(
                    lambda m: m.get("kind") == "view" and m["view"]["version"] == final.version,
                    timeout=RECHECK_SECONDS + 5,
                )
                stored = await redis_store.read("lost-bots")
                assert [e["version"] for e in spectator.events()] == [
                    e.version for e in stored if e.body["type"] != "hand_dealt"
                ]  # every event a spectator may see, once, in order
                assert spectator.views()[-1] == last["view"]
        finally:
            bots.set()
            await asyncio.wait_for(runner, 10)


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
