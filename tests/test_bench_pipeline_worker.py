"""bench/pipeline_worker.py: a paced run sends every command from another process, the worker
accepts them all, and the run reports its CPU a command and the commands each read found."""

from __future__ import annotations

import argparse

import redis.asyncio

from bench.pipeline_worker import generate, one_run


async def test_a_paced_run_applies_every_command_and_counts_the_reads(
    redis_url: str, redis_client: redis.asyncio.Redis
) -> None:
    games = await generate(3, seed=5, moves=6)
    args = argparse.Namespace(url=redis_url, shards=4, batch_size=200, rate=200.0, profile=None)
    run = await one_run(args, games)
    assert run["commands"] == sum(len(game) for game in games.values()) == 3 * (3 + 6)
    assert run["not_accepted"] == 0
    assert run["cpu_us_per_command"] > 0
    # at 200/s the worker keeps up: a read finds a command or none (a blocked read that timed
    # out), never the whole queue
    assert 0 < run["commands_per_read"] < run["commands"] / 2
    assert [k async for k in redis_client.scan_iter(match="bench-*")] == []
