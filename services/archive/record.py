"""One archived table: what it holds, its file format, and the check of its hash chain.

An archived table is one gzip member of UTF-8 text (``docs/archive.md``): a header line (the
canonical JSON of ``format``, ``table_id``, the head ``version``/``hash``/``status``,
``ended_at``, ``events``, the seat ``tokens`` and the ``views``), then one line per event,
``<hash> <canonical JSON of the body>``, exactly the bytes its hash covers.  :func:`pack` and
:func:`unpack` write and read it; :func:`check_chain` re-derives every hash from the bodies.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from events.chain import GENESIS_HASH, canonical_json, hash_canonical
from services.store.base import Head, StoredEvent
from services.store.codec import _loads, _orjson_exact

__all__ = [
    "FORMAT",
    "ArchiveError",
    "ArchivedTable",
    "canonical_of",
    "check_chain",
    "from_stored",
    "pack",
    "unpack",
]

FORMAT = "conquian-archive/1"
"""The ``format`` of the header line; a reader refuses any other."""
COMPRESS_LEVEL = 6
"""gzip level: 9 saves under 1 % of a table's 6 KB for 1.4 times the time, xz 12 % for 17
times (docs/performance.md, "Archive")."""

_HASH = re.compile(rb"[0-9a-f]{64}")
_HEADER_KEYS = frozenset(
    {"format", "table_id", "version", "hash", "status", "ended_at", "events", "tokens", "views"}
)


class ArchiveError(Exception):
    """An archived table that cannot be read, or that does not check out; ``code`` is stable."""

    code = "archive/error"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ArchivedTable:
    """A finished table as archived: its head, its events as hashed, seat token hashes, views.

    ``events`` holds ``(hash, canonical body)`` for versions 1, 2, 3, …; ``tokens`` the secret
    hash's ``token:<seat>`` fields (SHA-256 of each seat's token, for the gateway's token
    check); ``views`` the stored view parts (``public``, ``seat0``, ``seat1``) as JSON text.
    """

    table_id: str
    version: int
    hash: str
    status: str | None
    ended_at: int | None
    events: tuple[tuple[str, bytes], ...]
    tokens: Mapping[str, str] = field(default_factory=dict)
    views: Mapping[str, str] = field(default_factory=dict)

    @property
    def head(self) -> Head:
        """The head the table had in Redis when it was archived."""
        return Head(self.version, self.hash, self.status)

    def stored_events(self) -> list[StoredEvent]:
        """The events as the store reads them (bodies parsed, each linked to the one before)."""
        out: list[StoredEvent] = []
        prev = GENESIS_HASH
        for version, (digest, canonical) in enumerate(self.events, 1):
            body = _body_of(self.table_id, version, canonical)
            out.append(StoredEvent(self.table_id, version, body, digest, prev))
            prev = digest
        return out


def from_stored(
    table_id: str,
    head: Head,
    events: Sequence[StoredEvent],
    tokens: Mapping[str, str],
    views: Mapping[str, str],
) -> ArchivedTable:
    """Build the archived form of a table read from the store (bodies written canonically)."""
    lines = tuple((e.hash, canonical_of(e.body)) for e in events)
    when = events[-1].body.get("time") if events else None
    ended_at = when if isinstance(when, int) and not isinstance(when, bool) else None
    return ArchivedTable(
        table_id, head.version, head.hash, head.status, ended_at, lines, dict(tokens), dict(views)
    )


def pack(table: ArchivedTable) -> bytes:
    """The archived file of a table: gzip (no name, no time: equal tables, equal bytes)."""
    header = {
        "format": FORMAT,
        "table_id": table.table_id,
        "version": table.version,
        "hash": table.hash,
        "status": table.status,
        "ended_at": table.ended_at,
        "events": len(table.events),
        "tokens": dict(table.tokens),
        "views": dict(table.views),
    }
    parts = [canonical_json(header)]
    parts += [digest.encode("ascii") + b" " + canonical for digest, canonical in table.events]
    text = b"\n".join(parts) + b"\n"
    return gzip.compress(text, COMPRESS_LEVEL, mtime=0)


def unpack(data: bytes) -> ArchivedTable:
    """Read an archived file; raises :class:`ArchiveError` (``archive/corrupt``) when it is not
    one whole archived table (a bad gzip member, a CRC error, a line missing or malformed)."""
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ArchiveError("archive/corrupt", f"not a whole gzip file: {exc}") from exc
    lines = text.split(b"\n")
    if len(lines) < 2 or lines[-1] != b"":
        raise ArchiveError("archive/corrupt", "the file does not end with a whole line")
    header = _header(lines[0])
    body_lines = lines[1:-1]
    if len(body_lines) != header["events"]:
        raise ArchiveError(
            "archive/corrupt",
            f"the header counts {header['events']} events, the file holds {len(body_lines)}",
        )
    events: list[tuple[str, bytes]] = []
    for version, line in enumerate(body_lines, 1):
        digest, sep, canonical = line[:64], line[64:65], line[65:]
        if sep != b" " or not _HASH.fullmatch(digest) or not canonical:
            raise ArchiveError("archive/corrupt", f"event {version}: not '<hash> <body>'")
        events.append((digest.decode("ascii"), canonical))
    return ArchivedTable(
        header["table_id"],
        header["version"],
        header["hash"],
        header["status"],
        header["ended_at"],
        tuple(events),
        header["tokens"],
        header["views"],
    )


def canonical_of(body: Mapping[str, Any]) -> bytes:
    """The canonical JSON of a body (``events.chain.canonical_json``), by orjson where it
    writes the same bytes (``services.store.codec``)."""
    if _orjson_exact(body):
        try:
            return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an int beyond 64 bits, a lone surrogate
            pass
    return canonical_json(body)


def check_chain(table: ArchivedTable, bodies: bool = True) -> None:
    """Re-derive every hash from the bodies and compare the last with the head.

    Each line's body must hash, chained to the one before, to its stored hash, and the head
    must be the last event's version and hash.  With ``bodies`` (a file read from an archive)
    each body must also be canonical JSON (so the audit, which hashes the parsed body again,
    reads the bytes that were hashed) and name the table and its version; without, only the
    hashes are derived (a copy compared byte for byte with bodies written canonically here).
    Raises :class:`ArchiveError` (``archive/broken_chain``, ``archive/head_mismatch``).
    """
    prev = GENESIS_HASH
    for version, (digest, canonical) in enumerate(table.events, 1):
        if bodies:
            _check_body(table.table_id, version, canonical)
        if hash_canonical(prev, canonical) != digest:
            raise ArchiveError(
                "archive/broken_chain", f"event {version}: the hash is not its body's"
            )
        prev = digest
    if table.version != len(table.events) or table.hash != prev:
        raise ArchiveError(
            "archive/head_mismatch",
            f"head {table.version} {table.hash[:12]}… is not the last event "
            f"({len(table.events)} {prev[:12]}…)",
        )


def _check_body(table_id: str, version: int, canonical: bytes) -> None:
    """A body line must be canonical JSON of an object naming this table and version."""
    try:
        body = _body_of(table_id, version, canonical)
    except ArchiveError as exc:
        raise ArchiveError("archive/broken_chain", str(exc)) from exc
    if body.get("table_id") != table_id or body.get("version") != version:
        raise ArchiveError("archive/broken_chain", f"event {version}: the body names another place")
    if canonical_of(body) != canonical:
        raise ArchiveError("archive/broken_chain", f"event {version}: not canonical JSON")


def _body_of(table_id: str, version: int, canonical: bytes) -> dict[str, Any]:
    try:
        body = _loads(canonical.decode("utf-8"))
    except ValueError as exc:
        raise ArchiveError(
            "archive/corrupt", f"table {table_id} event {version}: not JSON ({exc})"
        ) from exc
    if not isinstance(body, dict):
        raise ArchiveError("archive/corrupt", f"table {table_id} event {version}: not an object")
    return body


def _header(line: bytes) -> dict[str, Any]:
    """The header line, checked field by field (raises ``archive/corrupt``)."""
    try:
        header = _loads(line.decode("utf-8"))
    except ValueError as exc:
        raise ArchiveError("archive/corrupt", f"the header is not JSON ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ArchiveError("archive/corrupt", f"not a {FORMAT} file")
    if set(header) != _HEADER_KEYS:
        raise ArchiveError("archive/corrupt", f"header fields {sorted(header)}")
    ok = (
        isinstance(header["table_id"], str)
        and _is_int(header["version"])
        and isinstance(header["hash"], str)
        and _HASH.fullmatch(header["hash"].encode("ascii", "replace")) is not None
        and (header["status"] is None or isinstance(header["status"], str))
        and (header["ended_at"] is None or _is_int(header["ended_at"]))
        and _is_int(header["events"])
        and _str_map(header["tokens"])
        and _str_map(header["views"])
    )
    if not ok:
        raise ArchiveError("archive/corrupt", "a header field has the wrong type")
    return header


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _str_map(value: object) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
