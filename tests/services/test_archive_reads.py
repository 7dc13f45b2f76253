"""Reads of a finished table give the same answers once it is archived: ``conquian audit``
(named tables and ``--all``), ``conquian replay`` (transcript and ``--at``) and the gateway's
routes (public view, each seat's view with its token, the spectator's, events for each viewer)
and its refusals of commands to it (create again, join, a move).  Answers are recorded before
archiving and compared byte for byte after it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio

from services import cli
from services.archive.folder import FolderArchive
from services.archive.mover import Archiver
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.settings import Settings, load_settings
from services.store import KeySpace, RedisEventStore
from tests.services.gateway_stack import Seat, Stack, refuser, wire_command

SHARDS = 4
TABLES = [f"selfplay-8-{i}" for i in range(3)]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_audit_and_replay_answer_the_same_from_the_archive(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str, tmp_path: Path
) -> None:
    async def setup() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            store = RedisEventStore(client, KeySpace(redis_ns, SHARDS))
            config = SelfplayConfig(6, 8, ("greedy", "random"))
            await record_selfplay(config, store, table_deals=2)
        finally:
            await client.aclose()

    asyncio.run(setup())
    store_args = ["--redis-url", redis_url, "--namespace", redis_ns, "--shards", str(SHARDS)]
    folder = str(tmp_path / "archive")
    asks = [
        ["audit", *TABLES, "--json"],
        ["audit", *TABLES],
        ["audit", "--all"],
        *(["replay", t] for t in TABLES),
        ["replay", TABLES[0], "--at", "30", "--seat", "1"],
    ]
    before = [run_cli(capsys, *a, *store_args) for a in asks]
    assert all(code == 0 for code, _ in before), before

    code, _ = run_cli(capsys, "archive", *store_args, "--archive-dir", folder, "--older-than", "0")
    assert code == 0
    assert run_cli(capsys, "replay", TABLES[0], *store_args)[0] == 1  # Redis alone: gone

    after = [run_cli(capsys, *a, *store_args, "--archive-dir", folder) for a in asks]
    for ask, (was, now) in zip(asks, zip(before, after, strict=True), strict=True):
        if ask == ["audit", "--all"]:  # the seconds and the rate differ: compare the rest
            assert now[0] == was[0] == 0
            assert now[1].split(" in ")[0] == was[1].split(" in ")[0]
            assert now[1].endswith("3 ok, 0 failed\n")
        elif ask[-1] == "--json":
            strip = ("seconds", "events_per_s")
            was_json = {k: v for k, v in json.loads(was[1]).items() if k not in strip}
            now_json = {k: v for k, v in json.loads(now[1]).items() if k not in strip}
            assert (now[0], now_json) == (was[0], was_json)
        else:
            assert now == was, ask


def test_a_damaged_archived_file_fails_its_audit(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str, tmp_path: Path
) -> None:
    async def setup() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            store = RedisEventStore(client, KeySpace(redis_ns, SHARDS))
            await record_selfplay(SelfplayConfig(1, 8, ("greedy", "random")), store)
        finally:
            await client.aclose()

    asyncio.run(setup())
    store_args = ["--redis-url", redis_url, "--namespace", redis_ns, "--shards", str(SHARDS)]
    folder = tmp_path / "archive"
    archived = ["--archive-dir", str(folder)]
    assert run_cli(capsys, "archive", *store_args, *archived, "--older-than", "0")[0] == 0
    path = FolderArchive(folder, redis_ns).path(TABLES[0])
    path.write_bytes(path.read_bytes()[:-20])  # cut short
    code, out = run_cli(capsys, "audit", TABLES[0], *store_args, *archived, "--json")
    (report,) = json.loads(out)["reports"]
    assert code == 1 and report["failure"]["code"] == "audit/undecodable"
    assert "archived file" in report["failure"]["reason"]


@pytest.fixture
def settings(redis_url: str, redis_ns: str, tmp_path: Path) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret="archive-test-secret-0123456789",
        archive_dir=str(tmp_path / "archive"),
    )


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    async with Stack(settings) as running:
        yield running


async def answers(stack: Stack, table_id: str, seats: tuple[Seat, Seat]) -> list[Any]:
    """Every read of the table, as (status, bytes): views and events for each viewer."""
    http = stack.http
    out: list[Any] = []
    headers: list[dict[str, str]] = [{}, seats[0].headers, seats[1].headers]
    for h in headers:
        for path in ("", "/view", "/events", "/events?after=3&limit=5"):
            response = await http.get(f"/tables/{table_id}{path}", headers=h)
            out.append((path, response.status_code, response.content))
    bad = await http.get(f"/tables/{table_id}/view", headers={"Authorization": "Bearer nope"})
    out.append(("bad token", bad.status_code, bad.json()["code"]))
    return out


async def refusals(stack: Stack, table_id: str, seats: tuple[Seat, Seat], n: int) -> list[Any]:
    """The codes of commands a finished table refuses: create again, join, a seat's move."""
    http = stack.http
    out: list[Any] = []
    again = await http.post("/tables", json={"table_id": table_id, "deals": 1})
    join = await http.post(f"/tables/{table_id}/join", json={"name": "Cy"})
    move = await seats[0].send(wire_command("turn", table_id, f"late-move-{n}", None))
    for response in (again, join, move):
        out.append((response.status_code, response.json()["code"]))
    return out


async def test_the_gateway_answers_the_same_for_an_archived_table(
    stack: Stack, settings: Settings
) -> None:
    table_id = "finished-1"
    await stack.create(table_id=table_id, deals=1)
    seats = (
        await stack.join(table_id, "Ana", seat=0),
        await stack.join(table_id, "Bo", seat=1),
    )
    version = seats[1].version
    while True:
        views = [await s.view(version) for s in seats]
        acting = [(s, v) for s, v in zip(seats, views, strict=True) if v["legal_actions"]]
        if not acting:
            break
        seat, view = acting[0]
        version = (await seat.act(refuser(view["legal_actions"]), version))["version"]
    public = (await stack.http.get(f"/tables/{table_id}", params={"min_version": version})).json()
    assert public["status"] == "over"
    before = await answers(stack, table_id, seats)
    refused_before = await refusals(stack, table_id, seats, 1)

    client = redis.asyncio.Redis.from_url(settings.redis_url)
    try:
        store = RedisEventStore(client, settings.keys)
        archive = FolderArchive(settings.archive_dir or "", settings.namespace)
        tally = await Archiver(store, archive).archive_due(2**62)
        assert (tally.written, tally.refused) == (1, [])
        assert (await store.head(table_id)).version == 0
        assert await client.exists(settings.keys.table_view(table_id, "public")) == 0
    finally:
        await client.aclose()

    after = await answers(stack, table_id, seats)
    assert after == before
    # commands are refused with the codes the engine worker gave while the table was in Redis
    assert await refusals(stack, table_id, seats, 2) == refused_before
    assert [code for _, code in refused_before] == ["table/exists", "table/full", "move/match_over"]
    missing = await stack.http.get("/tables/never-was")
    assert missing.status_code == 404 and missing.json()["code"] == "table/not_found"
