"""The event store on Redis: one Lua call per append, pipelined batch reads and appends.

The client must be a ``redis.asyncio.Redis`` created with ``decode_responses=False``.  Layout,
command ids and sealing: ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from redis.asyncio import Redis

from .base import (
    GENESIS_HASH,
    AppendRequest,
    AppendResult,
    EventStore,
    FeedEntry,
    Head,
    NewEvent,
    StoredEvent,
    VersionConflict,
    check_append_args,
    check_read_many,
    prepare_encoded,
    seeds_only,
)
from .codec import (  # noqa: F401  (SEP, encode_body_exact and the helpers: re-exported)
    SEP,
    _loads,
    _orjson_exact,
    decode_packed,
    encode_body,
    encode_body_exact,
    pack_body,
    unpack_body,
)
from .keys import KeySpace, check_table_id
from .scripts import APPEND_LUA, READ_LUA, SEAL_LUA, ReadOnlyScript, evalsha_many

__all__ = [
    "APPEND_LUA",
    "FINISHED_IDS_MS",
    "READ_LUA",
    "SEAL_LUA",
    "RedisEventStore",
    "command_record",
    "decode_packed",
    "encode_body",
    "pack_body",
    "unpack_body",
]

READ_CHUNK = 5000
"""Entries per read call."""
FINISHED_IDS_MS = 3_600_000
"""How long a table's command ids stay once its match is over (ms)."""

_Call = tuple[list[str], list[bytes | str | int], list[StoredEvent]]
_Entries = list[tuple[bytes, dict[bytes, bytes]]]


def _b(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


async def command_record(
    client: Redis, keys: KeySpace, table_id: str, command_id: str
) -> bytes | None:
    """The record of a command the store applied or refused, ``<first> <last> <result>``, from
    the table's command ids or, for a command recorded before they were kept per table, the
    shard's (one round trip); None when neither holds it."""
    legacy = keys.cmdid_field(table_id, command_id)  # checks the command id
    async with client.pipeline(transaction=False) as pipe:
        pipe.hget(keys.command_ids(table_id), command_id)  # checks the table id
        pipe.hget(keys.cmdids(keys.shard_of(table_id)), legacy)
        mine, older = await pipe.execute()
    raw = mine if mine is not None else older
    return None if raw is None else _b(raw)


def _head(reply: list[bytes | None]) -> Head:
    """A head from its ``HMGET version hash status``."""
    version, h, status = reply
    if version is None:
        return Head()
    return Head(
        int(version),
        h.decode("ascii") if h else GENESIS_HASH,
        status.decode("utf-8") if status is not None else None,
    )


def _secrets(*hashes: Mapping[Any, Any]) -> dict[str, str]:
    """A table's secrets from the ``HGETALL`` of its secret hash and, when given, of its token
    digests (a digest a store kept in the secret hash before :meth:`KeySpace.tokens` gives way
    to one in the tokens hash)."""
    return {_b(k).decode("utf-8"): _b(v).decode("utf-8") for raw in hashes for k, v in raw.items()}


def _finish_time(r: AppendRequest) -> int:
    """When an append that ends a match happens: its last event's ``time`` (ms), else now."""
    when = r.events[-1].get("time") if r.events else None
    if isinstance(when, int) and not isinstance(when, bool):
        return when
    return int(time.time() * 1000)


class RedisEventStore(EventStore):
    """Event store on Redis (see the module docstring).  ``feed_maxlen`` trims each shard feed
    approximately to that many entries (``None``: never; table streams are never trimmed);
    reads fetch ``read_chunk`` events per round trip; a finished table's command ids stay
    ``finished_ids_ms`` (``None``: for ever)."""

    keeps_views = True

    def __init__(
        self,
        client: Redis,
        keys: KeySpace | None = None,
        *,
        feed_maxlen: int | None = None,
        read_chunk: int = READ_CHUNK,
        finished_ids_ms: int | None = FINISHED_IDS_MS,
    ) -> None:
        pool = getattr(client, "connection_pool", None)
        kwargs: dict[str, Any] = getattr(pool, "connection_kwargs", {}) or {}
        if kwargs.get("decode_responses"):
            raise ValueError("RedisEventStore needs a client with decode_responses=False")
        self.client = client
        self.keys = keys or KeySpace()
        self._script = client.register_script(APPEND_LUA)
        self._seal = client.register_script(SEAL_LUA)
        self._read = ReadOnlyScript(client, READ_LUA)
        if read_chunk < 1:
            raise ValueError("read_chunk must be >= 1")
        self.read_chunk = read_chunk
        self._feed_maxlen = "" if feed_maxlen is None else str(int(feed_maxlen))
        self._by_shard: dict[int, tuple[str, str, str, str]] = {}
        if finished_ids_ms is not None and finished_ids_ms < 1:
            raise ValueError("finished_ids_ms must be >= 1 (None keeps them for ever)")
        self._finished_ids_ms = "" if finished_ids_ms is None else str(int(finished_ids_ms))

    @property
    def script_sha(self) -> str:
        """SHA1 of the append script (what EVALSHA runs)."""
        return str(self._script.sha)

    # -- append -------------------------------------------------------------------------------
    def build_call(self, r: AppendRequest) -> _Call:
        """KEYS and ARGV of the append script for one append, and the events it would store."""
        table_id, expected_hash = r.table_id, r.expected_hash
        check_append_args(table_id, r.expected_version, expected_hash, r.command_id)
        shard = self.keys.shard_of(table_id)
        tag, feed, legacy, sealed = self._shard_keys(shard)
        prefix = f"{tag}:t:{table_id}:"
        keys = [
            prefix + "head",
            prefix + "ev",
            feed,
            prefix + "cmdids",
            prefix + "secret",
            legacy,
            sealed,
            prefix + "tokens",
        ]
        encoded = prepare_encoded(
            table_id, r.expected_version, expected_hash, r.events, encode_body
        )
        last_hash = encoded[-1][0].hash if encoded else expected_hash
        secret_items = list(r.secrets.items()) if r.secrets else []
        args: list[bytes | str | int] = [
            table_id,
            r.command_id,
            r.expected_version,
            expected_hash,
            r.result,
            len(encoded),
            last_hash,
            r.status or "",
            self._feed_maxlen,
            len(secret_items),
            self._finished_ids_ms,
            _finish_time(r) if r.status == "over" else "",
            r.taken_result,
            len(r.taken_by),
            *r.taken_by,
        ]
        for e, stored in encoded:
            args.append(stored)
            args.append(bytes.fromhex(e.hash))
        for k, v in secret_items:
            args.append(k)
            args.append(v)
        if r.views and encoded:
            base = f"{tag}:view:{table_id}:"  # = keys.table_view(table_id, part) for each part
            for part, view in r.views.items():
                keys.append(base + part)
                args.append(view)
        return keys, args, [e for e, _ in encoded]

    def _shard_keys(self, shard: int) -> tuple[str, str, str, str]:
        """A shard's prefix, feed, legacy command ids and finished-table index, built once."""
        known = self._by_shard.get(shard)
        if known is None:
            ks = self.keys
            known = (ks.shard_prefix(shard), ks.feed(shard), ks.cmdids(shard), ks.sealed(shard))
            self._by_shard[shard] = known
        return known

    @staticmethod
    def finish_call(r: AppendRequest, prepared: list[StoredEvent], reply: Any) -> AppendResult:
        """The outcome of one append from the script's reply (raises on a conflict)."""
        code = int(reply[0])
        if code == 0:
            last_hash = prepared[-1].hash if prepared else r.expected_hash
            return AppendResult(
                int(reply[1]), int(reply[2]), last_hash, False, _b(r.result), tuple(prepared)
            )
        if code == 3:  # the command id is another seat's: its refusal recorded
            version = int(reply[1])
            return AppendResult(
                version + 1, version, r.expected_hash, False, _b(r.taken_result), refused=True
            )
        if code == 1:
            last = int(reply[2])
            raw = reply[4]
            last_hash = raw.hex() if last > 0 and raw else GENESIS_HASH
            return AppendResult(int(reply[1]), last, last_hash, True, _b(reply[3]))
        actual_hash = _b(reply[2]).decode("ascii")
        raise VersionConflict(
            r.table_id, r.expected_version, int(reply[1]), r.expected_hash, actual_hash
        )

    async def append(
        self,
        table_id: str,
        expected_version: int,
        expected_hash: str,
        command_id: str,
        events: Sequence[NewEvent] = (),
        result: bytes | str = b"",
        *,
        secrets: Mapping[str, str] | None = None,
        status: str | None = None,
        views: Mapping[str, str] | None = None,
        taken_by: Sequence[str] = (),
        taken_result: bytes | str = b"",
    ) -> AppendResult:
        return await self.append_request(
            AppendRequest(
                table_id,
                expected_version,
                expected_hash,
                command_id,
                events,
                result,
                secrets,
                status,
                views,
                taken_by,
                taken_result,
            )
        )

    async def append_request(self, r: AppendRequest) -> AppendResult:
        keys, args, prepared = self.build_call(r)
        return self.finish_call(r, prepared, await self._script(keys=keys, args=args))

    async def append_many(
        self, requests: Sequence[AppendRequest]
    ) -> list[AppendResult | VersionConflict]:
        """All appends in one pipeline (one round trip); each stays atomic on its own.

        The appends go as plain ``EVALSHA``, the script loaded only when Redis answers NOSCRIPT
        and just those appends sent again (:func:`~services.store.scripts.evalsha_many`).  Any
        other error fails the whole call.
        """
        calls = [self.build_call(r) for r in requests]
        replies = await evalsha_many(self._script, [(keys, args) for keys, args, _ in calls])
        out: list[AppendResult | VersionConflict] = []
        for r, (_, _, prepared), reply in zip(requests, calls, replies, strict=True):
            try:
                out.append(self.finish_call(r, prepared, reply))
            except VersionConflict as exc:
                out.append(exc)
        return out

    # -- reads --------------------------------------------------------------------------------
    async def _read_from(
        self, table_id: str, from_version: int, end: str, out: list[StoredEvent]
    ) -> None:
        """Append events ``from_version..end`` to ``out``, ``read_chunk`` per script call."""
        key = self.keys.events(table_id)
        prev: str | None = GENESIS_HASH if from_version == 1 else None
        start = f"{max(from_version - 1, 1)}-1"
        while True:
            buf = await self._read(keys=[key], args=[start, end, self.read_chunk])
            n, last, prev = decode_packed(table_id, _b(buf), from_version, prev, out)
            if n < self.read_chunk:
                return
            start = f"({last}-1"

    async def read(
        self, table_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        check_table_id(table_id)
        if from_version < 1:
            raise ValueError(f"from_version must be >= 1, got {from_version}")
        out: list[StoredEvent] = []
        if to_version is None or to_version >= from_version:
            end = "+" if to_version is None else f"{to_version}-1"
            await self._read_from(table_id, from_version, end, out)
        return out

    async def read_many(
        self,
        table_ids: Sequence[str],
        first: int | None = None,
        after: Mapping[str, int] | None = None,
    ) -> dict[str, list[StoredEvent]]:
        """Tables, one script call per table, all sent together (the script loaded where a
        node answers NOSCRIPT: :func:`~services.store.scripts.evalsha_many`); with ``first``,
        each table's events up to version ``first`` (one call each); with ``after``, the events
        after the version it gives a table (the call reads that event too, for its hash)."""
        since = check_read_many(first, after)
        if not table_ids:
            return {}
        end = "+" if first is None else f"{first}-1"
        calls: list[tuple[list[str], list[Any]]] = []
        for t in table_ids:
            done = since.get(t, 0)
            start = "-" if done == 0 else f"{done}-1"
            calls.append(([self.keys.events(t)], [start, end, self.read_chunk]))
        replies = await evalsha_many(self._read, calls)
        result: dict[str, list[StoredEvent]] = {}
        for t, buf in zip(table_ids, replies, strict=True):
            events: list[StoredEvent] = []
            done = since.get(t, 0)
            prev = GENESIS_HASH if done == 0 else None
            n, last, _ = decode_packed(t, _b(buf), done + 1, prev, events)
            if n == self.read_chunk:  # a long table: the rest chunk by chunk
                await self._read_from(t, last + 1, end, events)
            result[t] = events
        return result

    async def heads(self, table_ids: Sequence[str]) -> list[Head]:
        """The head of each table, one pipeline of ``HMGET``s (per node on a cluster)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for table_id in table_ids:
                pipe.hmget(self.keys.head(table_id), ["version", "hash", "status"])
            replies = await pipe.execute()
        return [_head(cast(list[bytes | None], reply)) for reply in replies]

    async def head(self, table_id: str) -> Head:
        reply = await self.client.hmget(self.keys.head(table_id), ["version", "hash", "status"])
        return _head(cast(list[bytes | None], reply))

    async def versions(self, table_ids: Sequence[str]) -> list[int]:
        """The head version of each table, one pipeline of ``HGET``s (per node on a cluster)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for table_id in table_ids:
                pipe.hget(self.keys.head(table_id), "version")
            replies = await pipe.execute()
        return [int(v) if v is not None else 0 for v in replies]

    async def read_feed(self, shard: int, after: str = "0-0", count: int = 100) -> list[FeedEntry]:
        start = "-" if after in ("0", "0-0", "") else f"({after}"
        entries = cast(
            _Entries, await self.client.xrange(self.keys.feed(shard), start, "+", count=count)
        )
        return [
            FeedEntry(
                entry_id.decode("ascii"),
                fields[b"t"].decode("utf-8"),
                int(fields[b"f"]),
                int(fields[b"l"]),
            )
            for entry_id, fields in entries
        ]

    async def tables(self) -> AsyncIterator[str]:
        seen: set[str] = set()
        async for key in self.client.scan_iter(
            match=self.keys.head_pattern(), count=1000, _type="HASH"
        ):
            table_id = self.keys.table_of_head(_b(key).decode("utf-8"))
            if table_id is not None and table_id not in seen:
                seen.add(table_id)
                yield table_id

    async def command_result(self, table_id: str, command_id: str) -> bytes | None:
        raw = await command_record(self.client, self.keys, table_id, command_id)
        return None if raw is None else raw.split(b" ", 2)[2]

    async def secrets(self, table_id: str) -> dict[str, str]:
        return (await self.secrets_many([table_id]))[table_id]

    async def secrets_many(
        self, table_ids: Sequence[str], *, tokens: bool = True
    ) -> dict[str, dict[str, str]]:
        """The secrets of each table (its seeds and, with ``tokens``, its token digests), one
        pipeline of ``HGETALL``s; without ``tokens`` the tokens hash is not read."""
        async with self.client.pipeline(transaction=False) as pipe:
            for table_id in table_ids:
                pipe.hgetall(self.keys.secret(table_id))
                if tokens:
                    pipe.hgetall(self.keys.tokens(table_id))
            replies = await pipe.execute()
        if not tokens:  # an older store's digests in the secret hash are left out too
            return {t: seeds_only(_secrets(replies[i])) for i, t in enumerate(table_ids)}
        return {t: _secrets(replies[2 * i], replies[2 * i + 1]) for i, t in enumerate(table_ids)}

    async def seal(self, table_id: str) -> None:
        """Rewrite the table's stream with exact-size nodes (DUMP + RESTORE, one script)."""
        await self._seal(keys=[self.keys.events(table_id)])
