"""Audit benchmark: replay and check recorded tables from Redis, events per second, one process.

    .venv/bin/python bench/audit.py [--url redis://127.0.0.1:6379/9] [--tables 1000]
                                    [--players greedy,random] [--repeat 3] [--keep]

What each pass measures: ``docs/performance.md`` ("Audit", "Module notes").  The last line
printed is a JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import itertools
import json
import os
import platform
import random
import secrets
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.machine import cpu_model, load_average
from bench.namespaces import delete_namespace
from engine import game
from services import audit, cli
from services.audit import audit_store, fast_redecide, load_tables
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.store import KeySpace, RedisEventStore
from services.store.client import connect


async def table_ids(store: RedisEventStore) -> list[str]:
    return sorted([t async for t in store.tables()])


async def record(store: RedisEventStore, tables: int, players: tuple[str, str], seed: int) -> float:
    started = time.perf_counter()

    def progress(n: int, total: int) -> None:
        if n % 100 == 0 or n == total:
            sys.stderr.write(f"\rrecording {n}/{total} tables")
            sys.stderr.flush()

    config = SelfplayConfig(tables, seed, players)
    await record_selfplay(config, store, progress=progress)
    sys.stderr.write("\n")
    return time.perf_counter() - started


async def record_lobby(store: RedisEventStore, tables: int, seed: int) -> None:
    """Tables holding the lobby's events (see the module docstring), played through
    ``TableService`` with random moves."""
    from engine.bots import RandomBot
    from events.commands import Command, CreateTable, Join, LeaveTable, Rematch
    from events.mapping import to_wire_command
    from services.tables.service import TableService

    rng = random.Random(seed)
    bot = RandomBot()
    service = TableService(store, seed_source=lambda: rng.randbytes(32), cache_size=1)
    numbers = itertools.count()

    async def send(command: Command, seat: int | None) -> None:
        outcome = await service.execute(command, seat)
        assert outcome.ok, outcome.result

    for t in range(tables):
        tid = f"lobby-{seed}-{t}"

        def cid() -> str:
            return f"cmd-{next(numbers):08d}"

        await send(CreateTable(table_id=tid, command_id=cid(), deals=1), None)
        await send(Join(table_id=tid, command_id=cid(), seat=0, name="ana"), None)
        await send(LeaveTable(table_id=tid, command_id=cid()), 0)
        await send(Join(table_id=tid, command_id=cid(), seat=1, name="cy"), None)
        await send(Join(table_id=tid, command_id=cid(), seat=0, name="bo"), None)
        while True:
            match = (await service.load(tid)).match
            assert match is not None
            if match.over or match.to_act is None:
                break
            seat = match.to_act
            await send(to_wire_command(bot.choose(match, seat, rng), tid, cid()), seat)
        for seat in (0, 1):
            rematch = Rematch(table_id=tid, command_id=cid(), next_table_id=f"{tid}-again")
            await send(rematch, seat)


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
) -> tuple[float, list[tuple[str, list[Any]]]]:
    """The fast path's reads alone, one batch after the other."""
    reads = audit._PackedReads(store)
    started = time.perf_counter()
    replies: list[tuple[str, list[Any]]] = []
    for i in range(0, len(ids), batch):
        chunk = ids[i : i + batch]
        got = await reads.receive(await reads.send(chunk))
        assert got is not None
        replies += zip(chunk, got, strict=True)
    return time.perf_counter() - started, replies


def run_check(replies: list[tuple[str, list[Any]]]) -> tuple[float, float]:
    """CPU seconds of the fast path over replies in memory, and of it in the engine."""
    decide, evolve = game.decide, game.evolve
    spent = [0.0]
    clock = time.process_time

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
    for table_id, reply in replies:
        report = audit._audit_reply(table_id, reply)
        assert report is not None and report.ok, table_id
    total = clock() - started
    setattr(fast_redecide, "decide", timed_decide)  # noqa: B010 - the names the fast path calls
    setattr(fast_redecide, "evolve", timed_evolve)  # noqa: B010
    try:
        for table_id, reply in replies:
            audit._audit_reply(table_id, reply)
    finally:
        setattr(fast_redecide, "decide", decide)  # noqa: B010
        setattr(fast_redecide, "evolve", evolve)  # noqa: B010
    timed_total = clock() - started - total
    return total, total * spent[0] / timed_total if timed_total else 0.0


async def run_full(
    store: RedisEventStore, ids: list[str], batch: int
) -> tuple[float, float, float]:
    """Seconds and CPU seconds of the store's read of every table, and CPU seconds of the full
    audit."""
    started = time.perf_counter()
    cpu = time.process_time()
    loaded = []
    for i in range(0, len(ids), batch):
        loaded += await load_tables(store, ids[i : i + batch])
    read = time.perf_counter() - started
    read_cpu = time.process_time() - cpu
    started = time.process_time()
    for table in loaded:
        assert table.audit().ok
    return read, read_cpu, time.process_time() - started


def run_jobs(url: str, ns: str, jobs: int, batch: int) -> dict[str, Any]:
    """``conquian audit --all --jobs N --json``, its summary (run in a thread: it runs its own
    event loop)."""
    out = io.StringIO()
    argv = ["audit", "--all", "--json", "--jobs", str(jobs), "--batch", str(batch)]
    with contextlib.redirect_stdout(out):
        code = cli.main([*argv, "--redis-url", url, "--namespace", ns])
    summary: dict[str, Any] = json.loads(out.getvalue())
    assert code == 0, summary
    return summary


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    client = connect(args.url)
    ns = args.namespace or f"bench-audit-{secrets.token_hex(4)}"
    store = RedisEventStore(client, KeySpace(ns))
    out: dict[str, Any] = {"namespace": ns}
    try:
        have = len(await table_ids(store))
        if have < args.tables:
            out["record_seconds"] = round(
                await record(store, args.tables - have, args.players, args.seed + have), 2
            )
        load_before = load_average()
        audits = []
        reads = []
        checks = []
        for _ in range(args.repeat):
            audits.append(await run_audit(store, args.batch))
            ids = await table_ids(store)
            read_s, replies = await run_read(store, ids, args.batch)
            reads.append(read_s)
            checks.append(run_check(replies))
            del replies  # a large live heap slows every collection of the next run
        fulls = [await run_full(store, await table_ids(store), args.batch) for _ in audits]
        full_read = min(f[0] for f in fulls)
        full_read_cpu = min(f[1] for f in fulls)
        full_check = min(f[2] for f in fulls)
        lobby: list[dict[str, Any]] = []
        if args.lobby_tables:
            lobby_store = RedisEventStore(client, KeySpace(f"{ns}-lobby"))
            if not await table_ids(lobby_store):
                await record_lobby(lobby_store, args.lobby_tables, args.seed)
            lobby = [await run_audit(lobby_store, args.batch) for _ in range(args.repeat)]
            assert not any(a["failed"] for a in lobby), lobby
        loop = asyncio.get_running_loop()
        in_processes = [
            await loop.run_in_executor(None, run_jobs, args.url, ns, args.jobs, args.batch)
            for _ in range(args.repeat if args.jobs else 0)
        ]
        best = min(audits, key=lambda a: a["seconds"])
        best_cpu = min(a["cpu"] for a in audits)
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
                "audit_events_per_cpu_s_runs": [round(events / a["cpu"]) for a in audits],
                "read_events_per_s": round(events / min(reads)),
                "check_events_per_cpu_s": round(events / check_s),
                "check_us_per_event": round(check_s * 1e6 / events, 2),
                "engine_share_of_check": round(engine_s / check_s, 3),
                "full_read_events_per_s": round(events / full_read),
                "full_check_events_per_cpu_s": round(events / full_check),
                "full_events_per_cpu_s": round(events / (full_read_cpu + full_check)),
                "fast_cpu_share_of_full": round(best_cpu / (full_read_cpu + full_check), 3),
                "lobby_tables": lobby[0]["tables"] if lobby else 0,
                "lobby_events": lobby[0]["events"] if lobby else 0,
                "lobby_audit_events_per_cpu_s": (
                    round(lobby[0]["events"] / min(a["cpu"] for a in lobby)) if lobby else 0
                ),
                "lobby_audit_events_per_s": (
                    round(lobby[0]["events"] / min(a["seconds"] for a in lobby)) if lobby else 0
                ),
                "jobs": args.jobs,
                "jobs_events_per_s_runs": [j["events_per_s"] for j in in_processes],
                "players": list(args.players),
                "batch": args.batch,
                "python": platform.python_version(),
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "redis": (await client.info("server")).get("redis_version"),
                "load_average_before": load_before,
                "load_average_after": load_average(),
            }
        )
        return out
    finally:
        if not args.keep:
            await delete_namespace(client, ns)
            await delete_namespace(client, f"{ns}-lobby")
        await client.aclose()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    parser.add_argument("--tables", type=int, default=1000, help="tables to record (default 1000)")
    parser.add_argument("--players", default="greedy,random", help="bots of seat 0 and seat 1")
    parser.add_argument("--seed", type=int, default=1, help="selfplay seed of the recording")
    parser.add_argument("--repeat", type=int, default=3, help="audit runs (the fastest counts)")
    parser.add_argument("--batch", type=int, default=50, help="tables per read round trip")
    parser.add_argument("--namespace", help="record into / reuse this namespace")
    parser.add_argument("--keep", action="store_true", help="keep the recorded tables")
    parser.add_argument(
        "--lobby-tables", type=int, default=100, help="tables with the lobby's events (0: none)"
    )
    parser.add_argument(
        "--jobs", type=int, default=2, help="also time audit --all --jobs N (0: do not)"
    )
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
        f"{out['failed']} failed; load average {out['load_average_before']} -> "
        f"{out['load_average_after']}"
    )
    print(
        f"audit from Redis: {out['audit_events_per_s']:,} events/s "
        f"({out['audit_events_per_cpu_s']:,} per CPU-s; runs {out['audit_events_per_s_runs']})"
    )
    print(
        f"  reads alone {out['read_events_per_s']:,} events/s; fast path alone "
        f"{out['check_events_per_cpu_s']:,} events per CPU-s ({out['check_us_per_event']} us an "
        f"event), engine {out['engine_share_of_check']:.0%} of it"
    )
    print(
        f"  full audit, for tables the fast path does not certify: store read "
        f"{out['full_read_events_per_s']:,} events/s, checks "
        f"{out['full_check_events_per_cpu_s']:,} events per CPU-s; read and checks "
        f"{out['full_events_per_cpu_s']:,} events per CPU-s (the fast audit takes "
        f"{out['fast_cpu_share_of_full']:.0%} of its CPU)"
    )
    if out["lobby_tables"]:
        print(
            f"audit of {out['lobby_tables']} tables with the lobby's events "
            f"({out['lobby_events']:,} events): {out['lobby_audit_events_per_s']:,} events/s, "
            f"{out['lobby_audit_events_per_cpu_s']:,} per CPU-s"
        )
    if out["jobs"]:
        print(
            f"audit --all --jobs {out['jobs']}: {max(out['jobs_events_per_s_runs']):,} events/s "
            f"(runs {out['jobs_events_per_s_runs']})"
        )
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
