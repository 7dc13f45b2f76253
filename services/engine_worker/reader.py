"""The command streams as the engine worker reads them: one read of every owned shard's stream,
and what an entry of them is.

:class:`ShardStreamsSubscriber`, one FastStream subscriber per worker, reads the streams it is
told of before each read, in one ``XREADGROUP`` (one a stream on a cluster): ``docs/services.md``
("Module notes").  :func:`parse_entry` turns an entry (fields ``c`` the command's JSON, ``s``
the seat, ``r`` received ms) into a command and its seat: ``docs/services.md`` ("Command
intake").
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faststream._internal.broker.registrator import Registrator
from faststream._internal.endpoint.subscriber.call_item import CallsCollection
from faststream.middlewares import AckPolicy
from faststream.redis import RedisBroker, StreamSub
from faststream.redis.message import FAKE_CONSUMER, RedisBatchStreamMessage
from faststream.redis.subscriber.config import (
    RedisSubscriberConfig,
    RedisSubscriberSpecificationConfig,
)
from faststream.redis.subscriber.specification import StreamSubscriberSpecification
from faststream.redis.subscriber.usecases import LogicSubscriber, StreamBatchSubscriber
from redis.asyncio.cluster import RedisCluster

from engine.codes import Code
from events.commands import Command, parse_command
from services.log import get_logger
from services.store.client import as_text
from services.store.keys import KeySpace
from services.store.outage import OUTAGE_ERRORS, Outage
from services.store.stream_watch import StreamWatch, answered, xreadgroup_on

GROUP = "engine"
"""The consumer group of the engine workers on every command stream."""

ID_PEEK_BYTES = 64 * 1024
"""A malformed command up to this size is searched for a command id to publish its rejection."""

RawEntry = tuple[bytes, Mapping[bytes, bytes]]
"""A stream entry as read: its id and its fields."""


@dataclass
class Entry:
    """A command read from the stream, with the deliveries it had before this one."""

    entry_id: bytes
    command: Command
    seat: int | None
    tries: int = 0
    error: str = ""


@dataclass(frozen=True)
class Malformed:
    """An entry that is not a command: its rejection, and the ids read from it if any."""

    entry_id: bytes
    code: str
    message: str
    table_id: str | None
    command_id: str | None


_no: tuple[None, None] = (None, None)


def _peek_ids(raw: bytes | None) -> tuple[str | None, str | None]:
    """The ``table_id`` and ``command_id`` of raw JSON that failed to parse, when readable."""
    if raw is None or len(raw) > ID_PEEK_BYTES:
        return None, None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) and 0 < len(value) <= 128 else None

    return text("table_id"), text("command_id")


def parse_entry(
    entry_id: bytes, fields: Mapping[bytes, bytes], shard: int, keys: KeySpace
) -> Entry | Malformed:
    """Turn an entry of ``shard``'s stream into a command and its seat, or say why it is not
    one (not JSON, not a command, a bad seat field, a table of another shard)."""
    raw = fields.get(b"c")
    if raw is None:
        message = "the entry has no command (field c)"
        return Malformed(entry_id, Code.COMMAND_INVALID, message, *_no)
    try:
        command = parse_command(raw)
    except Exception as error:  # ContractError, and anything else the input can provoke
        code = getattr(error, "code", None)
        if not isinstance(code, str):
            code = Code.COMMAND_MALFORMED_JSON.value
        return Malformed(entry_id, code, str(error)[:500], *_peek_ids(raw))
    ids = (command.table_id, command.command_id)
    seat_text = fields.get(b"s", b"")
    if seat_text == b"":
        seat = None
    elif seat_text in (b"0", b"1"):
        seat = int(seat_text)
    else:
        message = f"bad seat field {seat_text[:20]!r}"
        return Malformed(entry_id, Code.COMMAND_INVALID, message, *ids)
    if keys.shard_of(command.table_id) != shard:
        message = f"table {command.table_id} is not on shard {shard}"
        return Malformed(entry_id, Code.COMMAND_WRONG_SHARD, message, *ids)
    return Entry(entry_id, command, seat)


STREAMS_FIELD = "streams"
"""The key of the batch message that names each entry's stream (aligned with the ids)."""

Handler = Callable[[Mapping[str, Any]], Awaitable[None]]


async def _raw_batch(message: Mapping[str, Any]) -> RedisBatchStreamMessage:
    """FastStream parser: keep the raw entries (ids and field maps), decode nothing."""
    return RedisBatchStreamMessage(
        raw_message=message, body=b"", consumer=FAKE_CONSUMER, group=None
    )


async def _raw_entries(message: RedisBatchStreamMessage) -> Mapping[str, Any]:
    """FastStream decoder: the raw entries (``message_ids`` and ``data``) are the body."""
    return message.raw_message


class ShardStreamsSubscriber(StreamBatchSubscriber):
    """A FastStream batch subscriber reading several streams of one consumer group at once."""

    def __init__(
        self,
        config: RedisSubscriberConfig,
        specification: StreamSubscriberSpecification,
        calls: CallsCollection[Any],
        *,
        streams: Callable[[], Sequence[str]],
        group: str,
        consumer: str,
    ) -> None:
        super().__init__(config, specification, calls)
        self._streams = streams
        self._group = group
        self._consumer = consumer
        self._busy: frozenset[str] = frozenset()
        self._done = asyncio.Event()
        self.reads = 0
        """XREADGROUP calls made (the tests read it)."""
        self._log_channel: str | None = None
        self._watch: StreamWatch | None = None
        self._outage = Outage(get_logger("engine_worker", consumer=consumer), "read")

    def get_log_context(self, message: Any) -> dict[str, str]:
        """FastStream's log context of a batch (built for every message), with the channel
        named once: the base class deep-copies the subscription (``stream_sub``) each time."""
        channel = self._log_channel
        if channel is None:
            channel = self._log_channel = self.stream_sub.name
        return self.build_log_context(message=message, channel=channel)

    async def start(self) -> None:
        """Start the consume loop (the worker creates the groups and acknowledges entries itself,
        so there is no per-stream setup)."""
        await LogicSubscriber.start(self, self._read)

    async def _read(self, _: str) -> Any:
        """One XREADGROUP over the streams of this moment (a pause when there are none)."""
        sub = self._stream_sub
        streams = self._busy
        if not streams:
            await asyncio.sleep(sub.polling_interval / 1000)
            return ()
        client = self._client
        if isinstance(client, RedisCluster):
            return await self._read_split(client, sorted(streams))
        self.reads += 1
        return await client.xreadgroup(
            groupname=self._group,
            consumername=self._consumer,
            streams=dict.fromkeys(sorted(streams), ">"),
            count=sub.max_records,
            block=sub.polling_interval,
        )

    async def _read_split(self, client: RedisCluster, streams: Sequence[str]) -> list[Any]:
        """The read on a cluster: a non-blocking XREADGROUP a stream; when none had news, where
        each stream ends, read once more, and wait on a watch of those ends before a last read.

        Asking where a stream ends *before* reading it leaves no gap: an entry added after that
        answer is either read by the XREADGROUP that follows or past the watched id.
        """
        found = await self._read_each(client, streams)
        if found:
            return found
        ends: dict[str, str] = {}
        found = await self._read_each(client, streams, ends)
        if found:
            return found
        if self._watch is None:
            self._watch = StreamWatch(client)
        if await self._watch.wait(ends, self._stream_sub.polling_interval):
            return await self._read_each(client, streams)
        return []

    async def _read_each(
        self, client: RedisCluster, streams: Sequence[str], ends: dict[str, str] | None = None
    ) -> list[Any]:
        """One pipeline of XREADGROUP (COUNT, no BLOCK), each after an XREVRANGE of the
        stream's last entry when ``ends`` is given (a dict to fill); return the entries read."""
        self.reads += 1
        count = self._stream_sub.max_records
        async with client.pipeline(transaction=False) as pipe:
            for stream in streams:
                if ends is not None:
                    pipe.xrevrange(stream, "+", "-", count=1)
                xreadgroup_on(client, self._group, self._consumer, stream, count, sender=pipe)
            replies = await pipe.execute(raise_on_error=False)
        if ends is None:
            return answered(replies)
        for stream, last in zip(streams, replies[::2], strict=True):
            if not isinstance(last, Exception):  # a master away: its streams are not watched
                ends[stream] = as_text(last[0][0]) if last else "0-0"
        return answered(replies[1::2])

    async def stop(self) -> None:
        """Stop the consume loop, and the watches of a cluster's idle reads."""
        await super().stop()
        if self._watch is not None:
            await self._watch.close()

    async def _get_msgs(self, read: Any) -> None:
        """Read once and hand every entry read, of every stream, to the handler as one batch.

        A read that fails because Redis is away is tried again after a pause of at most a
        second (:class:`~services.store.outage.Outage`), where FastStream's loop would wait five."""
        self._busy = frozenset(self._streams())
        try:
            try:
                reply = await read("")
            except OUTAGE_ERRORS as error:
                self._busy = frozenset()  # no read in flight while we wait
                await asyncio.sleep(self._outage.failed(error))
                return
            self._outage.ok()
            ids: list[bytes] = []
            data: list[dict[bytes, bytes]] = []
            names: list[str] = []
            for stream_name, entries in reply:
                name = stream_name.decode() if isinstance(stream_name, bytes) else stream_name
                for entry_id, fields, *_ in entries:
                    ids.append(entry_id)
                    data.append(fields)
                    names.append(name)
            if ids:
                # FastStream's BatchStreamMessage, with each entry's stream beside its id
                message = {
                    "type": "bstream",
                    "channel": self._stream_sub.name,
                    "data": data,
                    "message_ids": ids,
                    STREAMS_FIELD: names,
                }
                await self.consume_one(message)
        finally:
            self._busy = frozenset()
            done, self._done = self._done, asyncio.Event()
            done.set()

    async def settled(self, stream: str) -> None:
        """Wait until no read or batch in hand involves ``stream``."""
        while stream in self._busy:
            await self._done.wait()


def subscribe_shards(
    broker: RedisBroker,
    handler: Handler,
    *,
    name: str,
    streams: Callable[[], Sequence[str]],
    group: str,
    consumer: str,
    max_records: int,
    polling_ms: int,
) -> ShardStreamsSubscriber:
    """Register a :class:`ShardStreamsSubscriber` on ``broker`` (started with the broker, or
    by its own ``start()``), built the way ``broker.subscriber(stream=StreamSub(batch=True))``
    builds FastStream's own, with the manual ack policy and no replies; the handler gets the
    raw entries (``message_ids``, ``data`` and :data:`STREAMS_FIELD`), none decoded.

    ``name`` labels the subscriber in FastStream's logs; ``max_records`` is XREADGROUP's COUNT
    (per stream); ``polling_ms`` its BLOCK.
    """
    stream_sub = StreamSub(
        name,
        group=group,
        consumer=consumer,
        batch=True,
        max_records=max_records,
        polling_interval=polling_ms,
    )
    config = RedisSubscriberConfig(
        stream_sub=stream_sub,
        no_reply=True,
        _outer_config=broker.config,  # type: ignore[arg-type]
        _ack_policy=AckPolicy.MANUAL,
    )
    calls = CallsCollection[Any]()
    specification = StreamSubscriberSpecification(
        broker.config,  # type: ignore[arg-type]
        RedisSubscriberSpecificationConfig(title_=None, description_=None, include_in_schema=False),
        calls,
        stream_sub=stream_sub,
    )
    subscriber = ShardStreamsSubscriber(
        config, specification, calls, streams=streams, group=group, consumer=consumer
    )
    Registrator.subscriber(broker, subscriber, persistent=False)
    subscriber.add_call(parser_=_raw_batch, decoder_=_raw_entries, dependencies_=())
    subscriber(handler)
    return subscriber
