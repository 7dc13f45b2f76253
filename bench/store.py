"""Event-store benchmark: append throughput against raw EVALSHA, replay rate, bytes per event.

    .venv/bin/python bench/store.py [--url redis://127.0.0.1:6379/9] [--tables 200] [--events 60]

What each part measures: ``docs/performance.md`` ("Event store", "Module notes").  The last line
printed is a JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import redis.asyncio

from bench.machine import cpu_model
from bench.namespaces import delete_namespace
from events.chain import GENESIS_HASH, verify_chain
from services.store import AppendRequest, KeySpace, RedisEventStore

Call = tuple[list[str], list[Any]]


def _id() -> str:
    return secrets.token_urlsafe(16)[:22]


def typical_body(i: int) -> dict[str, Any]:
    """A body like the engine's card_turned (table_id and version are added by the store)."""
    return {
        "type": "card_turned",
        "v": 1,
        "seat": i % 2,
        "card": "7H",
        "command_id": _id(),
        "causation": _id(),
        "time": 1764480000000 + 1500 * i,
    }


def tables_of(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


def workload(n_tables: int, n_events: int) -> dict[str, list[dict[str, Any]]]:
    return {t: [typical_body(i) for i in range(n_events)] for t in tables_of("bt", n_tables)}


def raw_calls(
    store: RedisEventStore, work: dict[str, list[dict[str, Any]]], per_append: int = 1
) -> dict[str, list[Call]]:
    """Precomputed KEYS/ARGV of every append (what the store would send), per table: its
    bodies ``per_append`` to an append."""
    out: dict[str, list[Call]] = {}
    for table, bodies in work.items():
        calls: list[Call] = []
        h = GENESIS_HASH
        for v in range(0, len(bodies), per_append):
            events = bodies[v : v + per_append]
            request = AppendRequest(table, v, h, events[0]["command_id"], events, "ok")
            keys, args, prepared = store.build_call(request)
            calls.append((keys, args))
            h = prepared[-1].hash
        out[table] = calls
    return out


async def timed(fn: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Wall-clock and this process's CPU seconds of one run."""
    t0, c0 = time.perf_counter(), time.process_time()
    await fn()
    return time.perf_counter() - t0, time.process_time() - c0


# -- append phases (each runs versions lo..hi-1 of every table) -------------------------------
async def run_raw_concurrent(
    client: redis.asyncio.Redis, sha: str, calls: dict[str, list[Call]], lo: int, hi: int
) -> None:
    async def one_table(table_calls: list[Call]) -> None:
        for keys, args in table_calls[lo:hi]:
            reply = await client.evalsha(sha, len(keys), *keys, *args)
            assert reply[0] == 0, reply

    await asyncio.gather(*(one_table(c) for c in calls.values()))


async def run_store_concurrent(
    store: RedisEventStore,
    work: dict[str, list[dict[str, Any]]],
    heads: dict[str, str],
    lo: int,
    hi: int,
) -> None:
    async def one_table(table: str, bodies: list[dict[str, Any]]) -> None:
        h = heads[table]
        for v in range(lo, hi):
            res = await store.append(table, v, h, bodies[v]["command_id"], [bodies[v]], "ok")
            h = res.last_hash
        heads[table] = h

    await asyncio.gather(*(one_table(t, b) for t, b in work.items()))


async def run_raw_pipelined(
    client: redis.asyncio.Redis, sha: str, calls: dict[str, list[Call]], lo: int, hi: int
) -> None:
    for r in range(lo, hi):
        async with client.pipeline(transaction=False) as pipe:
            for table_calls in calls.values():
                keys, args = table_calls[r]
                pipe.evalsha(sha, len(keys), *keys, *args)
            replies = await pipe.execute()
        assert all(reply[0] == 0 for reply in replies)


async def run_store_pipelined(
    store: RedisEventStore,
    work: dict[str, list[dict[str, Any]]],
    heads: dict[str, str],
    lo: int,
    hi: int,
) -> None:
    for r in range(lo, hi):
        reqs = [
            AppendRequest(t, r, heads[t], bodies[r]["command_id"], [bodies[r]], "ok")
            for t, bodies in work.items()
        ]
        for req, res in zip(reqs, await store.append_many(reqs), strict=True):
            assert not isinstance(res, Exception)
            heads[req.table_id] = res.last_hash


# -- replay and memory ------------------------------------------------------------------------
async def replay(
    store: RedisEventStore, tables: Sequence[str], verify: bool, batch: int, inflight: int
) -> int:
    """Read all tables back, ``batch`` tables per pipeline and ``inflight`` pipelines at once
    (so Redis runs one batch while this process decodes another)."""
    gate = asyncio.Semaphore(inflight)
    counts: list[int] = []

    async def one(chunk: Sequence[str]) -> None:
        async with gate:
            got = await store.read_many(chunk)
        for events in got.values():
            counts.append(len(events))
            if verify and verify_chain(events) is not None:
                raise AssertionError("hash chain broken")

    await asyncio.gather(*(one(tables[i : i + batch]) for i in range(0, len(tables), batch)))
    return sum(counts)


async def memory(
    client: redis.asyncio.Redis, store: RedisEventStore, tables: Sequence[str], n_events: int
) -> dict[str, float]:
    ks = store.keys

    async def usage(keys: list[str]) -> int:
        async with client.pipeline(transaction=False) as pipe:
            for k in keys:
                pipe.memory_usage(k, samples=0)
            return sum(int(x or 0) for x in await pipe.execute())

    n = len(tables) * n_events
    live = await usage([ks.events(t) for t in tables])
    head = await usage([ks.head(t) for t in tables])
    for t in tables:
        await store.seal(t)
    sealed = await usage([ks.events(t) for t in tables])
    shards = range(ks.shards)
    cmdids = await usage([ks.command_ids(t) for t in tables])
    feed = await usage([ks.feed(s) for s in shards])
    return {
        "bytes_per_event_live": round(live / n, 1),
        "bytes_per_event_sealed": round(sealed / n, 1),
        "bytes_per_event_sealed_with_head": round((sealed + head) / n, 1),
        "bytes_per_command_cmdids": round(cmdids / n, 1),
        "bytes_per_append_feed": round(feed / n, 1),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/9"))
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--events", type=int, default=60, help="events (one per command) per table")
    ap.add_argument("--slice", type=int, default=5, help="versions per interleaved append slice")
    ap.add_argument("--repeat", type=int, default=3, help="replay runs (median kept)")
    ap.add_argument("--connections", type=int, default=64, help="connection pool size")
    ap.add_argument("--replay-batch", type=int, default=20, help="tables per read pipeline")
    ap.add_argument("--replay-inflight", type=int, default=4, help="read pipelines at once")
    opts = ap.parse_args()

    pool = redis.asyncio.BlockingConnectionPool.from_url(
        opts.url, max_connections=opts.connections, timeout=None, decode_responses=False
    )
    client = redis.asyncio.Redis(connection_pool=pool)
    info = await client.info("server")
    load_before = round(os.getloadavg()[0], 2)
    run_id = secrets.token_hex(3)
    namespaces: list[str] = []

    def new_store() -> RedisEventStore:
        ns = f"bench-{run_id}-{len(namespaces)}"
        namespaces.append(ns)
        return RedisEventStore(client, KeySpace(ns, shards=16))

    try:
        probe = new_store()
        await probe.append("probe", 0, GENESIS_HASH, "probe", [typical_body(0)])  # loads script
        sha = probe.script_sha
        n_appends = opts.tables * opts.events
        # Raw and store alternate slice by slice (``--slice`` versions of every table, in turn
        # raw-first and store-first), so load from elsewhere hits both alike; the rate of each
        # is all its appends over the sum of its slices' times.
        spent = dict.fromkeys(("raw", "store", "raw_pipe", "store_pipe"), 0.0)
        cpu = dict.fromkeys(spent, 0.0)
        work_c, work_p = workload(opts.tables, opts.events), workload(opts.tables, opts.events)
        raw_c, store_c, raw_p, store_p = new_store(), new_store(), new_store(), new_store()
        calls_c, calls_p = raw_calls(raw_c, work_c), raw_calls(raw_p, work_p)
        heads_c = dict.fromkeys(work_c, GENESIS_HASH)
        heads_p = dict.fromkeys(work_p, GENESIS_HASH)
        for k, lo in enumerate(range(0, opts.events, opts.slice)):
            hi = min(lo + opts.slice, opts.events)
            runs: dict[str, Callable[[], Awaitable[None]]] = {
                "raw": lambda: run_raw_concurrent(client, sha, calls_c, lo, hi),  # noqa: B023
                "store": lambda: run_store_concurrent(store_c, work_c, heads_c, lo, hi),  # noqa: B023
                "raw_pipe": lambda: run_raw_pipelined(client, sha, calls_p, lo, hi),  # noqa: B023
                "store_pipe": lambda: run_store_pipelined(store_p, work_p, heads_p, lo, hi),  # noqa: B023
            }
            order = ["raw", "store", "raw_pipe", "store_pipe"]
            if k % 2:
                order = ["store", "raw", "store_pipe", "raw_pipe"]
            for name in order:
                wall, used = await timed(runs[name])
                spent[name] += wall
                cpu[name] += used
        med = {k: n_appends / v for k, v in spent.items()}
        for st in (raw_c, raw_p, store_p):
            await delete_namespace(client, st.keys.ns)
        last_store, last_tables = store_c, list(work_c)

        # replay: read every table of the last concurrent store back
        replay_rates: dict[str, list[float]] = {"plain": [], "verified": []}
        replay_cpu: dict[str, list[float]] = {"plain": [], "verified": []}
        for _ in range(opts.repeat):
            for mode in ("plain", "verified"):
                t0, c0 = time.perf_counter(), time.process_time()
                n = await replay(
                    last_store,
                    last_tables,
                    mode == "verified",
                    opts.replay_batch,
                    opts.replay_inflight,
                )
                replay_rates[mode].append(n / (time.perf_counter() - t0))
                replay_cpu[mode].append(n / (time.process_time() - c0))
                assert n == n_appends

        mem = await memory(client, last_store, last_tables, opts.events)
        result = {
            "machine": {
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "python": platform.python_version(),
                "redis": info.get("redis_version"),
                "redis_py": redis.__version__,
                "connections": opts.connections,
                "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
            },
            "tables": opts.tables,
            "events_per_table": opts.events,
            "append_raw_evalsha_per_s": round(med["raw"]),
            "append_store_per_s": round(med["store"]),
            "append_ratio": round(med["store"] / med["raw"], 3),
            "append_raw_pipelined_per_s": round(med["raw_pipe"]),
            "append_store_pipelined_per_s": round(med["store_pipe"]),
            "append_pipelined_ratio": round(med["store_pipe"] / med["raw_pipe"], 3),
            "client_cpu_us_per_append_raw": round(cpu["raw"] / n_appends * 1e6, 1),
            "client_cpu_us_per_append_store": round(cpu["store"] / n_appends * 1e6, 1),
            "client_cpu_us_per_append_raw_pipelined": round(cpu["raw_pipe"] / n_appends * 1e6, 1),
            "client_cpu_us_per_append_store_pipelined": round(
                cpu["store_pipe"] / n_appends * 1e6, 1
            ),
            "replay_events_per_s": round(statistics.median(replay_rates["plain"])),
            "replay_verified_events_per_s": round(statistics.median(replay_rates["verified"])),
            "replay_events_per_cpu_s": round(statistics.median(replay_cpu["plain"])),
            "replay_verified_events_per_cpu_s": round(statistics.median(replay_cpu["verified"])),
            "loadavg_1min_before_after": [load_before, round(os.getloadavg()[0], 2)],
            **mem,
        }
        print(
            f"append, {opts.tables} tables in flight: store {result['append_store_per_s']}/s, "
            f"raw EVALSHA {result['append_raw_evalsha_per_s']}/s, "
            f"ratio {result['append_ratio']:.0%}"
        )
        print(
            f"append, pipelined per round: store {result['append_store_pipelined_per_s']}/s, "
            f"raw EVALSHA {result['append_raw_pipelined_per_s']}/s, "
            f"ratio {result['append_pipelined_ratio']:.0%}"
        )
        print(
            f"client CPU per append: store {result['client_cpu_us_per_append_store']} us, raw "
            f"{result['client_cpu_us_per_append_raw']} us; pipelined: store "
            f"{result['client_cpu_us_per_append_store_pipelined']} us, raw "
            f"{result['client_cpu_us_per_append_raw_pipelined']} us"
        )
        print(
            f"replay: {result['replay_events_per_s']} events/s decoded, "
            f"{result['replay_verified_events_per_s']} events/s with the chain verified "
            f"({result['replay_events_per_cpu_s']} and "
            f"{result['replay_verified_events_per_cpu_s']} per CPU second of this process)"
        )
        print(
            f"memory per event: live {mem['bytes_per_event_live']} B, sealed "
            f"{mem['bytes_per_event_sealed']} B, sealed + head "
            f"{mem['bytes_per_event_sealed_with_head']} B; per command: cmdids "
            f"{mem['bytes_per_command_cmdids']} B, feed {mem['bytes_per_append_feed']} B"
        )
        print(json.dumps(result))
    finally:
        for ns in namespaces:
            await delete_namespace(client, ns)
        await client.aclose()
        await pool.aclose()


if __name__ == "__main__":
    asyncio.run(main())
