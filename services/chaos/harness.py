"""A chaos run: a private Redis, ``conquian serve`` on it, the load tool, and the killer.

The run's folder, the order of its steps and its checks are in ``docs/chaos.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from services.chaos import checks
from services.chaos.killer import Killer
from services.chaos.targets import Targets
from services.loadtest.ledger import Entry, read_ledger
from services.redis_server import LocalRedis
from services.redis_server.local import free_port
from services.settings import load_settings
from services.store.client import connect
from services.store.redis_store import RedisEventStore

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Plan:
    """What a chaos run does (``conquian chaos --help``)."""

    duration: float
    interval: float
    seed: int
    folder: Path
    tables: int = 8
    workers: int = 2
    shards: int = 8
    grace: float = 30.0
    kinds: tuple[str, ...] = ()


@dataclass
class Findings:
    """What a run measured and found, before it is put into a report."""

    seconds: float
    killer: Killer
    ledger: dict[str, Any]
    anywhere_doubled: list[str]
    stall: tuple[float, float]
    """The longest gap without an accepted command (seconds) and when it started (into the
    run)."""
    audit: dict[str, Any]
    views_compared: int
    views_differing: list[str]
    load: dict[str, Any]
    up_at_end: bool


def run(plan: Plan) -> Findings:
    """Carry out a chaos run and its checks; return what it found.

    Raises RuntimeError when the service does not start.
    """
    plan.folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "CONQUIAN_SHARDS": str(plan.shards),
        "CONQUIAN_LOG_LEVEL": os.environ.get("CONQUIAN_LOG_LEVEL", "WARNING"),
    }
    env.pop("REDIS_URL", None)  # serve starts, and restarts, a Redis of its own
    env.pop("CONQUIAN_ARCHIVE_DIR", None)  # the tables stay in Redis, where the checks read
    load: subprocess.Popen[bytes] | None = None
    with (plan.folder / "serve.log").open("w") as serve_log:
        serve = _start_serve(env, port, plan, serve_log)
        try:
            redis_port = _wait_ready(serve)
            targets = Targets(serve.pid, redis_port, f"http://127.0.0.1:{port}", plan.workers)
            killer = Killer(targets, plan.kinds, plan.interval, plan.seed)
            started, wall = time.monotonic(), time.time()
            load = _start_load(env, port, plan)
            _wait_first_accepted(plan.folder / "ledger.jsonl", load)
            killer.run(started, started + plan.duration, lambda: load.poll() is not None)
            up = _wait_all_up(targets)
            with contextlib.suppress(subprocess.TimeoutExpired):
                load.wait(timeout=plan.grace + 60)
            _end(load)  # the checks want a quiet service
            seconds = time.monotonic() - started
            found = _check_live(plan, {**env, "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0"})
        finally:
            if load is not None:
                _end(load)
            _stop(serve)
    differing = _check_rebuild(plan, env, found)
    report = plan.folder / "loadtest.json"
    return Findings(
        seconds=seconds,
        killer=killer,
        ledger=found.ledger.as_dict(),
        anywhere_doubled=found.doubled,
        stall=longest_stall([e.at for e in found.entries], wall, wall + plan.duration),
        audit=found.audit,
        views_compared=len(found.views),
        views_differing=differing,
        load=json.loads(report.read_text()) if report.exists() else {},
        up_at_end=up,
    )


def _start_serve(env: dict[str, str], port: int, plan: Plan, log: TextIO) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "services.cli", "serve", "--port", str(port),
            "--workers", str(plan.workers), "--data-dir", str(plan.folder / "redis")]  # fmt: skip
    return subprocess.Popen(
        argv, cwd=checks.ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
        start_new_session=True,  # its own process group: the services are found in it
    )  # fmt: skip


def _wait_ready(serve: subprocess.Popen[str]) -> int:
    """Wait for serve's banner; return the port of its Redis (``Redis: redis://…:PORT/0``)."""
    assert serve.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    running = False
    while time.monotonic() < deadline:
        line = serve.stdout.readline()
        if not line:
            raise RuntimeError(f"conquian serve exited with {serve.wait()}")
        running = running or line.startswith("Conquian is running")
        found = re.match(r"Redis: redis://[^ ]*?:(\d+)/", line)
        if running and found:
            return int(found.group(1))
    raise RuntimeError(f"conquian serve did not say it runs within {READY_TIMEOUT_S} s")


def _start_load(env: dict[str, str], port: int, plan: Plan) -> subprocess.Popen[bytes]:
    folder = plan.folder
    argv = [
        sys.executable, "-m", "services.cli", "loadtest", "--via", "gateway",
        "--url", f"http://127.0.0.1:{port}", "--tables", str(plan.tables),
        "--duration", str(plan.duration), "--grace", str(plan.grace),
        "--result-timeout", "6", "--retry", "--seed", str(plan.seed),
        "--ledger", str(folder / "ledger.jsonl"), "--report", str(folder / "loadtest.json"),
        "--display", "none",
    ]  # fmt: skip
    with (folder / "loadtest.log").open("w") as log:
        return subprocess.Popen(argv, cwd=checks.ROOT, env=env, stdout=log, stderr=log)


def _end(load: subprocess.Popen[bytes]) -> None:
    """SIGKILL the load tool if it still runs; reap it."""
    if load.poll() is None:
        load.kill()
    load.wait()


def _wait_first_accepted(ledger: Path, load: subprocess.Popen[bytes]) -> None:
    """Wait until the load tool has had a command accepted: the kills start under load."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and load.poll() is None:
        if ledger.exists() and ledger.stat().st_size > 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the load tool had no command accepted (exit status {load.poll()})")


def _wait_all_up(targets: Targets) -> bool:
    """Wait until every killed process is back (serve's pause may still be running)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if targets.all_up():
            return True
        time.sleep(0.2)
    return False


def _stop(serve: subprocess.Popen[str]) -> None:
    """Stop serve and its services as Ctrl-C does; SIGKILL the group if it does not stop."""
    if serve.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGINT)
        try:
            serve.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    if serve.stdout is not None:
        serve.stdout.close()


@dataclass
class Found:
    """What the checks on the live service found, before serve stops."""

    entries: list[Entry]
    ledger: checks.LedgerCheck
    doubled: list[str]
    tables: list[str]
    views: dict[str, Any]
    audit: dict[str, Any]


def _check_live(plan: Plan, env: dict[str, str]) -> Found:
    """Check the quiet service: the ledger, the audit, and the views once settled."""
    ledger_path = plan.folder / "ledger.jsonl"
    entries = read_ledger(ledger_path) if ledger_path.exists() else []
    ledger, doubled, tables = asyncio.run(_store_checks(env, entries))
    views = _settled_views(env, tables)
    return Found(entries, ledger, doubled, tables, views, checks.audit_all(env))


def _check_rebuild(plan: Plan, env: dict[str, str], found: Found) -> list[str]:
    """Rebuild every view from the events (serve stopped: the rebuild wants the projector's
    leases; Redis started again from its AOF) and return the views that differ from the live
    ones."""
    with LocalRedis(plan.folder / "redis") as redis:
        env = {**env, "REDIS_URL": redis.url}
        checks.rebuild_views(env)
        rebuilt = asyncio.run(_views(env, found.tables))
    differing = checks.differences(found.views, rebuilt)
    if differing:  # kept for a look: what was stored, and what a rebuild wrote
        for name, views in (("views-stored.json", found.views), ("views-rebuilt.json", rebuilt)):
            kept = {key: views.get(key) for key in differing}
            (plan.folder / name).write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
    return differing


async def _store_checks(
    env: dict[str, str], entries: list[Entry]
) -> tuple[checks.LedgerCheck, list[str], list[str]]:
    """Return the ledger check, the commands applied twice anywhere, and every table."""
    settings = load_settings(redis_url=env["REDIS_URL"], shards=int(env["CONQUIAN_SHARDS"]))
    client = connect(settings.redis_url)
    try:
        store = RedisEventStore(client, settings.keys)
        ledger = await checks.check_ledger(store, entries)
        doubled = await checks.applied_twice_anywhere(store)
        tables = sorted([t async for t in store.tables()])
        return ledger, doubled, tables
    finally:
        await client.aclose()


async def _views(env: dict[str, str], tables: list[str]) -> dict[str, Any]:
    settings = load_settings(redis_url=env["REDIS_URL"], shards=int(env["CONQUIAN_SHARDS"]))
    client = connect(settings.redis_url)
    try:
        return await checks.read_views(client, settings.keys, tables)
    finally:
        await client.aclose()


def _settled_views(env: dict[str, str], tables: list[str]) -> dict[str, Any]:
    """Return the stored views once two reads a second apart agree (at most a minute)."""
    views = asyncio.run(_views(env, tables))
    for _ in range(60):
        time.sleep(1.0)
        again = asyncio.run(_views(env, tables))
        if again == views:
            break
        views = again
    return views


def longest_stall(accepted_at: list[float], start: float, end: float) -> tuple[float, float]:
    """Return the longest time between ``start`` and ``end`` with no accepted command, and
    when (seconds after ``start``) it began.

    >>> longest_stall([1.0, 1.5, 4.0], 0.0, 5.0)
    (2.5, 1.5)
    """
    moments = [start, *sorted(t for t in accepted_at if start <= t <= end), end]
    gap, at = max((b - a, a - start) for a, b in itertools.pairwise(moments))
    return round(gap, 3), round(at, 3)
