"""``conquian archive`` killed with SIGKILL at any point loses no table and writes none twice.

A real ``conquian archive`` process is killed (1) at each step of its work, where the test hook
``CONQUIAN_TEST_ARCHIVE_PAUSE`` stops it (``services/archive/pause.py``), and (2) at random
times over a batch of tables.  After every kill each table is in Redis or has a verified copy
in the archive (or both); after a last run that is left to finish, every table is in the
archive exactly once, nothing of it is left in Redis, and each audits clean from the archive
with the report it had in Redis.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

from services.archive.folder import SUFFIX, FolderArchive
from services.archive.pause import PAUSE_ENV, STEPS
from services.archive.record import check_chain, unpack
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.store import Head, KeySpace, RedisEventStore

ROOT = Path(__file__).resolve().parents[2]
SHARDS = 4


def record(url: str, ns: str, deals: int, seed: int) -> list[str]:
    async def go() -> list[str]:
        client = redis.asyncio.Redis.from_url(url)
        try:
            store = RedisEventStore(client, KeySpace(ns, SHARDS))
            config = SelfplayConfig(deals, seed, ("greedy", "random"))
            _, tables = await record_selfplay(config, store)
            return [t.table_id for t in tables]
        finally:
            await client.aclose()

    return asyncio.run(go())


def store_args(url: str, ns: str) -> list[str]:
    return ["--redis-url", url, "--namespace", ns, "--shards", str(SHARDS)]


def start(url: str, ns: str, folder: Path, pause: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != PAUSE_ENV}
    if pause is not None:
        env[PAUSE_ENV] = pause
    argv = [sys.executable, "-m", "services.cli", "archive", *store_args(url, ns)]
    argv += ["--archive-dir", str(folder), "--older-than", "0", "--batch", "3"]
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)


def heads(client: redis.Redis, keys: KeySpace, tables: list[str]) -> dict[str, Head]:
    out = {}
    for t in tables:
        version, digest, status = client.hmget(keys.head(t), ["version", "hash", "status"])
        out[t] = Head(int(version), digest.decode(), status.decode()) if version else Head()
    return out


def check_nothing_lost(
    client: redis.Redis, keys: KeySpace, folder: Path, recorded: dict[str, Head]
) -> int:
    """Each table is in Redis as recorded, or verified in the archive; return how many are
    archived (and gone from Redis)."""
    archive = FolderArchive(folder, keys.ns)
    now = heads(client, keys, list(recorded))
    gone = 0
    for t, head in recorded.items():
        if now[t].version:
            assert now[t] == head, t  # never changed
            continue
        copy = unpack(archive.get(t) or b"")  # deleted from Redis: its copy must be whole
        check_chain(copy)
        assert copy.head == head, t
        gone += 1
    return gone


def finish_and_check(
    client: redis.Redis, url: str, ns: str, folder: Path, recorded: dict[str, Head], audit: Any
) -> None:
    """Run the archiver to the end, then check the archive against what was recorded."""
    done = start(url, ns, folder)
    _, err = done.communicate(timeout=120)
    assert done.returncode == 0, err.decode()
    keys = KeySpace(ns, SHARDS)
    archive = FolderArchive(folder, ns)
    listed = list(archive.list())
    assert sorted(listed) == sorted(recorded)  # every table, each exactly once
    files = [p for p in (folder / ns).rglob("*") if p.name.endswith(SUFFIX)]
    assert len(files) == len(recorded)
    assert check_nothing_lost(client, keys, folder, recorded) == len(recorded)
    leftovers = [
        k for k in client.scan_iter(match=f"{ns}*", count=1000) if not k.endswith(b":feed")
    ]
    assert leftovers == []  # no head, stream, secret, view, command ids or index entry left
    after = audit_json(url, ns, folder)
    assert after["ok"] and after["tables"] == len(recorded)
    assert reports(after) == reports(audit)


def audit_json(url: str, ns: str, folder: Path | None = None) -> Any:
    argv = [sys.executable, "-m", "services.cli", "audit", "--all", *store_args(url, ns), "--json"]
    if folder is not None:
        argv += ["--archive-dir", str(folder)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def reports(summary: Any) -> Any:
    return {k: v for k, v in summary.items() if k not in ("seconds", "events_per_s")}


@pytest.mark.slow
def test_killed_at_every_step_then_rerun(
    redis_url: str, redis_ns: str, redis_sync: redis.Redis, tmp_path: Path
) -> None:
    tables = record(redis_url, redis_ns, 12, seed=21)
    keys = KeySpace(redis_ns, SHARDS)
    recorded = heads(redis_sync, keys, tables)
    audit = audit_json(redis_url, redis_ns)
    folder = tmp_path / "archive"
    archived = 0
    for step in STEPS:  # each time at its second passage: after a batch or table went through
        process = start(redis_url, redis_ns, folder, f"{step}:2")
        assert process.stderr is not None
        line = process.stderr.readline().decode()
        assert line.startswith(f"paused at {step}"), line
        kill(process)
        now = check_nothing_lost(redis_sync, keys, folder, recorded)
        assert now >= archived
        archived = now
    assert 0 < archived < len(tables)
    finish_and_check(redis_sync, redis_url, redis_ns, folder, recorded, audit)


@pytest.mark.slow
def test_killed_at_random_times_then_rerun(
    redis_url: str, redis_ns: str, redis_sync: redis.Redis, tmp_path: Path
) -> None:
    tables = record(redis_url, redis_ns, 150, seed=22)
    keys = KeySpace(redis_ns, SHARDS)
    recorded = heads(redis_sync, keys, tables)
    audit = audit_json(redis_url, redis_ns)
    folder = tmp_path / "archive"
    # how long the interpreter takes to start and read the first batch: kills come from half of
    # it to a little after it (a run that lived longer could archive every table before three
    # kills, on a fast moment of a busy machine)
    started = time.monotonic()
    process = start(redis_url, redis_ns, folder, "exported:1")
    assert process.stderr is not None
    assert process.stderr.readline().startswith(b"paused at exported")
    warm = time.monotonic() - started
    kill(process)
    rng = random.Random(22)
    kills = 0
    for _ in range(15):
        process = start(redis_url, redis_ns, folder)
        time.sleep(rng.uniform(0.5 * warm, warm + 0.15))
        if process.poll() is not None:
            continue
        kill(process)
        kills += 1
        if check_nothing_lost(redis_sync, keys, folder, recorded) == len(tables):
            break
    assert kills >= 3
    finish_and_check(redis_sync, redis_url, redis_ns, folder, recorded, audit)
