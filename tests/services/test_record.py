"""``conquian selfplay --record``: deals written through TableService as real tables."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator

import pytest
import redis.asyncio

from engine.rules import PRESETS
from events.fairness import commitment, parse_seed
from services import cli
from services.audit import audit_table
from services.selfplay.cli import (
    RecordingConflict,
    SelfplayConfig,
    command_id_of,
    deal_seed,
    record_selfplay,
    run_selfplay,
    table_id_of,
)
from services.store import KeySpace, MemoryEventStore, RedisEventStore
from services.store.base import EventStore, Head, StoredEvent

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def _record(
    capsys: pytest.CaptureFixture[str], url: str, ns: str, *extra: str
) -> dict[str, object]:
    args = ["selfplay", "--deals", "3", "--seed", "5", "--record", "--redis-url", url]
    assert cli.main([*args, "--namespace", ns, "--json", *extra]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


def _read(
    url: str, ns: str, tables: list[str]
) -> dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]:
    async def read() -> dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]:
        client = redis.asyncio.Redis.from_url(url, decode_responses=False)
        try:
            store = RedisEventStore(client, KeySpace(ns))
            return {
                t: (await store.read(t), await store.head(t), await store.secrets(t))
                for t in tables
            }
        finally:
            await client.aclose()

    return asyncio.run(read())


@pytest.fixture
def recorded(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str
) -> Iterator[tuple[dict[str, object], dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]]]:
    data = _record(capsys, redis_url, redis_ns)
    tables = [table_id_of(5, i) for i in range(3)]
    yield data, _read(redis_url, redis_ns, tables)


def test_record_writes_one_table_per_deal(
    recorded: tuple[dict[str, object], dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]],
    redis_ns: str,
) -> None:
    data, tables = recorded
    assert data["recorded"] == {
        "namespace": redis_ns,
        "tables": 3,
        "first_table": "selfplay-5-0",
        "last_table": "selfplay-5-2",
        "events": sum(len(events) for events, _, _ in tables.values()),
    }
    assert data["deals"] == 3
    for table_id, (events, head, secrets) in tables.items():
        types = [e.body["type"] for e in events]
        assert types[:6] == [
            "table_created",
            "player_joined",
            "player_joined",
            "deal_started",
            "hand_dealt",
            "hand_dealt",
        ]
        assert types[-3:] == ["stakes_settled", "deal_revealed", "match_ended"]
        assert head == Head(events[-1].version, events[-1].hash, "over")
        index = int(table_id.rsplit("-", 1)[1])
        assert parse_seed(secrets["seed:1"]) == deal_seed(5, index)
        assert events[3].body["commitment"] == commitment(deal_seed(5, index))
        assert events[-2].body["seed"] == secrets["seed:1"]
        assert events[0].body["first_dealer"] == index % 2
        assert [e.body["bot"] for e in events[1:3]] == ["greedy", "random"]
        for event in events:  # a command sent at version V has the id command_id_of(table, V)
            cid = event.body["command_id"]
            first = next(e for e in events if e.body["command_id"] == cid)
            assert cid == command_id_of(table_id, first.version - 1)


def test_recorded_tables_pass_the_audit(
    recorded: tuple[dict[str, object], dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]],
) -> None:
    _, tables = recorded
    for table_id, (events, head, _) in tables.items():
        report = audit_table(table_id, events, head)
        assert report.ok, report.failure
        assert (report.deals, report.revealed, report.running) == (1, 1, None)


def test_the_tally_is_what_the_tables_say(
    recorded: tuple[dict[str, object], dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]],
) -> None:
    data, tables = recorded
    wins = [0, 0]
    draws = 0
    for events, _, _ in tables.values():
        settled = next(e.body for e in events if e.body["type"] == "stakes_settled")
        if settled["winner"] is None:
            draws += 1
        else:
            wins[settled["winner"]] += 1
    assert data["wins"] == wins and data["draws"] == draws


def test_recording_again_appends_nothing(
    capsys: pytest.CaptureFixture[str],
    recorded: tuple[dict[str, object], dict[str, tuple[list[StoredEvent], Head, dict[str, str]]]],
    redis_url: str,
    redis_ns: str,
) -> None:
    first, tables = recorded
    again = _record(capsys, redis_url, redis_ns)
    assert again == first
    assert _read(redis_url, redis_ns, list(tables)) == tables


def test_several_deals_per_table(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str
) -> None:
    data = _record(capsys, redis_url, redis_ns, "--deals", "5", "--table-deals", "3")
    assert data["deals"] == 5
    recorded = data["recorded"]
    assert isinstance(recorded, dict) and recorded["tables"] == 2
    tables = _read(redis_url, redis_ns, ["selfplay-5-0", "selfplay-5-1"])
    counts = []
    for table_id, (events, head, secrets) in tables.items():
        counts.append(sum(e.body["type"] == "deal_revealed" for e in events))
        assert sorted(secrets) == [f"seed:{n}" for n in range(1, counts[-1] + 1)]
        report = audit_table(table_id, events, head)
        assert report.ok, report.failure
        assert report.deals == report.revealed == counts[-1]
    assert counts == [3, 2]


def test_the_memory_store_records_the_same_games() -> None:
    config = SelfplayConfig(4, 9, ("random", "greedy"), PRESETS["bicycle"])
    store: EventStore = MemoryEventStore()
    result, tables = asyncio.run(record_selfplay(config, store, table_deals=2))
    assert [t.table_id for t in tables] == ["selfplay-9-0", "selfplay-9-1"]
    assert result.deals == 4 and sum(result.wins) + result.draws == 4
    assert result.actions == sum(t.actions for t in tables)

    async def audit_all() -> list[bool]:
        return [
            audit_table(t, await store.read(t), await store.head(t)).ok
            async for t in store.tables()
        ]

    assert asyncio.run(audit_all()) == [True, True]
    created = asyncio.run(store.read("selfplay-9-0"))[0].body
    assert created["rules"]["name"] == "bicycle"


def test_the_recorded_tally_differs_only_by_the_decks() -> None:
    config = SelfplayConfig(6, 2, ("greedy", "random"))
    plain = run_selfplay(config)
    recorded, _ = asyncio.run(record_selfplay(config, MemoryEventStore()))
    assert recorded.deals == plain.deals == 6
    assert recorded.as_dict().keys() == plain.as_dict().keys()


def test_custom_rules_are_sent_as_options() -> None:
    rules = PRESETS["classic"].__class__.from_dict(
        {**PRESETS["classic"].as_dict(), "name": "house", "base_stake": 2}
    )
    config = SelfplayConfig(1, 3, ("random", "random"), rules)
    store = MemoryEventStore()
    asyncio.run(record_selfplay(config, store))
    created = asyncio.run(store.read("selfplay-3-0"))[0].body
    assert created["rules"]["name"] == "house" and created["rules"]["base_stake"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--record"], "--record needs --redis-url or REDIS_URL"),
        (["--namespace", "x"], "--namespace, --shards and --table-deals need --record"),
        (["--table-deals", "2"], "--namespace, --shards and --table-deals need --record"),
        (["--record", "--redis-url", "redis://x", "--namespace", "a b"], "invalid key namespace"),
        (["--table-deals", "0"], "argument --table-deals: must be at least 1, not 0"),
    ],
)
def test_record_usage_errors(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("CONQUIAN_REDIS_URL", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["selfplay", "--deals", "1", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


class _PlayedMeanwhile(MemoryEventStore):
    """A store where, just before the recorder's sixth append, another player (a running
    service's bots runner, say) acts for the seat to move."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    async def append(self, table_id, expected_version, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.appends += 1
        if self.appends == 6:
            from engine.bots import make_bot
            from events.mapping import to_wire_command
            from services.tables.service import TableService

            other = TableService(self)
            table = await other.load(table_id)
            assert table.match is not None and table.match.to_act is not None
            seat = table.match.to_act
            action = make_bot("random").choose(table.match, seat, random.Random(1))
            command = to_wire_command(action, table_id, "someone-else-0001", table.version)
            assert (await other.execute(command, seat)).ok
        return await super().append(table_id, expected_version, *args, **kwargs)


async def test_a_table_moved_by_another_player_stops_the_recording_with_a_clear_error() -> None:
    with pytest.raises(RecordingConflict, match="namespace of its own"):
        await record_selfplay(SelfplayConfig(2, 9, ("greedy", "random")), _PlayedMeanwhile())
