"""``execute_many``: the same outcomes and stored events as ``TableService.execute`` one by one."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from engine.bots import RandomBot
from events.commands import Command, CreateTable, Join, Resign, Turn
from events.mapping import to_wire_command
from services.store import MemoryEventStore, VersionConflict, command_key
from services.store.base import StoredEvent
from services.tables.decide import Decision, TableError
from services.tables.results import BatchItem, CommandResult
from services.tables.service import MAX_CONFLICT_RETRIES, TableService
from services.tables.table import Table

SEED = bytes(range(32))


def service(store: MemoryEventStore | None = None) -> TableService:
    return TableService(
        store or MemoryEventStore(),
        clock=lambda: 1_764_000_000_000,
        seed_source=lambda: SEED,
        dealer_source=lambda: 0,
    )


def opening(table_id: str) -> list[BatchItem]:
    return [
        (CreateTable(table_id=table_id, command_id=f"create-{table_id}"), None),
        (Join(table_id=table_id, command_id=f"join0-{table_id}", name="ann"), None),
        (Join(table_id=table_id, command_id=f"join1-{table_id}", name="bob"), None),
    ]


async def reference_game(svc: TableService, table_id: str, seed: int) -> list[BatchItem]:
    """Play one table to its end with ``execute``, one command at a time; return the commands
    (with a few rejected ones and a client retry mixed in)."""
    rng = random.Random(seed)
    items = opening(table_id)
    for command, seat in items:
        assert (await svc.execute(command, seat)).ok
    bot = RandomBot()
    step = 0
    while True:
        table = await svc.load(table_id)
        assert table.match is not None
        seat = table.match.to_act
        if seat is None:
            return items
        step += 1
        action = bot.choose(table.match, seat, rng)
        command = to_wire_command(action, table_id, f"m{step:04d}-{table_id}", table.version)
        if step % 7 == 0:  # the other seat tries to act: recorded rejection
            wrong = Turn(table_id=table_id, command_id=f"x{step:04d}-{table_id}")
            items.append((wrong, 1 - seat))
            assert (await svc.execute(wrong, 1 - seat)).code is not None
        items.append((command, seat))
        assert (await svc.execute(command, seat)).ok
        if step % 5 == 0:  # a client retry of the same command
            items.append((command, seat))
            assert (await svc.execute(command, seat)).duplicate


def interleave(games: list[list[BatchItem]]) -> list[BatchItem]:
    out: list[BatchItem] = []
    for i in range(max(len(g) for g in games)):
        out.extend(g[i] for g in games if i < len(g))
    return out


async def dump(store: MemoryEventStore, table_id: str) -> list[tuple[int, str, dict[str, object]]]:
    return [(e.version, e.hash, e.body) for e in await store.read(table_id)]


async def test_same_events_and_results_as_one_by_one() -> None:
    tables = [f"T{i}" for i in range(6)]
    one_by_one = service()
    games = [await reference_game(one_by_one, t, i) for i, t in enumerate(tables)]
    items = interleave(games)
    batched = service()
    results: list[CommandResult] = []
    for start in range(0, len(items), 40):
        chunk = await batched.execute_many(items[start : start + 40])
        assert all(isinstance(r, CommandResult) for r in chunk)
        results += [r for r in chunk if isinstance(r, CommandResult)]
    a, b = one_by_one.store, batched.store
    assert isinstance(a, MemoryEventStore) and isinstance(b, MemoryEventStore)
    for t in tables:
        assert await dump(a, t) == await dump(b, t)
        assert await a.secrets(t) == await b.secrets(t)
    for (command, seat), outcome in zip(items, results, strict=True):
        key = command_key(command.command_id, seat)
        expected = await a.command_result(command.table_id, key)
        assert await b.command_result(command.table_id, key) == expected
        assert outcome.ok == (b'"ok":true' in (expected or b""))
    assert sum(r.duplicate for r in results) > 0
    assert sum(not r.ok for r in results) > 0


async def test_rounds_append_many_tables_per_round_trip() -> None:
    calls: list[int] = []

    class CountingStore(MemoryEventStore):
        async def append_many(self, requests):  # type: ignore[no-untyped-def]
            calls.append(len(requests))
            return await super().append_many(requests)

    svc = service(CountingStore())
    items = interleave([opening(f"T{i}") for i in range(10)])
    durations: list[float] = []
    results = await svc.execute_many(items, on_append=durations.append)
    assert all(isinstance(r, CommandResult) and r.ok for r in results)
    assert calls == [10, 10, 10]  # one round per command of a table, every table in each
    assert len(durations) == 3


async def test_a_conflict_reloads_the_table_and_decides_again() -> None:
    store = MemoryEventStore()
    first, second = service(store), service(store)
    for command, seat in opening("T1"):
        await first.execute(command, seat)
    await first.load("T1")  # cached at version 6
    table = await second.load("T1")
    assert table.match is not None and table.match.to_act is not None
    seat = table.match.to_act
    await second.execute(Turn(table_id="T1", command_id="turn-by-second"), seat)
    # first's cache is stale: its planned append conflicts, the next round reloads the table
    # and rejects the turn
    again = Turn(table_id="T1", command_id="turn-by-first")
    (outcome,) = await first.execute_many([(again, seat)])
    assert isinstance(outcome, CommandResult)
    assert outcome.code == "move/wrong_phase"
    assert (await store.head("T1")).version == table.version + 1  # the turn by second, nothing else
    assert first.cached("T1") == await second.load("T1")


async def test_a_table_that_always_conflicts_is_busy_and_the_others_go_on() -> None:
    """Each conflict costs a reload and one more round, as ``execute``'s retries do; after
    ``MAX_CONFLICT_RETRIES`` the command fails ``table/busy`` and its table's later commands
    are not attempted."""

    class Contended(MemoryEventStore):
        def __init__(self) -> None:
            super().__init__()
            self.rounds = 0

        async def append_many(self, requests):  # type: ignore[no-untyped-def]
            self.rounds += 1
            others = iter(await super().append_many([r for r in requests if r.table_id != "B1"]))
            return [  # another writer is always one event ahead on B1
                VersionConflict(r.table_id, r.expected_version, r.expected_version + 1)
                if r.table_id == "B1"
                else next(others)
                for r in requests
            ]

    store = Contended()
    svc = service(store)
    items = interleave([opening("B1"), opening("OK")])
    results = await svc.execute_many(items)
    by_id = {c.command_id: r for (c, _), r in zip(items, results, strict=True)}
    busy = by_id["create-B1"]
    assert isinstance(busy, TableError) and busy.code == "table/busy"
    assert by_id["join0-B1"] is None and by_id["join1-B1"] is None  # behind it: not attempted
    assert all(isinstance(by_id[f"{k}-OK"], CommandResult) for k in ("create", "join0", "join1"))
    assert store.rounds == MAX_CONFLICT_RETRIES


async def test_forget_drops_the_tables_picked() -> None:
    svc = service()
    for table_id in ("A1", "A2", "B1"):
        await svc.execute_many(opening(table_id))
    assert svc.forget(lambda table_id: table_id.startswith("A")) == 2
    assert svc.cached("A1") is None and svc.cached("A2") is None
    assert svc.cached("B1") is not None
    assert (await svc.load("A1")).version == (await svc.store.head("A1")).version


class Exploding(TableService):
    """Raises an unexpected error for chosen command ids."""

    def __init__(self, boom: set[str]) -> None:
        super().__init__(MemoryEventStore(), seed_source=lambda: SEED, dealer_source=lambda: 0)
        self.boom = boom

    def decide(self, table: Table, command: Command, seat: int | None) -> Decision:
        if command.command_id in self.boom:
            raise RuntimeError(f"boom {command.command_id}")
        return super().decide(table, command, seat)


async def test_a_failure_stops_its_table_only() -> None:
    svc = Exploding({"join0-T1"})
    items = interleave([opening("T1"), opening("T2")])
    results = await svc.execute_many(items)
    by_id = {c.command_id: r for (c, _), r in zip(items, results, strict=True)}
    assert isinstance(by_id["create-T1"], CommandResult)
    assert isinstance(by_id["join0-T1"], RuntimeError)
    assert by_id["join1-T1"] is None  # not attempted: it must wait for join0
    assert all(isinstance(by_id[f"{k}-T2"], CommandResult) for k in ("create", "join0", "join1"))
    assert await svc.store.command_result("T1", "join0-T1") is None  # nothing recorded
    assert (await svc.store.head("T1")).version == 1


async def test_store_failure_fails_the_round() -> None:
    class Down(MemoryEventStore):
        async def append_many(self, requests):  # type: ignore[no-untyped-def]
            raise ConnectionError("redis is down")

    svc = service(Down())
    results = await svc.execute_many(interleave([opening("T1"), opening("T2")]))
    assert [type(r).__name__ for r in results] == [
        "ConnectionError",
        "ConnectionError",
        "NoneType",
        "NoneType",
        "NoneType",
        "NoneType",
    ]


@pytest.mark.parametrize("rounds", [0, 1, 2])
async def test_proceed_stops_one_table_between_rounds(rounds: int) -> None:
    """``proceed`` is asked per table before each round: T1 stops, T2 goes on to the end."""
    left = [rounds]

    def proceed(table_id: str) -> bool:
        if table_id == "T2":
            return True
        left[0] -= 1
        return left[0] >= 0

    check: Callable[[str], bool] = proceed
    svc = service()
    items = [item for pair in zip(opening("T1"), opening("T2"), strict=True) for item in pair]
    results = await svc.execute_many(items, proceed=check)
    assert [isinstance(r, CommandResult) for r in results[0::2]] == [i < rounds for i in range(3)]
    assert all(isinstance(r, CommandResult) and r.ok for r in results[1::2])
    assert (await svc.store.head("T1")).version == [0, 1, 2][rounds]
    alone = service()
    await alone.execute_many(opening("T2"))
    assert await svc.store.head("T2") == await alone.store.head("T2")


class SealsKept(MemoryEventStore):
    """The memory store, recording the tables it was asked to seal."""

    def __init__(self) -> None:
        super().__init__()
        self.sealed: list[str] = []

    async def seal(self, table_id: str) -> None:
        self.sealed.append(table_id)
        await super().seal(table_id)


async def test_a_table_ended_in_a_batch_is_sealed_once() -> None:
    """The command that ends a match (here a resignation) gives the table's memory back, as
    ``execute`` does; a redelivery of it (a duplicate) does not seal again."""
    store = SealsKept()
    svc = service(store)
    items = [*opening("S1"), *opening("S2")]
    resign = (Resign(table_id="S1", command_id="resign-S1"), 0)
    results = await svc.execute_many([*items, resign])
    await svc.sealed()
    assert all(isinstance(r, CommandResult) and r.ok for r in results)
    assert (await store.head("S1")).status == "over" and (await store.head("S2")).status != "over"
    assert store.sealed == ["S1"]
    again = await svc.execute_many([resign])
    await svc.sealed()
    assert isinstance(again[0], CommandResult) and again[0].duplicate
    assert store.sealed == ["S1"]


async def test_a_seal_that_fails_leaves_the_ending_command_accepted() -> None:
    class SealFails(MemoryEventStore):
        async def seal(self, table_id: str) -> None:
            raise ConnectionError("Redis went away after the append")

    for run in ("batch", "one"):
        svc = service(SealFails())
        for command, seat in opening("F1"):
            assert (await svc.execute(command, seat)).ok
        resign = Resign(table_id="F1", command_id="resign-F1")
        if run == "batch":
            (outcome,) = await svc.execute_many([(resign, 0)])
            await svc.sealed()
        else:
            outcome = await svc.execute(resign, 0)
        assert isinstance(outcome, CommandResult) and outcome.ok, run
        assert (await svc.store.head("F1")).status == "over"


async def test_a_table_ended_by_execute_is_sealed_once() -> None:
    """The one-command path seals as a batch does (``TableService.finish``)."""
    store = SealsKept()
    svc = service(store)
    await svc.execute_many(opening("S3"))
    resign = Resign(table_id="S3", command_id="resign-S3")
    assert (await svc.execute(resign, 0)).ok
    assert (await svc.execute(resign, 0)).duplicate
    await svc.sealed()
    assert store.sealed == ["S3"]


async def test_load_many_gives_what_load_gives_in_three_calls() -> None:
    """Tables never written, not cached, cached behind, cached current, and one whose events do
    not fold (its exception in its place): one call each for the heads, the events and the
    secrets, whatever the number of tables."""

    class Counted(MemoryEventStore):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[str] = []

        async def heads(self, table_ids):  # type: ignore[no-untyped-def]
            self.calls.append("heads")
            return await super().heads(table_ids)

        async def read_many(self, table_ids, first=None, after=None):  # type: ignore[no-untyped-def]
            self.calls.append("read_many")
            found = await super().read_many(table_ids, first, after)
            if "bad" in found:  # a stored body no event parses
                e = found["bad"][0]
                found["bad"] = [
                    StoredEvent(e.table_id, e.version, {"type": "nonsense"}, e.hash, e.prev_hash)
                ]
            return found

        async def secrets_many(self, table_ids, *, tokens=True):  # type: ignore[no-untyped-def]
            self.calls.append("secrets_many" if tokens else "seeds_many")
            return await super().secrets_many(table_ids, tokens=tokens)

    store = Counted()
    writer, reader = service(store), service(store)
    for table_id in ("cold", "behind", "current", "bad"):
        await writer.execute_many(opening(table_id))
    await reader.load("behind")
    await reader.load("current")
    await writer.execute_many([(Resign(table_id="behind", command_id="resign-behind"), 0)])
    current = reader.cached("current")
    store.calls.clear()
    loaded = await reader.load_many(["never", "cold", "behind", "current", "bad"])
    assert store.calls == ["heads", "read_many", "seeds_many"]  # a fold needs no token digest
    assert list(loaded) == ["never", "cold", "behind", "current", "bad"]
    assert isinstance(loaded["bad"], Exception)
    assert loaded["current"] is current
    for table_id in ("never", "cold", "behind", "current"):
        expected = await reader.load(table_id, fresh=True)
        assert loaded[table_id] == expected, table_id
        assert reader.cached(table_id) == expected
    assert loaded["never"] == Table("never")
