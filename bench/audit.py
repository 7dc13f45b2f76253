"""Audit benchmark: replay and check recorded tables from Redis, events per second, one process.

    .venv/bin/python bench/audit.py [--url redis://127.0.0.1:6379/9] [--tables 1000]
                                    [--players greedy,random] [--repeat 3] [--keep]

Tables are recorded first with ``conquian selfplay --record``'s code (``record_selfplay``:
every deal played through ``TableService`` with wire commands, one table per deal), into a
throw-away namespace that is deleted at the end unless ``--keep`` (a kept namespace given again
with ``--namespace`` is reused, so the slow recording happens once).  Then, ``--repeat`` times:

* **audit**: what ``conquian audit --all`` does (``audit_store``: heads and events read in
  pipelined batches of ``--batch`` tables, the next batch in flight while one is checked) --
  wall time from the table listing to the last report, and the process's CPU time;
* **read**: the same reads alone (``load_tables``), to show what the store costs;
* **check**: ``audit_table`` alone over tables already in memory, and within it the share of
  the engine (``decide`` + ``evolve`` of every command the audit re-decides).

The last line printed is a JSON object with the figures (the fastest run of each).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio

from engine import game
from services import audit
from services.audit import LoadedTable, audit_store, load_tables
from services.selfplay import SelfplayConfig, record_selfplay
from services.store import KeySpace, RedisEventStore


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


async def table_ids(store: RedisEventStore) -> list[str]:
    return sorted([t async for t in store.tables()])


async def record(store: RedisEventStore, tables: int, players: tuple[str, str], seed: int) -> float:
    started = time.perf_counter()
    done = [0]

    def progress(n: int, total: int) -> None:
        done[0] = n
        if n % 100 == 0 or n == total:
            sys.stderr.write(f"\rrecording {n}/{total} tables")
            sys.stderr.flush()

    config = SelfplayConfig(tables, seed, players)
    await record_selfplay(config, store, progress=progress)
    sys.stderr.write("\n")
    return time.perf_counter() - started


async def run_audit(store: RedisEventStore, batch: int) -> dict[str, Any]:
    wall = time.perf_counter()
    cpu = time.process_time()
    ids = await table_ids(store)
    events = failed = 0
    async for report in audit_store(store, ids, batch):
        events += report.events
        failed += not report.ok
    wall = time.perf_counter() - wall
    cpu = time.process_time() - cpu
    return {"tables": len(ids), "events": events, "failed": failed, "seconds": wall, "cpu": cpu}


async def run_read(
    store: RedisEventStore, ids: list[str], batch: int
) -> tuple[float, list[LoadedTable]]:
    started = time.perf_counter()
    loaded: list[LoadedTable] = []
    for i in range(0, len(ids), batch):
        loaded += await load_tables(store, ids[i : i + batch])
    return time.perf_counter() - started, loaded


def run_check(loaded: list[LoadedTable]) -> tuple[float, float]:
    """Seconds to audit tables in memory, and the seconds of it spent in the engine."""
    decide, evolve = game.decide, game.evolve
    spent = [0.0]
    clock = time.perf_counter

    def timed_decide(*args: Any) -> Any:
        t = clock()
        try:
            return decide(*args)
        finally:
            spent[0] += clock() - t

    def timed_evolve(*args: Any) -> Any:
        t = clock()
        try:
            return evolve(*args)
        finally:
            spent[0] += clock() - t

    started = clock()
    for table in loaded:
        assert table.audit().ok
    total = clock() - started
    setattr(audit, "decide", timed_decide)  # noqa: B010 - the names audit.py calls
    setattr(audit, "evolve", timed_evolve)  # noqa: B010
    try:
        for table in loaded:
            table.audit()
    finally:
        setattr(audit, "decide", decide)  # noqa: B010
        setattr(audit, "evolve", evolve)  # noqa: B010
    timed_total = clock() - started - total
    return total, total * spent[0] / timed_total if timed_total else 0.0


async def delete_namespace(client: redis.asyncio.Redis, ns: str) -> None:
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{ns}:*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    client = redis.asyncio.Redis.from_url(args.url, decode_responses=False)
    ns = args.namespace or f"bench-audit-{secrets.token_hex(4)}"
    store = RedisEventStore(client, KeySpace(ns))
    out: dict[str, Any] = {"namespace": ns}
    try:
        have = len(await table_ids(store))
        if have < args.tables:
            out["record_seconds"] = round(
                await record(store, args.tables - have, args.players, args.seed + have), 2
            )
        audits = []
        reads = []
        checks = []
        for _ in range(args.repeat):
            audits.append(await run_audit(store, args.batch))
            ids = await table_ids(store)
            read_s, loaded = await run_read(store, ids, args.batch)
            reads.append(read_s)
            checks.append(run_check(loaded))
            del loaded  # a large live heap slows every collection of the next audit run
        best = min(audits, key=lambda a: a["seconds"])
        events = best["events"]
        check_s, engine_s = min(checks)
        out.update(
            {
                "tables": best["tables"],
                "events": events,
                "failed": best["failed"],
                "events_per_table": round(events / best["tables"], 1),
                "audit_events_per_s": round(events / best["seconds"]),
                "audit_events_per_cpu_s": round(events / best["cpu"]),
                "audit_events_per_s_runs": [round(events / a["seconds"]) for a in audits],
                "read_events_per_s": round(events / min(reads)),
                "check_events_per_s": round(events / check_s),
                "engine_share_of_check": round(engine_s / check_s, 3),
                "players": list(args.players),
                "batch": args.batch,
                "python": platform.python_version(),
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
        return out
    finally:
        if not args.keep:
            await delete_namespace(client, ns)
        await client.aclose()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    parser.add_argument("--tables", type=int, default=1000, help="tables to record (default 1000)")
    parser.add_argument("--players", default="greedy,random", help="bots of seat 0 and seat 1")
    parser.add_argument("--seed", type=int, default=1, help="selfplay seed of the recording")
    parser.add_argument("--repeat", type=int, default=3, help="audit runs (the fastest counts)")
    parser.add_argument("--batch", type=int, default=50, help="tables per read round trip")
    parser.add_argument("--namespace", help="record into / reuse this namespace")
    parser.add_argument("--keep", action="store_true", help="keep the recorded tables")
    args = parser.parse_args()
    players = tuple(args.players.split(","))
    if len(players) != 2:
        parser.error("--players names two bots")
    args.players = players
    return args


def main() -> None:
    args = parse_args()
    out = asyncio.run(main_async(args))
    print(
        f"{out['tables']} tables, {out['events']} events ({out['events_per_table']} a table), "
        f"{out['failed']} failed"
    )
    print(
        f"audit from Redis: {out['audit_events_per_s']:,} events/s "
        f"({out['audit_events_per_cpu_s']:,} per CPU-s; runs {out['audit_events_per_s_runs']})"
    )
    print(
        f"  reads alone {out['read_events_per_s']:,} events/s, checks alone "
        f"{out['check_events_per_s']:,} events/s, engine {out['engine_share_of_check']:.0%} "
        "of the checks"
    )
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
