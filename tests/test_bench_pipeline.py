"""bench/pipeline.py's reading of its own figures: the latency timeline of a paced phase, the
split of a latency at the worker's answer, and the Redis fork counters it reports."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque

import redis.asyncio

from bench.pipeline import Hints, redis_forks, timeline


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


async def test_result_hints_time_the_worker_answer_and_view_hints_the_view(
    redis_url: str, redis_client: redis.asyncio.Redis
) -> None:
    ns = f"test-hints-{uuid.uuid4().hex[:8]}"
    hints = Hints(redis_url, f"{ns}:views", f"{ns}:results")
    await hints.start()
    try:
        for _ in range(500):  # until subscribed (both channels in one SUBSCRIBE)
            if (await redis_client.pubsub_numsub(f"{ns}:results"))[0][1]:
                break
            await asyncio.sleep(0.01)
        sent = time.perf_counter()
        hints.sent_at.update({"t1-a": sent, "t2-b": sent})
        hints.waiting["t1"] = deque([(5, sent)])
        hints.expect({"t1": 5})
        answer = '{"table_id":"t1","command_id":"t1-a","result":{"ok":true}}'
        other = '{"table_id":"t9","command_id":"t9-z","result":{"ok":true}}'  # not awaited
        await redis_client.publish(f"{ns}:results", f"{answer}\n{other}")
        await redis_client.publish(f"{ns}:views", "t1 5")
        await asyncio.wait_for(hints.done.wait(), 5)
    finally:
        await hints.stop()
    assert len(hints.decided) == 1 and 0 <= hints.decided[0] <= hints.answered[0][1]
    assert hints.sent_at == {"t2-b": sent}  # still waiting for its answer
    assert [a for a, _ in hints.answered] == [sent] and hints.versions == {"t1": 5}
