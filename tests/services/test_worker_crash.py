"""``kill -9`` of an engine worker process in the middle of a stream of commands loses nothing.

Twenty tables play whole bot games through the command streams while a worker subprocess
(``python -m services.engine_worker``) decides them.  Once a quarter of the game is done the
worker is frozen (SIGSTOP) at a moment when it holds entries it has read but not acknowledged,
then SIGKILLed; a second worker process takes the shards over when the leases expire, claims the
dead worker's pending entries and carries on.  The clients (one coroutine per table, each
waiting for its result before the next move, as the gateway would) send some commands twice and
some with a stale version on purpose.  Afterwards:

* every command has exactly one result, the one its client saw, and every move was accepted;
* each table's event stream chains (hash chain), folds into a finished match, and holds the
  events of each accepted command exactly once, as one contiguous run, in the order the
  commands were sent; rejected commands left no event;
* nothing is pending in any consumer group, and the second worker stops cleanly on SIGTERM,
  releasing its leases;
* ``conquian audit --all`` passes for all twenty tables.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio

from engine.bots import RandomBot
from events.chain import verify_chain
from events.commands import CommandModel, CreateTable, Join, Turn
from events.mapping import to_wire_command
from services import cli
from services.engine_worker import GROUP
from services.settings import Settings, load_settings
from services.store.keys import command_key
from services.store.redis_store import RedisEventStore
from services.store.shard_leases import lease_key
from services.tables.service import TableService
from services.tables.table import fold_table

REPO = Path(__file__).resolve().parents[2]
TABLES = 20
SHARDS = 4
KILL_AFTER = 250  # results seen before the first worker is killed
RESULT_TIMEOUT = 20.0

pytestmark = pytest.mark.timeout(120)


def worker_env(redis_url: str, ns: str, worker_id: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONQUIAN_")}
    env.update(
        REDIS_URL=redis_url,
        CONQUIAN_NAMESPACE=ns,
        CONQUIAN_SHARDS=str(SHARDS),
        CONQUIAN_LEASE_MS="1000",
        CONQUIAN_CLAIM_IDLE_MS="300",
        CONQUIAN_BATCH_SIZE="20",
        CONQUIAN_WORKER_ID=worker_id,
        CONQUIAN_LOG_LEVEL="INFO",
        CONQUIAN_TOKEN_SECRET="s" * 32,
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass
class Worker:
    """A worker subprocess and its log file."""

    process: subprocess.Popen[bytes]
    log: Path

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def start_worker(redis_url: str, ns: str, worker_id: str, tmp_path: Path) -> Worker:
    log = tmp_path / f"{worker_id}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.engine_worker"],
            cwd=REPO,
            env=worker_env(redis_url, ns, worker_id),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return Worker(process, log)


@dataclass
class Client:
    """The clients of all tables: what they sent and the results they saw."""

    redis: redis.asyncio.Redis
    settings: Settings
    store: RedisEventStore
    sent: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)  # table: (id, ok)
    results: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    duplicates: int = 0
    stale: int = 0

    async def submit(self, command: CommandModel, seat: int | None, twice: bool) -> Any:
        fields: dict[Any, Any] = {
            "c": command.model_dump_json(exclude_none=True),
            "s": "" if seat is None else str(seat),
            "r": str(int(time.time() * 1000)),
        }
        stream = self.settings.keys.cmd(self.settings.keys.shard_of(command.table_id))
        await self.redis.xadd(stream, fields)
        if twice:  # a client retry: the same entry again
            await self.redis.xadd(stream, fields)
            self.duplicates += 1
        deadline = time.monotonic() + RESULT_TIMEOUT
        key = command_key(command.command_id, seat)  # the seat's record of the command
        while (raw := await self.store.command_result(command.table_id, key)) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"no result for {command.command_id}")
            await asyncio.sleep(0.005)
        result: dict[str, Any] = json.loads(raw)
        self.results[command.table_id, key] = result
        self.sent.setdefault(command.table_id, []).append((key, result["ok"]))
        return result

    async def play(self, table_id: str, seed: int) -> None:
        """Play one table to the end of its match, one command at a time."""
        rng = random.Random(seed)
        opening: list[CommandModel] = [
            CreateTable(table_id=table_id, command_id=f"{table_id}-create"),
            Join(table_id=table_id, command_id=f"{table_id}-join-0", name="ann"),
            Join(table_id=table_id, command_id=f"{table_id}-join-1", name="bob"),
        ]
        for command in opening:
            assert (await self.submit(command, None, rng.random() < 0.1))["ok"] is True
        reader = TableService(self.store)
        bot = RandomBot()
        step = 0
        while True:
            table = await reader.load(table_id, fresh=True)
            assert table.match is not None
            seat = table.match.to_act
            if seat is None:
                assert table.match.over
                return
            step += 1
            if rng.random() < 0.05 and table.version > 1:  # a move sent from an old view
                stale = Turn(
                    table_id=table_id,
                    command_id=f"{table_id}-stale-{step:04d}",
                    expected_version=table.version - 1,
                )
                result = await self.submit(stale, seat, False)
                assert result["code"] == "command/stale_version", result
                self.stale += 1
            action = bot.choose(table.match, seat, rng)
            command = to_wire_command(
                action, table_id, f"{table_id}-move-{step:04d}", table.version
            )
            result = await self.submit(command, seat, rng.random() < 0.1)
            assert result["ok"] is True, result


async def total_pending(client: redis.asyncio.Redis, settings: Settings) -> int:
    total = 0
    for shard in range(settings.shards):
        total += int((await client.xpending(settings.keys.cmd(shard), GROUP))["pending"])
    return total


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait(10)


async def test_sigkill_mid_stream_loses_nothing_and_doubles_nothing(
    redis_url: str,
    redis_ns: str,
    redis_client: redis.asyncio.Redis,
    tmp_path: Path,
    workers: list[Worker],
) -> None:
    settings = load_settings(redis_url=redis_url, namespace=redis_ns, shards=SHARDS)
    store = RedisEventStore(redis_client, settings.keys)
    client = Client(redis_client, settings, store)
    first = start_worker(redis_url, redis_ns, "crash-a", tmp_path)
    workers.append(first)
    tables = [f"crash{i:02d}" for i in range(TABLES)]
    games = asyncio.gather(*(client.play(t, i) for i, t in enumerate(tables)))

    # wait for a quarter of the work, then catch the worker holding unacknowledged entries
    while len(client.results) < KILL_AFTER:
        assert not games.done(), games
        assert first.process.poll() is None, first.log.read_text()
        await asyncio.sleep(0.01)
    for _ in range(200):
        first.process.send_signal(signal.SIGSTOP)
        await asyncio.sleep(0.01)
        held = [
            entry
            for shard in range(SHARDS)
            for entry in await redis_client.xpending_range(
                settings.keys.cmd(shard), GROUP, "-", "+", 1000, consumername="crash-a"
            )
        ]
        if held:
            break
        first.process.send_signal(signal.SIGCONT)
        await asyncio.sleep(0.005)
    first.process.kill()  # SIGKILL, while stopped: no cleanup of any kind
    first.process.wait(10)
    assert held, "the worker never held an unacknowledged entry"
    applied_not_acked = 0  # appended by the dead worker, not yet acknowledged
    for entry in held:
        for shard in range(SHARDS):
            found: Any = await redis_client.xrange(
                settings.keys.cmd(shard), entry["message_id"], entry["message_id"]
            )
            if found:
                command = json.loads(found[0][1][b"c"])
                seat = found[0][1][b"s"].decode()
                key = command_key(command["command_id"], int(seat) if seat else None)
                if await store.command_result(command["table_id"], key):
                    applied_not_acked += 1
    done_at_kill = len(client.results)
    second = start_worker(redis_url, redis_ns, "crash-b", tmp_path)
    workers.append(second)

    await asyncio.wait_for(games, 90)
    games.result()

    # the second worker stops cleanly and gives its shards back
    second.process.send_signal(signal.SIGTERM)
    assert second.process.wait(15) == 0, second.log.read_text()[-3000:]
    assert [await redis_client.get(lease_key(settings.keys, s)) for s in range(SHARDS)] == [
        None
    ] * SHARDS
    claimed = sum(
        line.get("count", 0)
        for line in second.lines()
        if line.get("event") == "claimed pending entries"
    )
    assert claimed >= len(held), (claimed, len(held))
    assert not [line for line in second.lines() if line.get("level") in ("error", "critical")]
    assert done_at_kill < len(client.results)  # the kill was in the middle of the stream

    # exactly one result per command, the one its client saw
    assert await total_pending(redis_client, settings) == 0
    recorded: dict[str, set[str]] = {t: set() for t in tables}
    for table_id in tables:
        for key in await redis_client.hkeys(settings.keys.command_ids(table_id)):
            recorded[table_id].add(key.decode() if isinstance(key, bytes) else key)
    for table_id in tables:
        sent_ids = [cid for cid, _ in client.sent[table_id]]
        assert len(sent_ids) == len(set(sent_ids))
        assert recorded[table_id] == set(sent_ids)
        for command_id in sent_ids:
            raw = await store.command_result(table_id, command_id)
            assert raw is not None and json.loads(raw) == client.results[table_id, command_id]

    # every accepted command's events exactly once, in order; rejected ones left none
    for table_id in tables:
        events = await store.read(table_id)
        assert verify_chain(events) is None
        runs: list[str] = []
        for event in events:
            command_id = event.body["command_id"]
            if not runs or runs[-1] != command_id:
                runs.append(command_id)
        accepted = [key.rpartition(":")[2] for key, ok in client.sent[table_id] if ok]
        assert runs == accepted, f"{table_id}: events out of order or applied twice"
        table = fold_table(
            table_id,
            ((e.version, e.hash, e.body) for e in events),
            await store.secrets(table_id),
        )
        assert table.match is not None and table.match.over
        assert (await store.head(table_id)).status == "over"
    assert client.duplicates > 0 and client.stale > 0
    print(  # shown with -s
        f"commands {len(client.results)}, done at kill {done_at_kill}, unacked at kill "
        f"{len(held)} (already appended {applied_not_acked}), claimed by the next worker "
        f"{claimed}, client retries {client.duplicates}, stale {client.stale}"
    )

    # the independent audit: chain, commitments, every card and move re-decided, heads
    assert "audit" in dict(cli.SUBCOMMANDS)
    audit = subprocess.run(
        [sys.executable, "-m", "services.cli", "audit", "--all", "--json"],
        cwd=REPO,
        env=worker_env(redis_url, redis_ns, "auditor"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    tally = json.loads(audit.stdout.strip().splitlines()[-1])
    assert tally["ok"] is True and tally["tables"] == tally["tables_ok"] == TABLES, tally
