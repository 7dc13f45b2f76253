"""The bots runner plays bot seats through the command streams, against a real Redis.

Commands are applied by ``CommandApplier``, a test-only stand-in for the engine worker: it reads
every shard's command stream in order and runs ``TableService.execute`` for each entry, keeping
every outcome so that the tests can count accepted, repeated and rejected commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from redis.asyncio import Redis

from engine.bots import RandomBot
from engine.state import Phase
from events.chain import verify_chain
from events.commands import Command, CreateTable, Join, NextDeal, parse_command
from events.mapping import to_wire_command
from services.followers.bots_runner import (
    BotsRunner,
    bot_command,
    bot_command_id,
    run_bots,
)
from services.followers.feed import FeedFollower, submit_command, time_ms
from services.settings import Settings, load_settings
from services.store.keys import KeySpace
from services.store.memory_store import MemoryEventStore
from services.store.redis_store import RedisEventStore
from services.tables.results import CommandResult
from services.tables.service import TableService
from services.tables.table import Table

# --- a test-only engine worker and other helpers ---------------------------------------------


@dataclass(frozen=True)
class Applied:
    """One command stream entry as the applier executed it."""

    command: Command
    seat: int | None
    outcome: CommandResult


class CommandApplier:
    """Test-only stand-in for services/engine_worker/: applies each cmd stream in order."""

    def __init__(self, client: Redis, keys: KeySpace, clock: Callable[[], int] = time_ms) -> None:
        self.client = client
        self.service = TableService(RedisEventStore(client, keys), clock=clock)
        self.positions: dict[Any, Any] = {keys.cmd(s): "0-0" for s in range(keys.shards)}
        self.applied: list[Applied] = []

    async def step(self, block_ms: int = 50) -> int:
        """Apply the entries that arrived (waiting up to ``block_ms``); return how many."""
        reply = await self.client.xread(dict(self.positions), count=100, block=block_ms)
        n = 0
        for stream, entries in cast(
            list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], reply or []
        ):
            for entry_id, fields in entries:
                self.positions[stream.decode()] = entry_id.decode()
                command = parse_command(fields[b"c"])
                seat_text = fields[b"s"].decode()
                seat = int(seat_text) if seat_text else None
                outcome = await self.service.execute(command, seat)
                self.applied.append(Applied(command, seat, outcome))
                n += 1
        return n

    async def run(self, stop: asyncio.Event) -> None:
        """Apply commands until ``stop`` is set."""
        while not stop.is_set():
            await self.step()

    def of(self, table_id: str) -> list[Applied]:
        """Return what was applied to one table, in order."""
        return [a for a in self.applied if a.command.table_id == table_id]


@dataclass
class Background:
    """Tasks running beside a test; ``check`` raises the error of one that failed."""

    stop: asyncio.Event
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def check(self) -> None:
        for task in self.tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise AssertionError(f"background task failed: {task.exception()!r}")


@contextlib.asynccontextmanager
async def running(
    *starters: Callable[[asyncio.Event], Awaitable[None]],
) -> AsyncIterator[Background]:
    """Run ``starter(stop)`` for each starter as tasks; set ``stop`` and wait for them at exit."""
    background = Background(asyncio.Event())
    for starter in starters:
        background.tasks.append(asyncio.ensure_future(starter(background.stop)))
    try:
        yield background
    finally:
        background.stop.set()
        results = await asyncio.wait_for(
            asyncio.gather(*background.tasks, return_exceptions=True), 15
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]


async def wait_for_table(
    background: Background,
    service: TableService,
    table_id: str,
    predicate: Callable[[Table], bool],
    what: str,
    timeout: float = 90.0,
) -> Table:
    """Poll the table until ``predicate`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        background.check()
        table = await service.load(table_id)
        if table.exists and predicate(table):
            return table
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; table at {table.version}")
        await asyncio.sleep(0.02)


async def create(
    client: Redis, keys: KeySpace, table_id: str, bots: dict[int, str], **options: Any
) -> None:
    command = CreateTable(
        command_id=f"create-{table_id}"[:64], table_id=table_id, bots=bots, **options
    )
    await submit_command(client, keys, command, None, time_ms())


def audit(applied: list[Applied], stored: list[Any]) -> None:
    """No rejection; accepted command ids unique; each command's events contiguous; chain holds."""
    rejected = [(a.command.command_id, a.outcome.result) for a in applied if not a.outcome.ok]
    assert rejected == []
    accepted = [a.command.command_id for a in applied if not a.outcome.duplicate]
    assert len(accepted) == len(set(accepted))
    runs = [k for k, _ in itertools.groupby(e.body["command_id"] for e in stored)]
    assert runs == accepted
    assert verify_chain(stored) is None


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(redis_url=redis_url, namespace=redis_ns, shards=4, batch_size=100)


# --- deciding, without Redis -----------------------------------------------------------------


async def test_bot_commands_are_deterministic_and_only_for_bot_seats() -> None:
    service = TableService(MemoryEventStore())
    table_id = "unit-bots"
    create_cmd = CreateTable(command_id="create-0001", table_id=table_id, bots={1: "greedy"})
    await service.execute(create_cmd, None)
    table = await service.load(table_id)
    assert bot_command(table) is None  # seat 0 empty: no deal to start

    await service.execute(Join(command_id="join-0001", table_id=table_id, name="Ana"), None)
    table = await service.load(table_id)
    seen = 0
    while table.match is not None and table.match.to_act is not None and seen < 200:
        seat = table.match.to_act
        move = bot_command(table)
        if seat == 0:
            assert move is None  # the human's turn is not the bot's business
            action = RandomBot().choose(table.match, 0, random.Random(table.version))
            command: Command = to_wire_command(
                action, table_id, f"human-{table.version:04d}", table.version
            )
        else:
            assert move is not None
            assert move == bot_command(table)  # same table, same command
            assert move.seat == 1 and move.version == table.version
            assert move.command.command_id == bot_command_id(table.version, 1)
            assert move.command.expected_version == table.version
            command = move.command
        outcome = await service.execute(command, seat)
        assert outcome.ok, outcome.result
        table = await service.load(table_id)
        seen += 1
    assert table.match is not None and table.match.over  # one deal: the match is over
    assert bot_command(table) is None


async def test_between_deals_the_lowest_bot_seat_starts_the_next_deal() -> None:
    service = TableService(MemoryEventStore())
    table_id = "unit-two-bots"
    bots = {0: "random", 1: "greedy"}
    create_cmd = CreateTable(command_id="create-0001", table_id=table_id, bots=bots)
    await service.execute(create_cmd, None)
    table = await service.load(table_id)
    move = bot_command(table)
    assert move is not None and isinstance(move.command, NextDeal)
    assert move.seat == 0 and move.command.command_id == bot_command_id(table.version, 0)
    assert len(move.command.command_id) >= 8


# --- the runner against Redis ----------------------------------------------------------------


async def test_two_bots_play_a_whole_match_by_themselves(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    table_id = "bots-match"
    applier = CommandApplier(redis_client, keys)
    observer = TableService(RedisEventStore(redis_client, keys))
    await create(redis_client, keys, table_id, {0: "greedy", 1: "random"}, deals=2)

    async with running(applier.run, lambda stop: run_bots(settings, stop, block_ms=50)) as bg:
        table = await wait_for_table(
            bg, observer, table_id, lambda t: t.match is not None and t.match.over, "match over"
        )

    assert table.match is not None and table.match.deals_played == 2
    applied = applier.of(table_id)
    bot_sent = [a for a in applied if a.command.command_id.startswith("bot-")]
    assert len(bot_sent) == len(applied) - 1  # all but the create
    next_deals = [a for a in bot_sent if isinstance(a.command, NextDeal)]
    assert [a.seat for a in next_deals] == [0, 0]
    stored = await observer.store.read(table_id)
    audit(applied, stored)
    refolded = await TableService(RedisEventStore(redis_client, keys)).load(table_id)
    assert refolded.match == table.match


async def test_a_bot_and_a_scripted_human_finish_a_deal(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    table_id = "bot-vs-human"
    applier = CommandApplier(redis_client, keys)
    observer = TableService(RedisEventStore(redis_client, keys))
    await create(redis_client, keys, table_id, {1: "greedy"}, deals=2)
    join = Join(command_id="join-ana-01", table_id=table_id, name="Ana")
    await submit_command(redis_client, keys, join, None, time_ms())

    async def human(stop: asyncio.Event) -> None:
        """Seat 0: a scripted person who plays a random legal action whenever it is their turn."""
        service = TableService(RedisEventStore(redis_client, keys))
        played: set[int] = set()
        while not stop.is_set():
            table = await service.load(table_id)
            match = table.match
            if match is not None and match.to_act == 0 and table.version not in played:
                rng = random.Random(f"human/{table.version}")
                action = RandomBot().choose(match, 0, rng)
                command = to_wire_command(
                    action, table_id, f"human-{table.version:04d}", table.version
                )
                await submit_command(redis_client, keys, command, 0, time_ms())
                played.add(table.version)
            await asyncio.sleep(0.005)

    async with running(
        applier.run, human, lambda stop: run_bots(settings, stop, block_ms=50)
    ) as bg:
        table = await wait_for_table(
            bg, observer, table_id, lambda t: t.deal_number == 2, "the second deal"
        )

    applied = applier.of(table_id)
    by_seat = {
        seat: {a.command.command_id.split("-")[0] for a in applied if a.seat == seat}
        for seat in (0, 1)
    }
    assert by_seat == {0: {"human"}, 1: {"bot"}}
    stored = await observer.store.read(table_id)
    types = [e.body["type"] for e in stored]
    assert types.count("deal_started") == 2
    assert "stakes_settled" in types and "deal_revealed" in types  # the first deal finished
    first_deal_end = types.index("deal_revealed")
    second_start = stored[first_deal_end + 1]
    assert second_start.body["command_id"].startswith("bot-")  # the bot sent next_deal
    assert table.match is not None and table.match.deal is not None
    assert table.match.deal.phase is not Phase.OVER
    audit(applied, stored)


async def test_two_runners_at_once_apply_each_bot_command_once(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    table_id = "two-runners"
    applier = CommandApplier(redis_client, keys)
    observer = TableService(RedisEventStore(redis_client, keys))
    await create(redis_client, keys, table_id, {0: "greedy", 1: "greedy"}, deals=2)

    async with running(
        applier.run,
        lambda stop: run_bots(settings, stop, block_ms=50),
        lambda stop: run_bots(settings, stop, block_ms=50),
    ) as bg:
        table = await wait_for_table(
            bg, observer, table_id, lambda t: t.match is not None and t.match.over, "match over"
        )
        await asyncio.sleep(0.3)  # let the slower runner's last sends arrive
        while await applier.step(block_ms=100):
            pass

    applied = applier.of(table_id)
    duplicates = [a for a in applied if a.outcome.duplicate]
    assert duplicates, "both runners should have sent some of the same commands"
    assert all(a.outcome.ok for a in duplicates)  # a repeat gets the first (accepted) result
    stored = await observer.store.read(table_id)
    audit(applied, stored)  # no stale-version rejections, each command id applied once
    assert table.version == stored[-1].version


async def test_follower_resumes_after_its_checkpoint(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    service = TableService(RedisEventStore(redis_client, keys))
    for n in range(3):
        table_id = f"follow-{n}"
        command = CreateTable(command_id=f"create-{n:04d}", table_id=table_id)
        assert (await service.execute(command, None)).ok

    follower = FeedFollower(redis_client, keys, "probe", block_ms=10)
    stop = asyncio.Event()
    seen: list[str] = []
    async for tables in follower.batches(stop):
        seen += tables
        if len(seen) >= 3:
            stop.set()
    assert sorted(seen) == ["follow-0", "follow-1", "follow-2"]

    again = FeedFollower(redis_client, keys, "probe", block_ms=10)
    assert await again.read() == []  # the checkpoints were written
    command = CreateTable(command_id="create-0009", table_id="follow-9")
    assert (await service.execute(command, None)).ok
    assert [e.table_id for e in await again.read()] == ["follow-9"]


async def test_tables_without_a_bot_are_never_loaded(
    settings: Settings, redis_client: Redis
) -> None:
    """A table seats its bots at creation: the events of its creation show that it has none,
    and its feed entries (or those of a match over) cost the runner no load."""
    store = RedisEventStore(redis_client, settings.keys)
    service = TableService(store)
    runner = BotsRunner(redis_client, settings.keys, service=service)
    loads: list[str] = []
    load_many = service.load_many

    async def counted(table_ids: Sequence[str]) -> dict[str, Table | Exception]:
        loads.extend(table_ids)
        return await load_many(table_ids)

    humans = CreateTable(command_id="create-0001", table_id="humans")
    with_bot = CreateTable(command_id="create-0002", table_id="botted", bots={1: "greedy"})
    for command in (humans, with_bot):
        assert (await service.execute(command, None)).ok
    service.load_many = counted  # type: ignore[method-assign]
    follower = FeedFollower(redis_client, settings.keys, "bots-skip")
    tables = await follower.read_tables(block_ms=0)
    await runner.handle(tables)
    await runner.handle(tables)
    assert loads.count("humans") == 0 and loads.count("botted") == 2


async def test_one_batch_sends_the_moves_of_all_its_bot_tables_once(
    settings: Settings, redis_client: Redis
) -> None:
    """The tables of a batch are loaded together, in three pipelined calls for them all, and
    their moves sent in one call."""
    keys = settings.keys
    service = TableService(RedisEventStore(redis_client, keys))
    ids = [f"batch-{n:02d}" for n in range(20)]
    for n, table_id in enumerate(ids):
        bots = {0: "greedy", 1: "random"}
        create = CreateTable(command_id=f"create-{n:04d}", table_id=table_id, bots=bots)
        assert (await service.execute(create, None)).ok
    runner = BotsRunner(redis_client, keys)
    tables = await FeedFollower(redis_client, keys, "batch").read_tables(block_ms=0)
    moves = await runner.handle(tables)
    assert sorted(m.table_id for m in moves) == ids
    assert await runner.handle(tables) == []  # each version's move is sent once
    sent: dict[str, tuple[int | None, Command]] = {}
    for shard in range(keys.shards):
        for _, fields in await redis_client.xrange(keys.cmd(shard)):
            command = parse_command(fields[b"c"])
            sent[command.table_id] = (int(fields[b"s"]), command)
    assert sorted(sent) == ids
    for move in moves:
        seat, command = sent[move.table_id]
        assert seat == 0 and isinstance(command, NextDeal)
        assert command.command_id == bot_command_id(move.version, 0)


async def test_a_bot_command_lost_with_a_master_is_sent_again(
    settings: Settings, redis_client: Redis
) -> None:
    """A command that vanished (a master killed before its AOF had it) is sent again with the
    same command id once it is overdue; once the table moved past it, it is not."""
    keys = settings.keys
    service = TableService(RedisEventStore(redis_client, keys))
    create = CreateTable(
        command_id="create-lost", table_id="lost-1", bots={0: "greedy", 1: "random"}
    )
    assert (await service.execute(create, None)).ok
    runner = BotsRunner(redis_client, keys, resend_after_s=0.0)
    later = BotsRunner(redis_client, keys, resend_after_s=60.0)
    tables = await FeedFollower(redis_client, keys, "lost").read_tables(block_ms=0)
    (move,) = await runner.handle(tables)
    assert (await later.handle(tables))[0].command.command_id == move.command.command_id
    stream = keys.cmd(keys.shard_of("lost-1"))
    assert await redis_client.delete(stream) == 1  # the master came back without it
    assert await later.resend_overdue() == []  # not overdue yet
    (again,) = await runner.resend_overdue()
    assert again.command.command_id == move.command.command_id and again.version == move.version
    entries = await redis_client.xrange(stream)
    assert [parse_command(f[b"c"]).command_id for _, f in entries] == [move.command.command_id]
    # the engine applies it: the table moves on, and nothing is sent again
    assert (await service.execute(move.command, move.seat)).ok
    assert await runner.resend_overdue() == []
    assert await redis_client.xlen(stream) == 1
