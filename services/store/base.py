"""The event store's interface, its records and errors, and the event preparation both stores share.

An append applies a command id once and checks the expected version and head hash
(``docs/services.md``, "Module notes").
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from engine.codes import Code, CodedError
from events.chain import GENESIS_HASH, HASH_FIELDS, event_hash, hash_canonical

from .keys import TOKEN_PREFIX, KeySpace, check_table_id

__all__ = [
    "GENESIS_HASH",
    "AppendRequest",
    "AppendResult",
    "BodyEncoder",
    "EventStore",
    "FeedEntry",
    "Head",
    "InvalidEvent",
    "NewEvent",
    "StoreError",
    "StoredEvent",
    "VersionConflict",
    "prepare_encoded",
    "prepare_events",
]

NewEvent: TypeAlias = Mapping[str, Any]
"""An event to append: its JSON-compatible body (``type``, ``v``, payload fields, ``command_id``,
``causation``, ``time``…).  ``table_id`` and ``version`` may be left out (the store fills them
in) or given (they must match); ``hash``/``prev_hash`` are ignored (the store computes them).
A pydantic event becomes one with ``model.model_dump(mode="json", exclude={"hash", …})``."""

TABLE_FIELD = "table_id"
VERSION_FIELD = "version"
KEY_FIELDS = frozenset({TABLE_FIELD, VERSION_FIELD})
"""Body fields the Redis store does not keep in the entry (the key and the id give them)."""


# -- records ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One stored event.  ``body`` is exactly what the hash covers (it includes ``table_id`` and
    ``version``); ``prev_hash`` is the hash of the event before (genesis for version 1)."""

    table_id: str
    version: int
    body: dict[str, Any]
    hash: str
    prev_hash: str

    def to_dict(self) -> dict[str, Any]:
        """The flat wire form: body fields plus ``hash`` and ``prev_hash``."""
        return {**self.body, "hash": self.hash, "prev_hash": self.prev_hash}


@dataclass(frozen=True, slots=True)
class Head:
    """Where a table stands: its last ``version`` (0 when empty), that event's ``hash`` (genesis
    when empty) and the ``status`` last set by an append (``None`` if never set)."""

    version: int = 0
    hash: str = GENESIS_HASH
    status: str | None = None


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Outcome of an append.  ``first_version > last_version`` when no event was appended (a
    recorded rejection).  ``duplicate`` is true when the command id had been seen: then the
    versions, ``last_hash`` and ``result`` are those of the first time, and ``events`` is empty."""

    first_version: int
    last_version: int
    last_hash: str
    duplicate: bool
    result: bytes
    events: tuple[StoredEvent, ...] = ()
    refused: bool = False
    """The command id was another seat's (one of the append's ``taken_by``): ``result`` is the
    ``taken_result`` now recorded for it, and nothing else was written."""


@dataclass(frozen=True, slots=True)
class FeedEntry:
    """One append as the shard feed records it; ``position`` is the feed's stream id."""

    position: str
    table_id: str
    first_version: int
    last_version: int


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """The arguments of one :meth:`EventStore.append`, for :meth:`EventStore.append_many`."""

    table_id: str
    expected_version: int
    expected_hash: str
    command_id: str
    events: Sequence[NewEvent] = ()
    result: bytes | str = b""
    secrets: Mapping[str, str] | None = None
    status: str | None = None
    views: Mapping[str, str] | None = None
    taken_by: Sequence[str] = ()
    taken_result: bytes | str = b""


# -- errors -----------------------------------------------------------------------------------
class StoreError(CodedError):
    """Base of the store's errors; ``code`` is stable."""

    code = Code.STORE_ERROR.value


class VersionConflict(StoreError):
    """The table moved on: its head is not at the expected version and hash."""

    code = Code.STORE_VERSION_CONFLICT.value

    def __init__(
        self,
        table_id: str,
        expected: int,
        actual: int,
        expected_hash: str = "",
        actual_hash: str = "",
    ) -> None:
        what = "version" if expected != actual else "head hash"
        super().__init__(
            f"table {table_id}: expected version {expected}, head is at {actual} ({what} differs)"
        )
        self.table_id = table_id
        self.expected = expected
        self.actual = actual
        self.expected_hash = expected_hash
        self.actual_hash = actual_hash


class InvalidEvent(StoreError, ValueError):
    """An event body the store cannot take (wrong table id or version, not JSON)."""

    code = Code.STORE_INVALID_EVENT.value


# -- preparation shared by both stores --------------------------------------------------------
def _check_hash(value: str, name: str) -> None:
    if len(value) != 64:
        raise ValueError(f"{name} must be 64 hex characters, got {value!r}")
    try:
        bytes.fromhex(value)
    except ValueError:
        raise ValueError(f"{name} must be 64 hex characters, got {value!r}") from None


def check_append_args(
    table_id: str, expected_version: int, expected_hash: str, command_id: str
) -> None:
    """Validate the scalar arguments of an append (raises ``ValueError``)."""
    check_table_id(table_id)
    if not isinstance(expected_version, int) or expected_version < 0:
        raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
    _check_hash(expected_hash, "expected_hash")
    if expected_version == 0 and expected_hash != GENESIS_HASH:
        raise ValueError("an empty table's head hash is the genesis hash")
    if not isinstance(command_id, str) or not 0 < len(command_id) <= 128:
        raise ValueError(f"invalid command id {command_id!r}")


def check_read_many(first: int | None, after: Mapping[str, int] | None) -> Mapping[str, int]:
    """Validate the arguments of ``EventStore.read_many``; return ``after`` (empty for None)."""
    if first is not None and first < 1:
        raise ValueError(f"first must be >= 1, got {first}")
    since = after or {}
    for table_id, done in since.items():
        if done < 0:
            raise ValueError(f"after must be >= 0, got {done} for {table_id!r}")
    return since


BodyEncoder: TypeAlias = Callable[[dict[str, Any]], tuple[bytes, bytes]]
"""Turns a body into (its canonical JSON, a store's own form of it) in one pass."""


def _normalise(new: NewEvent, table_id: str, version: int) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for k, v in new.items():
        if k not in HASH_FIELDS:
            body[k] = v
    given_table = body.setdefault(TABLE_FIELD, table_id)
    given_version = body.setdefault(VERSION_FIELD, version)
    if given_table != table_id:
        raise InvalidEvent(f"event table_id {given_table!r} is not {table_id!r}")
    if given_version != version or isinstance(given_version, bool):
        raise InvalidEvent(f"event version {given_version!r} is not the next one ({version})")
    return body


def prepare_events(
    table_id: str, expected_version: int, expected_hash: str, events: Sequence[NewEvent]
) -> list[StoredEvent]:
    """Number and hash ``events`` after ``expected_version``/``expected_hash``."""
    out: list[StoredEvent] = []
    prev = expected_hash
    for version, new in enumerate(events, expected_version + 1):
        body = _normalise(new, table_id, version)
        try:
            h = event_hash(prev, body)
        except (TypeError, ValueError) as exc:
            raise InvalidEvent(f"event {version} is not canonical JSON: {exc}") from exc
        out.append(StoredEvent(table_id, version, body, h, prev))
        prev = h
    return out


def prepare_encoded(
    table_id: str,
    expected_version: int,
    expected_hash: str,
    events: Sequence[NewEvent],
    encode: BodyEncoder,
) -> list[tuple[StoredEvent, bytes]]:
    """:func:`prepare_events`, with each event's stored form from ``encode``, which also gives
    the canonical JSON that is hashed (one pass over the body instead of two)."""
    out: list[tuple[StoredEvent, bytes]] = []
    prev = expected_hash
    for version, new in enumerate(events, expected_version + 1):
        body = _normalise(new, table_id, version)
        try:
            canonical, stored = encode(body)
        except (TypeError, ValueError) as exc:
            raise InvalidEvent(f"event {version} is not canonical JSON: {exc}") from exc
        h = hash_canonical(prev, canonical)
        out.append((StoredEvent(table_id, version, body, h, prev), stored))
        prev = h
    return out


# -- the interface ----------------------------------------------------------------------------
class EventStore(abc.ABC):
    """An async event store.  :class:`~services.store.redis_store.RedisEventStore` is the real
    one; :class:`~services.store.memory_store.MemoryEventStore` behaves the same in memory."""

    keys: KeySpace

    keeps_views = False
    """Whether readers read the views that appends store (``append(views=...)``): a writer
    builds them only for a store that keeps them."""

    @abc.abstractmethod
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
        """Append one command's events atomically (see the module docstring).

        ``secrets`` are HSET into the table's secret hash and ``status`` into its head in the
        same atomic step (also for a zero-event append; not for a duplicate).  ``views``, the
        table's view parts at the new version (part name -> JSON text, as
        ``services.tables.stored_parts`` stores them), are written in the same step when events
        are appended (not for a zero-event append, a duplicate or a conflict).  When the table
        has recorded one of the command ids ``taken_by`` (the same id, sent by another seat),
        only ``taken_result`` is recorded under ``command_id``, and the result says ``refused``.
        Raises :class:`VersionConflict` when the head is not at
        ``expected_version``/``expected_hash``.
        """

    async def append_many(
        self, requests: Sequence[AppendRequest]
    ) -> list[AppendResult | VersionConflict]:
        """Many appends (to different tables) in one go; each is atomic on its own, and a
        conflict is returned in its place rather than raised."""
        out: list[AppendResult | VersionConflict] = []
        for r in requests:
            try:
                out.append(await self.append_request(r))
            except VersionConflict as exc:
                out.append(exc)
        return out

    async def append_request(self, r: AppendRequest) -> AppendResult:
        """:meth:`append` with the arguments of ``r`` (raises :class:`VersionConflict`)."""
        return await self.append(
            r.table_id,
            r.expected_version,
            r.expected_hash,
            r.command_id,
            r.events,
            r.result,
            secrets=r.secrets,
            status=r.status,
            views=r.views,
            taken_by=r.taken_by,
            taken_result=r.taken_result,
        )

    @abc.abstractmethod
    async def read(
        self, table_id: str, from_version: int = 1, to_version: int | None = None
    ) -> list[StoredEvent]:
        """Events ``from_version..to_version`` (inclusive; to the end when ``None``)."""

    async def read_many(
        self,
        table_ids: Sequence[str],
        first: int | None = None,
        after: Mapping[str, int] | None = None,
    ) -> dict[str, list[StoredEvent]]:
        """Whole tables, many at once; with ``first``, each table's events up to version
        ``first``; with ``after``, only the events after the version it gives a table (a cached
        fold brought up to date).  Raises ValueError for ``first`` below 1 or a version in
        ``after`` below 0."""
        since = check_read_many(first, after)
        return {t: await self.read(t, since.get(t, 0) + 1, first) for t in table_ids}

    @abc.abstractmethod
    async def head(self, table_id: str) -> Head:
        """The table's head; ``Head()`` (version 0, genesis) for a table never written."""

    async def heads(self, table_ids: Sequence[str]) -> list[Head]:
        """The head of each table, in order (:meth:`head` of each, at once where it can)."""
        return [await self.head(t) for t in table_ids]

    async def versions(self, table_ids: Sequence[str]) -> list[int]:
        """The head version of each table (0 for a table never written), in order."""
        return [(await self.head(t)).version for t in table_ids]

    @abc.abstractmethod
    async def read_feed(self, shard: int, after: str = "0-0", count: int = 100) -> list[FeedEntry]:
        """Up to ``count`` feed entries of ``shard`` after position ``after``."""

    @abc.abstractmethod
    def tables(self) -> AsyncIterator[str]:
        """Every table id with a head, in no particular order."""

    @abc.abstractmethod
    async def command_result(self, table_id: str, command_id: str) -> bytes | None:
        """The result recorded for a command on a table, ``None`` if never seen (or, in the
        Redis store, seen at a table whose match ended longer ago than it keeps command ids)."""

    @abc.abstractmethod
    async def secrets(self, table_id: str) -> dict[str, str]:
        """The table's secrets as appends wrote them: its deal seeds and seat-token digests
        (the Redis store keeps the two in separate keys)."""

    async def secrets_many(
        self, table_ids: Sequence[str], *, tokens: bool = True
    ) -> dict[str, dict[str, str]]:
        """The secrets of each table (:meth:`secrets` of each, at once where it can); with
        ``tokens`` False, without the seat-token digests (fields ``token:<seat>``): a fold
        needs only the seeds, and the bots runner's and turn clock's Redis users may not read
        the digests."""
        found = {t: await self.secrets(t) for t in table_ids}
        return found if tokens else {t: seeds_only(s) for t, s in found.items()}

    async def seal(self, table_id: str) -> None:
        """Give back the memory a table's storage keeps for more appends; call it after a
        table's last event (appends still work afterwards, they just cost a reallocation)."""
        check_table_id(table_id)


def seeds_only(secrets: Mapping[str, str]) -> dict[str, str]:
    """``secrets`` without the seat-token digests (fields ``token:<seat>``)."""
    return {k: v for k, v in secrets.items() if not k.startswith(TOKEN_PREFIX)}
