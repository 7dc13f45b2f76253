"""Calls sent packed: every call in one write on a pooled connection and Redis's own replies read
back in order, without redis-py's pipeline; on a Redis Cluster, one such write a master, all at
once, and what a master did not take sent again through redis-py's cluster pipeline.

Why, with the figures: ``docs/performance.md`` ("Reads and pipelines on a cluster").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hiredis import pack_command
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    ResponseError,
    TimeoutError,
    TryAgainError,
)

from services.store.stream_watch import master_of

__all__ = ["Call", "exchange", "key_of", "send_packed"]

Call = tuple[Any, ...]
"""A command: its name, then its arguments (``("GET", key)``, ``("EVALSHA", sha, 1, key)``)."""

_SCRIPTS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})

NOT_TAKEN = (AskError, ClusterDownError, ConnectionError, MovedError, TimeoutError, TryAgainError)
"""What a master answers, or what befalls its connection, when a call is not for it now (a
slot moved, a failover, the node away): such calls go again through the cluster pipeline."""


def key_of(call: Call) -> Any:
    """The key that routes ``call``: a script's first key, else the first argument."""
    name = call[0]
    if (name.upper() if isinstance(name, str) else name.decode().upper()) in _SCRIPTS:
        return call[3]
    return call[1]


async def exchange(connection: Any, calls: Sequence[Call]) -> list[Any]:
    """Write ``calls`` packed by hiredis in one write on ``connection`` and read their replies;
    an error reply takes its call's place.  Anything else raises, and the connection, whose
    socket may hold replies not read, is dropped."""
    try:
        await connection.send_packed_command(b"".join(pack_command(c) for c in calls))
        replies: list[Any] = []
        for _ in calls:
            try:
                replies.append(await connection.read_response())
            except ResponseError as error:  # that call's error; the next reply follows
                replies.append(error)
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    return replies


async def send_packed(client: Any, calls: Sequence[Call]) -> list[Any]:
    """The reply, or the error reply, of each call: on one Redis by :func:`exchange` on a
    pooled connection (a lost connection raises); on a cluster, one :func:`exchange` a master
    (at once, as its slot table routes :func:`key_of` each call), then every call a master did
    not take (:data:`NOT_TAKEN`) or that had no known master again by redis-py's cluster
    pipeline, which follows redirects and learns the new slot table.  Replies are Redis's own,
    without redis-py's response callbacks."""
    if not isinstance(client, RedisCluster):
        pool = client.connection_pool
        connection = await pool.get_connection()
        try:
            return await exchange(connection, calls)
        finally:
            await pool.release(connection)
    replies: list[Any] = [None] * len(calls)
    by_node: dict[str, tuple[ClusterNode, list[int]]] = {}
    again: list[int] = []
    for i, call in enumerate(calls):
        node = master_of(client, key_of(call))
        if node is None:
            again.append(i)
        else:
            by_node.setdefault(node.name, (node, []))[1].append(i)
    sent = list(by_node.values())
    outcomes = await asyncio.gather(
        *(_on_node(node, [calls[i] for i in todo]) for node, todo in sent),
        return_exceptions=True,
    )
    for (_, todo), got in zip(sent, outcomes, strict=True):
        if isinstance(got, BaseException):
            if not isinstance(got, (*NOT_TAKEN, OSError)):
                raise got
            again += todo
            continue
        for i, reply in zip(todo, got, strict=True):
            if isinstance(reply, NOT_TAKEN):
                again.append(i)
            else:
                replies[i] = reply
    if again:
        async with client.pipeline(transaction=False) as pipe:
            for i in again:
                pipe.execute_command(*calls[i])
            for i, reply in zip(again, await pipe.execute(raise_on_error=False), strict=True):
                replies[i] = reply
    return replies


async def _on_node(node: ClusterNode, calls: list[Call]) -> list[Any]:
    connection = node.acquire_connection()
    try:
        return await exchange(connection, calls)
    finally:
        node.release(connection)
