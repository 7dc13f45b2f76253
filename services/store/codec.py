"""The stored form of an event: its body as one ``b`` field, and the framed replies of reads.

The entry encoding (fields ``h`` and ``b``) is in ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from events.chain import canonical_json

from .base import KEY_FIELDS, TABLE_FIELD, VERSION_FIELD, StoredEvent, StoreError

__all__ = [
    "SEP",
    "decode_packed",
    "encode_body",
    "encode_body_exact",
    "pack_body",
    "unpack_body",
]

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
        *columns, p = raw.decode("utf-8").split(_SEP_STR)
        if len(columns) != 5:
            raise ValueError(f"{len(columns) + 1} parts")
        body: dict[str, Any] = _loads("{" + p + "}") if p else {}
        return _with_columns(body, columns, table_id, version)
    except ValueError as exc:  # wrong number of parts, bad UTF-8, JSON or integer
        raise StoreError(f"table {table_id} version {version}: stored body is corrupt") from exc


def _with_columns(
    body: dict[str, Any], columns: Sequence[str], table_id: str, version: int
) -> dict[str, Any]:
    """Put a stored entry's columns (type, v, command id, causation, time) and its key fields
    back into the body parsed from its payload; raises ValueError for a bad integer."""
    t, v, c, k, m = columns
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
    return body


# -- read framing -----------------------------------------------------------------------------
_FRAME = struct.Struct(">BBI")
"""The frame of one entry in a read reply: lengths of the stream id, the hash and the body."""


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
        for (version, h, before, columns), body in zip(rows, bodies, strict=True):
            append(
                StoredEvent(
                    table_id, version, _with_columns(body, columns, table_id, version), h, before
                )
            )
    except (ValueError, struct.error) as exc:  # bad frame, UTF-8, JSON or integer
        raise StoreError(f"table {table_id}: stored events are corrupt ({exc})") from exc
    return n, last, prev
