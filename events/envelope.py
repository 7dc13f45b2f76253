"""The envelope of a table event: where it sits in its table's stream, why, when, and its hash.

Its three forms (wire, body, stored body) are in ``docs/events.md`` ("The envelope").

>>> from events.domain import CardTurned
>>> e = seal("T1", 3, "c-000042", "c-000042", 1_700_000_000_000, "0" * 64,
...          CardTurned(seat=0, card="7H"))
>>> e.event_id, e.to_stored()
('T1:3', {'type': 'card_turned', 'v': 1, 'seat': 0, 'card': '7H', 'command_id': 'c-000042', \
'time': 1700000000000})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

from pydantic import PrivateAttr, Strict, StringConstraints, ValidationError, model_validator

from engine.codes import Code
from events.base import (
    CommandId,
    ContractError,
    Hex64,
    InvalidContent,
    MalformedJson,
    NonNegative,
    Positive,
    Subject,
    TableId,
    WireModel,
    summarise,
)
from events.chain import GENESIS_HASH, canonical_json, event_body, event_hash
from events.domain import TableEvent
from events.upcast import upcast

__all__ = [
    "BODY_KEYS",
    "STORED_KEYS",
    "Envelope",
    "HashMismatch",
    "event_id",
    "seal",
]

BODY_KEYS = frozenset({"table_id", "version", "command_id", "causation", "time"})
"""The envelope's keys in a body; every other key belongs to the payload."""

STORED_KEYS = frozenset({"command_id", "causation", "time"})
"""The envelope's keys in a stored body (table id and version come from the store's key)."""

CausationId = Annotated[
    str, Strict(), StringConstraints(pattern="^[A-Za-z0-9_-]{1,64}(:[1-9][0-9]{0,11})?$")
]
"""The id of what caused an event: a command id, or an event id ``<table>:<version>``."""

MAX_TIME = 2**53 - 1  # ms since the epoch; JSON numbers stay exact below 2**53


class HashMismatch(ContractError):
    """A stored event's hash is not the hash of its body chained to the previous hash."""

    kind = "bad_hash"
    codes: ClassVar[Mapping[Subject, Code]] = {"event": Code.EVENT_BAD_HASH}


def event_id(table_id: str, version: int) -> str:
    """Return the id of a table's event: ``<table_id>:<version>`` (table ids hold no ``:``)."""
    return f"{table_id}:{version}"


class Envelope(WireModel):
    """One event of a table's stream with its position, cause, time and hash chain links.

    ``event_id`` is always ``<table_id>:<version>``: it may be left out and is filled in.
    ``causation_id`` is the command id for events a command caused, or the id of the event
    that caused this one.  ``time`` is milliseconds since the epoch, set by the service when
    it accepted the command (``events`` never reads a clock).
    """

    table_id: TableId
    version: Positive
    event_id: str = ""
    command_id: CommandId
    causation_id: CausationId
    time: Annotated[NonNegative, Strict()]
    prev_hash: Hex64
    hash: Hex64
    payload: TableEvent

    _written: dict[str, Any] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _fill_in(cls, data: Any) -> Any:
        """Fill in ``event_id`` and lift an old payload dict to the current schema version."""
        if not isinstance(data, Mapping):
            return data
        filled = dict(data)
        if not filled.get("event_id") and "table_id" in filled and "version" in filled:
            filled["event_id"] = f"{filled['table_id']}:{filled['version']}"
        payload = filled.get("payload")
        if isinstance(payload, Mapping) and isinstance(payload.get("type"), str):
            filled["payload"] = upcast(payload)
        return filled

    @model_validator(mode="after")
    def _check_event_id(self) -> Envelope:
        if self.event_id != event_id(self.table_id, self.version):
            raise ValueError(f"event_id must be {event_id(self.table_id, self.version)!r}")
        if self.time > MAX_TIME:
            raise ValueError(f"time must be at most {MAX_TIME} ms")
        return self

    # --- the body and its hash -----------------------------------------------------------------

    def to_body(self) -> dict[str, Any]:
        """Return the flat body the hash covers (see the module docstring for its keys)."""
        body = self.to_stored()
        body["table_id"] = self.table_id
        body["version"] = self.version
        return body

    def to_stored(self) -> dict[str, Any]:
        """Return the body without ``table_id`` and ``version``: what the store keeps."""
        stored: dict[str, Any] = self.payload.model_dump(mode="json")
        stored["command_id"] = self.command_id
        if self.causation_id != self.command_id:
            stored["causation"] = self.causation_id
        stored["time"] = self.time
        return stored

    def stored_json(self) -> bytes:
        """Return the canonical JSON of :meth:`to_stored` (keys sorted, no spaces, UTF-8)."""
        return canonical_json(self.to_stored())

    @property
    def body(self) -> dict[str, Any]:
        """Return the body as it was written: for an upcast event, the old version's body.

        It differs from :meth:`to_body` only for an event read with ``from_body`` or
        ``from_stored`` whose stored body was not in the current canonical form (an older
        schema version, or e.g. ``causation`` written out although equal to ``command_id``).

        With ``version`` and ``hash`` this makes an envelope an ``events.chain.ChainedEvent``,
        so ``verify_chain(envelopes)`` checks a run of them.
        """
        return dict(self._written) if self._written is not None else self.to_body()

    def verify_hash(self) -> bool:
        """Say whether ``hash`` is ``event_hash(prev_hash, body)`` of the body as written."""
        return event_hash(self.prev_hash, self.body) == self.hash

    # --- reading -------------------------------------------------------------------------------

    @classmethod
    def from_body(
        cls,
        body: Mapping[str, Any],
        prev_hash: str | None = None,
        hash: str | None = None,  # the name the store and events.chain use
        *,
        check: bool = True,
    ) -> Envelope:
        """Return the envelope of a flat body (as the store's ``StoredEvent.body`` holds it).

        ``prev_hash`` and ``hash`` default to the body's own ``prev_hash``/``hash`` keys (the
        store's ``StoredEvent.to_dict()`` form).  With ``check`` the hash is verified on the
        body as written, before any upcast.  Raises HashMismatch (``event/bad_hash``),
        UnknownType, UnknownVersion or InvalidContent (``event/invalid``).
        """
        prev = prev_hash if prev_hash is not None else body.get("prev_hash")
        given = hash if hash is not None else body.get("hash")
        written = event_body(body)
        if not isinstance(prev, str) or not isinstance(given, str):
            raise InvalidContent("event", "an event needs its hash and prev_hash")
        if check and (len(prev) != 64 or event_hash(prev, written) != given):
            where = f"{written.get('table_id')}:{written.get('version')}"
            raise HashMismatch("event", f"event {where}: hash does not match its body")
        fields = {k: v for k, v in written.items() if k in BODY_KEYS}
        payload = upcast({k: v for k, v in written.items() if k not in BODY_KEYS})
        data = {
            "table_id": fields.get("table_id"),
            "version": fields.get("version"),
            "command_id": fields.get("command_id"),
            "causation_id": fields.get("causation", fields.get("command_id")),
            "time": fields.get("time"),
            "prev_hash": prev,
            "hash": given,
            "payload": payload,
        }
        try:
            envelope = cls.model_validate(data)
        except ValidationError as exc:
            text, details = summarise(exc)
            raise InvalidContent("event", f"invalid event body: {text}", details) from None
        if envelope.to_body() != written:  # upcast, or written in a non-canonical form
            envelope._written = written
        return envelope

    @classmethod
    def from_stored(
        cls,
        table_id: str,
        version: int,
        stored_body: Mapping[str, Any] | str | bytes,
        hash: str,  # the name the store and events.chain use
        prev_hash: str,
        *,
        check: bool = True,
    ) -> Envelope:
        """Return the envelope of a stored body, restoring ``table_id`` and ``version``.

        ``stored_body`` is the dict or its JSON as the store keeps it.  Raises MalformedJson
        and everything :meth:`from_body` raises.
        """
        if isinstance(stored_body, str | bytes):
            try:
                stored_body = json.loads(stored_body)
            except ValueError as exc:
                raise MalformedJson("event", f"a stored event must be JSON: {exc}") from None
        if not isinstance(stored_body, Mapping):
            raise MalformedJson("event", "a stored event must be a JSON object")
        body = {**stored_body, "table_id": table_id, "version": version}
        return cls.from_body(body, prev_hash, hash, check=check)


def seal(
    table_id: str,
    version: int,
    command_id: str,
    causation_id: str,
    time: int,
    prev_hash: str,
    payload: TableEvent,
) -> Envelope:
    """Return the envelope of a new event, its hash chained to ``prev_hash``.

    ``prev_hash`` is the hash of the table's event ``version - 1`` (``GENESIS_HASH`` for
    version 1).  Raises pydantic's ValidationError for an invalid id, version or time.
    """
    draft = Envelope(
        table_id=table_id,
        version=version,
        command_id=command_id,
        causation_id=causation_id,
        time=time,
        prev_hash=prev_hash,
        hash=GENESIS_HASH,
        payload=payload,
    )
    return draft.model_copy(update={"hash": event_hash(prev_hash, draft.to_body())})
