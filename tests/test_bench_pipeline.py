"""bench/pipeline.py's reading of its own figures: the latency timeline of a paced phase, the
split of a latency at the worker's answer, and the Redis fork counters it reports; and its waits,
which end on the store when hints are lost."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from typing import Any

import pytest
import redis.asyncio

import bench.pipeline
from bench.pipeline import RECHECK, Driver, Hints, redis_forks, timeline
from bench.raw_redis import RawSender
from services.store.client import connect
from services.store.keys import KeySpace


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


async def test_a_wait_finishes_on_the_store_when_hints_are_lost(private_redis: str) -> None:
    """Nothing is published (every hint lost) and the subscription is killed under the driver:
    the wait still ends, from the store, within a re-check, and the driver subscribes again."""
    keys = KeySpace(ns="lost", shards=4)
    client = connect(private_redis)
    hints = Hints(private_redis, "lost:views", "lost:results")
    await hints.start()
    driver = Driver(client, RawSender(), keys, hints)
    try:
        for table_id, version in (("t1", 7), ("t2", 9)):
            await client.hset(keys.head(table_id), "version", version)
            await client.set(keys.table_view(table_id, "public"), f'{{"version":{version}}}')
        await client.hset(keys.head("t3"), "version", 4)  # its view is not there yet
        hints.expect({"t1": 7, "t2": 9, "t3": 4})
        await eventually(lambda: client.pubsub_numsub("lost:views"), lambda n: n[0][1] == 1)
        await client.client_kill_filter(_type="pubsub")
        waiting = asyncio.create_task(driver._wait(30))
        await eventually(lambda: client.pubsub_numsub("lost:views"), lambda n: n[0][1] == 1)
        assert hints.drops == 1 and not waiting.done()  # t3's view is still missing
        await client.set(keys.table_view("t3", "public"), '{"version":4}')
        started = time.perf_counter()
        assert await asyncio.wait_for(waiting, 10)
        assert time.perf_counter() - started <= RECHECK + 0.5  # at most a re-check late
        assert driver.rechecked == 3 and hints.versions == {"t1": 7, "t2": 9, "t3": 4}
        await client.publish("lost:views", "t1 8")  # hints flow again on the new subscription
        await eventually(lambda: asyncio.sleep(0.01, hints.versions["t1"]), lambda v: v == 8)
    finally:
        await hints.stop()
        await client.aclose()


async def test_a_wait_takes_a_lost_hint_from_the_store_while_other_hints_flow(
    redis_url: str, redis_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hints of another table keep coming, so the wait is never quiet: its periodic read
    takes a table the store shows at its goal once two such reads in a row found it."""
    monkeypatch.setattr(bench.pipeline, "RECHECK_EVERY", 1.5)
    ns = f"test-flow-{uuid.uuid4().hex[:8]}"
    keys = KeySpace(ns=ns, shards=4)
    hints = Hints(redis_url, f"{ns}:views")
    await hints.start()
    driver = Driver(redis_client, RawSender(), keys, hints)

    async def chatter() -> None:
        for n in range(1, 1000):
            await redis_client.publish(f"{ns}:views", f"other {n}")
            await asyncio.sleep(0.1)

    noise = asyncio.create_task(chatter())
    try:
        await redis_client.hset(keys.head("t1"), "version", 3)
        await redis_client.set(keys.table_view("t1", "public"), '{"version":3}')
        hints.expect({"t1": 3})
        started = time.perf_counter()
        assert await driver._wait(20)
        waited = time.perf_counter() - started
        assert driver.rechecked == 1 and 2 * 1.5 <= waited <= 2 * 1.5 + 2 * RECHECK + 1
    finally:
        noise.cancel()
        await hints.stop()
        await redis_client.delete(keys.head("t1"), keys.table_view("t1", "public"))


async def eventually(probe: Any, accept: Any, timeout: float = 5.0) -> None:
    """Await ``probe()`` until ``accept`` takes its value (fail after ``timeout`` seconds)."""
    deadline = time.perf_counter() + timeout
    while not accept(await probe()):
        assert time.perf_counter() < deadline, "timed out"
        await asyncio.sleep(0.02)
