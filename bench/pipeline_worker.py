"""Engine-worker benchmark: commands per second through one worker, from stream to event store.

    .venv/bin/python bench/pipeline_worker.py [--url redis://127.0.0.1:6379/9] [--tables 200]
        [--shards 16] [--batch-size 200] [--repeat 3] [--rate 300]

What is measured: ``docs/performance.md`` ("Module notes").  The last line printed is a JSON
object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pickle
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio
from redis.utils import HIREDIS_AVAILABLE

from engine.bots import RandomBot
from events.commands import CommandModel, CreateTable, Join
from events.mapping import to_wire_command
from services.engine_worker import EngineWorker
from services.log import configure
from services.settings import load_settings
from services.store import MemoryEventStore, RedisEventStore
from services.store.client import connect
from services.store.keys import command_key
from services.tables.service import TableService

SEED = bytes(range(32))

Entry = tuple[str, int | None]  # command JSON, seat


def fixed_service(store: Any) -> TableService:
    return TableService(store, seed_source=lambda: SEED, dealer_source=lambda: 0)


async def generate(tables: int, seed: int, moves: int) -> dict[str, list[Entry]]:
    """Games (whole, or their first ``moves`` moves), one list of (command JSON, seat) per
    table."""
    service = fixed_service(MemoryEventStore())
    bot = RandomBot()
    games: dict[str, list[Entry]] = {}
    for i in range(tables):
        table_id = f"b{i:05d}"
        rng = random.Random(f"{seed}/{table_id}")
        commands: list[tuple[CommandModel, int | None]] = [
            (CreateTable(table_id=table_id, command_id=f"{table_id}-create"), None),
            (Join(table_id=table_id, command_id=f"{table_id}-join-0", name="ann"), None),
            (Join(table_id=table_id, command_id=f"{table_id}-join-1", name="bob"), None),
        ]
        for command, seat in commands:
            await service.execute(command, seat)  # type: ignore[arg-type]
        step = 0
        while True:
            table = await service.load(table_id)
            assert table.match is not None
            seat = table.match.to_act
            if seat is None or step >= moves:
                break
            step += 1
            action = bot.choose(table.match, seat, rng)
            command = to_wire_command(action, table_id, f"{table_id}-m{step:04d}", table.version)
            assert (await service.execute(command, seat)).ok
            commands.append((command, seat))
        games[table_id] = [(c.model_dump_json(exclude_none=True), s) for c, s in commands]
    return games


def entries_in_order(
    settings: Any, games: dict[str, list[Entry]]
) -> list[tuple[str, dict[str, str]]]:
    """Every command's stream and fields, tables interleaved (as :func:`feed` sends them)."""
    out = []
    longest = max(len(g) for g in games.values())
    for step in range(longest):
        for table_id, game in games.items():
            if step < len(game):
                raw, seat = game[step]
                stream = settings.keys.cmd(settings.keys.shard_of(table_id))
                out.append((stream, {"c": raw, "s": "" if seat is None else str(seat), "r": "0"}))
    return out


async def feed(client: redis.asyncio.Redis, settings: Any, games: dict[str, list[Entry]]) -> int:
    """XADD every command, tables interleaved, in pipelines of 1000; return the count."""
    entries = entries_in_order(settings, games)
    async with client.pipeline(transaction=False) as pipe:
        for n, (stream, fields) in enumerate(entries, 1):
            pipe.xadd(stream, fields)
            if n % 1000 == 0:
                await pipe.execute()
        await pipe.execute()
    return len(entries)


async def drained(client: redis.asyncio.Redis, settings: Any) -> bool:
    for shard in range(settings.shards):
        stream = settings.keys.cmd(shard)
        last = await client.xrevrange(stream, count=1)
        (group,) = await client.xinfo_groups(stream)
        if group["pending"] or (last and group["last-delivered-id"] != last[0][0]):
            return False
    return True


_FEEDER = """
import pickle, sys, time
import redis
url, path, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(path, "rb") as f:
    entries = pickle.load(f)
client = redis.Redis.from_url(url)
start = time.perf_counter()
for i, (stream, fields) in enumerate(entries):
    wait = start + i / rate - time.perf_counter()
    if wait > 0:
        time.sleep(wait)
    client.xadd(stream, fields)
"""
"""The paced sender of ``--rate``: XADDs the entries of a pickle file, ``rate`` a second."""


async def one_run(args: argparse.Namespace, games: dict[str, list[Entry]]) -> dict[str, Any]:
    ns = f"bench-{uuid.uuid4().hex[:8]}"
    settings = load_settings(
        redis_url=args.url,
        namespace=ns,
        shards=args.shards,
        batch_size=args.batch_size,
        worker_id=f"{ns}-w",
        token_secret="b" * 32,
    )
    client = connect(args.url)
    worker = EngineWorker(settings, service_factory=fixed_service)
    try:
        await worker.create_groups()
        paced = entries_in_order(settings, games) if args.rate else None
        commands = len(paced) if paced is not None else await feed(client, settings, games)
        stop = asyncio.Event()
        await worker.start()
        task = asyncio.create_task(worker.run(stop))
        while len(worker.owned) < settings.shards:
            await asyncio.sleep(0.001)
        sender = None
        if paced is not None:
            with tempfile.NamedTemporaryFile(suffix=".pickle", delete=False) as f:
                pickle.dump(paced, f)
            sender = subprocess.Popen(
                [sys.executable, "-c", _FEEDER, args.url, f.name, str(args.rate)],
                stdin=subprocess.DEVNULL,
            )
        profile = cProfile.Profile() if args.profile else None
        reads = worker.reader.reads
        started = time.perf_counter()
        cpu = time.process_time()
        if profile is not None:
            profile.enable()
        while sender is not None and sender.poll() is None:
            await asyncio.sleep(0.05)
        while not await drained(client, settings):
            await asyncio.sleep(0.02)
        if sender is not None:
            os.unlink(f.name)
        reads = worker.reader.reads - reads
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        stop.set()
        await task
        await worker.close()
        store = RedisEventStore(client, settings.keys)
        bad = 0
        for table_id, game in games.items():
            for raw, seat in game:
                key = command_key(json.loads(raw)["command_id"], seat)
                result = await store.command_result(table_id, key)
                bad += result is None or not json.loads(result)["ok"]
        return {
            "commands": commands,
            "seconds": round(elapsed, 3),
            "commands_per_s": round(commands / elapsed),
            "commands_per_cpu_s": round(commands / cpu) if cpu else None,
            "cpu_us_per_command": round(cpu / commands * 1e6),
            "commands_per_read": round(commands / reads, 2) if reads else None,
            "not_accepted": bad,
        }
    finally:
        keys = [k async for k in client.scan_iter(match=f"{ns}*", count=1000)]
        for i in range(0, len(keys), 500):
            await client.unlink(*keys[i : i + 500])
        await client.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--moves", type=int, default=30, help="moves per table at most")
    parser.add_argument("--profile", help="write a cProfile of the worker phase to this file")
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (as the worker does)")
    parser.add_argument(
        "--rate", type=float, help="send the commands at this rate while the worker runs"
    )
    args = parser.parse_args()
    configure("WARNING")
    games = await generate(args.tables, args.seed, args.moves)
    runs = [await one_run(args, games) for _ in range(args.repeat)]
    for run in runs:
        print(json.dumps(run))
    print(
        json.dumps(
            {
                "bench": "pipeline_worker",
                "tables": args.tables,
                "moves": args.moves,
                "shards": args.shards,
                "batch_size": args.batch_size,
                "rate": args.rate,
                "commands": runs[0]["commands"],
                "commands_per_s": max(r["commands_per_s"] for r in runs),
                "runs": [r["commands_per_s"] for r in runs],
                "cpu_us_per_command": [r["cpu_us_per_command"] for r in runs],
                "commands_per_read": [r["commands_per_read"] for r in runs],
                "not_accepted": sum(r["not_accepted"] for r in runs),
                "python": platform.python_version(),
                "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
                "hiredis": HIREDIS_AVAILABLE,
                "cpus": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    if "--uvloop" in sys.argv:
        import uvloop

        uvloop.install()
    asyncio.run(main())
