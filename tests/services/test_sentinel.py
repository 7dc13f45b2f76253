"""The whole service behind Redis Sentinel (``redis+sentinel://``), through a failover.

A primary, a replica and a Sentinel of the test's own on free loopback ports; ``conquian
serve`` is given only the Sentinel's address and the service name. A bot table is played to
the end, the primary is SIGKILLed and the Sentinel promotes the replica, and a second table is
played to the end on the new primary, which also holds the first; every table audits clean.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.redis_server.local import free_port
from services.store.sentinel import parse_sentinel_url
from tests.services.sentinels import Sentinels
from tests.services.test_cluster import retrying, run_cli
from tests.services.test_serve import start_serve, wait_for_line

pytestmark = pytest.mark.redis


def test_sentinel_urls_parse() -> None:
    parsed = parse_sentinel_url("redis+sentinel://u:p%40ss@h1,h2:26390/main/3?sentinel_password=s")
    assert parsed is not None
    assert parsed.sentinels == (("h1", 26379), ("h2", 26390))
    assert (parsed.service, parsed.db, parsed.username, parsed.password) == ("main", 3, "u", "p@ss")
    assert parsed.sentinel_password == "s"
    assert parse_sentinel_url("redis://h:1/0") is None
    with pytest.raises(ValueError):
        parse_sentinel_url("redis+sentinel://h1,h2")


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    running = Sentinels(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def play_to_the_end(base: str) -> str:
    # right after a failover the gateway's first call may meet a dead connection (issue 18's
    # 5xx): the client sends again, as it would
    table: str = retrying("POST", f"{base}/tables", {"bots": {"0": "greedy", "1": "random"}})[
        "table_id"
    ]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if retrying("GET", f"{base}/tables/{table}").get("status") == "over":
            return table
        time.sleep(0.3)
    raise AssertionError(f"table {table} never finished")


def test_the_service_behind_sentinel_goes_on_after_a_failover(
    sentinels: Sentinels, tmp_path: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": sentinels.url(),
        "CONQUIAN_NAMESPACE": "snt",
        "CONQUIAN_SHARDS": "4",
        "CONQUIAN_LOG_LEVEL": "WARNING",
        "CONQUIAN_LEASE_MS": "3000",
    }
    with (tmp_path / "serve.log").open("w") as errors:
        serve = start_serve(env, port, stderr=errors)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_line(serve.stdout, "Conquian is running at", time.monotonic() + 120)
        before = play_to_the_end(base)
        sentinels.kill_primary()
        after = play_to_the_end(base)
        assert retrying("GET", f"{base}/tables/{before}")["status"] == "over"
        os.killpg(serve.pid, signal.SIGINT)
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    promoted = redis.Redis(port=sentinels.replica.port)
    assert promoted.info("replication")["role"] == "master"
    promoted.close()
    audit = run_cli(env, "audit", before, after)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]
