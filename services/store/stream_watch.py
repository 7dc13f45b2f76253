"""Reading and waiting on many streams of a Redis Cluster: one ``XREAD`` a stream, sent
straight to the stream's master, and one blocked ``XREAD`` a stream as a wake-up.

A watch only wakes the reader, which reads again itself; why reads name their master
(:func:`xread_on`): ``docs/deploy.md``, "Module notes".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from services.tasks import cancel_and_wait

__all__ = [
    "StreamWatch",
    "answered",
    "master_of",
    "xread_each",
    "xread_on",
    "xread_split",
    "xreadgroup_on",
]


def master_of(client: Any, stream: Any) -> Any:
    """The cluster node that serves ``stream`` as redis-py's slot table has it, or None (not
    known now: redis-py then routes the command by asking Redis for its keys)."""
    try:
        return client.get_node_from_key(stream)
    except (RedisClusterException, RedisError):
        return None


def _on_master(client: Any, sender: Any, stream: Any, *command: Any) -> Any:
    """Send ``command`` by ``sender`` (``client`` itself, or its pipeline) to the master of
    ``stream`` as ``client``'s slot table has it; where it does not know, routed as redis-py
    routes it."""
    node = master_of(client, stream)
    routed = {} if node is None else {"target_nodes": node}
    return (client if sender is None else sender).execute_command(*command, **routed)


def xread_on(
    client: Any,
    stream: Any,
    after: Any,
    count: int,
    block_ms: int | None = None,
    *,
    sender: Any = None,
) -> Any:
    """``XREAD [COUNT] [BLOCK] STREAMS stream after`` on a cluster client (or, with ``sender``,
    its pipeline), sent to the stream's master (:func:`master_of`); the reply as redis-py's
    ``xread`` gives it.

    redis-py finds the keys of a command whose keys move (``XREAD``, ``XREADGROUP``) by asking
    Redis (``COMMAND GETKEYS``): a round trip a command before the command itself, awaited one
    by one while a pipeline is routed.  Naming the master skips it.  A stale slot table gets
    ``MOVED``; redis-py then routes the retry by the keys, as before.
    """
    block = () if block_ms is None else (b"BLOCK", str(block_ms))
    return _on_master(
        client, sender, stream, "XREAD", b"COUNT", str(count), *block, b"STREAMS", stream, after
    )


def xreadgroup_on(
    client: Any, group: str, consumer: str, stream: Any, count: int | None, *, sender: Any = None
) -> Any:
    """``XREADGROUP GROUP group consumer [COUNT count] STREAMS stream >``, sent to the stream's
    master as :func:`xread_on` sends its read."""
    counted = () if count is None else (b"COUNT", str(count))
    command = ("XREADGROUP", b"GROUP", group, consumer, *counted, b"STREAMS", stream, ">")
    return _on_master(client, sender, stream, *command)


class StreamWatch:
    """Blocked ``XREAD`` wake-ups over many streams of one cluster client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._watches: dict[str, asyncio.Task[bool]] = {}

    async def wait(self, after: Mapping[str, str], block_ms: int) -> bool:
        """Wait up to ``block_ms`` until a stream of ``after`` has an entry past its id.

        Returns True when a watch saw one (or failed: the caller's read then finds out why),
        False when the time ran out. Watches of streams no longer in ``after`` are dropped.
        """
        for stream in [s for s in self._watches if s not in after]:
            self._watches.pop(stream).cancel()
        if not after:
            await asyncio.sleep(block_ms / 1000)
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + block_ms / 1000
        while (remaining := deadline - loop.time()) > 0:
            for stream, entry_id in after.items():
                if stream not in self._watches:
                    self._watches[stream] = asyncio.create_task(
                        self._watch(stream, entry_id, block_ms), name=f"watch {stream}"
                    )
            done, _ = await asyncio.wait(
                self._watches.values(), timeout=remaining, return_when=asyncio.FIRST_COMPLETED
            )
            woke = False
            for stream, task in list(self._watches.items()):
                if task in done:  # a watch that timed out empty is started again
                    del self._watches[stream]
                    fired = task.cancelled() or task.exception() is not None or task.result()
                    woke = woke or fired
            if woke:
                return True
        return False

    async def _watch(self, stream: str, entry_id: str, block_ms: int) -> bool:
        try:
            reply = await xread_on(self.client, stream, entry_id, 1, block_ms)
        except RedisError:
            await asyncio.sleep(min(block_ms, 100) / 1000)  # a node away: no busy loop
            raise
        return bool(reply)

    async def close(self) -> None:
        """Cancel every watch in flight."""
        watches, self._watches = list(self._watches.values()), {}
        for task in watches:
            task.cancel()
        for task in watches:
            with contextlib.suppress(RedisError):
                await cancel_and_wait(task)


async def xread_each(client: Any, streams: Mapping[str, str], count: int) -> list[Any]:
    """``XREAD COUNT`` of every stream after its id, one command a stream in one pipeline;
    the replies of the streams that had entries, as one multi-stream ``XREAD`` gives them."""
    async with client.pipeline(transaction=False) as pipe:
        for stream, entry_id in streams.items():
            xread_on(client, stream, entry_id, count, sender=pipe)
        replies = await pipe.execute(raise_on_error=False)
    return answered(replies)


def answered(replies: list[Any]) -> list[Any]:
    """The entries of a pipeline of reads, one stream each, skipping the streams whose master
    did not answer (a master away stalls its own shards only); raises the first error when no
    stream answered, so that the caller backs off."""
    found: list[Any] = []
    errors = [reply for reply in replies if isinstance(reply, Exception)]
    if errors and len(errors) == len(replies):
        raise errors[0]
    for reply in replies:
        if not isinstance(reply, Exception):
            found.extend(reply or ())
    return found


async def xread_split(
    client: Any, streams: Mapping[str, str], count: int, block_ms: int | None, watch: StreamWatch
) -> list[Any]:
    """What ``XREAD COUNT BLOCK`` over ``streams`` gives on one Redis, on a cluster: read each
    stream; when none had entries, wait up to ``block_ms`` on ``watch`` and read once more."""
    found = await xread_each(client, streams, count)
    if found or not block_ms:
        return found
    if await watch.wait(streams, block_ms):
        return await xread_each(client, streams, count)
    return []
