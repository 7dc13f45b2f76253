"""bench/redis_client.py: both clients append through the real script, and it cleans up."""

from __future__ import annotations

import argparse

import redis.asyncio

from bench.redis_client import run


async def test_both_clients_are_measured_and_the_tables_deleted(
    redis_url: str, redis_client: redis.asyncio.Redis
) -> None:
    args = argparse.Namespace(url=redis_url, calls=3, rounds=4, repeat=2, round_trips=20)
    report = await run(args)
    for figures in (report["client_cpu_us_per_call"], report["wall_us_per_call"]):
        assert set(figures) == {"default", "no_call_timeouts"}
        assert all(v > 0 for v in figures.values())
    assert all(len(v) == 2 for v in report["client_cpu_us_per_call_runs"].values())
    assert [k async for k in redis_client.scan_iter(match="benchclient-*")] == []
    assert "redis_py" in report["round_trip"]
    assert all(set(v) == {"cpu_us", "user_us", "system_us"} for v in report["round_trip"].values())
