"""The hash chain of a table's events: canonical JSON and SHA-256, standard library only.

:func:`event_hash` chains an event's body to the hash before it (:data:`GENESIS_HASH` for
version 1); :func:`verify_chain` returns the version of the first event whose hash, version or
link is wrong.  How to re-derive a hash by hand: ``docs/events.md`` ("Module notes").

>>> event_hash(GENESIS_HASH, {"type": "table_opened", "v": 1, "table_id": "t1",
...                           "version": 1})[:16]
'8137b429be524ff0'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "GENESIS_HASH",
    "HASH_FIELDS",
    "ChainedEvent",
    "canonical_json",
    "event_body",
    "event_hash",
    "hash_canonical",
    "verify_chain",
]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first event (version 1) of every table."""

HASH_FIELDS = frozenset({"hash", "prev_hash"})
"""Fields of a stored or wire event that the hash does not cover."""

_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)


_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)


def _unencodable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_encode_once: Any = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(
        None, _unencodable, json.encoder.encode_basestring, None, ":", ",", True, False, False
    )
)
"""The C encoder that ``_encoder`` builds at every call, built once (the same settings, but no
circular-reference markers: a cycle ends in RecursionError, and the full encoder then says so)."""


def canonical_json(obj: object) -> bytes:
    """The canonical JSON of ``obj``: keys sorted, no whitespace, UTF-8, no ASCII escaping.

    >>> canonical_json({"b": 1, "a": ["é", None, True]})
    b'{"a":["\\xc3\\xa9",null,true],"b":1}'
    """
    if _encode_once is not None:
        try:
            return "".join(_encode_once(obj, 0)).encode("utf-8")
        except RecursionError:
            pass
    return _encoder.encode(obj).encode("utf-8")


def event_body(event: Mapping[str, object]) -> dict[str, object]:
    """The part of an event dict that the hash covers: everything but :data:`HASH_FIELDS`."""
    return {k: v for k, v in event.items() if k not in HASH_FIELDS}


def event_hash(prev_hash: str, event: Mapping[str, object]) -> str:
    """SHA-256 hex of ``prev_hash`` + ``"\\n"`` + canonical JSON of the event body.

    ``event`` may still hold ``hash`` / ``prev_hash``: they are left out before hashing.
    """
    body: Mapping[str, object] = event
    if not HASH_FIELDS.isdisjoint(event.keys()):
        body = event_body(event)
    return hash_canonical(prev_hash, canonical_json(body))


def hash_canonical(prev_hash: str, canonical: bytes) -> str:
    """:func:`event_hash` of a body already written as its canonical JSON ``canonical``."""
    if len(prev_hash) != 64:
        raise ValueError(f"prev_hash must be 64 hex characters, got {prev_hash!r}")
    digest = hashlib.sha256(prev_hash.encode("ascii"))
    digest.update(b"\n")
    digest.update(canonical)
    return digest.hexdigest()


@runtime_checkable
class ChainedEvent(Protocol):
    """A stored event as :func:`verify_chain` reads it (the store's ``StoredEvent`` is one)."""

    @property
    def version(self) -> int: ...

    @property
    def body(self) -> Mapping[str, object]: ...

    @property
    def hash(self) -> str: ...


def _parts(event: ChainedEvent | Mapping[str, object]) -> tuple[object, Mapping[str, object], str]:
    if isinstance(event, Mapping):
        return event.get("version"), event, str(event.get("hash", ""))
    return event.version, event.body, event.hash


def verify_chain(
    events: Iterable[ChainedEvent | Mapping[str, object]],
    prev_hash: str = GENESIS_HASH,
    first_version: int | None = None,
) -> int | None:
    """Check a run of consecutive events; return the first bad version, or ``None`` if all hold.

    ``events`` are objects with ``version``, ``body`` and ``hash`` (like the store's
    ``StoredEvent``) or flat dicts holding ``version`` and ``hash`` beside the body fields.
    ``prev_hash`` is the hash the first event chains to (genesis for a whole table) and
    ``first_version`` the version it must have (1 when ``prev_hash`` is genesis, otherwise
    whatever comes first).  An event is bad when its version is not the next one, when the body's
    ``version`` field disagrees with it, or when its hash is not ``event_hash(prev, body)``;
    the walk stops there, since everything after it chains to a broken link.  An event whose
    version is not an integer reports ``-1``.
    """
    expected = first_version
    if expected is None and prev_hash == GENESIS_HASH:
        expected = 1
    prev = prev_hash
    for event in events:
        version, body, stored_hash = _parts(event)
        if not isinstance(version, int) or isinstance(version, bool):
            return -1
        if expected is not None and version != expected:
            return version
        if "version" in body and body["version"] != version:
            return version
        if event_hash(prev, body) != stored_hash:
            return version
        prev = stored_hash
        expected = version + 1
    return None
