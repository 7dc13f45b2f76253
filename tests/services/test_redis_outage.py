"""Every service waits out a Redis outage, does not exit, and resumes once Redis answers.

Issue 18 (section 2): while Redis was down, the bots runner and the turn clock crash-looped
(their supervisor's pause grew to 16 s) and bot tables moved again only about 14 s after Redis
was back.  Here ``conquian serve`` runs every service (two engine workers, the projector, the
bots runner, the turn clock, the archiver and the gateway) on a Redis the test started
privately; clients keep creating tables while a bot table plays.  The test SIGKILLs that Redis,
keeps it away for a few seconds and starts it again on the same port and data folder (AOF).
Then:

* no service process exited or was restarted (the supervisor's log has no ``service_died``,
  every pid is the one it started with), and each of the looping services logged
  ``redis_unavailable`` and then ``redis_back``;
* ``/readyz`` answered 503 ``store/unavailable`` with ``Retry-After`` throughout the outage,
  and 200 after;
* every create the gateway accepted (201, or 202 queued) is in Redis afterwards, and the bot
  table plays on.

The times from Redis answering again to each of these are printed (``-s``) and recorded in
docs/performance.md ("Recovery"), never asserted.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import redis

from services.redis_server import LocalRedis
from services.redis_server.local import free_port
from services.store.keys import KeySpace
from tests.services.serve_run import Creates, ServeRun, until

pytestmark = pytest.mark.timeout(300)

NS = "outage"
SHARDS = 4
DOWN_S = 3.0
LOOPS = {"engine_worker", "projector", "bots_runner", "turn_clock", "archive"}
"""The loggers of the services whose loops call Redis on their own (the gateway only answers)."""


def answers(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


def test_every_service_waits_out_a_redis_outage_and_resumes(tmp_path: Path) -> None:
    server = LocalRedis(tmp_path / "redis", stop_timeout=10)
    server.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONQUIAN_")}
    env.update(
        REDIS_URL=server.url,
        CONQUIAN_NAMESPACE=NS,
        CONQUIAN_SHARDS=str(SHARDS),
        CONQUIAN_LOG_LEVEL="INFO",
        CONQUIAN_TOKEN_SECRET="s" * 32,
        CONQUIAN_ARCHIVE_DIR=str(tmp_path / "archive"),
        CONQUIAN_ARCHIVE_INTERVAL_MS="200",
    )
    times: dict[str, float] = {}
    try:
        with ServeRun(env, free_port(), "--workers", "2") as serve:
            serve.wait_ready()
            status, bots, _ = serve.http(
                "POST", "/tables", {"bots": {"0": "greedy", "1": "random"}, "deals": 12}
            )
            assert status == 201, bots
            bot_table = bots["table_id"]
            creates = Creates(serve, KeySpace(ns=NS, shards=SHARDS))
            until(lambda: serve.version(bot_table) > 20, 60)
            pids = serve.pids()
            assert len(pids) == 7, pids

            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
            killed = time.monotonic()
            while time.monotonic() - killed < DOWN_S:  # /readyz says so throughout
                status, body, headers = serve.http("GET", "/readyz", timeout=5)
                assert status == 503 and body["code"] == "store/unavailable", (status, body)
                assert headers.get("retry-after") == "1", headers
                time.sleep(0.2)
            assert server.exited() == -signal.SIGKILL
            server.restart()
            back = time.monotonic()
            assert answers(server.url)

            until(lambda: serve.http("GET", "/readyz", timeout=2)[0] == 200, 30)
            times["/readyz 200"] = time.monotonic() - back
            until(lambda: creates.first_accepted_after(back) < float("inf"), 30)
            times["a create answered"] = creates.first_accepted_after(back)
            version = serve.version(bot_table)
            until(lambda: serve.version(bot_table) > version, 30)
            times["the bot table moves"] = time.monotonic() - back
            for logger in sorted(LOOPS):  # each looping service saw the outage and its end
                line = serve.wait_event("redis_back", 30, logger=logger)
                times[f"{logger}: redis_back"] = line["_at"] - back
                assert serve.events("redis_unavailable", logger=logger)
            time.sleep(1.0)  # a few more commands after the outage
            ledger = creates.finish()

            assert serve.pids() == pids, "a service was restarted"
            assert not serve.events("service_died"), serve.events("service_died")
            accepted = [table for _, _, status, table in ledger if status in (201, 202)]
            after = [table for sent, _, status, table in ledger if sent > back and status == 201]
            assert len(accepted) > 20 and after
            for table in accepted:
                assert table is not None
                status, view, _ = serve.http("GET", f"/tables/{table}")
                assert status == 200 and view["version"] >= 1, (table, status, view)
            refused = {status for _, _, status, _ in ledger} - {201, 202}
            assert refused <= {503}, refused
        assert serve.process.returncode == 0
    finally:
        server.stop()
    print(  # shown with -s; docs/performance.md, "Recovery"
        "after Redis answered again (s):", {k: round(v, 2) for k, v in times.items()}
    )
