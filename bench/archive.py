"""Archive benchmark: Redis memory with finished tables before and after archiving, the bytes of
a table on disk, and the archiver's tables per second.

    .venv/bin/python bench/archive.py [--tables 10000] [--players greedy,random] [--batch 100]

How the tables are made and what is measured: ``docs/performance.md`` ("Module notes").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import cpu_model, load_average
from events.chain import GENESIS_HASH
from services.archive.folder import SUFFIX, FolderArchive
from services.archive.mover import Archiver
from services.redis_server import LocalRedis
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.store import KeySpace, MemoryEventStore, RedisEventStore
from services.store.base import AppendRequest
from services.store.client import connect
from services.tables.stored_parts import TableFold

NS = "bench"
SHARDS = 16


async def used_memory(store: RedisEventStore) -> int:
    info = await store.client.info("memory")
    return int(info["used_memory"])


def clone_id(table_id: str, copy: int) -> str:
    """The id of copy ``copy`` of a recorded table (copy 0 is the table itself)."""
    return table_id if copy == 0 else f"{table_id}-{copy}"


async def copy_tables(
    memory: MemoryEventStore, store: RedisEventStore, copies: int, chunk: int = 200
) -> int:
    """Copy every table of the memory store into Redis ``copies`` times (one append each, in
    pipelines, then sealed); return the number of events copied."""
    requests: list[AppendRequest] = []
    events = 0
    for t in sorted([t async for t in memory.tables()]):
        stored = await memory.read(t)
        secrets = await memory.secrets(t)
        fold = TableFold(t)
        for e in stored:
            fold.apply_body(e.version, e.body)
        views = fold.views()
        for copy in range(copies):
            new = clone_id(t, copy)
            bodies = [{**e.body, "table_id": new} for e in stored]
            named = f'"table_id":{json.dumps(t)}'
            renamed = f'"table_id":{json.dumps(new)}'
            parts = {p: v.replace(named, renamed, 1) for p, v in views.items()}
            last = stored[-1].body["command_id"]
            ok = b'{"ok":true}'
            requests.append(
                AppendRequest(new, 0, GENESIS_HASH, last, bodies, ok, secrets, "over", parts)
            )
            events += len(stored)
            if len(requests) >= chunk:
                await flush(store, requests)
                requests = []
    await flush(store, requests)
    return events


async def flush(store: RedisEventStore, requests: list[AppendRequest]) -> None:
    """Append ``requests`` in one pipeline, then seal their tables."""
    for result in await store.append_many(requests):
        assert not isinstance(result, Exception), result
    async with store.client.pipeline(transaction=False) as pipe:
        for r in requests:  # what RedisEventStore.seal runs, one pipeline for them all
            await store._seal(keys=[store.keys.events(r.table_id)], client=pipe)
        await pipe.execute()


async def run(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    players = tuple(args.players.split(","))
    assert len(players) == 2
    with LocalRedis(folder / "redis") as server:
        client = connect(server.url)
        try:
            store = RedisEventStore(client, KeySpace(NS, SHARDS), finished_ids_ms=1)
            empty = await used_memory(store)

            started = time.perf_counter()
            memory = MemoryEventStore(KeySpace(NS, SHARDS))
            distinct = -(-args.tables // args.copies)
            config = SelfplayConfig(distinct, args.seed, (players[0], players[1]))
            await record_selfplay(config, memory, concurrency=64)
            events = await copy_tables(memory, store, args.copies)
            n = distinct * args.copies
            del memory
            made_s = time.perf_counter() - started
            await asyncio.sleep(0.1)  # let the command ids expire
            assert await client.dbsize() > n
            full = await used_memory(store)

            archive = FolderArchive(folder / "archive", NS)
            archiver = Archiver(store, archive, batch=args.batch)
            wall, cpu = time.perf_counter(), time.process_time()
            tally = await archiver.archive_due(int(time.time() * 1000) + 1)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert tally.archived == n and not tally.refused, tally.as_dict()
            after = await used_memory(store)
            files = [p.stat().st_size for p in archive.folder.rglob(f"*{SUFFIX}")]
            assert len(files) == n
        finally:
            await client.aclose()
    return {
        "tables": n,
        "distinct_tables": distinct,
        "events": events,
        "events_per_table": round(events / n, 1),
        "make_s": round(made_s, 1),
        "used_memory_empty": empty,
        "used_memory_with_tables": full,
        "used_memory_after_archive": after,
        "redis_bytes_per_table": round((full - empty) / n),
        "redis_bytes_per_table_after": round((after - empty) / n),
        "disk_bytes_per_table": round(sum(files) / n),
        "disk_bytes_min_max": [min(files), max(files)],
        "archive_s": round(wall, 2),
        "archive_tables_per_s": round(n / wall),
        "archive_cpu_ms_per_table": round(cpu / n * 1000, 3),
        "batch": args.batch,
        "cpu": cpu_model(),
        "load_average": load_average(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--players", default="greedy,random")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--batch", type=int, default=100, help="tables an archiver batch")
    parser.add_argument(
        "--copies", type=int, default=10, help="copies of each self-played table (default 10)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-archive-") as tmp:
        result = asyncio.run(run(args, Path(tmp)))
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
