"""The turn clock: a timed-out human seat gets its documented default action, exactly once.

The clock is injected (``run_clock(..., clock=...)`` and ``TurnClock(clock=...)``), and the
test-only command applier of test_bots_runner.py stamps events with the same clock, so that
deadlines are exact and nothing times out unless the test moves the clock.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import Redis
from test_bots_runner import (  # the test folder is on sys.path (like tests/engine/positions)
    CommandApplier,
    running,
    wait_for_table,
)

from engine.actions import (
    Action,
    Discard,
    Force,
    Leave,
    NewMatch,
    Play,
    Refuse,
    StartDeal,
    Take,
    TurnCard,
    Waive,
)
from engine.bots import GreedyBot, RandomBot
from engine.game import decide, evolve
from engine.legal import default_take, legal_actions
from engine.rules import PRESETS
from engine.state import Match, Phase
from events.commands import CreateTable, Join, NextDeal, Turn
from events.mapping import to_wire_command
from services.followers.feed import FeedFollower, submit_command
from services.followers.turn_clock import (
    TurnClock,
    clock_command_id,
    default_action,
    run_clock,
    timed_seat,
    timeout_command,
)
from services.selfplay.cli import deal_deck
from services.settings import Settings, load_settings
from services.store.keys import KeySpace
from services.store.memory_store import MemoryEventStore
from services.store.redis_store import RedisEventStore
from services.tables.service import TableService
from services.tables.table import Table

T0 = 1_700_000_000_000
TURN_SECONDS = 5


class FakeClock:
    """A clock the test moves by hand (ms since the epoch)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(redis_url=redis_url, namespace=redis_ns, shards=4, batch_size=100)


# --- the default actions, without Redis ------------------------------------------------------


def expected_default(match: Match) -> Action:
    """The table of docs/turn-clock.md, written out again independently."""
    assert match.deal is not None and match.to_act is not None
    legal = legal_actions(match)
    phase = match.deal.phase
    simple: dict[Phase, Action] = {
        Phase.TURN: TurnCard(),
        Phase.OFFERED: Refuse(),
        Phase.TURNED: Leave(),
        Phase.FORCE_WINDOW: Waive(),
    }
    wanted = simple.get(phase)
    if phase is Phase.DISCARD:
        wanted = GreedyBot().choose(match, match.to_act, random.Random(0))
    if wanted in legal:
        return wanted
    take = default_take(match, 0)
    if take in legal:
        assert take is not None
        return take
    return next(a for a in legal if isinstance(a, Take))


@pytest.mark.parametrize("rules", ["classic", "automatic-forcing"])
def test_default_actions_follow_the_documented_table(rules: str) -> None:
    phases: set[Phase] = set()
    for index in range(60):
        rng = random.Random(index)
        match: Match | None = None
        for event in decide(None, NewMatch(rules=PRESETS[rules], first_dealer=index % 2)):
            match = evolve(match, event)
        assert match is not None
        for event in decide(match, StartDeal(deal_deck(7, index))):
            match = evolve(match, event)
        while match.to_act is not None:
            seat = match.to_act
            assert match.deal is not None
            phases.add(match.deal.phase)
            action = default_action(match)
            assert action in legal_actions(match)
            assert action == expected_default(match)
            assert not isinstance(action, Force)
            if match.deal.phase is Phase.DISCARD:
                assert isinstance(action, Discard)
            # play on at random (forcing often, to reach the forced phase)
            legal = legal_actions(match)
            forces = [a for a in legal if isinstance(a, Force)]
            choice = forces[0] if forces and rng.random() < 0.7 else rng.choice(legal)
            for event in decide(match, Play(seat, choice)):
                match = evolve(match, event)
    wanted = {Phase.TURN, Phase.OFFERED, Phase.TURNED, Phase.DISCARD}
    if rules == "classic":
        wanted |= {Phase.FORCE_WINDOW, Phase.FORCED}
    assert wanted <= phases


async def test_default_actions_alone_play_a_timed_match_and_start_the_next_deal() -> None:
    service = TableService(MemoryEventStore())
    table_id = "unit-clock"
    create = CreateTable(
        command_id="create-0001", table_id=table_id, turn_seconds=TURN_SECONDS, deals=2
    )
    await service.execute(create, None)
    for name in ("Ana", "Bea"):
        await service.execute(Join(command_id=f"join-{name}-1", table_id=table_id, name=name), None)
    table = await service.load(table_id)
    next_deals = 0
    for _ in range(500):
        if table.match is None or table.match.over:
            break
        timeout = timeout_command(table)
        assert timeout is not None and timeout.version == table.version
        assert timeout.command.command_id == clock_command_id(table.version)
        assert timeout.command.expected_version == table.version
        if table.match.to_act is None:
            assert isinstance(timeout.command, NextDeal) and timeout.seat == 0
            next_deals += 1
        else:
            assert timeout.seat == table.match.to_act
        outcome = await service.execute(timeout.command, timeout.seat)
        assert outcome.ok, outcome.result
        table = await service.load(table_id)
    assert table.match is not None and table.match.over
    assert next_deals == 1
    assert timeout_command(table) is None


async def test_no_clock_for_bots_or_untimed_tables() -> None:
    service = TableService(MemoryEventStore())
    untimed = CreateTable(command_id="create-0001", table_id="untimed", bots={1: "greedy"})
    await service.execute(untimed, None)
    await service.execute(Join(command_id="join-0001", table_id="untimed", name="Ana"), None)
    assert timed_seat(await service.load("untimed")) is None

    timed = CreateTable(
        command_id="create-0002", table_id="timed", bots={1: "greedy"}, turn_seconds=TURN_SECONDS
    )
    await service.execute(timed, None)
    await service.execute(Join(command_id="join-0002", table_id="timed", name="Ana"), None)
    table = await service.load("timed")
    for _ in range(200):
        match = table.match
        assert match is not None
        if match.to_act is None:
            break
        seat = match.to_act
        assert timed_seat(table) == (0 if seat == 0 else None)
        action = RandomBot().choose(match, seat, random.Random(table.version))
        command = to_wire_command(action, "timed", f"move-{table.version:04d}", table.version)
        assert (await service.execute(command, seat)).ok
        table = await service.load("timed")
    assert timed_seat(table) is None  # match over


# --- the clock against Redis -----------------------------------------------------------------


async def seat_two_humans(service: TableService, table_id: str) -> Table:
    create = CreateTable(
        command_id="create-0001", table_id=table_id, turn_seconds=TURN_SECONDS, deals=2
    )
    assert (await service.execute(create, None)).ok
    for name in ("Ana", "Bea"):
        join = Join(command_id=f"join-{name}-01", table_id=table_id, name=name)
        assert (await service.execute(join, None)).ok
    table = await service.load(table_id)
    assert table.match is not None and table.match.to_act is not None
    return table


async def timer(client: Redis, keys: KeySpace, table_id: str) -> tuple[int | None, int | None]:
    """Return the table's (deadline, version) in the timer keys, None where there is none."""
    zset = keys.timers(keys.shard_of(table_id))
    score = await client.zscore(zset, table_id)
    version = await client.hget(f"{zset}:v", table_id)
    return (
        None if score is None else int(score),
        None if version is None else int(version),
    )


async def arm_from_feeds(follower: FeedFollower, clock: TurnClock) -> None:
    await clock.handle(await follower.read_tables(block_ms=0))


async def test_a_human_who_does_not_act_gets_the_default_action_once(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    fake = FakeClock()
    applier = CommandApplier(redis_client, keys, clock=fake)
    observer = TableService(RedisEventStore(redis_client, keys))
    table_id = "slow-human"
    for command in (
        CreateTable(command_id="create-0001", table_id=table_id, turn_seconds=TURN_SECONDS),
        Join(command_id="join-ana-01", table_id=table_id, name="Ana"),
        Join(command_id="join-bea-01", table_id=table_id, name="Bea"),
    ):
        await submit_command(redis_client, keys, command, None, fake())

    def clock_loop(stop: asyncio.Event) -> Any:
        return run_clock(settings, stop, fake, tick_ms=10, block_ms=20)

    async with running(applier.run, clock_loop, clock_loop) as bg:
        table = await wait_for_table(
            bg,
            observer,
            table_id,
            lambda t: t.match is not None and t.match.to_act is not None,
            "the first deal",
        )
        version = table.version
        assert table.match is not None
        seat = table.match.to_act
        deadline = T0 + TURN_SECONDS * 1000
        await wait_until(bg, lambda: timer(redis_client, keys, table_id), (deadline, version))

        fake.now = deadline - 1
        await asyncio.sleep(0.2)
        assert (await observer.load(table_id)).version == version  # not yet

        fake.now = deadline
        table = await wait_for_table(
            bg, observer, table_id, lambda t: t.version > version, "the default action"
        )
        await asyncio.sleep(0.3)  # both loops have had many ticks to fire again

    fired = [a for a in applier.of(table_id) if a.command.command_id.startswith("clock-")]
    assert [a.command.command_id for a in fired if not a.outcome.duplicate] == [
        clock_command_id(version)
    ]
    assert all(a.outcome.ok and a.seat == seat for a in fired)
    assert isinstance(fired[0].command, Turn)  # the documented default of the first turn
    stored = await observer.store.read(table_id, version + 1)
    assert {e.body["command_id"] for e in stored} == {clock_command_id(version)}
    # the next turn is timed from the default action's own time, and has not run out
    next_deadline, next_version = await timer(redis_client, keys, table_id)
    assert next_version == table.version and next_deadline == deadline + TURN_SECONDS * 1000


async def test_two_clocks_take_a_timer_once_and_a_repeat_is_applied_once(
    settings: Settings, redis_client: Redis
) -> None:
    keys = settings.keys
    fake = FakeClock()
    applier = CommandApplier(redis_client, keys, clock=fake)
    first = TurnClock(redis_client, keys, clock=fake)
    second = TurnClock(redis_client, keys, clock=fake)
    table = await seat_two_humans(applier.service, "two-clocks")
    untimed = CreateTable(command_id="create-0002", table_id="no-clock")
    assert (await applier.service.execute(untimed, None)).ok
    await arm_from_feeds(FeedFollower(redis_client, keys, "clock-test", block_ms=10), first)
    assert await timer(redis_client, keys, "no-clock") == (None, None)
    deadline, version = await timer(redis_client, keys, "two-clocks")
    assert version == table.version and deadline == T0 + TURN_SECONDS * 1000

    fake.now = deadline
    fired = list(itertools.chain(*await asyncio.gather(first.tick(), second.tick())))
    assert len(fired) == 1  # the lease: one clock takes the timer
    assert await timer(redis_client, keys, "two-clocks") == (None, version)
    # a clock whose lease ran out (or a redelivered timer) sends the very same command
    again = await second.fire("two-clocks", version)
    assert again is not None and again.command == fired[0].command

    while await applier.step(block_ms=10):
        pass
    applied = [a for a in applier.applied if a.command.command_id == clock_command_id(version)]
    assert [(a.outcome.ok, a.outcome.duplicate) for a in applied] == [(True, False), (True, True)]
    after = await applier.service.load("two-clocks")
    assert after.version > version
    stored = await applier.service.store.read("two-clocks", version + 1)
    assert {e.body["command_id"] for e in stored} == {clock_command_id(version)}
    assert await second.fire("two-clocks", version) is None  # the table moved on


async def test_a_move_in_time_cancels_the_timeout(settings: Settings, redis_client: Redis) -> None:
    keys = settings.keys
    fake = FakeClock()
    applier = CommandApplier(redis_client, keys, clock=fake)
    clock = TurnClock(redis_client, keys, clock=fake)
    follower = FeedFollower(redis_client, keys, "clock-test", block_ms=10)
    table = await seat_two_humans(applier.service, "quick-human")
    await arm_from_feeds(follower, clock)
    first_deadline, version = await timer(redis_client, keys, "quick-human")
    assert version == table.version and first_deadline is not None

    fake.now = first_deadline - 2_000  # the player moves with two seconds to spare
    assert table.match is not None and table.match.to_act is not None
    seat = table.match.to_act
    action = legal_actions(table.match)[0]
    move = to_wire_command(action, "quick-human", "human-move-01", version)
    assert (await applier.service.execute(move, seat)).ok
    await arm_from_feeds(follower, clock)
    new_deadline, new_version = await timer(redis_client, keys, "quick-human")
    assert new_version is not None and new_version > version
    assert new_deadline == fake.now + TURN_SECONDS * 1000

    fake.now = first_deadline  # the first deadline passes: nothing happens
    assert await clock.tick() == []
    assert await clock.fire("quick-human", version) is None  # even a stale timer does nothing
    assert await timer(redis_client, keys, "quick-human") == (new_deadline, new_version)

    fake.now = new_deadline  # the next turn does run out
    fired = await clock.tick()
    assert [t.command.command_id for t in fired] == [clock_command_id(new_version)]
    while await applier.step(block_ms=10):
        pass
    assert not [a for a in applier.applied if not a.outcome.ok]


async def wait_until(
    background: Any,
    probe: Callable[[], Any],
    expected: object,
    timeout: float = 30.0,
) -> None:
    """Poll ``await probe()`` until it equals ``expected``."""
    deadline = time.monotonic() + timeout
    while True:
        background.check()
        got = await probe()
        if got == expected:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out: {got!r} != {expected!r}")
        await asyncio.sleep(0.02)


async def test_untimed_tables_are_never_loaded(settings: Settings, redis_client: Redis) -> None:
    """The turn clock is set at creation: the events of its creation show that a table has
    none, and its feed entries cost the clock no load."""
    service = TableService(RedisEventStore(redis_client, settings.keys))
    clock = TurnClock(redis_client, settings.keys, service=service)
    loads: list[str] = []
    load = service.load

    async def counted(table_id: str, **kwargs: Any) -> Table:
        loads.append(table_id)
        return await load(table_id, **kwargs)

    await seat_two_humans(service, "timed")
    untimed = CreateTable(command_id="create-0009", table_id="untimed")
    assert (await service.execute(untimed, None)).ok
    service.load = counted  # type: ignore[method-assign]
    follower = FeedFollower(redis_client, settings.keys, "clock-skip")
    tables = await follower.read_tables(block_ms=0)
    await clock.handle(tables)
    await clock.handle(tables)
    assert loads.count("untimed") == 0 and loads.count("timed") == 2
