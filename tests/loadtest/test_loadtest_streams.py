"""``--via streams``'s loop against a real Redis, the engine worker and projector in this process
(``tests.services.gateway_stack.Stack``): news that never comes, answers counted by their code,
sends that fail and ``--retry``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from services.chaos.checks import applied_twice, command_runs
from services.loadtest import links, streams
from services.loadtest.ledger import read_ledger
from services.loadtest.options import Options
from services.loadtest.runner import Run, RunEnd
from services.loadtest.streams import StreamsDriver, StreamsPlay
from services.settings import load_settings
from services.store.client import connect
from services.store.keys import KeySpace
from services.store.redis_store import RedisEventStore
from tests.services.gateway_stack import TEST_SECRET, Stack

pytestmark = pytest.mark.redis


def options(redis_url: str, redis_ns: str, prefix: str, **changes: Any) -> Options:
    return Options(
        via="streams",
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        tables=3,
        table_prefix=prefix,
        display="none",
        timeout=60,
        **changes,
    )


async def run(redis_url: str, redis_ns: str, run_options: Options, **settings: Any) -> RunEnd:
    service = load_settings(
        redis_url=redis_url, namespace=redis_ns, shards=2, token_secret=TEST_SECRET, **settings
    )
    async with Stack(service):
        return await Run(run_options, StreamsDriver(run_options), lambda row, s: None).run()


async def test_tables_finish_by_polling_when_feed_entries_and_hints_are_lost(
    redis_url: str, redis_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every hint is dropped (the rejections of moves out of turn announce themselves by
    nothing else), and every feed entry of one table is lost: only the polls find the answers."""
    monkeypatch.setattr(streams, "FIRST_POLL", 0.01)
    monkeypatch.setattr(streams, "MAX_POLL", 0.04)
    lost: list[str] = []
    appended = StreamsPlay.appended

    def losing(self: StreamsPlay, table_id: str, last: int) -> None:
        if table_id == "lt-lost-1":
            lost.append(table_id)
            return
        appended(self, table_id, last)

    monkeypatch.setattr(StreamsPlay, "appended", losing)
    asked = options(redis_url, redis_ns, "lt-lost", bad_share=0.3, seed=5)
    end = await run(redis_url, redis_ns, asked, drop_hints=1.0)
    totals = end.stats.totals()
    commands = totals["commands"]
    assert totals["tables"]["finished"] == 3 and totals["errors"] == {}
    assert len(lost) > 20  # the lost table's every move, found by polls
    refused = commands["refused_on_purpose"]
    assert refused > 0 and totals["rejections"] == {"move/not_your_turn": refused}
    assert commands["sent"] == commands["results"] == commands["accepted"] + refused
    assert totals["latency_ms"]["view"]["count"] == commands["accepted"]


def failing_sends(every: int) -> tuple[list[str], Any]:
    """An ``execute`` that drops every ``every``-th move's XADD from its pipeline and answers it
    with a connection error: the command never reaches Redis."""
    dropped: list[str] = []
    execute = StreamsDriver.execute
    seen = 0

    async def failing(self: StreamsDriver, calls: list[Any]) -> list[Any]:
        nonlocal seen
        kept, failed = [], set()
        for index, call in enumerate(calls):
            is_move = call[0] == "XADD" and call[6] != ""  # a seat's command, not a setup
            seen += is_move
            if is_move and seen % every == 0:
                failed.add(index)
                dropped.append(call[4].decode())
            else:
                kept.append(call)
        replies = iter(await execute(self, kept))
        error = RedisConnectionError("dropped by the test")
        return [error if i in failed else next(replies) for i in range(len(calls))]

    return dropped, failing


async def test_with_retry_a_failed_send_goes_again_and_is_applied_once(
    redis_url: str, redis_ns: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(links, "RETRY_PAUSE", 0.01)
    dropped, failing = failing_sends(7)
    monkeypatch.setattr(StreamsDriver, "execute", failing)
    ledger = tmp_path / "ledger.jsonl"
    asked = options(redis_url, redis_ns, "lt-retry", retry=True, ledger=str(ledger))
    end = await run(redis_url, redis_ns, asked)
    totals = end.stats.totals()
    assert totals["tables"]["finished"] == 3 and totals["errors"] == {}
    assert dropped and totals["retries"] == {"redis/error": len(dropped)}
    entries = read_ledger(ledger)
    assert len(entries) == totals["commands"]["accepted"] == totals["commands"]["sent"]
    client = connect(redis_url)
    try:
        store = RedisEventStore(client, KeySpace(ns=redis_ns, shards=2))
        for table_id in {entry.table_id for entry in entries}:
            events = await store.read(table_id)
            assert applied_twice(command_runs(events)) == []
            last = {event.body["command_id"]: event.version for event in events}
            assert all(last[e.command_id] == e.version for e in entries if e.table_id == table_id)
    finally:
        await client.aclose()


async def test_without_retry_a_failed_send_gives_its_table_up(
    redis_url: str, redis_ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped, failing = failing_sends(30)
    monkeypatch.setattr(StreamsDriver, "execute", failing)
    end = await run(redis_url, redis_ns, options(redis_url, redis_ns, "lt-noretry"))
    totals = end.stats.totals()
    assert dropped and totals["errors"] == {"redis/error": len(dropped)}
    assert totals["tables"]["finished"] == 3 - len(dropped)
    assert totals["retries"] == {}
