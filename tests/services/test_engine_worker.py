"""The engine worker against a real Redis: intake, idempotency, rejections, leases and claims.

Each test runs workers in the test's own event loop and namespace (4 or 8 shards, 2 s leases),
XADDs command entries the way the gateway does (``docs/services.md``) and reads the outcome
from the store, the stream's pending list and the result hints.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest
import redis.asyncio
from played_tables import folded_views, read_views  # tests/services on sys.path
from prometheus_client import REGISTRY
from redis.asyncio.connection import Connection, parse_url

from events.commands import (
    Command,
    CommandModel,
    CreateTable,
    Discard,
    Join,
    NextDeal,
    Resign,
    Turn,
)
from services.engine_worker import GROUP, EngineWorker
from services.engine_worker.answers import AcksInFlight, acknowledge
from services.engine_worker.loop import CHUNK_ENTRIES, OwnedShard, ShardLoop
from services.engine_worker.reader import STREAMS_FIELD
from services.settings import Settings, load_settings
from services.store.client import packing_in_c, without_call_timeouts
from services.store.keys import command_key, results_channel, views_channel
from services.store.redis_store import RedisEventStore
from services.store.shard_leases import fair_share, lease_key, registry_key
from services.tables.decide import Decision
from services.tables.results import CommandResult
from services.tables.service import TableService
from services.tables.stored_parts import STORED_PARTS
from services.tables.table import Table

SEED = bytes(range(32))


def make_settings(redis_url: str, ns: str, worker: str = "w1", **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "namespace": ns,
        "shards": 4,
        "lease_ms": 2000,
        "claim_idle_ms": 300,
        "batch_size": 50,
        "worker_id": f"{ns}-{worker}",
        "token_secret": "s" * 32,
        **overrides,
    }
    return load_settings(**values)


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return make_settings(redis_url, redis_ns)


@pytest.fixture
def store(redis_client: redis.asyncio.Redis, settings: Settings) -> RedisEventStore:
    return RedisEventStore(redis_client, settings.keys)


def seeded(store: RedisEventStore) -> TableService:
    return TableService(store, seed_source=lambda: SEED, dealer_source=lambda: 0)


@contextlib.asynccontextmanager
async def running(
    settings: Settings, cls: type[EngineWorker] = EngineWorker, **kwargs: Any
) -> AsyncIterator[EngineWorker]:
    """A started worker whose lease loop runs until the block ends (then a clean stop)."""
    worker = cls(settings, **kwargs)
    stop = asyncio.Event()
    await worker.start()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await task
        await worker.close()


async def eventually(
    check: Callable[[], Awaitable[bool]] | Callable[[], bool], timeout: float = 10.0
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.02)


def table_on(settings: Settings, shard: int, prefix: str = "T") -> str:
    """A table id that lives on ``shard``."""
    for i in range(10_000):
        table_id = f"{prefix}{i}"
        if settings.keys.shard_of(table_id) == shard:
            return table_id
    raise AssertionError("no table id found")


async def send(
    client: redis.asyncio.Redis,
    settings: Settings,
    command: dict[str, Any] | CommandModel | bytes,
    seat: int | None = None,
    *,
    shard: int | None = None,
    fields: dict[str, bytes | str] | None = None,
) -> bytes:
    """XADD a command entry (fields ``c``, ``s``, ``r``) to its table's command stream."""
    if isinstance(command, CommandModel):
        raw = command.model_dump_json(exclude_none=True).encode()
        table_id: str | None = command.table_id
    elif isinstance(command, dict):
        raw = json.dumps(command).encode()
        table_id = command.get("table_id")
    else:
        raw, table_id = command, None
    if shard is None:
        assert table_id is not None
        shard = settings.keys.shard_of(table_id)
    entry: dict[Any, Any] = (
        dict(fields) if fields is not None else {"c": raw, "s": "" if seat is None else str(seat)}
    )
    entry.setdefault("r", str(int(time.time() * 1000)))
    entry_id = await client.xadd(settings.keys.cmd(shard), entry)
    assert isinstance(entry_id, bytes)
    return entry_id


async def result_of(
    store: RedisEventStore,
    table_id: str,
    command_id: str,
    seat: int | None = None,
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Wait for the recorded result of a command of ``seat`` (None: create, join)."""
    deadline = time.monotonic() + timeout
    while True:
        raw = await store.command_result(table_id, command_key(command_id, seat))
        if raw is not None:
            result: dict[str, Any] = json.loads(raw)
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"no result for {table_id}/{command_id} within {timeout} s")
        await asyncio.sleep(0.01)


def opening(table_id: str) -> list[CommandModel]:
    return [
        CreateTable(table_id=table_id, command_id=f"create-{table_id}"),
        Join(table_id=table_id, command_id=f"join0-{table_id}", name="ann"),
        Join(table_id=table_id, command_id=f"join1-{table_id}", name="bob"),
    ]


async def pending(client: redis.asyncio.Redis, settings: Settings) -> int:
    total = 0
    for shard in range(settings.shards):
        info = await client.xpending(settings.keys.cmd(shard), GROUP)
        total += int(info["pending"])
    return total


def metric(result: str) -> float:
    return REGISTRY.get_sample_value("conquian_commands_total", {"result": result}) or 0.0


class Hints:
    """Collects the result hints published on ``<ns>:results``."""

    def __init__(self, client: redis.asyncio.Redis, settings: Settings) -> None:
        self.pubsub = client.pubsub()
        self.channel = results_channel(settings.namespace)
        self.seen: dict[str, dict[str, Any]] = {}
        self.all: list[dict[str, Any]] = []
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Hints:
        await self.pubsub.subscribe(self.channel)
        self.task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        async for message in self.pubsub.listen():
            if message["type"] == "message":  # one message a batch, a hint a line
                for line in message["data"].split(b"\n"):
                    hint = json.loads(line)
                    self.seen.setdefault(hint["command_id"], hint)
                    self.all.append(hint)

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.pubsub.aclose()  # type: ignore[no-untyped-call]

    async def wait(self, command_id: str) -> dict[str, Any]:
        await eventually(lambda: command_id in self.seen, 5)
        return self.seen[command_id]


# --- intake ------------------------------------------------------------------------------------


async def test_commands_are_applied_acked_and_hinted(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 2)
    accepted = metric("accepted")
    async with Hints(redis_client, settings) as hints, running(settings) as worker:
        ids = [await send(redis_client, settings, c) for c in opening(table_id)]
        for command in opening(table_id):
            result = await result_of(store, table_id, command.command_id)
            assert result["ok"] is True
            hint = await hints.wait(command.command_id)
            assert hint == {
                "table_id": table_id,
                "command_id": command.command_id,
                "seat": None,
                "result": result,
            }
        assert (await result_of(store, table_id, f"join1-{table_id}"))["seat"] == 1
        assert worker.owned == {0, 1, 2, 3}
    # XACKed by the worker itself: nothing pending, everything delivered
    assert await pending(redis_client, settings) == 0
    (group,) = await redis_client.xinfo_groups(settings.keys.cmd(2))
    assert group["last-delivered-id"] == ids[-1]
    types = [e.body["type"] for e in await store.read(table_id)]
    assert types[:4] == ["table_created", "player_joined", "player_joined", "deal_started"]
    assert metric("accepted") - accepted == 3


async def test_views_are_current_when_the_answer_is(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    """No projector runs: each accepted command's views are stored with its append, at its
    version, before its result hint, and a view hint ``<table> <version>`` is published."""
    table_id = table_on(settings, 1)
    pubsub = redis_client.pubsub()
    await pubsub.subscribe(views_channel(settings.namespace))
    async with Hints(redis_client, settings) as hints, running(settings):
        for command in opening(table_id):
            await send(redis_client, settings, command)
            await hints.wait(command.command_id)
            head = await store.head(table_id)
            for part in STORED_PARTS:
                raw = await redis_client.get(settings.keys.table_view(table_id, part))
                assert raw is not None and json.loads(raw)["version"] == head.version, part
    seen: list[str] = []
    deadline = time.monotonic() + 1.0  # everything was published before the worker stopped
    while time.monotonic() < deadline:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if message is not None:
            seen += message["data"].decode().split("\n")
    await pubsub.aclose()  # type: ignore[no-untyped-call]
    head = await store.head(table_id)
    assert seen and seen[-1] == f"{table_id} {head.version}"
    assert [int(line.split()[1]) for line in seen] == sorted(int(line.split()[1]) for line in seen)
    assert await read_views(redis_client, settings.keys, table_id) == await folded_views(
        store, table_id
    )


def append_rounds() -> float:
    return REGISTRY.get_sample_value("conquian_append_seconds_count") or 0.0


async def test_consumed_commands_leave_their_stream(
    redis_client: redis.asyncio.Redis, redis_url: str, redis_ns: str, store: RedisEventStore
) -> None:
    settings = make_settings(redis_url, redis_ns, command_retention_ms=0)
    stream = settings.keys.cmd(2)
    tables = [f"C{i}" for i in range(2_000) if settings.keys.shard_of(f"C{i}") == 2][:300]
    async with redis_client.pipeline(transaction=False) as pipe:
        for table_id in tables:
            command = opening(table_id)[0].model_dump_json(exclude_none=True)
            pipe.xadd(stream, {"c": command, "s": ""})
        await pipe.execute()
    assert await redis_client.xlen(stream) == len(tables)
    async with running(settings):
        for table_id in tables:
            assert (await result_of(store, table_id, f"create-{table_id}"))["ok"] is True
        # the sweep (every claim_idle_ms) deletes whole stream nodes of acknowledged entries
        await eventually(lambda: _shorter(redis_client, stream, len(tables) // 2))
        # and reports the shard's backlog: nothing left to acknowledge
        await eventually(lambda: backlog(2) == 0)
    assert await pending(redis_client, settings) == 0
    assert len(await store.read(tables[0])) == 1  # what the command led to stays
    assert backlog(2) is None  # a shard given up is reported by its next owner


async def test_a_finished_tables_command_ids_go_after_the_set_time(
    redis_client: redis.asyncio.Redis, redis_url: str, redis_ns: str, store: RedisEventStore
) -> None:
    """``CONQUIAN_FINISHED_COMMAND_IDS_MS``: the worker's appends give a finished table's
    command ids that long; a table still playing keeps its own."""
    settings = make_settings(redis_url, redis_ns, finished_command_ids_ms=60_000)
    async with running(settings):
        for table_id in ("F1", "P1"):
            for command in opening(table_id):
                await send(redis_client, settings, command)
            assert (await result_of(store, table_id, f"join1-{table_id}"))["ok"] is True
        await send(redis_client, settings, Resign(table_id="F1", command_id="resign-F1"), 0)
        assert (await result_of(store, "F1", "resign-F1", 0))["ok"] is True
    finished = await redis_client.pttl(settings.keys.command_ids("F1"))
    assert 0 < finished <= 60_000
    assert await redis_client.hlen(settings.keys.command_ids("F1")) == 4
    assert await redis_client.pttl(settings.keys.command_ids("P1")) == -1


def backlog(shard: int) -> float | None:
    return REGISTRY.get_sample_value("conquian_command_backlog", {"shard": str(shard)})


async def _shorter(client: redis.asyncio.Redis, stream: str, length: int) -> bool:
    return int(await client.xlen(stream)) < length


async def test_commands_of_several_shards_are_read_and_appended_together(
    redis_client: redis.asyncio.Redis,
    settings: Settings,
    store: RedisEventStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batches: list[set[str]] = []  # the streams of every batch the reader hands over
    handle = ShardLoop.handle

    async def recording(self: ShardLoop, raw: Mapping[str, Any]) -> None:
        batches.append(set(raw["streams"]))
        await handle(self, raw)

    monkeypatch.setattr(ShardLoop, "handle", recording)
    tables = [table_on(settings, shard) for shard in range(settings.shards)]
    async with running(settings) as worker:
        await eventually(lambda: len(worker.reading()) == settings.shards)
        rounds = append_rounds()
        # one MULTI: an entry on every shard at once
        async with redis_client.pipeline(transaction=True) as pipe:
            for table_id in tables:
                command = opening(table_id)[0].model_dump_json(exclude_none=True)
                pipe.xadd(settings.keys.cmd(settings.keys.shard_of(table_id)), {"c": command})
            await pipe.execute()
        for table_id in tables:
            assert (await result_of(store, table_id, f"create-{table_id}"))["ok"] is True
        # Redis 7.2+ answers the blocked read with every stream of the MULTI; 7.0 answers it
        # with the first stream that got an entry, and the next read takes the other three
        # together: either way several shards' commands in one read and one append
        assert any(len(batch) > 1 for batch in batches), batches
        assert append_rounds() - rounds <= 2  # the creates in at most two pipelined appends
    assert await pending(redis_client, settings) == 0


async def test_a_large_read_is_processed_in_chunks_in_read_order() -> None:
    """A read of many shards' full streams goes to ``process`` a chunk at a time, so that the
    event loop (and the lease renewals on it) gets a turn between chunks; each shard's entries
    keep their order, and an entry of a stream no longer ours is left out."""
    loop = ShardLoop.__new__(ShardLoop)
    ours = {s: OwnedShard(s, f"cmd{s}", time.monotonic() + 60, None) for s in (0, 1)}
    loop.shards = ours
    seen: list[dict[int, list[bytes]]] = []

    async def process(batches: Mapping[OwnedShard, Any], tries: Any = None) -> None:
        seen.append({shard.shard: [i for i, _ in entries] for shard, entries in batches.items()})

    loop.process = process  # type: ignore[method-assign]
    streams = ["cmd0", "cmd1", "cmd9"] * 500
    ids = [f"{n}-0".encode() for n in range(len(streams))]
    raw = {"message_ids": ids, "data": [{}] * len(ids), STREAMS_FIELD: streams}
    await loop.handle(raw)
    assert [sum(map(len, chunk.values())) for chunk in seen] == [CHUNK_ENTRIES, 500]
    for shard in (0, 1):
        got = [i for chunk in seen for i in chunk.get(shard, [])]
        assert got == [i for i, s in zip(ids, streams, strict=True) if s == f"cmd{shard}"]


async def test_leases_hold_while_a_read_takes_longer_than_a_lease(
    redis_client: redis.asyncio.Redis, redis_url: str, redis_ns: str
) -> None:
    """A read of 4,000 commands whose deciding takes about three lease periods (1.5 ms of
    deciding each, 2 s leases): the worker keeps every lease and answers every command.  When
    a read was decided in one stretch (no chunks, no turn for the loop between the plans of a
    round), the leases ran out in the middle of such a read.  (With 1 s leases and 0.5 ms, the
    stretches the loop cannot turn in, such as a round's appends, sometimes outlasted a lease
    on a machine running two CPU hogs beside the test, with or without the fix.)"""

    class Slow(TableService):
        def decide(self, table: Table, command: Command, seat: int | None) -> Decision:
            time.sleep(0.0015)  # a busy machine: the event loop is held meanwhile
            return super().decide(table, command, seat)

    settings = make_settings(
        redis_url, redis_ns, shards=2, lease_ms=2000, batch_size=2000, claim_idle_ms=60_000
    )
    store = RedisEventStore(redis_client, settings.keys)
    tables = [f"L{i}" for i in range(4000)]
    lost: list[int] = []
    async with running(settings, service_factory=lambda s: Slow(s)) as worker:
        await eventually(lambda: len(worker.reading()) == 2)
        worker.log = Watch(worker.log, lost)
        async with redis_client.pipeline(transaction=False) as pipe:
            for table_id in tables:
                command = opening(table_id)[0].model_dump_json(exclude_none=True)
                pipe.xadd(settings.keys.cmd(settings.keys.shard_of(table_id)), {"c": command})
            await pipe.execute()
        await eventually(lambda: _all_created(store, tables), timeout=40)
        assert worker.owned == {0, 1}
    assert lost == []


async def _all_created(store: RedisEventStore, tables: list[str]) -> bool:
    """Every table at version 1 (the last of each shard checked first: cheap while waiting)."""
    last = {store.keys.shard_of(t): t for t in tables}
    for table_id in last.values():
        if (await store.head(table_id)).version != 1:
            return False
    heads = await asyncio.gather(*(store.head(t) for t in tables))
    return all(h.version == 1 for h in heads)


class Watch:
    """A logger wrapper that records the shards of ``lease lost`` warnings."""

    def __init__(self, log: Any, lost: list[int]) -> None:
        self._log = log
        self._lost = lost

    def warning(self, event: str, **kw: Any) -> None:
        if event == "lease lost":
            self._lost.append(kw["shard"])
        self._log.warning(event, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


async def test_the_same_entry_twice_is_applied_once(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 1)
    create, join0, _ = opening(table_id)
    duplicates = metric("duplicate")
    async with Hints(redis_client, settings) as hints, running(settings):
        await send(redis_client, settings, create)
        await send(redis_client, settings, join0)
        await send(redis_client, settings, join0)  # a client retry, or a redelivery
        first = await result_of(store, table_id, join0.command_id)
        await eventually(lambda: metric("duplicate") - duplicates >= 1)
        assert (await hints.wait(join0.command_id))["result"] == first
        # a retry much later (not in the same batch) gets the same first result
        await send(redis_client, settings, join0)
        await eventually(lambda: metric("duplicate") - duplicates >= 2)
    assert first == {"ok": True, "seat": 0}
    events = await store.read(table_id)
    assert [e.body["type"] for e in events] == ["table_created", "player_joined"]
    assert await pending(redis_client, settings) == 0


async def test_each_entry_is_acked_and_hinted_once(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    """Every entry, accepted, rejected or a duplicate, is acknowledged and gets exactly one
    hint (a batch's hints go out as one message, one a line)."""
    table_id = table_on(settings, 3)
    create, join0, join1 = opening(table_id)
    stale = NextDeal(table_id=table_id, command_id=f"stale-{table_id}", expected_version=1)
    async with Hints(redis_client, settings) as hints, running(settings):
        for command, seat in ((create, None), (join0, None), (join0, None), (stale, 0)):
            await send(redis_client, settings, command, seat)
        await result_of(store, table_id, stale.command_id, 0)
        await send(redis_client, settings, join1)
        await hints.wait(join1.command_id)
        await eventually(lambda: len(hints.all) >= 5)
        await asyncio.sleep(0.2)  # nothing more comes
    ids = [h["command_id"] for h in hints.all]
    assert sorted(ids) == sorted(
        [create.command_id, join0.command_id, join0.command_id, stale.command_id, join1.command_id]
    )
    assert [h["result"] for h in hints.all if h["command_id"] == join0.command_id] == [
        {"ok": True, "seat": 0}
    ] * 2
    assert hints.seen[stale.command_id]["result"]["code"] == "command/stale_version"
    assert await pending(redis_client, settings) == 0


async def test_rejections_are_recorded_and_change_nothing(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 3)
    async with Hints(redis_client, settings) as hints, running(settings, service_factory=seeded):
        for command in opening(table_id):
            await send(redis_client, settings, command)
        await result_of(store, table_id, f"join1-{table_id}")
        table = await seeded(store).load(table_id)
        assert table.match is not None and table.match.to_act is not None
        seat = table.match.to_act
        head = await store.head(table_id)
        cases: list[tuple[CommandModel, int | None, str]] = [
            (Turn(table_id=table_id, command_id="wrong-seat"), 1 - seat, "move/not_your_turn"),
            (Discard(table_id=table_id, command_id="illegal-1", card="7H"), seat, "move/"),
            (
                Turn(table_id=table_id, command_id="stale-ver", expected_version=2),
                seat,
                "command/stale_version",
            ),
            (Turn(table_id=table_id, command_id="no-seat-1"), None, "seat/required"),
            (Join(table_id=table_id, command_id="full-join", name="cy"), None, "table/full"),
        ]
        for command, sender, _ in cases:
            await send(redis_client, settings, command, sender)
        for command, sender, code in cases:
            result = await result_of(store, table_id, command.command_id, sender)
            assert result["ok"] is False
            assert result["code"].startswith(code), result
            assert result["message"]
            assert (await hints.wait(command.command_id))["result"] == result
        assert await store.head(table_id) == head  # nothing appended
        # the table still plays: the seat to act turns the card
        await send(redis_client, settings, Turn(table_id=table_id, command_id="turn-ok-1"), seat)
        assert (await result_of(store, table_id, "turn-ok-1", seat))["ok"] is True
    assert await pending(redis_client, settings) == 0


async def test_malformed_entries_are_acked_and_rejected(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 0)
    other = table_on(settings, 1)
    join = {"type": "join", "table_id": table_id, "name": "ann"}
    bad: list[tuple[dict[str, bytes | str], str | None, str | None]] = [
        ({"c": b"{nope"}, None, None),
        ({"c": b"\xff\xfe\x00"}, None, None),
        ({"c": b"[1, 2]"}, None, None),
        ({"x": b"no command field"}, None, None),
        (
            {"c": json.dumps({**join, "type": "fly", "command_id": "c-unknown1"})},
            "c-unknown1",
            "command/unknown_type",
        ),
        (
            {"c": json.dumps({**join, "command_id": "c-big00001", "name": "x" * 9000})},
            "c-big00001",
            "command/too_large",
        ),
        (
            {"c": json.dumps({"type": "join", "table_id": table_id, "command_id": "c-noname1"})},
            "c-noname1",
            "command/invalid",
        ),
        (
            {"c": json.dumps({**join, "command_id": "c-badseat1"}), "s": "7"},
            "c-badseat1",
            "command/invalid",
        ),
        (
            {"c": json.dumps({**join, "table_id": other, "command_id": "c-wrongsh1"})},
            "c-wrongsh1",
            "command/wrong_shard",
        ),
        ({"c": "[" * 5000 + "]" * 5000}, None, None),
    ]
    rejected = metric("rejected")
    async with Hints(redis_client, settings) as hints, running(settings):
        for fields, _, _ in bad:
            await send(redis_client, settings, b"", shard=0, fields=dict(fields))
        create = opening(table_id)[0]
        await send(redis_client, settings, create)  # the worker keeps going
        assert (await result_of(store, table_id, create.command_id))["ok"] is True
        for _, command_id, code in bad:
            if command_id is not None:
                hint = await hints.wait(command_id)
                assert hint["result"]["ok"] is False
                assert hint["result"]["code"] == code
                assert await store.command_result(table_id, command_id) is None  # not recorded
        assert metric("rejected") - rejected == len(bad)
    assert await pending(redis_client, settings) == 0
    assert (await store.head(table_id)).version == 1
    assert (await store.head(other)).version == 0


# --- leases ------------------------------------------------------------------------------------


class Recording(EngineWorker):
    """Remembers the tables it appended to (through the turn-clock hook)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.appended: list[str] = []

    async def after_append(self, table: Table, outcome: CommandResult) -> None:
        assert outcome.ok and not outcome.duplicate and table.version == outcome.last_version
        self.appended.append(table.table_id)


async def lease_holders(client: redis.asyncio.Redis, settings: Settings) -> dict[int, str | None]:
    out: dict[int, str | None] = {}
    for shard in range(settings.shards):
        value = await client.get(lease_key(settings.keys, shard))
        out[shard] = value.decode() if isinstance(value, bytes) else value
    return out


def appending(worker: EngineWorker) -> set[int]:
    """The shards a worker may append for now (it holds a lease it knows to be valid)."""
    return {s for s, r in worker.runners.items() if r.may_append()}


async def test_two_workers_split_the_shards(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis
) -> None:
    # 6 s leases: both workers share this test's event loop, on a machine that may be busy
    a_settings = make_settings(redis_url, redis_ns, "a", shards=8, lease_ms=6000)
    b_settings = make_settings(redis_url, redis_ns, "b", shards=8, lease_ms=6000)
    store = RedisEventStore(redis_client, a_settings.keys)
    async with running(a_settings, Recording) as a, running(b_settings, Recording) as b:
        assert isinstance(a, Recording) and isinstance(b, Recording)
        overlap: list[set[int]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(a.owned) == len(b.owned) == 4):
            overlap.append(appending(a) & appending(b))
            await asyncio.sleep(0.01)
        assert len(a.owned) == len(b.owned) == fair_share(8, 2) == 4
        assert not any(overlap), "two workers could append for one shard at once"
        assert a.owned | b.owned == set(range(8))
        holders = await lease_holders(redis_client, a_settings)
        assert {s for s, w in holders.items() if w == a.worker_id} == a.owned
        assert {s for s, w in holders.items() if w == b.worker_id} == b.owned
        live = await redis_client.zrange(registry_key(a_settings.keys), 0, -1)
        assert sorted(live) == sorted([a.worker_id.encode(), b.worker_id.encode()])
        tables = [table_on(a_settings, s, f"T{s}x") for s in range(8)]
        for table_id in tables:
            await send(redis_client, a_settings, opening(table_id)[0])
        for table_id in tables:
            assert (await result_of(store, table_id, f"create-{table_id}"))["ok"] is True
        # each table appended once, by one of them, and both made progress (the hook runs just
        # after the append whose result we saw: give it a moment)
        await eventually(lambda: len(a.appended) + len(b.appended) >= len(tables))
        assert sorted(a.appended + b.appended) == sorted(tables)
        assert a.appended and b.appended


async def test_a_stopping_worker_hands_its_shards_over(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis
) -> None:
    a_settings = make_settings(redis_url, redis_ns, "a", lease_ms=6000)
    b_settings = make_settings(redis_url, redis_ns, "b", lease_ms=6000)
    store = RedisEventStore(redis_client, a_settings.keys)
    async with running(b_settings, Recording) as b:
        async with running(a_settings, Recording) as a:
            await eventually(lambda: len(a.owned) == len(b.owned) == 2)
            given = set(a.owned)
        # a released its leases and left the registry: b takes everything at its next tick
        holders = await lease_holders(redis_client, a_settings)
        assert a.worker_id not in holders.values()
        await eventually(lambda: b.owned == {0, 1, 2, 3})
        tables = [table_on(a_settings, s, "H") for s in sorted(given)]
        for table_id in tables:
            await send(redis_client, a_settings, opening(table_id)[0])
        for table_id in tables:
            assert (await result_of(store, table_id, f"create-{table_id}"))["ok"] is True
        assert isinstance(b, Recording)
        await eventually(lambda: set(tables) <= set(b.appended))  # the hook runs just after
    assert await lease_holders(redis_client, a_settings) == dict.fromkeys(range(4))
    assert await redis_client.zcard(registry_key(a_settings.keys)) == 0


async def test_a_lost_lease_stops_the_shard_at_once(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    async with running(settings) as worker:
        await eventually(lambda: worker.owned == {0, 1, 2, 3})
        key = lease_key(settings.keys, 2)
        await redis_client.set(key, "intruder", px=5000)  # somebody else holds shard 2 now
        await eventually(lambda: 2 not in worker.runners, timeout=3)
        table_id = table_on(settings, 2)
        create = opening(table_id)[0]
        await send(redis_client, settings, create)
        await asyncio.sleep(0.6)
        assert await store.command_result(table_id, create.command_id) is None
        assert await redis_client.get(key) == b"intruder"  # never renewed by the worker
        await redis_client.delete(key)  # the intruder goes away: the shard is free again
        assert (await result_of(store, table_id, create.command_id))["ok"] is True
        assert 2 in worker.owned


async def test_a_worker_restarted_under_its_id_takes_its_leases_back_at_once(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis
) -> None:
    """Issue 18 (section 2): a SIGKILLed worker restarted by its supervisor under the same id
    waited for its own leases to expire (10 s then) before its shards moved again.  Its
    previous process left the leases of shards 0 and 1 (a minute long) and a command read but
    not processed; the new process takes both shards back at once and answers the command,
    while a worker of another id leaves the other process's lease of shard 2 alone."""
    a_settings = make_settings(redis_url, redis_ns, "a", lease_ms=6000)
    store = RedisEventStore(redis_client, a_settings.keys)
    for shard in (0, 1):
        await redis_client.set(lease_key(a_settings.keys, shard), a_settings.worker_id, px=60_000)
    await redis_client.set(lease_key(a_settings.keys, 2), "someone-else", px=60_000)
    table_id = table_on(a_settings, 1)
    stream = a_settings.keys.cmd(1)
    await redis_client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    create = opening(table_id)[0]
    await send(redis_client, a_settings, create)
    read: Any = await redis_client.xreadgroup(GROUP, a_settings.worker_id, {stream: ">"})
    assert len(read[0][1]) == 1  # the previous process read it, then died
    async with running(a_settings) as worker:
        await eventually(lambda: {0, 1} <= worker.owned, timeout=5)
        assert (await result_of(store, table_id, create.command_id, timeout=5))["ok"] is True
        assert 2 not in worker.owned
        assert (await lease_holders(redis_client, a_settings))[2] == "someone-else"
    await redis_client.delete(lease_key(a_settings.keys, 2))


# --- claims and poison -------------------------------------------------------------------------


async def test_pending_entries_of_a_dead_consumer_are_claimed_in_order(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 1)
    stream = settings.keys.cmd(1)
    await redis_client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    for command in opening(table_id):
        await send(redis_client, settings, command)
    # a consumer read two entries and died before processing them
    read: Any = await redis_client.xreadgroup(GROUP, "ghost", {stream: ">"}, count=2)
    assert len(read[0][1]) == 2
    async with running(settings) as worker:
        results = [await result_of(store, table_id, c.command_id) for c in opening(table_id)]
        assert [r["ok"] for r in results] == [True, True, True]
        assert results[1]["seat"] == 0 and results[2]["seat"] == 1  # stream order kept
        assert worker.runners[1].claimed == 2
    assert await pending(redis_client, settings) == 0


class Exploding(TableService):
    """A table service that fails unexpectedly on chosen command ids."""

    def __init__(self, store: RedisEventStore, boom: set[str]) -> None:
        super().__init__(store, seed_source=lambda: SEED, dealer_source=lambda: 0)
        self.boom = boom
        self.attempts = 0

    def decide(self, table: Table, command: Command, seat: int | None) -> Decision:
        if command.command_id in self.boom:
            self.attempts += 1
            raise RuntimeError(f"bug triggered by {command.command_id}")
        return super().decide(table, command, seat)


async def test_a_poison_command_is_given_up_and_the_table_goes_on(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 3)
    create, join0, join1 = opening(table_id)
    services: list[Exploding] = []

    def factory(worker_store: RedisEventStore) -> TableService:
        services.append(Exploding(worker_store, {join0.command_id}))
        return services[-1]

    async with running(settings, service_factory=factory, max_deliveries=3):
        for command in (create, join0, join1):
            await send(redis_client, settings, command)
        failed = await result_of(store, table_id, join0.command_id)
        later = await result_of(store, table_id, join1.command_id)
    assert failed["ok"] is False and failed["code"] == "command/failed"
    assert "RuntimeError" in failed["message"]
    assert services[0].attempts == 3
    assert later == {"ok": True, "seat": 0}  # join1 waited for join0, then took seat 0
    assert [e.body["type"] for e in await store.read(table_id)] == [
        "table_created",
        "player_joined",
    ]
    assert await pending(redis_client, settings) == 0


async def test_an_entry_delivered_too_often_is_given_up_unapplied(
    redis_client: redis.asyncio.Redis, settings: Settings, store: RedisEventStore
) -> None:
    table_id = table_on(settings, 0)
    stream = settings.keys.cmd(0)
    await redis_client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    create = opening(table_id)[0]
    entry_id = await send(redis_client, settings, create)
    # it killed every worker that read it: delivered three times already
    await redis_client.xreadgroup(GROUP, "ghost-1", {stream: ">"}, count=1)
    await redis_client.xclaim(stream, GROUP, "ghost-2", 0, [entry_id])
    await redis_client.xclaim(stream, GROUP, "ghost-3", 0, [entry_id])
    async with running(settings, max_deliveries=3):
        result = await result_of(store, table_id, create.command_id)
    assert result["code"] == "command/failed"
    assert (await store.head(table_id)).version == 0
    assert await pending(redis_client, settings) == 0


async def test_the_worker_connections_have_no_call_timeouts(settings: Settings) -> None:
    """The store's client and FastStream's (whose XREADGROUP blocks) both leave a lost Redis to
    TCP: no socket timeout, keepalive on, and both pack their commands in C
    (``services.store.client``)."""
    worker = EngineWorker(settings)
    await worker.broker.connect()
    try:
        wanted = without_call_timeouts(settings.redis_url)
        assert wanted["socket_timeout"] is None
        url_class = parse_url(settings.redis_url).get("connection_class", Connection)
        for client in (worker.client, worker.broker.config.connection.client):
            options = client.connection_pool.connection_kwargs
            assert {k: options.get(k) for k in wanted} == wanted
            assert client.connection_pool.connection_class is packing_in_c(url_class)
    finally:
        await worker.broker.stop()
        await worker.client.aclose()


class _Log:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def exception(self, event: str, **_: Any) -> None:
        self.errors.append(event)


async def test_an_acknowledgement_is_answered_while_the_next_batch_goes_on() -> None:
    acks = AcksInFlight(_Log())
    gate = asyncio.Event()
    released: list[str] = []

    async def ack(name: str) -> None:
        await gate.wait()
        released.append(f"acked {name}")

    await acks.send(ack("a"), lambda: released.append("released a"))
    assert acks.in_flight == 1 and released == []  # send did not wait for the answer
    second = asyncio.create_task(acks.send(ack("b"), lambda: released.append("released b")))
    await asyncio.sleep(0.01)
    assert not second.done()  # the next one waits for the one in flight
    gate.set()
    await second
    await acks.drain()
    assert released == ["acked a", "released a", "acked b", "released b"]
    assert acks.in_flight == 0


async def test_a_failed_acknowledgement_is_logged_and_its_entries_released() -> None:
    log = _Log()
    acks = AcksInFlight(log)
    released: list[bool] = []

    async def fails() -> None:
        raise ConnectionError("Redis went away")

    await acks.send(fails(), lambda: released.append(True))
    await acks.drain()
    assert released == [True] and log.errors == ["acknowledgement failed; its entries stay pending"]


async def test_every_entry_is_acknowledged_when_the_worker_stops_right_after_a_burst(
    settings: Settings,
    redis_client: redis.asyncio.Redis,
    store: RedisEventStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Acknowledgements slower than the stop: the worker still waits for them before its
    leases go and it disconnects."""
    from services.engine_worker import loop

    async def slow(*args: Any) -> None:
        await asyncio.sleep(0.3)
        await acknowledge(*args)

    monkeypatch.setattr(loop, "acknowledge", slow)
    table_ids = [table_on(settings, shard, f"A{shard}-") for shard in range(settings.shards)]
    async with running(settings) as worker:
        await eventually(lambda: len(worker.reading()) == settings.shards)
        for table_id in table_ids:
            for command in opening(table_id):
                await send(redis_client, settings, command)
        for table_id in table_ids:
            assert (await result_of(store, table_id, f"join1-{table_id}"))["ok"]
    for shard in range(settings.shards):  # closed: nothing of ours left pending
        pending = await redis_client.xpending(settings.keys.cmd(shard), GROUP)
        assert pending["pending"] == 0
