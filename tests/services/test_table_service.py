"""TableService on the memory store: table-level rules, idempotency, rejections, keyed deals."""

from __future__ import annotations

import asyncio
import itertools
import random
from typing import Any

import pytest

from engine.bots import make_bot
from events.commands import parse_command
from events.mapping import to_wire_command
from services.store.memory_store import MemoryEventStore
from services.tables.results import CommandResult
from services.tables.service import SEALS_IN_FLIGHT, TableService

KEY = bytes(range(32))


class Driver:
    """Sends wire commands to one table with fresh command ids."""

    def __init__(self, service: TableService, table_id: str = "T-svc") -> None:
        self.service = service
        self.table_id = table_id
        self.ids = (f"cmd-{i:08d}" for i in itertools.count())

    async def send(self, sender: int | None, **fields: Any) -> CommandResult:
        body = {"table_id": self.table_id, "command_id": next(self.ids), **fields}
        return await self.service.execute(parse_command(body), sender)

    async def play_out(self, rng: random.Random) -> list[str]:
        """Play the match to its end with greedy bots; return the command types sent."""
        bots = [make_bot("greedy"), make_bot("greedy")]
        sent = []
        while True:
            table = await self.service.load(self.table_id)
            match = table.match
            assert match is not None
            if match.over:
                return sent
            if match.to_act is None:
                await self.send(0, type="next_deal")
                continue
            seat = match.to_act
            action = bots[seat].choose(match, seat, rng)
            command = to_wire_command(action, self.table_id, next(self.ids), table.version)
            outcome = await self.service.execute(command, seat)
            assert outcome.ok, outcome.result
            sent.append(command.type)


async def test_a_table_is_created_once_and_seats_fill_then_the_first_deal_starts() -> None:
    driver = Driver(TableService(MemoryEventStore()))
    assert (await driver.send(None, type="create_table")).ok
    again = await driver.send(None, type="create_table")
    assert again.code == "table/exists"
    joined = await driver.send(None, type="join", name="ann")
    assert joined.result["seat"] == 0 and joined.last_version == 2
    second = await driver.send(None, type="join", name="bob")
    assert second.result["seat"] == 1
    table = await driver.service.load(driver.table_id)
    assert table.deal_number == 1 and table.match is not None and table.match.to_act is not None
    assert (await driver.send(None, type="join", name="cy")).code == "table/full"


async def test_commands_before_the_table_or_without_a_seat_are_rejected() -> None:
    driver = Driver(TableService(MemoryEventStore()))
    assert (await driver.send(0, type="turn")).code == "table/not_found"
    await driver.send(None, type="create_table")
    assert (await driver.send(None, type="turn")).code == "seat/required"
    assert (await driver.send(1, type="turn")).code == "seat/required"  # seat 1 not joined


async def test_a_stale_expected_version_is_rejected_and_changes_nothing() -> None:
    store = MemoryEventStore()
    driver = Driver(TableService(store))
    await driver.send(None, type="create_table")
    head = await store.head(driver.table_id)
    stale = await driver.send(None, type="join", name="ann", expected_version=0)
    assert stale.code == "command/stale_version"
    assert await store.head(driver.table_id) == head


async def test_a_repeated_command_id_gets_the_first_answer_and_appends_nothing() -> None:
    store = MemoryEventStore()
    service = TableService(store)
    create = parse_command(
        {"type": "create_table", "table_id": "T-dup", "command_id": "cmd-create"}
    )
    first = await service.execute(create, None)
    again = await service.execute(create, None)
    assert again.duplicate and again.result == first.result
    assert (await store.head("T-dup")).version == 1
    bad = parse_command({"type": "turn", "table_id": "T-dup", "command_id": "cmd-turn-01"})
    rejected = await service.execute(bad, 0)
    replayed = await service.execute(bad, 0)
    assert rejected.code == "seat/required" and replayed.duplicate
    assert replayed.result == rejected.result


async def test_a_finished_deal_reveals_its_seed_and_the_match_ends() -> None:
    store = MemoryEventStore()
    driver = Driver(TableService(store))
    await driver.send(None, type="create_table", deals=2)
    await driver.send(None, type="join", name="ann")
    await driver.send(None, type="join", name="bob")
    await driver.play_out(random.Random(3))
    events = await store.read(driver.table_id)
    types = [e.body["type"] for e in events]
    assert types.count("deal_started") == 2 and types.count("deal_revealed") == 2
    assert types[-1] == "match_ended"
    assert (await store.head(driver.table_id)).status == "over"
    late = await driver.send(0, type="refuse")
    assert late.code == "move/match_over"


async def test_an_insecure_deal_key_makes_whole_games_repeatable() -> None:
    async def game() -> list[dict[str, Any]]:
        store = MemoryEventStore()
        driver = Driver(TableService(store, insecure_deal_key=KEY, clock=lambda: 7))
        await driver.send(None, type="create_table")
        await driver.send(None, type="join", name="ann")
        await driver.send(None, type="join", name="bob")
        await driver.play_out(random.Random(5))
        return [e.body for e in await store.read(driver.table_id)]

    assert await game() == await game()


@pytest.mark.parametrize("key", [None, KEY])
async def test_a_fresh_service_folds_the_same_table(key: bytes | None) -> None:
    store = MemoryEventStore()
    driver = Driver(TableService(store, insecure_deal_key=key))
    await driver.send(None, type="create_table", deals=1)
    await driver.send(None, type="join", name="ann")
    await driver.send(None, type="join", name="bob")
    await driver.play_out(random.Random(8))
    cached = await driver.service.load(driver.table_id)
    fresh = await TableService(store).load(driver.table_id)
    assert fresh.match == cached.match and fresh.version == cached.version


async def test_the_next_deal_needs_both_seats() -> None:
    driver = Driver(TableService(MemoryEventStore()))
    await driver.send(None, type="create_table", deals=2)
    await driver.send(None, type="join", name="ann", seat=1)
    assert (await driver.send(1, type="next_deal")).code == "table/not_full"
    table = await driver.service.load(driver.table_id)
    assert table.deal_number == 0 and table.version == 2


@pytest.mark.parametrize("seed", range(4))
async def test_the_cached_table_after_every_command_equals_the_stored_fold(seed: int) -> None:
    """``Table.next`` (the engine's own match, no re-mapping) agrees with folding the store."""
    store = MemoryEventStore()
    service = TableService(store, insecure_deal_key=KEY if seed % 2 else None)
    driver = Driver(service, f"T-after-{seed}")
    rng = random.Random(seed)
    bots = [make_bot("greedy"), make_bot("random")]

    async def check() -> None:
        cached = service.cached(driver.table_id)
        assert cached == await TableService(store).load(driver.table_id)

    await driver.send(None, type="create_table", deals=3, turn_seconds=30, bots={"1": "random"})
    await check()
    await driver.send(None, type="join", name="ann")
    await check()
    while not (table := await service.load(driver.table_id)).match.over:  # type: ignore[union-attr]
        match = table.match
        assert match is not None
        if match.to_act is None:
            await driver.send(0, type="next_deal")
        else:
            seat = match.to_act
            action = bots[seat].choose(match, seat, rng)
            command = to_wire_command(action, driver.table_id, next(driver.ids), table.version)
            assert (await service.execute(command, seat)).ok
        await check()


class CountingStore(MemoryEventStore):
    """A memory store that counts the reads a load makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def head(self, table_id: str) -> Any:
        self.calls.append("head")
        return await super().head(table_id)

    async def read(self, table_id: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("read")
        return await super().read(table_id, *args, **kwargs)

    async def secrets(self, table_id: str) -> dict[str, str]:
        self.calls.append("secrets")
        return await super().secrets(table_id)


async def test_loading_a_table_with_no_events_reads_the_head_alone() -> None:
    store = CountingStore()
    service = TableService(store, insecure_deal_key=KEY)
    table = await service.load("T-new")
    assert store.calls == ["head"]
    assert (table.table_id, table.version, table.match) == ("T-new", 0, None)
    driver = Driver(service, "T-new")
    for fields in ({"type": "create_table"}, {"type": "join", "name": "ann"}):
        assert (await driver.send(None, **fields)).ok
    store.calls.clear()
    again = await TableService(store, insecure_deal_key=KEY).load("T-new")  # events: all three
    assert store.calls == ["head", "read", "secrets"]
    assert again == service.cached("T-new")


class SlowSeals(MemoryEventStore):
    """A memory store whose seals wait to be released, counting how many run at once."""

    def __init__(self) -> None:
        super().__init__()
        self.running = 0
        self.most = 0
        self.done: list[str] = []
        self.release = asyncio.Event()

    async def seal(self, table_id: str) -> None:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
            await super().seal(table_id)
            self.done.append(table_id)
        finally:
            self.running -= 1


async def test_many_tables_ending_at_once_seal_a_few_at_a_time() -> None:
    store = SlowSeals()
    service = TableService(store)
    tables = [f"t-seal-{n:03d}" for n in range(60)]
    for table_id in tables:
        service.seal_soon(table_id)
    await asyncio.sleep(0.05)
    assert store.most == SEALS_IN_FLIGHT  # the rest wait their turn, holding no connection
    store.release.set()
    await asyncio.wait_for(service.sealed(), 5)
    assert sorted(store.done) == tables and store.most == SEALS_IN_FLIGHT
