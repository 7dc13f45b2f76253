"""bench/pipeline.py's reading of its own figures: the latency timeline of a paced phase and
the Redis fork counters it reports."""

from __future__ import annotations

import redis.asyncio

from bench.pipeline import redis_forks, timeline


def test_the_timeline_groups_latencies_by_send_time() -> None:
    start = 100.0
    answered = [(100.1, 0.010), (100.2, 0.030), (100.7, 0.500), (101.6, 0.020), (101.9, 0.040)]
    assert timeline(answered, start, 0.5) == [
        [0.0, 2, 10.0, 30.0, 30.0],  # a window's p50 is its lower median (nearest rank)
        [0.5, 1, 500.0, 500.0, 500.0],  # a stall shows as one bad window
        [1.5, 2, 20.0, 40.0, 40.0],  # an empty window (1.0 s) is left out
    ]
    assert timeline([], start, 0.5) == []


async def test_the_fork_counters_are_read_as_numbers(redis_client: redis.asyncio.Redis) -> None:
    forks = await redis_forks(redis_client)
    assert set(forks) == {"total_forks", "latest_fork_usec", "aof_last_rewrite_time_sec"}
    assert all(isinstance(v, int) for v in forks.values())
    assert forks["total_forks"] >= 0 and forks["aof_last_rewrite_time_sec"] >= -1
