"""Pipeline benchmark: commands per second from the command streams to the table views.

    .venv/bin/python bench/pipeline.py [--workers 2] [--shards 16] [--flood-tables 1000]
        [--rate 5000] [--load-seconds 10] [--low-rate 100] [--low-seconds 10]

What runs, its phases and baselines: ``docs/performance.md`` ("Pipeline", "Module notes").
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import redis.asyncio  # noqa: E402
from redis.utils import HIREDIS_AVAILABLE  # noqa: E402

from bench.machine import cpu_model, load_average  # noqa: E402
from bench.namespaces import delete_namespace  # noqa: E402
from bench.pipeline_games import (  # noqa: E402
    DEAL_KEY,
    Game,
    Order,
    games_for,
    interleave,
    reached,
    staggered,
)
from bench.pipeline_processes import Services, wait_ready  # noqa: E402
from bench.raw_redis import (  # noqa: E402
    RawSender,
    close_connection,
    encode_command,
    open_connection,
    resp_array,
)
from services.redis_server import LocalRedis  # noqa: E402
from services.serve.gc_tuning import settle_long_lived  # noqa: E402
from services.store.client import connect  # noqa: E402
from services.store.keys import KeySpace, command_key  # noqa: E402

PIPELINE = 1000
"""XADDs per pipeline when flooding."""
TICK = 0.002
"""Shortest sleep of the paced sender (it sends whatever is due when it wakes, in one
pipeline): at 5,000 commands/s about 10 commands per pipeline."""
TIMELINE_WINDOW = 0.5
"""Seconds of send time per row of a paced phase's latency ``timeline``."""
RECHECK = 1.0
"""Seconds without a hint after which a waiting driver reads the store (``Driver._wait``)."""
RECHECK_EVERY = 10.0
"""The longest a waiting driver goes without reading the store, hints or not."""


# --- the driver --------------------------------------------------------------------------------


class Hints:
    """Follows ``<ns>:views``: the newest view version of each table, and command latencies;
    with ``results`` also the engine workers' result hints, so that a latency splits into the
    time to the worker's answer (the command decided and appended) and the rest (the views).

    The subscription is a bare socket read by a small RESP parser, not redis-py's ``PubSub``:
    the driver shares the two cores with what it measures, and redis-py spends tens of
    microseconds per message.
    """

    def __init__(self, url: str, channel: str, results: str | None = None) -> None:
        self.url = url
        self.channel = channel
        self.results = results
        self.sent_at: dict[str, float] = {}
        """Send time by command id, of the commands whose result hint is awaited."""
        self.decided: list[float] = []
        """Seconds from sending a command to its result hint."""
        self.versions: dict[str, int] = {}
        self.waiting: dict[str, deque[tuple[int, float]]] = {}
        self.answered: list[tuple[float, float]] = []
        """Each answered command's send time and latency, seconds."""
        self.goal: dict[str, int] = {}
        self.done = asyncio.Event()
        self.messages = 0
        self.drops = 0
        """Times the subscription was closed under the driver (and made again)."""
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def start(self) -> None:
        reader = await self._subscribe()
        self.task = asyncio.create_task(self._follow(reader))

    async def _subscribe(self) -> asyncio.StreamReader:
        reader, self.writer = await open_connection(self.url)
        channels = [self.channel] if self.results is None else [self.channel, self.results]
        self.writer.write(encode_command("SUBSCRIBE", *(c.encode() for c in channels)))
        await self.writer.drain()
        return reader

    async def _follow(self, reader: asyncio.StreamReader) -> None:
        """Listen; when Redis closes the subscription (a slow subscriber passes its
        ``client-output-buffer-limit pubsub``), count it in ``drops`` and subscribe again: the
        hints of the gap are lost, which the driver's re-reads of the store make up for."""
        while True:
            with contextlib.suppress(OSError):
                await self._listen(reader)
            self.drops += 1
            if self.writer is not None:
                self.writer.close()
            while True:
                await asyncio.sleep(0.1)
                with contextlib.suppress(OSError):
                    reader = await self._subscribe()
                    break

    async def _listen(self, reader: asyncio.StreamReader) -> None:
        """Read ``*3 $7 message $n <channel> $m <data>`` pushes (and the subscribe answer)."""
        now = time.perf_counter
        versions = self.versions
        waiting = self.waiting
        answered = self.answered
        results = None if self.results is None else self.results.encode()
        sent_at = self.sent_at
        decided = self.decided
        buf = b""
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                return
            t = now()
            buf += chunk
            pos = 0
            while True:  # one complete push at a time; keep a partial one for the next read
                items = resp_array(buf, pos)
                if items is None:
                    break
                values, pos = items
                if len(values) != 3 or values[0] != b"message":
                    continue
                self.messages += 1
                if values[1] == results:  # parsed only while a paced phase awaits answers
                    for line in values[2].split(b"\n") if sent_at else ():
                        sent = sent_at.pop(orjson.loads(line)["command_id"], None)
                        if sent is not None:
                            decided.append(t - sent)
                    continue
                goal = self.goal
                for line in values[2].decode().split("\n"):  # one hint a line
                    table_id, _, text = line.partition(" ")
                    version = int(text)
                    if version > versions.get(table_id, 0):
                        versions[table_id] = version
                    queue = waiting.get(table_id)
                    while queue and queue[0][0] <= version:
                        sent = queue.popleft()[1]
                        answered.append((sent, t - sent))
                    target = goal.get(table_id)
                    if target is not None and version >= target:
                        del goal[table_id]
                        if not goal:
                            self.done.set()
            buf = buf[pos:]

    def expect(self, goals: dict[str, int]) -> None:
        """Set the versions to wait for (``done`` is set once every table reached its own)."""
        self.done.clear()
        self.goal = {t: v for t, v in goals.items() if self.versions.get(t, 0) < v}
        if not self.goal:
            self.done.set()

    def reached(self, table_id: str, version: int) -> bool:
        """Note a table's view at ``version`` found in the store (not from a hint: no latency
        is recorded); say whether that met the table's goal."""
        if version > self.versions.get(table_id, 0):
            self.versions[table_id] = version
        target = self.goal.get(table_id)
        if target is None or version < target:
            return False
        del self.goal[table_id]
        if not self.goal:
            self.done.set()
        return True

    async def stop(self) -> None:
        await close_connection(self.task, self.writer)


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 2)


def timeline(
    answered: Sequence[tuple[float, float]], start: float, window: float
) -> list[list[float | int | None]]:
    """Latency by when the command was sent: per ``window`` seconds from ``start``, ``[from_s,
    commands, p50_ms, p99_ms, max_ms]`` (a stall shows as one bad window, a queue as a rise)."""
    buckets: dict[int, list[float]] = {}
    for sent, latency in answered:
        buckets.setdefault(int((sent - start) / window), []).append(latency)
    return [
        [round(k * window, 2), len(v), ms(percentile(v, 0.5)), ms(percentile(v, 0.99)), ms(max(v))]
        for k, v in sorted(buckets.items())
    ]


class Driver:
    """Sends the games' commands (XADD of fields ``c``, ``s``, ``r``) through a
    :class:`RawSender`, each encoded before its phase's clock starts; checks the results with
    ``client``."""

    def __init__(
        self, client: redis.asyncio.Redis, sender: RawSender, keys: KeySpace, hints: Hints
    ) -> None:
        self.client = client
        self.sender = sender
        self.keys = keys
        self.hints = hints
        self.streams: dict[str, str] = {}
        self.rechecked = 0
        """Tables whose goal a wait found in the store instead of in a hint."""

    def stream(self, table_id: str) -> str:
        stream = self.streams.get(table_id)
        if stream is None:
            stream = self.streams[table_id] = self.keys.cmd(self.keys.shard_of(table_id))
        return stream

    def requests(self, order: Order) -> list[bytes]:
        """The XADD request of every command of ``order``, in order."""
        out = []
        for game, k in order:
            fields = game.commands[k][0]
            flat = [x for item in fields.items() for x in item]
            out.append(encode_command("XADD", self.stream(game.table_id), "*", *flat))
        return out

    async def flood(self, order: Order, timeout: float) -> dict[str, Any]:
        """Every command at once; the time until every view has the version of its table's
        last command."""
        goals: dict[str, int] = {}
        for game, k in order:
            goals[game.table_id] = max(goals.get(game.table_id, 0), game.commands[k][1])
        requests = self.requests(order)
        self.hints.expect(goals)
        started = time.perf_counter()
        for i in range(0, len(requests), PIPELINE):
            await self.sender.send(requests[i : i + PIPELINE])
        await self.sender.settle(timeout)
        sent = time.perf_counter() - started
        finished = await self._wait(timeout)
        elapsed = time.perf_counter() - started
        return {
            "commands": len(order),
            "tables": len(goals),
            "xadd_seconds": round(sent, 3),
            "seconds": round(elapsed, 3),
            "commands_per_s": round(len(order) / elapsed) if finished else None,
            "finished": finished,
            "rechecked": self.rechecked,
            "hint_drops": self.hints.drops,
        }

    async def paced(
        self, order: Order, rate: float, seconds: float, timeout: float
    ) -> dict[str, Any]:
        """Commands at ``rate`` for ``seconds`` (or until they run out); their latencies."""
        hints = self.hints
        hints.answered.clear()
        hints.decided.clear()
        hints.sent_at.clear()
        last: dict[str, int] = {}
        sent = 0
        limit = min(len(order), int(rate * seconds))
        requests = self.requests(order[:limit])
        started = time.perf_counter()
        while sent < limit:
            now = time.perf_counter()
            if now - started > seconds * 3 + 5:  # the sender itself cannot keep up: stop
                break
            due = min(limit, int((now - started) * rate) + 1)
            if due > sent:
                t = time.perf_counter()
                for game, k in order[sent:due]:
                    _, version, command_id = game.commands[k]
                    hints.waiting.setdefault(game.table_id, deque()).append((version, t))
                    hints.sent_at[command_id] = t
                    last[game.table_id] = version
                await self.sender.send(requests[sent:due])
                sent = due
            next_at = started + sent / rate
            await asyncio.sleep(max(TICK, next_at - time.perf_counter()))
        await self.sender.settle(timeout)
        send_seconds = time.perf_counter() - started
        hints.expect(last)
        finished = await self._wait(timeout)
        lat = [latency for _, latency in hints.answered]
        unanswered = sum(len(q) for q in hints.waiting.values())
        hints.waiting.clear()
        return {
            "commands": sent,
            "tables": len(last),
            "active_tables": len({g.table_id for g, _ in order[: max(1, int(rate))]}),
            "rate_asked": rate,
            "rate_sent": round(sent / send_seconds),
            "seconds": round(send_seconds, 3),
            "finished": finished,
            "rechecked": self.rechecked,
            "hint_drops": self.hints.drops,
            "latencies": len(lat),
            "unanswered": unanswered,
            "p50_ms": ms(percentile(lat, 0.50)),
            "p90_ms": ms(percentile(lat, 0.90)),
            "p99_ms": ms(percentile(lat, 0.99)),
            "max_ms": ms(max(lat) if lat else None),
            "decided_p50_ms": ms(percentile(hints.decided, 0.50)),
            "decided_p99_ms": ms(percentile(hints.decided, 0.99)),
            "timeline": timeline(hints.answered, started, TIMELINE_WINDOW),
            "sent": last,
        }

    async def _wait(self, timeout: float) -> bool:
        """Wait until every table of the goal is reached, at most ``timeout`` seconds.

        Hints are at most once (a subscriber that falls behind is disconnected, a publisher
        whose call fails loses them), so the wait does not rest on them alone: it reads the
        store for the tables still awaited (:meth:`at_goal`) after :data:`RECHECK` seconds
        without a hint or after a lost subscription, and takes what it finds there; and every
        :data:`RECHECK_EVERY` seconds whatever the hints, taking only what the previous such
        read found too (a hint on its way is not a lost one).  A lost hint thus costs at most
        a second once the hints stop, and shows in ``rechecked``."""
        hints = self.hints
        self.rechecked = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        checked = loop.time()
        heard = (hints.messages, hints.drops)
        suspects: set[str] = set()
        while not hints.done.is_set():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hints.done.wait(), min(RECHECK, remaining))
            if hints.done.is_set():
                break
            silent = hints.messages == heard[0] or hints.drops != heard[1]
            if silent or loop.time() - checked >= RECHECK_EVERY:
                found = await self.at_goal()
                taken = set(found) if silent else suspects.intersection(found)
                suspects = set(found) - taken
                self.rechecked += sum(hints.reached(t, found[t]) for t in taken)
                checked = loop.time()
            heard = (hints.messages, hints.drops)
        return True

    async def at_goal(self) -> dict[str, int]:
        """Read the head, then the ``public`` view, of every table still awaited (pipelines of
        500 tables): the view version of those whose view has reached the goal."""
        waiting = list(self.hints.goal)
        found: dict[str, int] = {}
        for i in range(0, len(waiting), 500):
            chunk = waiting[i : i + 500]
            async with self.client.pipeline(transaction=False) as pipe:
                for table_id in chunk:
                    pipe.hget(self.keys.head(table_id), "version")
                heads = await pipe.execute()
            goal = self.hints.goal
            moved = [t for t, h in zip(chunk, heads, strict=True) if h and int(h) >= goal.get(t, 0)]
            if not moved:
                continue
            async with self.client.pipeline(transaction=False) as pipe:
                for table_id in moved:
                    pipe.get(self.keys.table_view(table_id, "public"))
                views = await pipe.execute()
            for table_id, raw in zip(moved, views, strict=True):
                version = orjson.loads(raw).get("version") if raw else None
                if isinstance(version, int) and version >= goal.get(table_id, 0):
                    found[table_id] = version
        return found

    async def verify(self, games: Sequence[Game], upto: dict[str, int] | None = None) -> int:
        """Count the commands sent whose result is not ``ok`` or whose table's head or public
        view is not at the expected version (0 when all is well)."""
        bad = 0
        for i in range(0, len(games), 200):
            chunk = games[i : i + 200]
            async with self.client.pipeline(transaction=False) as pipe:
                expected: list[tuple[str, int]] = []
                for game in chunk:
                    final = game.final if upto is None else upto.get(game.table_id)
                    if final is None:
                        continue
                    fields = [  # each command's record, under its seat's id
                        command_key(command_id, int(sent["s"]) if sent["s"] else None)
                        for sent, version, command_id in game.commands
                        if version <= final
                    ]
                    pipe.hmget(self.keys.command_ids(game.table_id), fields)
                    pipe.hget(self.keys.head(game.table_id), "version")
                    pipe.get(self.keys.table_view(game.table_id, "public"))
                    expected.append((game.table_id, final))
                replies = await pipe.execute()
            for n, (_, final) in enumerate(expected):
                results, head, view = replies[3 * n : 3 * n + 3]
                for raw in results:
                    ok = raw is not None and json.loads(raw.split(b" ", 2)[2]).get("ok") is True
                    bad += not ok
                bad += head is None or int(head) != final
                bad += view is None or json.loads(view).get("version") != final
        return bad


# --- raw baselines -----------------------------------------------------------------------------


async def raw_baselines(
    client: redis.asyncio.Redis, ns: str, entries: Sequence[dict[str, str]]
) -> dict[str, Any]:
    """redis-py alone on the same Redis: pipelined XADD, pipelined XREADGROUP+XACK, and one
    awaited XREADGROUP, XADD and XACK per message."""
    scratch = f"{ns}:scratch"
    out: dict[str, Any] = {"entries": len(entries)}
    try:
        started = time.perf_counter()
        for i in range(0, len(entries), PIPELINE):
            async with client.pipeline(transaction=False) as pipe:
                for fields in entries[i : i + PIPELINE]:
                    pipe.xadd(scratch, fields)
                await pipe.execute()
        out["xadd_per_s"] = round(len(entries) / (time.perf_counter() - started))

        await client.xgroup_create(scratch, "g", id="0")
        started = time.perf_counter()
        read = 0
        acks: list[bytes] = []
        for _ in range(len(entries)):  # bounded: each round reads at least one entry
            async with client.pipeline(transaction=False) as pipe:
                if acks:
                    pipe.xack(scratch, "g", *acks)
                pipe.xreadgroup("g", "c", {scratch: ">"}, count=500)
                replies = await pipe.execute()
            reply = replies[-1]
            rows = reply[0][1] if reply else []
            acks = [entry_id for entry_id, _ in rows]
            read += len(rows)
            if not rows:
                break
        out["xreadgroup_xack_per_s"] = round(read / (time.perf_counter() - started))

        out_stream = f"{ns}:scratch-out"
        await client.xgroup_create(scratch, "h", id="0")
        started = time.perf_counter()
        handled = 0
        while handled < 5000 and time.perf_counter() - started < 5:
            reply = await client.xreadgroup("h", "c", {scratch: ">"}, count=1)
            if not reply:
                break
            entry_id, fields = reply[0][1][0]
            await client.xadd(out_stream, fields)
            await client.xack(scratch, "h", entry_id)
            handled += 1
        out["per_message_awaited_per_s"] = round(handled / (time.perf_counter() - started))
    finally:
        await client.delete(scratch, f"{ns}:scratch-out")
    return out


# --- the run -----------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "hiredis": HIREDIS_AVAILABLE,
        "platform": platform.platform(),
    }


async def redis_forks(client: redis.asyncio.Redis) -> dict[str, int]:
    """Redis's fork count, its last fork's pause and the last AOF rewrite's seconds."""
    stats = await client.info("stats")
    persistence = await client.info("persistence")
    return {
        "total_forks": int(stats.get("total_forks", 0)),
        "latest_fork_usec": int(stats.get("latest_fork_usec", 0)),
        "aof_last_rewrite_time_sec": int(persistence.get("aof_last_rewrite_time_sec", -1)),
    }


async def phase(
    name: str,
    services: Services,
    driver: Driver,
    run: Any,
    games: Sequence[Game],
    before: Order = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """Run one measured part; then check every command sent so far on these tables."""
    load_before = load_average()
    await driver.client.config_resetstat()  # (also zeroes the fork count)
    forks_before = await redis_forks(driver.client)
    cpu_before = services.cpu()
    wall = time.perf_counter()
    result: dict[str, Any] = await run
    wall = time.perf_counter() - wall
    cpu_after = services.cpu()
    stats = await driver.client.info("commandstats")
    forks_after = await redis_forks(driver.client)
    services.check()
    upto = reached(before)
    for table_id, version in result.pop("sent", {}).items():
        upto[table_id] = max(upto.get(table_id, 0), version)
    result["bad"] = await driver.verify(games, upto)
    result["verified_tables"] = len(upto)
    cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_after}
    capacity = cpu.pop("machine_total")
    system = {k.removesuffix("_sys"): cpu.pop(k) for k in list(cpu) if k.endswith("_sys")}
    ours = sum(v for k, v in cpu.items() if k != "machine")
    cpu["others"] = max(0.0, cpu["machine"] - ours)
    cpu["machine_idle"] = max(0.0, capacity - cpu.pop("machine"))
    result["cpu_s"] = {k: round(v, 2) for k, v in cpu.items()}
    result["cpu_share"] = {k: round(v / wall, 2) for k, v in cpu.items()}
    result["system_share"] = {k: round(v / cpu[k], 2) if cpu[k] else 0 for k, v in system.items()}
    if result.get("commands"):
        result["cpu_us_per_command"] = {
            k: round(v / result["commands"] * 1e6)
            for k, v in cpu.items()
            if k not in ("others", "machine_idle")
        }
    if result.get("commands"):  # Redis calls per command, all clients (EVALSHA: scripts)
        result["redis_calls_per_command"] = {
            k.removeprefix("cmdstat_"): round(v["calls"] / result["commands"], 2)
            for k, v in sorted(stats.items(), key=lambda kv: -kv[1]["calls"])
            if v["calls"] >= result["commands"] / 20
        }
        # the engine workers' reads: how many commands a turn of a worker carried on average
        reads = stats.get("cmdstat_xreadgroup", {}).get("calls", 0)
        result["commands_per_read"] = round(result["commands"] / reads, 1) if reads else None
        # Redis's own time per command, by Redis command (a script's inner calls are counted
        # both under their own names and in its EVALSHA)
        result["redis_us_per_command"] = {
            k.removeprefix("cmdstat_"): round(v["usec"] / result["commands"], 1)
            for k, v in sorted(stats.items(), key=lambda kv: -kv[1]["usec"])
            if v["usec"] >= result["commands"] / 2
        }
    # an AOF rewrite forks Redis, and its child shares the two cores with everything measured
    result["redis_forks"] = forks_after["total_forks"] - forks_before["total_forks"]
    if result["redis_forks"]:
        result["latest_fork_ms"] = round(forks_after["latest_fork_usec"] / 1000, 1)
        result["aof_rewrite_s"] = forks_after["aof_last_rewrite_time_sec"]
    result["loadavg"] = [load_before, load_average()]
    print(f"# {name}: {json.dumps(result)}", flush=True)
    return result


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_start = load_average()
    t0 = time.perf_counter()
    games = await games_for(args)
    # the games are many objects: freeze them, and what each full collection leaves, so that
    # the driver's own pauses do not show up as latency (as in the services)
    settle_long_lived()
    generated = time.perf_counter() - t0
    count = {k: sum(len(g.commands) for g in v) for k, v in games.items()}
    print(f"# games ready in {generated:.1f}s: {count}", flush=True)

    folder = Path(tempfile.mkdtemp(prefix="conquian-pipeline-"))
    ns = f"pb{uuid.uuid4().hex[:6]}"
    keys = KeySpace(ns=ns, shards=args.shards)
    server = LocalRedis(
        folder / "redis", appendfsync=args.appendfsync, extra_args=dict(args.redis_config)
    )
    services: Services | None = None
    client: redis.asyncio.Redis | None = None
    hints: Hints | None = None
    sender: RawSender | None = None
    try:
        url = args.url or server.start().url
        client = connect(url)
        info = await client.info("server")
        redis_version = info.get("redis_version") or info.get("valkey_version")
        redis_pid = int(info["process_id"])
        env = {
            **os.environ,
            "REDIS_URL": url,
            "CONQUIAN_NAMESPACE": ns,
            "CONQUIAN_SHARDS": str(args.shards),
            "CONQUIAN_INSECURE_DEAL_KEY": DEAL_KEY,
            "CONQUIAN_TOKEN_SECRET": "b" * 32,
            "CONQUIAN_LOG_LEVEL": "WARNING",
            "CONQUIAN_BATCH_SIZE": str(args.batch_size),
        }
        services = Services(folder, env)
        if not args.url:
            services.others["redis"] = redis_pid
        for i in range(args.workers):
            services.start(f"worker{i}", "services.engine_worker")
        for i in range(args.projectors):
            services.start(f"projector{i}", "services.projector")
        await wait_ready(client, keys, args.workers, args.projectors, services, 60)

        hints = Hints(url, f"{ns}:views", f"{ns}:results")
        await hints.start()
        sender = RawSender()
        await sender.start(url)
        driver = Driver(client, sender, keys, hints)

        report: dict[str, Any] = {}
        warm = await driver.flood(interleave(games["warmup"]), args.timeout)
        if not warm["finished"]:
            raise RuntimeError(f"warm-up did not finish: {warm}")

        flood_order = interleave(games["flood"])
        flood_entries = [g.commands[k][0] for g, k in flood_order]
        raw = await raw_baselines(client, ns, flood_entries[: args.raw_entries])
        print(f"# raw redis-py: {json.dumps(raw)}", flush=True)
        report["raw"] = raw

        def spy(name: str) -> list[subprocess.Popen[bytes]]:
            if not args.profile or args.profile_phase != name:
                return []
            return services.profile(Path(args.profile), args.profile_seconds)

        def unspy(spies: list[subprocess.Popen[bytes]]) -> None:
            for process in spies:
                try:
                    process.wait(timeout=args.profile_seconds + 30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

        spies = spy("flood")
        report["flood"] = await phase(
            "flood",
            services,
            driver,
            driver.flood(flood_order, args.timeout),
            games["flood"],
            before=flood_order,
        )
        unspy(spies)
        sustained = report["flood"]["commands_per_s"] or 0
        rate = min(args.rate, sustained) if sustained and not args.fixed_rate else args.rate

        for name, tables, pace, seconds in (
            ("load", games["load"], rate, args.load_seconds),
            ("low", games["low"], args.low_rate, args.low_seconds),
        ):
            commands = int(pace * seconds)
            mean = sum(len(g.commands) for g in tables) / len(tables)
            tables = tables[: max(2, min(len(tables), math.ceil(2.2 * commands / mean)))]
            prefix, measured = staggered(tables, commands, args.seed)
            ready = await driver.flood(prefix, args.timeout)  # tables already under way
            if not ready["finished"]:
                raise RuntimeError(f"the {name} prefix did not finish: {ready}")
            print(f"# {name} prefix: {ready['commands']} commands, {ready['seconds']} s")
            spies = spy(name)
            report[name] = await phase(
                name,
                services,
                driver,
                driver.paced(measured, pace, seconds, args.timeout),
                tables,
                before=prefix,
            )
            report[name]["prefix_commands"] = ready["commands"]
            unspy(spies)
        report["redis_version"] = redis_version
        report["hint_messages"] = hints.messages
        report["load_start"] = load_start
        return report
    except BaseException:
        if services is not None:
            for name in services.procs:
                sys.stderr.write(f"--- {name} log tail ---\n{services.tail(name)}\n")
        raise
    finally:
        if hints is not None:
            with contextlib.suppress(Exception):
                await hints.stop()
        if sender is not None:
            with contextlib.suppress(Exception):
                await sender.stop()
        if services is not None:
            services.stop()
        if client is not None:
            if args.url:
                with contextlib.suppress(Exception):
                    await delete_namespace(client, ns)
            await client.aclose()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def table(report: dict[str, Any]) -> str:
    raw, flood, load, low = report["raw"], report["flood"], report["load"], report["low"]
    rows = [
        ("raw redis-py pipelined XADD", f"{raw['xadd_per_s']:,} entries/s"),
        ("raw pipelined XREADGROUP + XACK", f"{raw['xreadgroup_xack_per_s']:,} entries/s"),
        ("raw awaited read + write + ack per message", f"{raw['per_message_awaited_per_s']:,}/s"),
        (
            f"flood: {flood['commands']:,} commands, {flood['tables']:,} tables",
            f"{flood['commands_per_s'] or 0:,} commands/s in {flood['seconds']} s",
        ),
        (
            f"load: {load['rate_sent']:,}/s asked {load['rate_asked']:,}/s",
            f"p50 {load['p50_ms']} ms  p99 {load['p99_ms']} ms  max {load['max_ms']} ms"
            f"  (to the worker's answer: p50 {load['decided_p50_ms']} ms"
            f"  p99 {load['decided_p99_ms']} ms)",
        ),
        (
            f"low: {low['rate_sent']:,}/s",
            f"p50 {low['p50_ms']} ms  p99 {low['p99_ms']} ms  max {low['max_ms']} ms",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{a:<{width}}  {b}" for a, b in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="use this Redis instead of a private one (keys deleted)")
    parser.add_argument("--appendfsync", default="everysec", choices=["always", "everysec", "no"])
    parser.add_argument(
        "--redis-config",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        metavar="NAME=VALUE",
        help="a setting of the private Redis (repeatable), e.g. rdbcompression=yes",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--projectors", type=int, default=2)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--deals", type=int, default=1, help="deals per match")
    parser.add_argument("--bots", default="greedy,random", help="bots of seat 0 and seat 1")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--warmup-tables", type=int, default=50)
    parser.add_argument("--flood-tables", type=int, default=1000)
    parser.add_argument("--load-tables", type=int, default=2200)
    parser.add_argument("--low-tables", type=int, default=100)
    parser.add_argument("--rate", type=float, default=5000.0, help="commands/s of the load phase")
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--low-rate", type=float, default=100.0)
    parser.add_argument("--low-seconds", type=float, default=10.0)
    parser.add_argument("--raw-entries", type=int, default=50_000)
    parser.add_argument("--timeout", type=float, default=180.0, help="per phase, seconds")
    parser.add_argument("--games-cache", help="keep the generated games in this pickle file")
    parser.add_argument("--profile", help="py-spy every service during the flood, into this folder")
    parser.add_argument("--profile-seconds", type=float, default=20.0)
    parser.add_argument("--profile-phase", default="flood", choices=["flood", "load", "low"])
    parser.add_argument(
        "--fixed-rate", action="store_true", help="load at --rate even above the flood's rate"
    )
    args = parser.parse_args()

    from services.log import configure

    configure("WARNING")
    try:
        import uvloop
    except ImportError:
        report = asyncio.run(run(args))
    else:
        report = uvloop.run(run(args))

    raw, flood, load, low = report["raw"], report["flood"], report["load"], report["low"]
    print(table(report))
    sustained = flood["commands_per_s"]
    summary = {
        "bench": "pipeline",
        "commands_per_s": sustained,
        "raw_xadd_per_s": raw["xadd_per_s"],
        "ratio": round(sustained / raw["xadd_per_s"], 3) if sustained else None,
        "raw_xreadgroup_xack_per_s": raw["xreadgroup_xack_per_s"],
        "raw_per_message_awaited_per_s": raw["per_message_awaited_per_s"],
        "flood_commands": flood["commands"],
        "flood_tables": flood["tables"],
        "load_rate": load["rate_sent"],
        "load_p50_ms": load["p50_ms"],
        "load_p99_ms": load["p99_ms"],
        "load_decided_p50_ms": load["decided_p50_ms"],
        "load_decided_p99_ms": load["decided_p99_ms"],
        "low_rate": low["rate_sent"],
        "low_p50_ms": low["p50_ms"],
        "low_p99_ms": low["p99_ms"],
        "not_accepted_or_wrong_version": flood["bad"] + load["bad"] + low["bad"],
        "cpu_share_flood": flood["cpu_share"],
        "cpu_share_load": load["cpu_share"],
        "workers": args.workers,
        "projectors": args.projectors,
        "shards": args.shards,
        "batch_size": args.batch_size,
        "appendfsync": args.appendfsync,
        "redis_config": dict(args.redis_config),
        "redis": report["redis_version"],
        "loadavg": [report["load_start"], low["loadavg"][1]],
        "machine": machine(),
    }
    print(json.dumps(summary))
    return 0 if summary["not_accepted_or_wrong_version"] == 0 and sustained else 1


if __name__ == "__main__":
    sys.exit(main())
