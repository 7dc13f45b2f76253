"""Client CPU per pipelined call: redis-py's default client against the consumers' one.

    .venv/bin/python bench/redis_client.py [--url redis://127.0.0.1:6379/9] [--calls 20]

What it compares: ``docs/performance.md`` ("Module notes").  The last line printed is a JSON
object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio

from bench.machine import cpu_model, load_average
from bench.namespaces import delete_namespace
from bench.raw_redis import close_connection, encode_command, open_connection
from bench.store import raw_calls, tables_of, typical_body
from services.store import KeySpace, RedisEventStore
from services.store.client import connect
from services.store.scripts import APPEND_LUA

EVENTS_PER_APPEND = 3
"""The events of each append: a command's few (``bench.store.typical_body``, about 200 bytes
stored each)."""


def _batches(
    client: redis.asyncio.Redis, ns: str, tables: int, rounds: int
) -> list[list[tuple[list[str], list[Any]]]]:
    """The KEYS and ARGV of ``rounds`` pipelines of one append per table, in order (built by the
    store itself, ``bench.store.raw_calls``)."""
    store = RedisEventStore(client, KeySpace(ns))
    events = EVENTS_PER_APPEND * rounds
    work = {t: [typical_body(i) for i in range(events)] for t in tables_of("T", tables)}
    calls = raw_calls(store, work, EVENTS_PER_APPEND)
    return [[calls[t][r] for t in work] for r in range(rounds)]


async def _slice(
    client: redis.asyncio.Redis, sha: str, batches: list[list[tuple[list[str], list[Any]]]]
) -> None:
    for batch in batches:
        async with client.pipeline(transaction=False) as pipe:
            for keys, args in batch:
                pipe.evalsha(sha, len(keys), *keys, *args)
            replies = await pipe.execute()
        if any(int(r[0]) != 0 for r in replies):
            raise RuntimeError(f"an append was refused: {replies[:3]}")


async def _bare_pings(url: str, n: int) -> None:
    """``n`` awaited PINGs over a bare connection (``bench.raw_redis``, the driver's own)."""
    reader, writer = await open_connection(url)
    ping = encode_command("PING")
    try:
        for _ in range(n):
            writer.write(ping)
            if await reader.readuntil(b"\r\n") != b"+PONG\r\n":
                raise RuntimeError("PING was not answered with PONG")
    finally:
        await close_connection(None, writer)


async def _client_pings(url: str, n: int) -> None:
    """``n`` awaited PINGs over the consumers' client (``connect(call_timeouts=False)``)."""
    client = connect(url, call_timeouts=False)
    try:
        await client.ping()
        for _ in range(n):
            await client.ping()
    finally:
        await client.aclose()


async def round_trips(url: str, n: int, repeat: int) -> dict[str, dict[str, float]]:
    """CPU (user, system) of one awaited round trip, median over ``repeat`` alternated slices."""
    ways = {"redis_py": _client_pings}
    if urlsplit(url).scheme in ("redis", "unix"):  # the bare connection knows no TLS
        ways["bare_asyncio"] = _bare_pings
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for r in range(repeat):
        for name in ways if r % 2 == 0 else reversed(list(ways)):
            before = os.times()
            await ways[name](url, n)
            after = os.times()
            runs[name].append(
                ((after.user - before.user) / n * 1e6, (after.system - before.system) / n * 1e6)
            )
    return {
        name: {
            "cpu_us": round(statistics.median(u + s for u, s in v), 1),
            "user_us": round(statistics.median(u for u, _ in v), 1),
            "system_us": round(statistics.median(s for _, s in v), 1),
        }
        for name, v in runs.items()
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clients = {
        "default": connect(args.url),
        "no_call_timeouts": connect(args.url, call_timeouts=False),
    }
    ns = f"benchclient-{uuid.uuid4().hex[:8]}"
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    wall: dict[str, list[float]] = {name: [] for name in clients}
    try:
        sha = await clients["default"].script_load(APPEND_LUA)
        rounds = args.repeat * args.rounds
        batches = {  # each client appends to tables of its own
            name: _batches(clients["default"], f"{ns}:{name}", args.calls, rounds)
            for name in clients
        }
        for repeat in range(args.repeat):
            order = list(clients) if repeat % 2 == 0 else list(reversed(clients))
            for name in order:  # alternating, so that the machine's moods hit both alike
                first = repeat * args.rounds
                c0, t0 = time.process_time(), time.perf_counter()
                await _slice(clients[name], sha, batches[name][first : first + args.rounds])
                calls = args.rounds * args.calls
                cpu[name].append((time.process_time() - c0) / calls * 1e6)
                wall[name].append((time.perf_counter() - t0) / calls * 1e6)
    finally:
        await delete_namespace(clients["default"], ns)
        for c in clients.values():
            await c.aclose()
    count = args.round_trips
    trips = await round_trips(args.url, count, args.repeat) if count else {}
    return {
        "bench": "redis_client",
        "round_trip": trips,
        "loop": type(asyncio.get_running_loop()).__module__.split(".")[0],
        "calls_per_pipeline": args.calls,
        "pipelines_per_slice": args.rounds,
        "repeat": args.repeat,
        "client_cpu_us_per_call": {n: round(statistics.median(v), 1) for n, v in cpu.items()},
        "client_cpu_us_per_call_runs": {n: [round(x, 1) for x in v] for n, v in cpu.items()},
        "wall_us_per_call": {n: round(statistics.median(v), 1) for n, v in wall.items()},
        "machine": {
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "loadavg": load_average(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    parser.add_argument("--calls", type=int, default=20, help="appends per pipeline")
    parser.add_argument("--rounds", type=int, default=250, help="pipelines per slice")
    parser.add_argument("--repeat", type=int, default=6, help="slices per client")
    parser.add_argument(
        "--round-trips", type=int, default=3000, help="awaited PINGs per slice (0: none)"
    )
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop (as the services do)")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        report = uvloop.run(run(args))
    else:
        report = asyncio.run(run(args))
    for name, value in report["client_cpu_us_per_call"].items():
        wall = report["wall_us_per_call"][name]
        print(f"{name:<18} client CPU {value:6.1f} µs a call, wall {wall:6.1f} µs")
    for name, trip in report["round_trip"].items():
        print(
            f"{name:<18} one awaited PING: {trip['cpu_us']:6.1f} µs of CPU "
            f"(user {trip['user_us']:.1f}, system {trip['system_us']:.1f})"
        )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
