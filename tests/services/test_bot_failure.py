"""A bot that fails on a table shows in the table's events and views (issue 18, defect b).

The bots runner used to log ``bot_failed`` and nothing else: the table waited on the bot's
seat for ever and no client could tell why. Now the runner reports the failure through the
command stream (the engine worker stays the only writer), the table gets a public
``bot_failed`` event, and the public view shows it on the seat until the next event. The audit
still verifies the table.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from engine import bots
from engine.actions import Action, Discard
from engine.state import Match
from events.commands import CreateTable, Join, ReportBotFailure, Resign
from events.domain import BotFailed
from services import cli
from services.audit import audit_store, audit_table
from services.followers.bots_runner import BotError, BotsRunner, bot_command, run_bots
from services.settings import Settings
from services.store import MemoryEventStore, RedisEventStore
from services.tables.service import TableService
from services.tables.stored_parts import TableFold
from tests.services.gateway_stack import Stack

SECRET_WORDS = "holding 5S KC"  # what a bot's own error might say: never shown to anyone


class BrokenBot:
    """A bot that raises whenever it is asked to move."""

    def choose(self, match: Match, seat: int, rng: random.Random) -> Action:
        raise RuntimeError(SECRET_WORDS)


class CheatingBot:
    """A bot that discards a card it does not hold, at any phase."""

    def choose(self, match: Match, seat: int, rng: random.Random) -> Action:
        return Discard(0)


@pytest.fixture(autouse=True)
def broken_bots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(bots.BOTS, "broken", BrokenBot)
    monkeypatch.setitem(bots.BOTS, "cheater", CheatingBot)


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    stop = asyncio.Event()
    async with Stack(settings) as running:
        runner = asyncio.create_task(run_bots(settings, stop, block_ms=50))
        try:
            yield running
        finally:
            stop.set()
            await asyncio.wait_for(runner, 20)


async def public_until(stack: Stack, table_id: str, done: Any) -> dict[str, Any]:
    """Return the public view once ``done(view)`` holds (each read waits for a newer one)."""
    version = 0
    for _ in range(100):
        view: dict[str, Any] = (
            await stack.http.get(f"/tables/{table_id}", params={"min_version": version + 1})
        ).json()
        if done(view):
            return view
        version = view.get("version", version)
    raise AssertionError(f"never: {view}")


async def assert_views_fold_from_events(redis: Redis, settings: Settings, table_id: str) -> None:
    """The views the engine worker stored equal the projector's fold of the events."""
    fold = TableFold(table_id)
    for event in await RedisEventStore(redis, settings.keys).read(table_id):
        fold.apply_body(event.version, event.body)
    for part, text in fold.views().items():
        stored = await redis.get(settings.keys.table_view(table_id, part))
        assert stored is not None and stored.decode() == text, part


async def test_a_bot_that_raises_shows_on_its_seat_and_the_table_still_audits(
    stack: Stack, settings: Settings, redis_client: Redis
) -> None:
    await stack.create(table_id="broken-1", deals=1, bots={"1": "broken"})
    ana = await stack.join("broken-1", "Ana", seat=0)  # the deal starts: seat 1 (the bot) turns
    public = await public_until(stack, "broken-1", lambda v: v["seats"][1]["bot_failure"])
    failure = public["seats"][1]["bot_failure"]
    assert failure["code"] == "bot/failed"
    assert "RuntimeError" in failure["message"] and "5S" not in failure["message"]
    assert public["seats"][0]["bot_failure"] is None and public["to_act"] == 1

    events = (await stack.http.get("/tables/broken-1/events", headers=ana.headers)).json()
    last = events["events"][-1]
    assert last["version"] == public["version"]
    assert last["payload"] == {
        "type": "bot_failed",
        "v": 1,
        "seat": 1,
        "bot": "broken",
        "code": "bot/failed",
        "message": failure["message"],
    }
    assert SECRET_WORDS not in str(events)

    await assert_views_fold_from_events(redis_client, settings, "broken-1")

    # Reported once: the runner does not try the bot again while its failure stands.
    runner = BotsRunner(redis_client, settings.keys)
    assert await runner.consider("broken-1") is None

    # A client cannot report a bot's failure itself.
    forged = ReportBotFailure(
        table_id="broken-1", command_id="forged-0001", code="bot/failed", message="x"
    )
    refused = await ana.send(forged)
    assert refused.status_code == 422 and refused.json()["code"] == "command/unsupported"

    # The human can still end the match; the failure is cleared by the next event.
    resign = Resign(table_id="broken-1", command_id="resign-0001")
    resigned = (await ana.send(resign)).json()
    assert resigned["ok"] is True, resigned
    after = await public_until(stack, "broken-1", lambda v: v["version"] >= resigned["version"])
    assert after["match_over"] is True and after["seats"][1]["bot_failure"] is None

    await assert_views_fold_from_events(redis_client, settings, "broken-1")
    store = RedisEventStore(redis_client, settings.keys)
    stored = await store.read("broken-1")
    assert [e.body["type"] for e in stored].count("bot_failed") == 1
    full = audit_table("broken-1", stored, await store.head("broken-1"))
    assert full.failure is None, full.failure
    reports = [r async for r in audit_store(store, ["broken-1"])]
    assert [r.failure for r in reports] == [None]
    where = ["--redis-url", settings.redis_url, "--namespace", settings.namespace]
    assert await asyncio.to_thread(cli.main, ["audit", "broken-1", *where]) == 0


async def test_the_audit_refuses_a_bot_failure_on_a_seat_without_that_bot() -> None:
    service = TableService(MemoryEventStore(), dealer_source=lambda: 0)
    create = CreateTable(table_id="t-forged", command_id="create-forged", bots={"1": "greedy"})
    await service.execute(create, None)
    await service.execute(Join(table_id="t-forged", command_id="join-forged", name="A"), None)
    store = service.store
    head = await store.head("t-forged")
    clean = audit_table("t-forged", await store.read("t-forged"), head)
    assert clean.failure is None
    forged = {
        **BotFailed(seat=0, bot="greedy", code="bot/failed", message="m").model_dump(),
        "command_id": "forged-failure",
        "time": 1,
    }
    await store.append("t-forged", head.version, head.hash, "forged-failure", [forged])
    stored = await store.read("t-forged")
    report = audit_table("t-forged", stored, await store.head("t-forged"))
    assert report.failure is not None and report.failure.code == "audit/event_mismatch"
    assert report.failure.version == len(stored) and "holds no greedy bot" in report.failure.reason


async def test_a_bots_unknown_name_or_illegal_move_is_a_bot_error() -> None:
    service = TableService(MemoryEventStore(), dealer_source=lambda: 0)
    for name, code in (("cheater", "bot/illegal_action"), ("gone", "bot/unknown")):
        table_id = f"t-{name}"
        bots_of = {"1": "cheater"}
        create = CreateTable(table_id=table_id, command_id=f"create-{name}", bots=bots_of)
        await service.execute(create, None)
        await service.execute(Join(table_id=table_id, command_id=f"join0-{name}", name="A"), None)
        table = await service.load(table_id)
        assert table.match is not None and table.match.to_act == 1

        def bot_for(bot: str, name: str = name) -> bots.Bot:
            return bots.make_bot("gone-for-good" if name == "gone" else bot)

        with pytest.raises(BotError) as info:
            bot_command(table, bot_for)
        assert info.value.code == code and info.value.seat == 1
        report = ReportBotFailure(
            table_id=table_id,
            command_id=f"report-{name}",
            code=info.value.code,
            message=info.value.message,
        )
        outcome = await service.execute(report, 1)
        assert outcome.ok, outcome.result
        table = await service.load(table_id)
        holder = table.seats[1]
        assert holder is not None and holder.failure is not None
        assert holder.failure.code == code
        assert bot_command(table, bot_for) is None  # its failure stands: not tried again
        refused = await service.execute(
            ReportBotFailure(table_id=table_id, command_id=f"human-{name}", code=code, message="m"),
            0,
        )
        assert refused.code == "command/unsupported"  # seat 0 holds no bot
