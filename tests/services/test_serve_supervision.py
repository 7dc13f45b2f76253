"""``conquian serve`` supervises what it started: its own Redis and every service process.

Issue 18 (section 2): ``make run`` left its private Redis as a zombie when it was killed, and
did not start it again.  Here ``conquian serve`` runs with its embedded Redis (no
``REDIS_URL``) while clients keep creating tables through the gateway; the test SIGKILLs the
Redis, then an engine worker, then the bots runner, and checks that:

* each is started again by the supervisor (a log line each), Redis on the same port and data
  folder, the killed processes reaped (no zombie), the other processes never restarted;
* every create the gateway accepted (201, or 202 queued) is in Redis afterwards: its table
  answers with version 1 or more, nothing lost across the restart from the AOF;
* a bot table created before the kills plays on after them.

The times (kill → ``/readyz`` 200, kill → a command answered, kill → the bot table moving) are
printed (``-s``) and recorded in docs/performance.md ("Recovery"), never asserted.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from services.redis_server.local import free_port
from services.store.keys import KeySpace
from tests.services.serve_run import Creates, ServeRun, until, worker_shards, zombie

pytestmark = pytest.mark.timeout(300)


def test_serve_restarts_its_redis_and_dead_services_and_loses_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        CONQUIAN_NAMESPACE="supervised",
        CONQUIAN_SHARDS="4",
        CONQUIAN_LOG_LEVEL="INFO",
        CONQUIAN_TOKEN_SECRET="s" * 32,
    )
    data_dir = tmp_path / "redis"
    times: dict[str, float] = {}
    with ServeRun(env, free_port(), "--workers", "2", "--data-dir", str(data_dir)) as serve:
        serve.wait_ready()
        started = serve.wait_event("redis.started", 10)
        redis_pid, redis_url = started["pid"], started["url"]
        status, bots, _ = serve.http("POST", "/tables", {"bots": {"0": "greedy", "1": "random"},
                                                         "deals": 12})  # fmt: skip
        assert status == 201, bots
        bot_table = bots["table_id"]
        creates = Creates(serve, KeySpace(ns="supervised", shards=4))
        until(lambda: serve.version(bot_table) > 20, 60)
        pids = serve.pids()
        assert set(pids) == {"engine-worker-0", "engine-worker-1", "projector", "bots",
                             "clock", "gateway"}  # fmt: skip

        # 1. Redis, SIGKILLed: restarted on the same port and data folder, reaped
        killed = time.monotonic()
        os.kill(redis_pid, signal.SIGKILL)
        restarted = serve.wait_event("redis.restarted", 30)
        assert restarted["previous_pid"] == redis_pid and restarted["pid"] != redis_pid
        assert f"127.0.0.1:{restarted['port']}" in redis_url
        assert Path(restarted["data_dir"]) == data_dir.resolve()
        assert serve.events("redis_died", pid=redis_pid)
        assert not zombie(redis_pid)
        times["redis: kill -> restarted"] = restarted["_at"] - killed
        until(lambda: serve.http("GET", "/readyz", timeout=2)[0] == 200, 30)
        times["redis: kill -> /readyz 200"] = time.monotonic() - killed
        version = serve.version(bot_table)
        until(lambda: serve.version(bot_table) > version, 30)
        times["redis: kill -> bot table moves"] = time.monotonic() - killed
        until(lambda: creates.first_accepted_after(killed) < float("inf"), 30)
        times["redis: kill -> a create answered"] = creates.first_accepted_after(killed)
        assert serve.pids() == pids, "a service was restarted because Redis was"

        # 2. an engine worker (restarted under its worker id), then the bots runner
        for name in ("engine-worker-0", "bots"):
            old = pids[name]
            held = worker_shards(redis_url, "supervised", 4, "-w0")
            assert held or name != "engine-worker-0", "engine-worker-0 holds no shard"
            killed = time.monotonic()
            os.kill(old, signal.SIGKILL)
            died = serve.wait_event("service_died", 30, service=name, pid=old)
            again = serve.wait_event("service_started", 30, service=name, after=1)
            assert died["status"] == -signal.SIGKILL and again["pid"] != old
            assert not zombie(old)
            times[f"{name}: kill -> restarted"] = again["_at"] - killed
            on_shards = held if name == "engine-worker-0" else None

            def answered(moment: float = killed, shards: set[int] | None = on_shards) -> float:
                return creates.first_accepted_after(moment, shards)

            until(lambda: answered() < float("inf"), 30)
            times[f"{name}: kill -> a create answered"] = answered()
            version = serve.version(bot_table)
            until(lambda: serve.version(bot_table) > version, 30)  # noqa: B023
            times[f"{name}: kill -> bot table moves"] = time.monotonic() - killed
            pids[name] = again["pid"]
            assert serve.pids() == pids, "only the killed process was restarted"
        ledger = creates.finish()

        # nothing accepted was lost (201 answered, or 202 queued and applied since)
        accepted = [table for _, _, status, table in ledger if status in (201, 202)]
        assert len(accepted) > 20
        for table in accepted:
            assert table is not None
            status, view, _ = serve.http("GET", f"/tables/{table}")
            assert status == 200 and view["version"] >= 1, (table, status, view)
        refused = {status for _, _, status, _ in ledger} - {201, 202}
        assert refused <= {0, 503}, refused
        assert not serve.events("redis_restart_failed")
    assert serve.process.returncode == 0
    report: dict[str, Any] = {k: round(v, 2) for k, v in times.items()}
    print("recovery times (s):", report)  # shown with -s; docs/performance.md, "Recovery"
