"""The table WebSocket against a real uvicorn server, engine worker and projector in process.

Resume: a socket that drops and reconnects with the last version it saw gets exactly the
events it missed (no gap, nothing twice), then the current view; one whose gap is too old gets
a full view first.  Refusals close with their codes; commands sent on the socket get results;
every socket of the process shares one Redis subscription.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError, MaxConnectionsError

from events.commands import LeaveTable
from services.settings import Settings, load_settings
from tests.services.gateway_stack import Listener, Seat, Stack, refuser, wire_command


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret="gateway-ws-secret-0123456789",
        result_wait_ms=5000,
        resume_gap=40,
    )


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    async with Stack(settings, serve=True) as running:
        yield running


async def seated(stack: Stack, table_id: str) -> tuple[Seat, Seat]:
    await stack.create(table_id=table_id, deals=1)
    return await stack.join(table_id, "Ana", seat=0), await stack.join(table_id, "Bo", seat=1)


async def moves(seats: tuple[Seat, Seat], version: int, count: int) -> int:
    """Play up to ``count`` moves, nobody taking; return the version after them."""
    for _ in range(count):
        for seat in seats:
            view = await seat.view(version)
            if view["legal_actions"]:
                answer = await seat.act(refuser(view["legal_actions"]), version)
                version = answer["version"]
                break
        else:
            break
    return version


def url(stack: Stack, table_id: str, token: str | None = None, after: int | None = None) -> str:
    query = [f"token={token}"] if token else []
    if after is not None:
        query.append(f"after={after}")
    return f"{stack.ws_base}/tables/{table_id}/ws" + ("?" + "&".join(query) if query else "")


def last_seen(socket: Listener) -> int:
    """The last version a client saw: its newest event or view."""
    versions = [e["version"] for e in socket.events()] + [v["version"] for v in socket.views()]
    return max(versions)


async def visible_events(stack: Stack, seat: Seat, after: int) -> list[dict[str, Any]]:
    response = await stack.http.get(
        f"/tables/{seat.table_id}/events", params={"after": after}, headers=seat.headers
    )
    assert response.status_code == 200
    page: list[dict[str, Any]] = response.json()["events"]
    return page


async def test_a_reconnect_with_its_last_version_gets_exactly_what_it_missed(
    stack: Stack,
) -> None:
    ana, bo = await seated(stack, "resume")
    version = bo.version
    first = Listener(url(stack, "resume", ana.token))
    async with first:
        hello = await first.wait_for(lambda m: m["kind"] == "hello")
        assert first.messages[0] is hello and hello["seat"] == 0 and not hello["resumed"]
        version = await moves((ana, bo), version, 6)
        await first.wait_version(version)
    seen = last_seen(first)
    assert seen == version

    version = await moves((ana, bo), version, 8)
    assert version - seen > 8

    second = Listener(url(stack, "resume", ana.token, after=seen))
    async with second:
        await second.wait_version(version)
        await second.wait_for(lambda m: m["kind"] == "view" and m["view"]["version"] == version)
        hello = second.messages[0]
        assert hello["kind"] == "hello" and hello["resumed"] is True and hello["after"] == seen
        missed = await visible_events(stack, ana, seen)
        assert second.events() == missed
        kinds = [m["kind"] for m in second.messages]
        assert kinds == ["hello"] + ["event"] * len(missed) + ["view"] * (
            len(kinds) - 1 - len(missed)
        )

        # after the first socket's view, the two sockets together hold every event seat 0 may
        # see, each exactly once
        everything = await visible_events(stack, ana, first.messages[0]["after"])
        together = [e["version"] for e in first.events() + second.events()]
        assert together == [e["version"] for e in everything]
        assert all(
            e["payload"].get("seat") == 0
            for e in everything
            if e["payload"]["type"] == "hand_dealt"
        )

        # live again: the next move arrives once, as an event then a view
        version = await moves((ana, bo), version, 1)
        await second.wait_for(lambda m: m["kind"] == "view" and m["view"]["version"] == version)
        assert [e["version"] for e in second.events()][-1] <= version
        assert second.views()[-1] == await ana.view(version)


async def test_a_gap_too_old_gets_a_full_view_first(stack: Stack) -> None:
    ana, bo = await seated(stack, "gap")
    version = await moves((ana, bo), bo.version, 30)
    await ana.view(version)  # the projector has caught up
    assert version > stack.settings.resume_gap
    async with Listener(url(stack, "gap", bo.token, after=0)) as socket:
        await socket.wait_for(lambda m: m["kind"] == "view")
        hello, view = socket.messages[0], socket.messages[1]
        assert hello["kind"] == "hello" and hello["resumed"] is False
        assert view["kind"] == "view" and view["view"]["version"] == version
        assert view["view"]["seat"] == 1
        assert hello["after"] == version and socket.events() == []


async def test_a_spectator_socket_sees_no_hand(stack: Stack) -> None:
    ana, bo = await seated(stack, "watch")
    async with Listener(url(stack, "watch", after=0)) as socket:
        version = await moves((ana, bo), bo.version, 4)
        await socket.wait_version(version)
        assert socket.messages[0]["seat"] is None
        types = [e["payload"]["type"] for e in socket.events()]
        assert "hand_dealt" not in types and "deal_started" in types
        for view in socket.views():
            assert all(p["hand"] is None for p in view["deal"]["players"])


async def test_refused_sockets_close_with_their_codes(stack: Stack) -> None:
    await seated(stack, "closed")
    for address, code, close in (
        (url(stack, "closed", "not-a-token"), "seat/bad_token", 4401),
        (url(stack, "nowhere"), "table/not_found", 4404),
        (url(stack, "bad.id"), "table/invalid_id", 4404),
        # the rule of HTTP's ?after= (issue 18, 1f): -1 was accepted, abc answered HTTP 403
        (url(stack, "closed", after=-1), "query/invalid", 4422),
        (url(stack, "closed") + "?after=abc", "query/invalid", 4422),
        (url(stack, "closed") + "?after=99999999999999999999999", "query/invalid", 4422),
    ):
        socket = Listener(address)
        async with socket:
            error = await socket.wait_for(lambda m: m["kind"] == "error")
            assert error["code"] == code
            assert await socket.wait_closed() == close


async def test_commands_on_the_socket_get_results(stack: Stack) -> None:
    ana, bo = await seated(stack, "cmds")
    seat = ana if (await ana.view(bo.version))["legal_actions"] else bo
    async with (
        Listener(url(stack, "cmds", seat.token)) as socket,
        Listener(url(stack, "cmds")) as spectator,
    ):
        command = wire_command("turn", "cmds", "ws-turn-0001", bo.version)
        result = await socket.command(command)
        assert result["ok"] is True and result["version"] > bo.version
        again = await socket.command(command)
        assert again["duplicate"] is True and again["version"] == result["version"]

        async def refused(message: Any, code: str) -> dict[str, Any]:
            start = len(socket.messages)
            if isinstance(message, str):
                await socket._socket.send(message)
            else:
                await socket.send(message)
            reply = await socket.wait_for(lambda m: m.get("kind") == "result", start=start)
            assert reply["ok"] is False and reply["code"] == code, reply
            return reply

        await refused({"kind": "command", "command": {"type": "fly"}}, "command/unknown_type")
        await refused("{oops", "command/malformed_json")
        await refused("[" * 3000 + "]" * 3000, "command/malformed_json")  # dropped the socket
        await refused({"kind": "hello"}, "command/unknown_type")
        await refused({"kind": "command", "command": {"pad": "x" * 10_000}}, "command/too_large")
        wrong = wire_command("refuse", "elsewhere", "ws-wrong-0001", None)
        assert (await socket.command(wrong))["code"] == "command/wrong_table"

        watched = await spectator.command(wire_command("refuse", "cmds", "ws-spec-0001", None))
        assert watched["code"] == "seat/required"


async def test_every_socket_shares_one_subscription(
    stack: Stack, redis_client: Redis, settings: Settings
) -> None:
    ana, bo = await seated(stack, "shared")
    sockets = [Listener(url(stack, "shared", seat.token)) for seat in (ana, bo) * 3]
    sockets += [Listener(url(stack, "shared")) for _ in range(4)]
    for socket in sockets:
        await socket.__aenter__()
    try:
        for socket in sockets:
            await socket.wait_for(lambda m: m["kind"] == "hello")
        channels = [f"{settings.namespace}:views", f"{settings.namespace}:results"]
        counts = dict(await redis_client.pubsub_numsub(*channels))
        assert counts == {c.encode(): 1 for c in channels}
        version = await moves((ana, bo), bo.version, 2)
        for socket in sockets:
            await socket.wait_version(version)
    finally:
        for socket in sockets:
            await socket.close()


def test_a_connection_that_falls_too_far_behind_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    from services.gateway import live

    monkeypatch.setattr(live, "MAX_QUEUE", 3)
    connection = live.Connection(0)
    for n in range(5):
        connection.send({"kind": "event", "n": n})
    assert connection.dropped is not None
    queued = [connection.queue.get_nowait() for _ in range(connection.queue.qsize())]
    assert queued == [
        {"kind": "event", "n": 0},
        {"kind": "event", "n": 1},
        {"kind": "event", "n": 2},
        None,
    ]


async def test_a_seat_given_up_closes_its_socket_before_the_next_player_is_dealt(
    stack: Stack,
) -> None:
    await stack.create(table_id="gone", deals=1)
    ana = await stack.join("gone", "Ana", seat=0)
    async with Listener(url(stack, "gone", ana.token, after=0)) as socket:
        await socket.wait_version(ana.version)
        answer = await stack.http.post("/tables/gone/leave", headers=ana.headers)
        assert answer.status_code == 200, answer.text
        error = await socket.wait_for(lambda m: m["kind"] == "error")
        assert error["code"] == "seat/bad_token"
        assert await socket.wait_closed() == 4401
        assert socket.events()[-1]["payload"] == {"type": "player_left", "v": 1, "seat": 0}
    await stack.join("gone", "Bo", seat=0)
    await stack.join("gone", "Cy", seat=1)
    assert all(v["seat"] == 0 and v.get("deal") is None for v in socket.views())


async def test_a_seat_that_leaves_over_its_socket_gets_the_result_before_the_close(
    stack: Stack,
) -> None:
    """The ``leave_table`` sent on the socket is answered there: the ``player_left`` event,
    then the command's result, then ``seat/bad_token`` and 4401, and no view after the event."""
    await stack.create(table_id="bye", deals=1)
    ana = await stack.join("bye", "Ana", seat=0)
    async with Listener(url(stack, "bye", ana.token, after=0)) as socket:
        await socket.wait_version(ana.version)
        leave = LeaveTable(table_id="bye", command_id="ws-leave-0001")
        result = await socket.command(leave)
        assert result["ok"] is True and result["version"] == ana.version + 1, result
        assert await socket.wait_closed() == 4401
        kinds = [m["kind"] for m in socket.messages]
        left = next(
            i
            for i, m in enumerate(socket.messages)
            if m["kind"] == "event" and m["event"]["payload"]["type"] == "player_left"
        )
        assert kinds[left + 1 :] == ["result", "error"], kinds
        assert socket.messages[-1]["code"] == "seat/bad_token"


async def test_a_socket_command_after_its_seat_was_given_up_is_refused(stack: Stack) -> None:
    """A socket open when its seat was given up (and taken again) acts for nobody, even
    before its room has seen the ``player_left`` that closes it."""
    from services.gateway.ws import _answer

    await stack.create(table_id="stale", deals=1)
    ana = await stack.join("stale", "Ana", seat=0)
    leave = await stack.http.post("/tables/stale/leave", headers=ana.headers)
    assert leave.status_code == 200
    bo = await stack.join("stale", "Bo", seat=0)
    command = wire_command("turn", "stale", "ws-stale-0001", None).model_dump(mode="json")
    raw = json.dumps({"kind": "command", "command": command})
    gateway = stack.app.state.gateway
    reply = await _answer(gateway, "stale", ana.token, 0, raw, "127.0.0.1")
    assert (reply["ok"], reply["code"]) == (False, "seat/bad_token")
    assert (await stack.http.get("/tables/stale")).json()["version"] == bo.version
    # the seat's new token acts
    mine = await _answer(gateway, "stale", bo.token, 0, raw, "127.0.0.1")
    assert mine["code"] != "seat/bad_token", mine


async def test_a_store_failure_answers_the_command_and_keeps_the_socket(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every connection to Redis out (a saturated gateway on a cluster met it), or Redis away:
    the command's result says ``store/unavailable`` with ``retry_after``, as HTTP's 503 does,
    and the socket stays open; the same command sent again is applied."""
    ana, bo = await seated(stack, "outage")
    seat = ana if (await ana.view(bo.version))["legal_actions"] else bo
    intake = stack.app.state.gateway.intake
    submit = intake.submit
    failures = [MaxConnectionsError("too many connections"), ConnectionError("Redis away")]

    async def failing(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop(0)
        return await submit(*args, **kwargs)

    monkeypatch.setattr(intake, "submit", failing)
    async with Listener(url(stack, "outage", seat.token)) as socket:
        command = wire_command("turn", "outage", "ws-outage-0001", bo.version)
        for _ in range(2):
            refused = await socket.command(command)
            assert refused["ok"] is False and refused["code"] == "store/unavailable", refused
            assert refused["retry_after"] == 1 and refused["command_id"] == "ws-outage-0001"
        applied = await socket.command(command)
        assert applied["ok"] is True and applied["version"] > bo.version
        assert socket.close_code is None


async def test_sockets_the_gateway_cannot_serve_close_with_a_code(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis away while a socket opens: ``store/unavailable`` and 4503 (try again later); a
    fault of the gateway while serving one: ``gateway/error`` and 4500, not a connection
    dropped without a close frame (1006)."""
    ana, _ = await seated(stack, "faults")
    gateway = stack.app.state.gateway
    head = gateway.store.head

    async def away(table_id: str) -> Any:
        raise ConnectionError("Redis away")

    monkeypatch.setattr(gateway.store, "head", away)
    async with Listener(url(stack, "faults", ana.token)) as socket:
        error = await socket.wait_for(lambda m: m["kind"] == "error")
        assert error["code"] == "store/unavailable"
        assert await socket.wait_closed() == 4503
    monkeypatch.setattr(gateway.store, "head", head)

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(gateway.intake, "submit", broken)
    async with Listener(url(stack, "faults", ana.token)) as socket:
        start = len(socket.messages)
        fault = wire_command("turn", "faults", "ws-fault-0001", 2)
        await socket.send({"kind": "command", "command": fault.model_dump(mode="json")})
        error = await socket.wait_for(lambda m: m["kind"] == "error", start=start)
        assert error["code"] == "gateway/error"
        assert await socket.wait_closed() == 4500
