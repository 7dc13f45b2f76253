"""A chaos run: a private Redis, ``conquian serve`` on it, the load tool, and the killer.

In the run's folder: ``redis/`` (the private Redis's data and AOF), ``serve.log`` (the
services' JSON log lines), ``loadtest.json`` and ``loadtest.log`` (the load tool's report and
errors) and ``ledger.jsonl`` (the commands it got an accepted answer for).

Order: Redis (AOF on, ``appendfsync everysec``), then serve with ``REDIS_URL`` pointing at it,
then the load (``conquian loadtest --retry --ledger``) for the run's duration while the killer
works; then the load's grace, serve stopped by SIGINT, and the checks on the quiet store
(``services.chaos.checks``).  Redis is restarted by this harness, not by serve
(``docs/chaos.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from services.chaos import checks
from services.chaos.killer import Killer
from services.chaos.targets import Targets
from services.loadtest.ledger import Entry, read_ledger
from services.redis_server import LocalRedis
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
class Outcome:
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


def run(plan: Plan) -> Outcome:
    """Carry out a chaos run and its checks; return what it found.

    Raises RuntimeError when the service does not start.
    """
    plan.folder.mkdir(parents=True, exist_ok=True)
    redis = LocalRedis(plan.folder / "redis", port=free_port())
    redis.start()
    try:
        return _with_redis(plan, redis)
    finally:
        redis.stop()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _with_redis(plan: Plan, redis: LocalRedis) -> Outcome:
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": redis.url,
        "CONQUIAN_SHARDS": str(plan.shards),
        "CONQUIAN_LOG_LEVEL": os.environ.get("CONQUIAN_LOG_LEVEL", "WARNING"),
    }
    env.pop("CONQUIAN_ARCHIVE_DIR", None)  # the tables stay in Redis, where the checks read
    with (plan.folder / "serve.log").open("w") as serve_log:
        serve = _start_serve(env, port, plan.workers, serve_log)
        try:
            _wait_ready(f"http://127.0.0.1:{port}", serve)
            killer = Killer(Targets(serve.pid, redis, plan.workers), plan.kinds, plan.interval,
                            plan.seed)  # fmt: skip
            started, wall = time.monotonic(), time.time()
            load = _start_load(env, port, plan)
            killer.run(started, started + plan.duration, lambda: load.poll() is not None)
            up = _wait_all_up(killer.targets)
            with contextlib.suppress(subprocess.TimeoutExpired):
                load.wait(timeout=plan.grace + 60)
            if load.poll() is None:
                load.kill()
                load.wait()
            seconds = time.monotonic() - started
        finally:
            _stop(serve)
    return _check(plan, env, killer, seconds, wall, up)


def _start_serve(
    env: dict[str, str], port: int, workers: int, log: TextIO
) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "services.cli", "serve", "--port", str(port),
            "--workers", str(workers)]  # fmt: skip
    return subprocess.Popen(
        argv, cwd=checks.ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True,
        start_new_session=True,  # its own process group: the services are found in it
    )  # fmt: skip


def _wait_ready(url: str, serve: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if serve.poll() is not None:
            raise RuntimeError(f"conquian serve exited with {serve.returncode}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/readyz", timeout=1) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url}/readyz did not answer 200 within {READY_TIMEOUT_S} s")


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


def _check(
    plan: Plan, env: dict[str, str], killer: Killer, seconds: float, started: float, up: bool
) -> Outcome:
    """Check the quiet store: the ledger, the audit, and the views against a rebuild."""
    ledger_path = plan.folder / "ledger.jsonl"
    entries = read_ledger(ledger_path) if ledger_path.exists() else []
    ledger, doubled, tables = asyncio.run(_store_checks(env, entries))
    before = asyncio.run(_views(env, tables))
    audit = checks.audit_all(env)
    checks.rebuild_views(env)
    after = asyncio.run(_views(env, tables))
    report = plan.folder / "loadtest.json"
    return Outcome(
        seconds=seconds,
        killer=killer,
        ledger=ledger.as_dict(),
        anywhere_doubled=doubled,
        stall=longest_stall([e.at for e in entries], started, started + plan.duration),
        audit=audit,
        views_compared=len(before),
        views_differing=checks.differences(before, after),
        load=json.loads(report.read_text()) if report.exists() else {},
        up_at_end=up,
    )


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


def longest_stall(accepted_at: list[float], start: float, end: float) -> tuple[float, float]:
    """Return the longest time between ``start`` and ``end`` with no accepted command, and
    when (seconds after ``start``) it began.

    >>> longest_stall([1.0, 1.5, 4.0], 0.0, 5.0)
    (2.5, 1.5)
    """
    moments = [start, *sorted(t for t in accepted_at if start <= t <= end), end]
    gap, at = max((b - a, a - start) for a, b in itertools.pairwise(moments))
    return round(gap, 3), round(at, 3)
