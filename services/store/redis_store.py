"""The event store on Redis: one Lua call per append, pipelined batch reads and appends.

Layout (see :mod:`services.store.keys`): per table a stream ``…:t:<table>:ev`` with explicit ids
``<version>-1``, a head hash ``…:t:<table>:head`` (``version``, ``hash`` hex, ``status``) and a
secret hash; per shard a feed stream (``t``, ``f``, ``l``) and the hash of processed command ids.
The client computes the hashes with :mod:`events.chain`; the script checks the command id, then
the head version and hash, and writes everything or nothing.

Entry encoding (two fields, the same in every entry, so Redis keeps the field names once per
stream node):

``h``  the 32 raw bytes of the event's SHA-256 (hex in the API);
``b``  the body without ``table_id`` and ``version`` (the key and the stream id give them), as
       six parts joined by the byte 0x1F::

           type 0x1F v 0x1F command_id 0x1F causation 0x1F time 0x1F payload

       ``type``, ``command_id``, ``causation`` are the strings themselves, ``v`` and ``time``
       decimal integers; a part is empty when the body has no such field or its value is not of
       that kind (a non-empty string without 0x1F, an integer) -- the field then stays in
       ``payload``: the canonical JSON of all remaining fields *without* the outer braces.
       Canonical JSON escapes control characters, so 0x1F never occurs raw in the payload and
       the split is unambiguous.  For a typical event this is ~95 bytes instead of ~145 for the
       canonical JSON, which keeps a stored event under 200 bytes of Redis memory.

After a table's last event, :meth:`RedisEventStore.seal` rewrites its stream with exact-size
nodes (DUMP + RESTORE in one script): Redis pre-allocates 4 KiB for the newest node of every
stream, which a finished table would otherwise keep forever.

The client must be a ``redis.asyncio.Redis`` created with ``decode_responses=False``.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from importlib import resources
from typing import Any, cast

import orjson
from redis.asyncio import Redis

from events.chain import canonical_json

from .base import (
    GENESIS_HASH,
    KEY_FIELDS,
    TABLE_FIELD,
    VERSION_FIELD,
    AppendRequest,
    AppendResult,
    EventStore,
    FeedEntry,
    Head,
    NewEvent,
    StoredEvent,
    StoreError,
    VersionConflict,
    check_append_args,
    prepare_encoded,
)
from .keys import KeySpace, check_table_id

__all__ = [
    "APPEND_LUA",
    "READ_LUA",
    "SEAL_LUA",
    "RedisEventStore",
    "decode_packed",
    "encode_body",
    "pack_body",
    "unpack_body",
]

APPEND_LUA: str = resources.files(__package__).joinpath("append.lua").read_text("utf-8")
"""The append script (loaded once with SCRIPT LOAD, run with EVALSHA)."""

SEAL_LUA = """#!lua
local d = redis.call('DUMP', KEYS[1])
if not d then return 0 end
redis.call('RESTORE', KEYS[1], 0, d, 'REPLACE')
return 1
"""
"""Rewrites a stream with exact-size nodes (what :meth:`RedisEventStore.seal` runs)."""

READ_LUA = """#!lua flags=no-writes
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
local out, n, pack = {}, 0, struct.pack
for i = 1, #e do
  local id, f = e[i][1], e[i][2]
  local b, h
  if f[1] == 'b' and f[3] == 'h' then
    b, h = f[2], f[4]
  else
    b, h = '', ''
    for j = 1, #f, 2 do
      if f[j] == 'b' then b = f[j + 1] elseif f[j] == 'h' then h = f[j + 1] end
    end
  end
  out[n + 1] = pack('>BBI', #id, #h, #b)
  out[n + 2] = id
  out[n + 3] = h
  out[n + 4] = b
  n = n + 4
end
return table.concat(out)
"""
"""Reads a range of a table stream as one string (so the client parses one reply, not five per
event): per entry ``>BBI`` (lengths of the stream id, the hash and the stored body), then the id,
the raw hash and the stored body.  KEYS[1] the stream; ARGV start id, end id, COUNT."""

READ_CHUNK = 5000
"""Entries per read call."""

_FRAME = struct.Struct(">BBI")

_Call = tuple[list[str], list[bytes | str | int], list[StoredEvent]]
_Entries = list[tuple[bytes, dict[bytes, bytes]]]

# -- body codec -------------------------------------------------------------------------------
SEP = b"\x1f"
_SEP_STR = "\x1f"


_COLUMN_INDEX = {"type": 0, "v": 1, "command_id": 2, "causation": 3, "time": 4}
_INT_KEYS = frozenset({"v", "time"})
_json_decode = json.JSONDecoder().decode


_LONG_NUMBER = re.compile(r"\d{19}")


def _loads(text: str) -> Any:
    """``json.loads`` of stored JSON, by orjson where it reads the same values: not where a
    number has 19 digits or more (orjson turns some ints beyond 64 bits into floats), nor what
    orjson refuses; the standard library also says what is wrong with corrupt text."""
    if _LONG_NUMBER.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return _json_decode(text)


_encode_str: Callable[[str], str] = json.encoder.encode_basestring


_SCALARS = frozenset({str, int, bool, type(None)})
_SEQUENCES = frozenset({list, tuple})
_SORTED = orjson.OPT_SORT_KEYS


def _orjson_exact(body: Mapping[str, Any]) -> bool:
    """Say whether orjson writes ``body`` exactly as ``canonical_json`` does: string keys,
    values scalars (no floats: the two print some differently) or lists of scalars or of lists
    of scalars, as every event but ``table_created`` is.  Big ints and lone surrogates, which
    orjson refuses, are left to the caller's ``TypeError``."""
    for k, v in body.items():
        if type(k) is not str:
            return False
        tv = type(v)
        if tv in _SCALARS:
            continue
        if tv not in _SEQUENCES:
            return False
        for item in v:
            if type(item) in _SCALARS:
                continue
            if type(item) not in _SEQUENCES:
                return False
            for inner in item:
                if type(inner) not in _SCALARS:
                    return False
    return True


def encode_body(body: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(canonical JSON of ``body``, its stored form ``b``), the same bytes as
    :func:`events.chain.canonical_json` and :func:`encode_body_exact` (the tests check all
    three agree on arbitrary bodies), by orjson where that is exact."""
    if not _orjson_exact(body):
        return encode_body_exact(body)
    try:
        canonical = orjson.dumps(body, option=_SORTED)
    except TypeError:  # an int beyond 64 bits, a lone surrogate: the exact path says what
        return encode_body_exact(body)
    parts: list[bytes] = [b"", b"", b"", b"", b""]
    rest: dict[str, Any] = {}
    for k, v in body.items():
        i = _COLUMN_INDEX.get(k)
        if i is not None:
            tv = type(v)
            if k in _INT_KEYS:
                if tv is int:
                    parts[i] = int.__repr__(v).encode()
                    continue
            elif tv is str and v and _SEP_STR not in v:
                parts[i] = v.encode("utf-8")
                continue
        elif k in KEY_FIELDS:
            continue
        rest[k] = v
    parts.append(orjson.dumps(rest, option=_SORTED)[1:-1])
    return canonical, SEP.join(parts)


def encode_body_exact(body: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(canonical JSON of ``body``, its stored form ``b``) in one pass over the fields.

    The canonical JSON is built item by item exactly as :func:`events.chain.canonical_json`
    writes it (keys sorted, strings with the same escaping, everything else through
    ``canonical_json`` itself), for any body; :func:`encode_body` takes the quicker way where
    orjson writes the same bytes.
    """
    items: list[str] = []
    rest: list[str] = []
    parts = ["", "", "", "", "", ""]
    for k in sorted(body):
        if type(k) is not str:
            raise TypeError(f"event keys must be strings, got {k!r}")
        v = body[k]
        tv = type(v)
        if tv is str:
            text = _encode_str(v)
        elif tv is int:
            text = int.__repr__(v)
        else:
            text = canonical_json(v).decode("utf-8")
        item = _encode_str(k) + ":" + text
        items.append(item)
        i = _COLUMN_INDEX.get(k)
        if i is not None:
            if k in _INT_KEYS:
                if tv is int:
                    parts[i] = text
                    continue
            elif tv is str and v and _SEP_STR not in v:
                parts[i] = v
                continue
        elif k in KEY_FIELDS:
            continue
        rest.append(item)
    parts[5] = ",".join(rest)
    return ("{" + ",".join(items) + "}").encode("utf-8"), _SEP_STR.join(parts).encode("utf-8")


def pack_body(body: Mapping[str, Any]) -> bytes:
    """The stored form ``b`` of an event body (see the module docstring)."""
    return encode_body(body)[1]


def unpack_body(table_id: str, version: int, raw: bytes) -> dict[str, Any]:
    """The full body (with ``table_id`` and ``version``) from its stored form."""
    try:
        t, v, c, k, m, p = raw.decode("utf-8").split(_SEP_STR)
        body: dict[str, Any] = _loads("{" + p + "}") if p else {}
        if t:
            body["type"] = t
        if v:
            body["v"] = int(v)
        if c:
            body["command_id"] = c
        if k:
            body["causation"] = k
        if m:
            body["time"] = int(m)
    except ValueError as exc:  # wrong number of parts, bad UTF-8, JSON or integer
        raise StoreError(f"table {table_id} version {version}: stored body is corrupt") from exc
    body[TABLE_FIELD] = table_id
    body[VERSION_FIELD] = version
    return body


def _b(value: bytes | str) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else value


def decode_packed(
    table_id: str, buf: bytes, from_version: int, prev: str | None, out: list[StoredEvent]
) -> tuple[int, int, str | None]:
    """Decode a reply of :data:`READ_LUA` into ``out`` (events from ``from_version`` on).

    ``prev`` is the hash before the first event wanted (``None`` when the reply starts with the
    event before it, whose hash is then taken).  Returns the number of entries in the reply,
    the last version seen and the last hash.  All payloads of the reply are parsed by one
    ``json`` call (as one array), which is what makes replay fast.
    """
    n = 0
    pos = 0
    size = len(buf)
    last = 0
    head = _FRAME.unpack_from
    frame = _FRAME.size
    rows: list[tuple[int, str, str, list[str]]] = []
    payloads: list[str] = []
    try:
        while pos < size:
            idlen, hlen, blen = head(buf, pos)
            pos += frame
            version = int(buf[pos : buf.index(b"-", pos, pos + idlen)])
            pos += idlen
            h = buf[pos : pos + hlen].hex()
            pos += hlen
            if version >= from_version:
                if prev is None:
                    raise StoreError(f"table {table_id}: event {from_version - 1} is missing")
                parts = buf[pos : pos + blen].decode("utf-8").split(_SEP_STR)
                if len(parts) != 6:
                    raise ValueError(f"event {version} has {len(parts)} parts")
                payloads.append(parts.pop())
                rows.append((version, h, prev, parts))
            pos += blen
            prev = h
            last = version
            n += 1
        if not rows:
            return n, last, prev
        bodies: list[dict[str, Any]] = _loads("[{" + "},{".join(payloads) + "}]")
        append = out.append
        for (version, h, before, (t, v, c, k, m)), body in zip(rows, bodies, strict=True):
            if t:
                body["type"] = t
            if v:
                body["v"] = int(v)
            if c:
                body["command_id"] = c
            if k:
                body["causation"] = k
            if m:
                body["time"] = int(m)
            body[TABLE_FIELD] = table_id
            body[VERSION_FIELD] = version
            append(StoredEvent(table_id, version, body, h, before))
    except (ValueError, struct.error) as exc:  # bad frame, UTF-8, JSON or integer
        raise StoreError(f"table {table_id}: stored events are corrupt ({exc})") from exc
    return n, last, prev


class RedisEventStore(EventStore):
    """Event store on Redis (see the module docstring).  ``feed_maxlen`` trims each shard feed
    approximately to that many entries (``None``: never; table streams are never trimmed);
    reads fetch ``read_chunk`` events per round trip."""

    def __init__(
        self,
        client: Redis,
        keys: KeySpace | None = None,
        *,
        feed_maxlen: int | None = None,
        read_chunk: int = READ_CHUNK,
    ) -> None:
        pool = getattr(client, "connection_pool", None)
        kwargs: dict[str, Any] = getattr(pool, "connection_kwargs", {}) or {}
        if kwargs.get("decode_responses"):
            raise ValueError("RedisEventStore needs a client with decode_responses=False")
        self.client = client
        self.keys = keys or KeySpace()
        self._script = client.register_script(APPEND_LUA)
        self._seal = client.register_script(SEAL_LUA)
        self._read = client.register_script(READ_LUA)
        if read_chunk < 1:
            raise ValueError("read_chunk must be >= 1")
        self.read_chunk = read_chunk
        self._feed_maxlen = "" if feed_maxlen is None else str(int(feed_maxlen))

    @property
    def script_sha(self) -> str:
        """SHA1 of the append script (what EVALSHA runs)."""
        return str(self._script.sha)

    # -- append -------------------------------------------------------------------------------
    def build_call(
        self,
        table_id: str,
        expected_version: int,
        expected_hash: str,
        command_id: str,
        events: Sequence[NewEvent] = (),
        result: bytes | str = b"",
        secrets: Mapping[str, str] | None = None,
        status: str | None = None,
    ) -> _Call:
        """KEYS and ARGV of the append script for one append, and the events it would store."""
        check_append_args(table_id, expected_version, expected_hash, command_id)
        ks = self.keys
        shard = ks.shard_of(table_id)
        prefix = f"{ks.shard_prefix(shard)}:t:{table_id}:"
        keys = [
            prefix + "head",
            prefix + "ev",
            ks.feed(shard),
            ks.cmdids(shard),
            prefix + "secret",
        ]
        encoded = prepare_encoded(table_id, expected_version, expected_hash, events, encode_body)
        last_hash = encoded[-1][0].hash if encoded else expected_hash
        secret_items = list(secrets.items()) if secrets else []
        args: list[bytes | str | int] = [
            table_id,
            ks.cmdid_field(table_id, command_id),
            expected_version,
            expected_hash,
            result,
            len(encoded),
            last_hash,
            status or "",
            self._feed_maxlen,
            len(secret_items),
        ]
        for e, stored in encoded:
            args.append(stored)
            args.append(bytes.fromhex(e.hash))
        for k, v in secret_items:
            args.append(k)
            args.append(v)
        return keys, args, [e for e, _ in encoded]

    @staticmethod
    def finish_call(
        table_id: str,
        expected_version: int,
        expected_hash: str,
        result: bytes | str,
        prepared: list[StoredEvent],
        reply: Any,
    ) -> AppendResult:
        """The outcome of one append from the script's reply (raises on a conflict)."""
        code = int(reply[0])
        if code == 0:
            last_hash = prepared[-1].hash if prepared else expected_hash
            return AppendResult(
                int(reply[1]), int(reply[2]), last_hash, False, _b(result), tuple(prepared)
            )
        if code == 1:
            last = int(reply[2])
            raw = reply[4]
            last_hash = raw.hex() if last > 0 and raw else GENESIS_HASH
            return AppendResult(int(reply[1]), last, last_hash, True, _b(reply[3]))
        actual_hash = _b(reply[2]).decode("ascii")
        raise VersionConflict(table_id, expected_version, int(reply[1]), expected_hash, actual_hash)

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
    ) -> AppendResult:
        keys, args, prepared = self.build_call(
            table_id, expected_version, expected_hash, command_id, events, result, secrets, status
        )
        reply = await self._script(keys=keys, args=args)
        return self.finish_call(table_id, expected_version, expected_hash, result, prepared, reply)

    async def append_many(
        self, requests: Sequence[AppendRequest]
    ) -> list[AppendResult | VersionConflict]:
        """All appends in one pipeline (one round trip); each stays atomic on its own."""
        if not requests:
            return []
        calls = [
            self.build_call(
                r.table_id,
                r.expected_version,
                r.expected_hash,
                r.command_id,
                r.events,
                r.result,
                r.secrets,
                r.status,
            )
            for r in requests
        ]
        async with self.client.pipeline(transaction=False) as pipe:
            for keys, args, _ in calls:
                await self._script(keys=keys, args=args, client=pipe)
            replies = await pipe.execute()
        out: list[AppendResult | VersionConflict] = []
        for r, (_, _, prepared), reply in zip(requests, calls, replies, strict=True):
            try:
                out.append(
                    self.finish_call(
                        r.table_id, r.expected_version, r.expected_hash, r.result, prepared, reply
                    )
                )
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

    async def read_many(self, table_ids: Sequence[str]) -> dict[str, list[StoredEvent]]:
        """Whole tables, one script call per table, all in one pipeline."""
        if not table_ids:
            return {}
        async with self.client.pipeline(transaction=False) as pipe:
            for t in table_ids:
                await self._read(
                    keys=[self.keys.events(t)], args=["-", "+", self.read_chunk], client=pipe
                )
            replies = await pipe.execute()
        result: dict[str, list[StoredEvent]] = {}
        for t, buf in zip(table_ids, replies, strict=True):
            events: list[StoredEvent] = []
            n, last, _ = decode_packed(t, _b(buf), 1, GENESIS_HASH, events)
            if n == self.read_chunk:  # a long table: the rest chunk by chunk
                await self._read_from(t, last + 1, "+", events)
            result[t] = events
        return result

    async def head(self, table_id: str) -> Head:
        reply = await self.client.hmget(self.keys.head(table_id), ["version", "hash", "status"])
        version, h, status = cast(list[bytes | None], reply)
        if version is None:
            return Head()
        return Head(
            int(version),
            h.decode("ascii") if h else GENESIS_HASH,
            status.decode("utf-8") if status is not None else None,
        )

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
        check_table_id(table_id)
        shard = self.keys.shard_of(table_id)
        raw = await self.client.hget(
            self.keys.cmdids(shard), self.keys.cmdid_field(table_id, command_id)
        )
        if raw is None:
            return None
        return _b(raw).split(b" ", 2)[2]

    async def secrets(self, table_id: str) -> dict[str, str]:
        raw = await self.client.hgetall(self.keys.secret(table_id))
        return {_b(k).decode("utf-8"): _b(v).decode("utf-8") for k, v in raw.items()}

    async def seal(self, table_id: str) -> None:
        """Rewrite the table's stream with exact-size nodes (DUMP + RESTORE, one script)."""
        await self._seal(keys=[self.keys.events(table_id)])
