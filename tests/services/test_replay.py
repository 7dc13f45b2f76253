"""``conquian replay``: the transcript of a recorded table, secrecy of running deals, ``--at``."""

from __future__ import annotations

import asyncio
import random
import re

import pytest
import redis
import redis.asyncio

from engine.bots import RandomBot
from engine.notation import format_position, parse_position
from events.commands import CreateTable, Join
from events.mapping import to_wire_command
from services import cli
from services.audit.replay import parse_events, position_at, transcript
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.store import KeySpace, MemoryEventStore, RedisEventStore
from services.store.base import StoredEvent
from services.store.redis_store import pack_body
from services.tables.service import TableService
from services.tables.table import fold_table

SEED = 11
T0 = f"selfplay-{SEED}-0"
LINE = re.compile(r"^ {0,4}(\d+)  (.*)$")


def _replay(capsys: pytest.CaptureFixture[str], url: str, ns: str, *args: str) -> str:
    assert cli.main(["replay", *args, "--redis-url", url, "--namespace", ns]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out


def _read(url: str, ns: str, table_id: str) -> tuple[list[StoredEvent], dict[str, str]]:
    async def read() -> tuple[list[StoredEvent], dict[str, str]]:
        client = redis.asyncio.Redis.from_url(url, decode_responses=False)
        try:
            store = RedisEventStore(client, KeySpace(ns))
            return await store.read(table_id), await store.secrets(table_id)
        finally:
            await client.aclose()

    return asyncio.run(read())


@pytest.fixture
def recorded(capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str) -> str:
    args = ["selfplay", "--deals", "1", "--seed", str(SEED), "--record", "--redis-url", redis_url]
    assert cli.main([*args, "--namespace", redis_ns]) == 0
    capsys.readouterr()
    return redis_ns


async def _start_a_table(url: str, ns: str, table_id: str, moves: int) -> None:
    client = redis.asyncio.Redis.from_url(url, decode_responses=False)
    try:
        store = RedisEventStore(client, KeySpace(ns))
        service = TableService(store, seed_source=lambda: bytes(range(32)), dealer_source=int)
        create = CreateTable(table_id=table_id, command_id="create-0001", deals=2)
        assert (await service.execute(create, None)).ok
        for seat in (0, 1):
            join = Join(table_id=table_id, command_id=f"join-000{seat}", name=f"player {seat}")
            assert (await service.execute(join, None)).ok
        rng = random.Random(3)
        for n in range(moves):
            table = await service.load(table_id)
            assert table.match is not None and table.match.to_act is not None
            seat = table.match.to_act
            action = RandomBot().choose(table.match, seat, rng)
            assert (
                await service.execute(to_wire_command(action, table_id, f"move-{n:04d}"), seat)
            ).ok
    finally:
        await client.aclose()


def test_the_transcript_of_a_finished_table(
    capsys: pytest.CaptureFixture[str], redis_url: str, recorded: str
) -> None:
    out = _replay(capsys, redis_url, recorded, T0)
    events, _ = _read(redis_url, recorded, T0)
    lines = out.splitlines()
    assert lines[0] == (
        f"    1  table {T0}: match: rules classic, deals 1, target -, first dealer 0, "
        "turn clock none"
    )
    assert lines[1] == "    2  seat 0: greedy bot (bot greedy)"
    assert lines[2] == "    3  seat 1: random bot (bot random)"
    assert lines[3] == ""
    assert lines[4] == "deal 1: dealer 0, stake 1"
    numbered = [int(m.group(1)) for line in lines if (m := LINE.match(line))]
    assert numbered == [e.version for e in events]  # every event once, in order
    texts = {int(m.group(1)): m.group(2) for line in lines if (m := LINE.match(line))}
    for event in events:
        body = event.body
        text = texts[event.version]
        if body["type"] == "hand_dealt":  # the deal is revealed: its hands are public
            assert text == f"hand {body['seat']}: {' '.join(body['cards'])}"
        elif body["type"] == "card_turned":
            assert text == f"{body['seat']} turns {body['card']}"
        elif body["type"] == "deal_revealed":
            assert text == f"deal 1 revealed: seed {body['seed']}, matches the commitment"
    deck = next(line for line in lines if line.startswith("       deck "))
    assert len(deck.split()) == 41
    assert lines[-1].endswith(("wins 1:0", "wins 0:1", "tie 0:0"))


def test_position_at_a_version(
    capsys: pytest.CaptureFixture[str], redis_url: str, recorded: str
) -> None:
    events, secrets = _read(redis_url, recorded, T0)
    for version in (4, 12, len(events) // 2, len(events)):
        out = _replay(capsys, redis_url, recorded, T0, "--at", str(version))
        first, position, *rest = out.splitlines()
        kind = events[version - 1].body["type"]
        assert first == f"{T0} after version {version} ({kind}):"
        triples = ((e.version, e.hash, e.body) for e in events[:version])
        match = fold_table(T0, triples, secrets).match
        assert match is not None
        assert position == format_position(match)
        assert rest == []  # the deal is revealed by the end of the table: nothing hidden


def test_a_running_deal_keeps_its_secrets(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str
) -> None:
    asyncio.run(_start_a_table(redis_url, redis_ns, "live-1", moves=10))
    out = _replay(capsys, redis_url, redis_ns, "live-1")
    assert "hand 0: 10 cards, hidden until the deal is revealed" in out
    assert "hand 1: 10 cards, hidden until the deal is revealed" in out
    assert "revealed" not in out.replace("hidden until the deal is revealed", "")

    events, secrets = _read(redis_url, redis_ns, "live-1")
    own = next(e.body for e in events if e.body["type"] == "hand_dealt" and e.body["seat"] == 1)
    out = _replay(capsys, redis_url, redis_ns, "live-1", "--seat", "1")
    assert f"hand 1: {' '.join(own['cards'])}" in out
    assert "hand 0: 10 cards, hidden" in out

    last = events[-1].version
    out = _replay(capsys, redis_url, redis_ns, "live-1", "--at", str(last))
    first, position, note = out.splitlines()
    assert first.startswith(f"live-1 after version {last} (")
    assert " | s " not in position and " | h0 " not in position and " | h1 " not in position
    assert note.startswith("note: deal 1 is not revealed: left out the stock (")
    parsed = parse_position(position)  # still a position, with fewer than 40 cards
    full = fold_table("live-1", ((e.version, e.hash, e.body) for e in events), secrets).match
    assert full is not None and parsed.deal is not None and full.deal is not None
    assert parsed.deal.tables == full.deal.tables and parsed.deal.waste == full.deal.waste
    assert parsed.deal.centre == full.deal.centre and parsed.deal.phase == full.deal.phase

    out = _replay(capsys, redis_url, redis_ns, "live-1", "--at", str(last), "--seat", "0")
    position = out.splitlines()[1]
    assert parse_position(position).deal.hands[0] == full.deal.hands[0]  # type: ignore[union-attr]
    assert " | h1 " not in position and "; hand 0 is shown to seat 0" in out


def test_replay_shows_what_it_cannot_read(
    capsys: pytest.CaptureFixture[str], redis_url: str, recorded: str, redis_sync: redis.Redis
) -> None:
    key = KeySpace(recorded).events(T0)
    entries = redis_sync.xrange(key)
    redis_sync.delete(key)
    for entry_id, fields in entries:  # type: ignore[union-attr]
        if entry_id == b"9-1":
            body = {"type": "card_turned", "v": 1, "seat": 0, "card": "8H", "command_id": "x"}
            fields = {b"b": pack_body(body), b"h": fields[b"h"]}  # type: ignore[index]
        redis_sync.xadd(key, fields, id=entry_id)  # type: ignore[arg-type]
    out = _replay(capsys, redis_url, recorded, T0)
    assert "    9  ?? event/invalid: " in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "0"], "--at must be a version >= 1"),
        (["--at", "100000"], "is past the table's last version"),
        (["--seat", "2"], "argument --seat: invalid choice"),
    ],
)
def test_replay_usage_errors(
    capsys: pytest.CaptureFixture[str],
    redis_url: str,
    recorded: str,
    args: list[str],
    message: str,
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["replay", T0, *args, "--redis-url", redis_url, "--namespace", recorded])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_table(capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str) -> None:
    assert cli.main(["replay", "nothing", "--redis-url", redis_url, "--namespace", redis_ns]) == 1
    assert "no table 'nothing'" in capsys.readouterr().err


def test_transcript_and_position_without_redis() -> None:
    store = MemoryEventStore()
    asyncio.run(record_selfplay(SelfplayConfig(2, 5, ("greedy", "random")), store, table_deals=2))
    stored = asyncio.run(store.read("selfplay-5-0"))
    events = parse_events(stored)
    lines = transcript("selfplay-5-0", events)
    headers = [line for line in lines if line.startswith("deal ")]
    assert headers[0] == "deal 1: dealer 0, stake 1"
    assert headers[1].startswith("deal 2: dealer 1, stake ")
    assert sum("matches the commitment" in line for line in lines) == 2
    with pytest.raises(ValueError):
        position_at("selfplay-5-0", [], 1)
    position, notes = position_at("selfplay-5-0", events, stored[-1].version)
    assert "match_over" in position and notes == []
