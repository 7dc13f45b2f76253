"""``conquian audit`` on tables that hold the lobby's events: a seat given up before the first
deal (``player_left``) and a rematch (``rematch_agreed``, ``rematch_opened``) pass, and each
written where the service would not have written it fails."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio

from events.chain import GENESIS_HASH, event_hash
from events.commands import (
    Command,
    CreateTable,
    Join,
    LeaveTable,
    Rematch,
    ReportBotFailure,
    Resign,
)
from services import cli
from services.audit import audit_table
from services.store import KeySpace, MemoryEventStore, RedisEventStore
from services.store.base import EventStore, StoredEvent
from services.tables.service import TableService

T = "lobby-audit"


async def play(store: EventStore, table_id: str = T, bot: bool = False) -> None:
    """Create, join, leave, join again, resign, and agree to a rematch from both seats (the
    human seat and its bot, at a bot's table)."""
    service = TableService(store, token_hasher=lambda t, s, c: "ab" * 32)

    async def ok(command: Command, seat: int | None = None) -> None:
        outcome = await service.execute(command, seat)
        assert outcome.ok, outcome.result

    bots = {1: "greedy"} if bot else None
    await ok(CreateTable(table_id=table_id, command_id="c-create-01", deals=1, bots=bots))
    if not bot:  # a join at a bot's table deals at once: nobody leaves
        await ok(Join(table_id=table_id, command_id="j-join-00001", seat=0, name="ana"))
        await ok(LeaveTable(table_id=table_id, command_id="c-leave-001"), 0)
        await ok(Join(table_id=table_id, command_id="j-join-00003", seat=1, name="cy"))
    await ok(Join(table_id=table_id, command_id="j-join-00002", seat=0, name="bo"))
    await ok(Resign(table_id=table_id, command_id="c-resign-01"), 0)
    for n, seat in enumerate((0, 0) if bot else (0, 0, 1)):
        rematch = Rematch(table_id=table_id, command_id=f"c-rematch-{n}", next_table_id="t-2")
        await ok(rematch, seat)


def test_the_audit_passes_a_table_with_lobby_events(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str
) -> None:
    async def record() -> list[str]:
        client = redis.asyncio.Redis.from_url(redis_url)
        store = RedisEventStore(client, KeySpace(redis_ns))
        await play(store)
        await play(store, "lobby-audit-bot", bot=True)
        kinds = [e.body["type"] for e in await store.read(T)]
        await client.aclose()
        return kinds

    kinds = asyncio.run(record())
    assert {"player_left", "rematch_agreed", "rematch_opened"} <= set(kinds)
    args = ["audit", T, "lobby-audit-bot", "--redis-url", redis_url, "--namespace", redis_ns]
    code = cli.main([*args, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    assert [r["status"] for r in data["reports"]] == ["over", "over"]
    assert cli.main(["replay", T, "--redis-url", redis_url, "--namespace", redis_ns]) == 0
    transcript = capsys.readouterr().out
    for line in (
        "seat 0: left before the first deal",
        "seat 1: agrees to a rematch",
        "rematch at table t-2",
    ):
        assert line in transcript


def _stored() -> list[dict[str, Any]]:
    store = MemoryEventStore()
    asyncio.run(play(store))
    return [dict(e.body) for e in asyncio.run(store.read(T))]


def _chain(bodies: list[dict[str, Any]]) -> list[StoredEvent]:
    out: list[StoredEvent] = []
    prev = GENESIS_HASH
    for version, body in enumerate(bodies, 1):
        body = {**body, "version": version}
        digest = event_hash(prev, body)
        out.append(StoredEvent(T, version, body, digest, prev))
        prev = digest
    return out


def _failure(bodies: list[dict[str, Any]]) -> tuple[str, int]:
    failure = audit_table(T, _chain(bodies), None).failure
    assert failure is not None
    return failure.code, failure.version


def _at(bodies: list[dict[str, Any]], kind: str) -> int:
    return next(i for i, b in enumerate(bodies) if b["type"] == kind)


def test_the_recorded_bodies_pass() -> None:
    assert audit_table(T, _chain(_stored()), None).ok


def test_a_seat_left_after_the_deal_is_illegal() -> None:
    bodies = _stored()
    left = {**bodies[_at(bodies, "player_left")], "command_id": "c-late-leave"}
    at = _at(bodies, "resigned")
    forged = [*bodies[:at], left, *bodies[at:]]
    assert _failure(forged) == ("audit/illegal_move", at + 1)


def test_a_seat_left_by_nobody_is_illegal() -> None:
    bodies = _stored()
    at = _at(bodies, "player_left")
    bodies[at] = {**bodies[at], "seat": 1}
    assert _failure(bodies) == ("audit/illegal_move", at + 1)


def test_a_rematch_before_the_end_is_illegal() -> None:
    bodies = _stored()
    agreed = bodies[_at(bodies, "rematch_agreed")]
    at = _at(bodies, "resigned")
    assert _failure([*bodies[:at], agreed, *bodies[at:]]) == ("audit/illegal_move", at + 1)


def test_a_rematch_opened_before_both_agreed_is_illegal() -> None:
    bodies = _stored()
    second = _at(bodies, "rematch_opened") - 1  # the second seat's agreement
    assert bodies[second]["type"] == "rematch_agreed"
    opened = {**bodies[second + 1], "command_id": bodies[second - 1]["command_id"]}
    forged = [*bodies[:second], opened]
    assert _failure(forged) == ("audit/illegal_move", second + 1)


def test_lobby_tables_on_redis_take_the_fast_path(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    redis_ns: str,
) -> None:
    """Tables holding ``player_left``, ``rematch_*`` and ``bot_failed`` are certified from what
    Redis holds: none is read again for the full audit."""

    async def record() -> set[str]:
        client = redis.asyncio.Redis.from_url(redis_url)
        store = RedisEventStore(client, KeySpace(redis_ns))
        await play(store)
        await play(store, "lobby-audit-bot", bot=True)
        service = TableService(store)
        failure = ReportBotFailure(
            table_id="lobby-audit-bot", command_id="c-failed-01", code="bot/no_move", message="x"
        )
        assert (await service.execute(failure, 1)).ok
        kinds = {e.body["type"] for t in (T, "lobby-audit-bot") for e in await store.read(t)}
        await client.aclose()
        return kinds

    assert {"player_left", "rematch_agreed", "rematch_opened", "bot_failed"} <= asyncio.run(
        record()
    )

    async def no_full_read(*args: object) -> None:
        raise AssertionError("a clean table was read again for the full audit")

    monkeypatch.setattr("services.audit.store_audit.load_tables", no_full_read)
    args = ["audit", "--all", "--json", "--redis-url", redis_url, "--namespace", redis_ns]
    code = cli.main(args)
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["tables"] == 2, data
