"""Lobby benchmark: what a page of ``GET /tables`` and a batch's write of rows cost in Redis.

    .venv/bin/python bench/lobby.py [--tables 10000,100000] [--pages 2000]

What is measured: ``docs/performance.md`` ("Lobby", "Module notes").
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
from engine.state import changed
from events.commands import CreateTable
from services.lobby import listing
from services.redis_server import LocalRedis
from services.store import MemoryEventStore
from services.store.client import connect
from services.store.keys import KeySpace
from services.tables.service import TableService
from services.tables.table import SeatHolder, Table


async def _template() -> Table:
    """A created table with seat 0 taken, as the lobby lists it."""
    service = TableService(MemoryEventStore())
    created = await service.execute(
        CreateTable(table_id="t-template00", command_id="c-template-0", turn_seconds=60), None
    )
    assert created.table is not None
    return changed(created.table, seats=(SeatHolder("ana"), None), version=2)


async def _run(tables: int, pages: int, folder: Path) -> dict[str, Any]:
    template = await _template()
    keys = KeySpace("bench", 16)
    with LocalRedis(folder / f"redis-{tables}") as server:
        client = connect(server.url)
        writes: list[float] = []
        for start in range(0, tables, 100):
            rows = [
                listing.lobby_row(changed(template, table_id=f"t-{n:012d}"))
                for n in range(start, min(start + 100, tables))
            ]
            began = time.perf_counter()
            await listing.write_rows(client, keys, rows, 1_000_000 + start)
            writes.append(time.perf_counter() - began)
        memory = 0
        for part in ("waiting", "running", "rows"):
            memory += int(await client.memory_usage(keys.lobby(part), samples=0) or 0)
        figures: dict[str, Any] = {
            "tables": tables,
            "write_100_rows_ms": round(1000 * sorted(writes)[len(writes) // 2], 3),
            "lobby_bytes_per_table": round(memory / tables, 1),
        }
        middle = None
        cursor = None
        for _ in range(tables // 200):  # walk to the middle of the list, 100 at a time
            cursor = (await listing.page(client, keys, "waiting", 100, cursor))["next_cursor"]
        middle = cursor
        for limit in (20, 100):
            for name, at in (("first", None), ("middle", middle)):
                times = []
                for _ in range(pages):
                    began = time.perf_counter()
                    page = await listing.page(client, keys, "waiting", limit, at)
                    times.append(time.perf_counter() - began)
                assert len(page["tables"]) == limit
                times.sort()
                figures[f"page_{limit}_{name}_ms_p50"] = round(1000 * times[len(times) // 2], 3)
                figures[f"page_{limit}_{name}_ms_p99"] = round(
                    1000 * times[len(times) * 99 // 100], 3
                )
        await client.aclose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="10000,100000")
    parser.add_argument("--pages", type=int, default=2000)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for tables in (int(t) for t in args.tables.split(",")):
            figures = asyncio.run(_run(tables, args.pages, Path(folder)))
            print(json.dumps(figures))
            results.append(figures)
    print(json.dumps({"results": results, "cpu": cpu_model(), "load": load_average()}))


if __name__ == "__main__":
    main()
