"""What the append script's check of the other seat's command id costs (docs/performance.md).

    .venv/bin/python bench/command_ids.py [--url redis://127.0.0.1:6491/0] [--rounds 9]

How it alternates the three ways: ``docs/performance.md`` ("Module notes").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.namespaces import delete_namespace
from services.store import AppendRequest, KeySpace, RedisEventStore, command_key
from services.store.client import connect
from services.store.keys import other_command_keys
from services.tables.service import ID_TAKEN

WAYS = ("no check", "check, 1-byte refusal", "check, real refusal")


def body(i: int) -> dict[str, Any]:
    """A card_turned body with its envelope fields (the store adds table id and version)."""
    return {
        "type": "card_turned",
        "v": 1,
        "seat": i % 2,
        "card": "7H",
        "command_id": f"cmd-{i:08d}",
        "time": 1_700_000_000_000 + i,
    }


async def server_usec(client: Any) -> tuple[int, int]:
    """Redis's total time in EVALSHA (µs) and its count of calls."""
    stats = (await client.info("commandstats")).get("cmdstat_evalsha", {})
    return int(stats.get("usec", 0)), int(stats.get("calls", 0))


async def one_round(url: str, way: int, tables: int, events: int) -> tuple[float, float]:
    """Appends a second, and server µs an append, of one way."""
    client = connect(url)
    ns = f"bench-ids-{uuid.uuid4().hex[:8]}"
    store = RedisEventStore(client, KeySpace(ns=ns))
    heads = {f"t{t}": (0, "0" * 64) for t in range(tables)}
    usec, calls = await server_usec(client)
    started = time.perf_counter()
    for i in range(events):
        cid, seat = f"cmd-{i:08d}", i % 2
        extra: dict[str, Any] = {}
        if way:
            refusal = ID_TAKEN if way == 2 else "x"
            extra = {"taken_by": other_command_keys(cid, seat), "taken_result": refusal}
        requests = [
            AppendRequest(t, v, h, command_key(cid, seat), [body(i)], b'{"ok":true}', **extra)
            for t, (v, h) in heads.items()
        ]
        for t, result in zip(heads, await store.append_many(requests), strict=True):
            assert not isinstance(result, Exception)
            heads[t] = (result.last_version, result.last_hash)
    elapsed = time.perf_counter() - started
    usec_after, calls_after = await server_usec(client)
    await delete_namespace(client, ns)
    await client.aclose()
    return tables * events / elapsed, (usec_after - usec) / max(1, calls_after - calls)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="redis://127.0.0.1:6379/9")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--events", type=int, default=50)
    args = parser.parse_args()
    runs: dict[int, list[tuple[float, float]]] = {way: [] for way in range(len(WAYS))}
    for _ in range(args.rounds):
        for way in runs:
            runs[way].append(await one_round(args.url, way, args.tables, args.events))
    figures = {
        WAYS[way]: {
            "appends_per_s_median": round(statistics.median(r for r, _ in got)),
            "server_us_per_append_median": round(statistics.median(u for _, u in got), 2),
            "server_us_per_append_min": round(min(u for _, u in got), 2),
        }
        for way, got in runs.items()
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
