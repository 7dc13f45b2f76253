"""The engine worker's reader: one FastStream subscriber, one XREADGROUP over several streams."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import redis.asyncio
from faststream.redis import RedisBroker
from faststream.redis.subscriber.usecases import StreamBatchSubscriber
from test_engine_worker import eventually  # the test folder is on sys.path

from services.engine_worker.reader import STREAMS_FIELD, ShardStreamsSubscriber, subscribe_shards


def _reader(
    broker: RedisBroker,
    handle: Callable[[Mapping[str, Any]], Awaitable[None]],
    name: str,
    streams: Callable[[], Sequence[str]],
) -> ShardStreamsSubscriber:
    """The worker's reader on ``broker``: group ``g``, consumer ``c1``, reads of 10."""
    return subscribe_shards(
        broker,
        handle,
        name=name,
        streams=streams,
        group="g",
        consumer="c1",
        max_records=10,
        polling_ms=50,
    )


async def test_one_read_spans_the_streams_and_settled_waits_for_the_batch(
    redis_url: str, redis_ns: str, redis_client: redis.asyncio.Redis
) -> None:
    streams = [f"{redis_ns}:{{s0{i}}}:cmd" for i in range(3)]
    ids: dict[str, list[bytes]] = {}
    for stream in streams:
        await redis_client.xgroup_create(stream, "g", id="0", mkstream=True)
        ids[stream] = [await redis_client.xadd(stream, {"n": str(i)}) for i in range(2)]

    batches: list[list[tuple[bytes, str]]] = []
    entered = asyncio.Event()
    release = asyncio.Event()

    async def handle(raw: Mapping[str, Any]) -> None:
        batches.append(list(zip(raw["message_ids"], raw[STREAMS_FIELD], strict=True)))
        entered.set()
        await release.wait()

    wanted = list(streams)
    broker = RedisBroker(redis_url, apply_types=False)
    reader = _reader(broker, handle, f"{redis_ns}:{{s*}}:cmd", lambda: wanted)
    await broker.start()
    try:
        await asyncio.wait_for(entered.wait(), 5)
        # every stream's entries in one batch, each with the name of its stream
        assert sorted(batches[0]) == sorted((i, s) for s in streams for i in ids[s])
        assert reader.reads == 1

        # the batch is in hand: a stream of it is not settled until the handler returns
        settled = asyncio.create_task(reader.settled(streams[1]))
        await asyncio.sleep(0.2)
        assert not settled.done()
        wanted.remove(streams[1])
        release.set()
        await asyncio.wait_for(settled, 5)

        # a stream left out is not read: its new entry stays undelivered
        await redis_client.xadd(streams[1], {"n": "late"})
        other = await redis_client.xadd(streams[0], {"n": "next"})
        await eventually(lambda: len(batches) >= 2, 5)
        assert batches[1] == [(other, streams[0])]
        (group,) = await redis_client.xinfo_groups(streams[1])
        assert group["last-delivered-id"] == ids[streams[1]][-1]
        # a stream of no read in hand is settled at once
        await asyncio.wait_for(reader.settled(streams[1]), 1)
    finally:
        release.set()
        await broker.stop()


def test_the_log_context_is_the_base_subscribers_with_the_channel_named_once() -> None:
    async def handle(raw: Mapping[str, Any]) -> None:  # never called: nothing is started
        raise AssertionError(raw)

    broker = RedisBroker("redis://127.0.0.1:1", apply_types=False, prefix="pre:")
    reader = _reader(broker, handle, "{s*}:cmd", list)
    base = StreamBatchSubscriber.get_log_context(reader, None)
    assert base["channel"].endswith("{s*}:cmd")
    assert reader.get_log_context(None) == base
    assert reader.get_log_context(None) == base  # from the name kept the first time
