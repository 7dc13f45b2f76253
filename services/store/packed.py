"""Calls sent packed: every call in one write on a pooled connection and Redis's own replies read
back in order, without redis-py's pipeline; on a Redis Cluster, one such write a master, all at
once.  What was not taken (a lost connection; on a cluster also a slot moved) goes again
through redis-py's pipeline, which retries and follows redirects as its client is configured.

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

try:  # redis-py's own hiredis parser, and the value its reader gives for "no whole reply yet"
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _AsyncHiredisParser
except ImportError:  # another redis-py: every reply through read_response
    _NOT_ENOUGH_DATA = None
    _AsyncHiredisParser = type(None)  # type: ignore[assignment,misc]

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
    socket may hold replies not read, is dropped.

    Replies the connection's hiredis reader holds already are taken from it directly; only when
    it holds none does a read go through redis-py's ``read_response`` (its timeout, its reading
    of the socket).  That skips redis-py's layers for most replies: about 1 µs of CPU a reply
    (``docs/performance.md``, "Reads and pipelines on a cluster").
    """
    try:
        await connection.send_packed_command(b"".join(pack_command(c) for c in calls))
        replies: list[Any] = []
        buffered, push = _buffered(connection)
        while len(replies) < len(calls):
            reply = _NOT_ENOUGH_DATA if buffered is None else buffered.gets()
            while push is not None and isinstance(reply, push):  # a RESP3 push, not a reply
                await connection._parser.handle_push_response(reply)  # as read_response does
                reply = buffered.gets()
            if reply is _NOT_ENOUGH_DATA:
                try:
                    reply = await connection.read_response()
                except ResponseError as error:  # that call's error; the next reply follows
                    reply = error
            elif isinstance(reply, ConnectionError) or (
                isinstance(reply, list) and reply and isinstance(reply[0], ConnectionError)
            ):
                raise reply if isinstance(reply, ConnectionError) else reply[0]
            replies.append(reply)
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    return replies


def _buffered(connection: Any) -> tuple[Any, Any]:
    """The hiredis reader of ``connection`` (error replies come out of it as exception objects,
    as redis-py reads them) and the type of its RESP3 pushes (None: no pushes); no reader:
    every reply goes through redis-py."""
    parser = getattr(connection, "_parser", None)
    if _NOT_ENOUGH_DATA is None or not isinstance(parser, _AsyncHiredisParser):
        return None, None
    return parser._reader, getattr(parser, "_hiredis_PushNotificationType", None)


async def send_packed(client: Any, calls: Sequence[Call]) -> list[Any]:
    """The reply, or the error reply, of each call.

    On one Redis one :func:`exchange` on a pooled connection; on a cluster one a master, at
    once, as redis-py's slot table routes :func:`key_of` each call.  The calls of a lost
    connection, and on a cluster those a master did not take (:data:`NOT_TAKEN`) or with no
    known master, go again through redis-py's pipeline: it retries, follows redirects and
    learns the new slot table, and raises what it cannot overcome.  A call sent again may
    have run once already (its reply was lost): the services send again only what is
    idempotent (appends carry a command id; reads).  Replies are Redis's own, without
    redis-py's response callbacks.
    """
    if not isinstance(client, RedisCluster):
        try:
            return await _on_pool(client.connection_pool, calls)
        except (ConnectionError, TimeoutError, OSError):
            return await _pipelined(client, calls)
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
        for i, reply in zip(
            again, await _pipelined(client, [calls[i] for i in again]), strict=True
        ):
            replies[i] = reply
    return replies


async def _pipelined(client: Any, calls: Sequence[Call]) -> list[Any]:
    async with client.pipeline(transaction=False) as pipe:
        for call in calls:
            pipe.execute_command(*call)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
    return replies


async def _on_pool(pool: Any, calls: Sequence[Call]) -> list[Any]:
    connection = await pool.get_connection()
    try:
        return await exchange(connection, calls)
    finally:
        await pool.release(connection)


async def _on_node(node: ClusterNode, calls: list[Call]) -> list[Any]:
    connection = node.acquire_connection()
    try:
        return await exchange(connection, calls)
    finally:
        node.release(connection)
