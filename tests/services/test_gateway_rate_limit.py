"""Rate limits of the gateway: token buckets per seat and per client address.

The buckets alone on a clock of the test's own; then through the app and a real Redis: a
create, join or command over its limit gets 429 ``rate/limited`` with ``Retry-After`` and is not
queued, a seat's limit is its own, and a command over the limit on the WebSocket gets a result
with the same code while the socket stays open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from services.gateway.errors import ApiError
from services.gateway.rate_limit import Bucket, Buckets, RateLimits, exempt_networks, take_all
from services.settings import Settings, load_settings
from tests.services.gateway_stack import Listener, Stack, wire_command


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def limits(clock: Clock, exempt: str = "") -> RateLimits:
    return RateLimits(
        seat=(1.0, 2.0),
        address=(10.0, 3.0),
        create=(0.5, 1.0),
        exempt=exempt_networks(exempt),
        clock=clock,
    )


def refused(call: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call()
    error = caught.value
    assert error.code == "rate/limited" and error.status == 429
    assert int(error.headers["Retry-After"]) >= 1
    assert error.body()["retry_after"] == int(error.headers["Retry-After"])
    return error


# --- the buckets -----------------------------------------------------------------------------


def test_a_bucket_allows_its_burst_then_its_rate() -> None:
    clock = Clock()
    limit = limits(clock)
    limit.command("t", 0, "192.0.2.1")
    limit.command("t", 0, "192.0.2.1")
    error = refused(lambda: limit.command("t", 0, "192.0.2.1"))
    assert error.body()["limit"] == "seat"
    clock.now += 0.5
    refused(lambda: limit.command("t", 0, "192.0.2.1"))  # half a token is no token
    clock.now += 0.5
    limit.command("t", 0, "192.0.2.1")
    limit.command("t", 1, "192.0.2.1")  # the other seat has a bucket of its own
    limit.command("u", 0, "192.0.2.1")  # and so has the same seat of another table


def test_retry_after_is_the_wait_rounded_up() -> None:
    bucket = Bucket(rate=0.1, burst=1.0, tokens=0.0, stamp=0.0)
    assert bucket.wait(0.0) == pytest.approx(10.0)
    clock = Clock()
    slow = Buckets("create", 0.1, 1.0, clock)
    take_all((slow, "a"))
    with pytest.raises(ApiError) as caught:
        take_all((slow, "a"))
    assert caught.value.headers["Retry-After"] == "10"


def test_a_refused_create_takes_nothing_from_the_address() -> None:
    clock = Clock()
    limit = limits(clock)
    limit.request("10.0.0.1", creates=True)
    refused(lambda: limit.request("10.0.0.1", creates=True))  # the create bucket: 1 a burst
    limit.request("10.0.0.1")  # the address still had two of its three
    limit.request("10.0.0.1")
    error = refused(lambda: limit.request("10.0.0.1"))
    assert error.body()["limit"] == "address"
    limit.request("10.0.0.2", creates=True)  # another address, other buckets


def test_exempt_addresses_are_not_limited() -> None:
    clock = Clock()
    limit = limits(clock, exempt="127.0.0.0/8, ::1")
    for _ in range(20):
        limit.request("127.0.0.1", creates=True)
        limit.request("::1", creates=True)
        limit.command("t", 0, "127.0.0.1")
    refused(lambda: [limit.request("192.0.2.7") for _ in range(4)])
    limit.command("t", 0, "192.0.2.1")
    limit.command("t", 0, "192.0.2.1")
    refused(lambda: limit.command("t", 0, "192.0.2.1"))


def test_a_rate_of_zero_turns_a_limit_off() -> None:
    limit = RateLimits(seat=(0.0, 1.0), address=(0.0, 1.0), create=(0.0, 1.0))
    for _ in range(100):
        limit.request("192.0.2.7", creates=True)
        limit.command("t", 0, "192.0.2.7")


def test_the_settings_default_to_limits_that_let_loopback_through() -> None:
    settings = load_settings()
    assert settings.rate_seat_per_s > 0 and settings.rate_address_per_s > 0
    networks = exempt_networks(settings.rate_exempt)
    assert any(n.version == 4 and n.network_address.is_loopback for n in networks)


# --- through the gateway ---------------------------------------------------------------------


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret="gateway-rate-secret-0123456789",
        result_wait_ms=5000,
        rate_exempt="",  # the test client's 127.0.0.1 counts
        rate_create_per_s=0.001,
        rate_create_burst=2,
        rate_address_per_s=0.001,
        rate_address_burst=12,
        rate_seat_per_s=0.001,
        rate_seat_burst=3,
    )


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    async with Stack(settings, serve=True) as running:
        yield running


async def backlog(redis: Redis, settings: Settings) -> int:
    """Commands queued on every shard's stream."""
    keys = settings.keys
    return sum([await redis.xlen(keys.cmd(s)) for s in range(keys.shards)])


async def test_creates_over_the_limit_get_429_and_are_not_queued(
    stack: Stack, redis_client: Redis, settings: Settings
) -> None:
    await stack.create(table_id="rl-a", deals=1)
    await stack.create(table_id="rl-b", deals=1)
    queued = await backlog(redis_client, settings)
    response = await stack.http.post("/tables", json={"table_id": "rl-c", "deals": 1})
    assert response.status_code == 429, response.text
    body = response.json()
    assert body["ok"] is False and body["code"] == "rate/limited" and body["limit"] == "create"
    assert int(response.headers["retry-after"]) == body["retry_after"] >= 1
    assert await backlog(redis_client, settings) == queued
    missing = await stack.http.get("/tables/rl-c")
    assert missing.status_code == 404


async def test_a_seat_over_its_limit_gets_429_on_http_and_a_result_on_the_socket(
    stack: Stack, redis_client: Redis, settings: Settings
) -> None:
    await stack.create(table_id="rl-seat", deals=1)
    ana = await stack.join("rl-seat", "Ana", seat=0)
    bo = await stack.join("rl-seat", "Bo", seat=1)
    # Three commands a seat: whatever the table answers (it refuses most), each one counts.
    for _ in range(3):
        answer = await ana.send(wire_command("turn", "rl-seat", ana.next_command_id(), None))
        assert answer.status_code != 429, answer.text
    queued = await backlog(redis_client, settings)
    over = await ana.send(wire_command("turn", "rl-seat", ana.next_command_id(), None))
    assert over.status_code == 429, over.text
    assert over.json()["code"] == "rate/limited" and over.json()["limit"] == "seat"
    assert "retry-after" in over.headers
    assert await backlog(redis_client, settings) == queued  # not queued
    other = await bo.send(wire_command("turn", "rl-seat", bo.next_command_id(), None))
    assert other.status_code != 429, other.text  # Bo's bucket is his own

    url = f"{stack.ws_base}/tables/rl-seat/ws?token={ana.token}"
    async with Listener(url) as socket:
        command = wire_command("turn", "rl-seat", ana.next_command_id(), None)
        result = await socket.command(command)
        assert result["ok"] is False and result["code"] == "rate/limited"
        assert result["retry_after"] >= 1 and result["command_id"] == command.command_id
        start = len(socket.messages)
        await socket.send({"kind": "hello"})  # the socket is still open and answering
        reply = await socket.wait_for(lambda m: m.get("kind") == "result", start=start)
        assert reply["code"] == "command/unknown_type"
        assert not socket.closed
    assert await backlog(redis_client, settings) == queued + 1  # Bo's command alone


async def test_the_lobby_routes_count_against_the_seat(
    stack: Stack, redis_client: Redis, settings: Settings
) -> None:
    """resign, leave and rematch are a seat's commands under routes of their own: each one
    takes from the seat's bucket, and one over the limit is refused before it is queued."""
    await stack.create(table_id="rl-lobby", deals=1)
    ana = await stack.join("rl-lobby", "Ana", seat=0)
    for _ in range(3):
        answer = await ana.send(wire_command("turn", "rl-lobby", ana.next_command_id(), None))
        assert answer.status_code != 429, answer.text
    queued = await backlog(redis_client, settings)
    for route in ("resign", "leave", "rematch"):
        over = await stack.http.post(f"/tables/rl-lobby/{route}", headers=ana.headers)
        assert over.status_code == 429, (route, over.text)
        assert over.json()["code"] == "rate/limited" and over.json()["limit"] == "seat"
    assert await backlog(redis_client, settings) == queued
    view = (await stack.http.get("/tables/rl-lobby")).json()
    assert view["seats"][0] is not None  # the leave was not applied
