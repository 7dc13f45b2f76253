"""``conquian audit``: replay a table from its stored events and check everything it claims.

:func:`audit_table` is pure: it takes a table's stored events (anything with ``version``,
``body`` and ``hash``, like the store's ``StoredEvent``) and its head, and returns a
:class:`TableReport`.  It trusts nothing but the published algorithms, and reads no secret: the
seeds come from the table's own ``deal_revealed`` events.  The checks run in this order, and the
first that fails names the table, the version, the event type and a reason code:

1. **chain**: versions run 1, 2, 3, … (``audit/version_gap``); every hash is the SHA-256 of the
   body chained to the hash before (``audit/bad_hash``); a body or a stored ``prev_hash`` that
   places the event elsewhere is ``audit/broken_chain``;
2. **decode**: every body is a valid event of the contract, after upcasting
   (``audit/undecodable``);
3. **deals**: every revealed seed hashes to its deal's commitment, under the same algorithm
   (``audit/commitment_mismatch``); each ``hand_dealt`` holds the cards the seed's deck deals
   (``audit/dealt_card_mismatch``); a finished deal must be revealed (``audit/unrevealed_deal``).
   A deal still running at the end of the table is fine: its seed is secret, so its cards cannot
   be checked yet (the report says so) and its moves are re-decided on the cards as recorded;
4. **re-decide**: the events of each command (they share a ``command_id``) give the command
   (``card_turned`` first: turn, ``meld_made``: take, …); the engine decides it on the state so
   far and the wire events it gives must be the recorded ones, field for field
   (``audit/illegal_move`` when the engine rejects the command, ``audit/turned_card_mismatch``
   when a turned card differs from the deck, ``audit/event_mismatch`` for any other difference);
5. **head**: the head's version, hash and status are those of the last event
   (``audit/head_mismatch``).

The rest of the module reads tables from a store in batches (:func:`audit_store`) and is the
command line.  On Redis, each table is first offered to a fast path (:func:`audit_packed`) that
can only certify a clean table, with the report :func:`audit_table` would give; anything it
cannot certify is read again and audited as above, which names the failure.
``docs/audit.md`` describes all of it with examples.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import os
import re
import struct
import sys
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TextIO

from engine import actions as ea
from engine import events as ee
from engine.cards import ALL_CARDS, Card, format_card
from engine.errors import EngineError
from engine.game import decide, evolve
from engine.state import Deal, Match
from events import domain as wd
from events.base import ContractError
from events.chain import GENESIS_HASH, canonical_json
from events.envelope import BODY_KEYS
from events.fairness import (
    SHUFFLE_ALGORITHM,
    FairnessError,
    deal_context,
    parse_seed,
    shuffle,
    split_deck,
    verify,
)
from events.mapping import rules_from_wire, to_wire
from events.upcast import parse_event

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.store import RedisEventStore
    from services.store.base import EventStore, Head
    from services.store.keys import KeySpace

__all__ = [
    "CODES",
    "AuditSummary",
    "Failure",
    "LoadedTable",
    "StoredLike",
    "TableReport",
    "add_parser",
    "audit_store",
    "audit_table",
    "load_tables",
    "run",
]

# --- reason codes --------------------------------------------------------------------------------

VERSION_GAP = "audit/version_gap"
BAD_HASH = "audit/bad_hash"
BROKEN_CHAIN = "audit/broken_chain"
UNDECODABLE = "audit/undecodable"
COMMITMENT_MISMATCH = "audit/commitment_mismatch"
DEALT_CARD_MISMATCH = "audit/dealt_card_mismatch"
UNREVEALED_DEAL = "audit/unrevealed_deal"
TURNED_CARD_MISMATCH = "audit/turned_card_mismatch"
ILLEGAL_MOVE = "audit/illegal_move"
EVENT_MISMATCH = "audit/event_mismatch"
HEAD_MISMATCH = "audit/head_mismatch"
NO_TABLE = "audit/no_table"

CODES: dict[str, str] = {
    VERSION_GAP: "versions do not run 1, 2, 3, … (an event is missing, doubled or moved)",
    BAD_HASH: "an event's hash is not the hash of its body chained to the one before",
    BROKEN_CHAIN: "an event's body or stored link places it elsewhere in the chain",
    UNDECODABLE: "a body is not a valid event of the contract (after upcasting)",
    COMMITMENT_MISMATCH: "a revealed seed does not hash to its deal's commitment",
    DEALT_CARD_MISMATCH: "a dealt hand is not the one the deal's deck deals",
    UNREVEALED_DEAL: "a finished deal's seed was never revealed",
    TURNED_CARD_MISMATCH: "a turned card is not the next card of the deal's deck",
    ILLEGAL_MOVE: "the engine rejects the command the events record",
    EVENT_MISMATCH: "the engine, re-deciding the command, gives other events",
    HEAD_MISMATCH: "the head's version, hash or status is not that of the last event",
    NO_TABLE: "the store has no such table",
}
"""Every reason code and what it means (``docs/audit.md``)."""


# --- results -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failure:
    """The first bad event of a table: where (version, type), the reason code and a message."""

    table_id: str
    version: int
    event_type: str | None
    code: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.table_id} version {self.version} ({self.event_type or '-'}): "
            f"{self.code}: {self.reason}"
        )

    def as_dict(self) -> dict[str, Any]:
        """Return the failure as JSON-ready values."""
        return {
            "table_id": self.table_id,
            "version": self.version,
            "event_type": self.event_type,
            "code": self.code,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class TableReport:
    """What the audit of one table found: ``failure`` is None when every check held.

    ``events`` is the number of stored events read, ``deals`` the deals started, ``revealed``
    those whose seed was revealed and checked, ``running`` the number of a deal still being
    played (its cards cannot be checked until its seed is revealed) and ``status`` the head's.
    """

    table_id: str
    events: int
    deals: int = 0
    revealed: int = 0
    running: int | None = None
    status: str | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        """Say whether every check held."""
        return self.failure is None

    @property
    def notes(self) -> tuple[str, ...]:
        """Return what the audit could not check, in words."""
        if self.running is None or self.failure is not None:
            return ()
        return (
            f"deal {self.running} is still running: its seed is secret until it ends, so its "
            "dealt and turned cards were not checked against its commitment (its moves were "
            "re-decided on the cards as recorded)",
        )

    def as_dict(self) -> dict[str, Any]:
        """Return the report as JSON-ready values."""
        return {
            "table_id": self.table_id,
            "ok": self.ok,
            "events": self.events,
            "deals": self.deals,
            "revealed": self.revealed,
            "running": self.running,
            "status": self.status,
            "failure": None if self.failure is None else self.failure.as_dict(),
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """Return the report as one line of text."""
        if self.failure is not None:
            return f"FAILED {self.failure}"
        deals = f"{self.deals} deal{'s' if self.deals != 1 else ''}"
        running = (
            f"; deal {self.running} still running, cards not checkable yet" if self.running else ""
        )
        return (
            f"{self.table_id}: ok, {self.events} events, {deals} ({self.revealed} revealed"
            f"{running}), status {self.status or '-'}"
        )


class StoredLike(Protocol):
    """A stored event as the audit reads it (the store's ``StoredEvent`` is one)."""

    @property
    def version(self) -> int: ...

    @property
    def body(self) -> Mapping[str, Any]: ...

    @property
    def hash(self) -> str: ...


class _Failed(Exception):
    """Raised inside the audit at the first bad event; carries the failure."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass(slots=True)
class _Event:
    """A decoded event: version, hash, type, its payload fields, how many, and command id.

    ``payload`` is the stored body itself when it passed the plain checks (``canonical``: its
    envelope keys then come along, ``size`` counts only the payload's own keys), else the dump
    of the parsed and upcast model.  ``model`` is kept for ``table_created``.
    """

    version: int
    hash: str
    type: str
    payload: Mapping[str, Any]
    size: int
    command_id: str
    canonical: bool
    model: wd.TableCreated | None = None

    def same(self, want: Mapping[str, Any]) -> bool:
        """Say whether the payload is exactly ``want`` (a wire dict without envelope keys)."""
        if len(want) != self.size:
            return False
        payload = self.payload
        for key, value in want.items():  # noqa: SIM110 - a loop beats all() on small dicts
            if payload.get(key, _MISSING) != value:
                return False
        return True


_MISSING = object()


# --- step 1: the hash of a body, as events.chain computes it, in fewer steps ---------------------

_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
"""The C encoder behind ``json.dumps``; made once here instead of at every call."""


def _unencodable(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _make_canonical() -> Callable[[object], bytes]:
    """Return a function equal to ``events.chain.canonical_json`` (checked here and in tests)."""
    if _c_make_encoder is not None:
        encode = _c_make_encoder(
            None, _unencodable, json.encoder.encode_basestring, None, ":", ",", True, False, False
        )

        def fast(obj: object) -> bytes:
            return "".join(encode(obj, 0)).encode("utf-8")

        sample = {"b": [1, "é\u2028\x1f", None, True], "a": {"z": 2.5, "y": -1}}
        if fast(sample) == canonical_json(sample):
            return fast
    return canonical_json  # pragma: no cover


canonical = _make_canonical()
"""``events.chain.canonical_json`` without building an encoder at every call."""


def body_hash(prev_hash: str, body: Mapping[str, Any]) -> str:
    """``events.chain.event_hash`` of a stored body (one without ``hash``/``prev_hash``)."""
    return hashlib.sha256(prev_hash.encode("ascii") + b"\n" + canonical(body)).hexdigest()


# --- step 2: decoding without pydantic where a plain check is enough -----------------------------

_CARD_KEY: dict[str, int] = {format_card(c): (c % 10) * 4 + c // 10 for c in ALL_CARDS}
"""Each canonical card text and its place in rank-then-suit order (how events sort cards)."""
_CARD_OF: dict[str, Card] = {format_card(c): c for c in ALL_CARDS}

_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
_CAUSATION = re.compile(r"[A-Za-z0-9_-]{1,64}(:[1-9][0-9]{0,11})?")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ALGORITHM = re.compile(r"[a-z0-9_.-]{1,40}")
_BOT = re.compile(r"[a-z0-9_-]{1,32}")
_MAX_TIME = 2**53 - 1
_ENVELOPE = ("table_id", "version", "command_id", "time")


def _seat(value: object) -> bool:
    return type(value) is int and 0 <= value <= 1


def _card(value: object) -> bool:
    return type(value) is str and value in _CARD_KEY


def _count(value: object, low: int) -> bool:
    return type(value) is int and value >= low


def _hex64(value: object) -> bool:
    return type(value) is str and _HEX64.fullmatch(value) is not None


def _algorithm(value: object) -> bool:
    return type(value) is str and _ALGORITHM.fullmatch(value) is not None


def _sorted_cards(value: object, low: int, high: int) -> bool:
    """A list of ``low..high`` distinct canonical cards in rank-then-suit order."""
    if type(value) is not list or not low <= len(value) <= high:
        return False
    last = -1
    for text in value:
        key = _CARD_KEY.get(text) if type(text) is str else None
        if key is None or key <= last:
            return False
        last = key
    return True


def _table(value: object) -> bool:
    """A table as events write it: sorted melds of 3-10 sorted cards, no card twice."""
    if type(value) is not list or len(value) > 13:
        return False
    seen: set[str] = set()
    last: list[int] = []
    for meld in value:
        if not _sorted_cards(meld, 3, 10):
            return False
        keys = [_CARD_KEY[c] for c in meld]
        if keys <= last or not seen.isdisjoint(meld):
            return False
        seen.update(meld)
        last = keys
    return True


def _scores(value: object) -> bool:
    return type(value) is list and len(value) == 2 and _count(value[0], 0) and _count(value[1], 0)


def _winner(value: object) -> bool:
    return value is None or _seat(value)


def _name(value: object) -> bool:
    return (
        type(value) is str
        and 1 <= len(value) <= 40
        and value.isprintable()
        and value.strip() == value
    )


_Check = Callable[[Mapping[str, Any]], bool]
_FAST_CHECKS: dict[str, _Check] = {
    "card_turned": lambda b: _seat(b["seat"]) and _card(b["card"]),
    "card_refused": lambda b: (
        _seat(b["seat"]) and _card(b["card"]) and type(b["forceable"]) is bool
    ),
    "card_left": lambda b: _seat(b["seat"]) and _card(b["card"]) and type(b["forceable"]) is bool,
    "card_wasted": lambda b: _card(b["card"]),
    "card_discarded": lambda b: _seat(b["seat"]) and _card(b["card"]),
    "force_demanded": lambda b: _seat(b["seat"]),
    "force_waived": lambda b: _seat(b["seat"]),
    "went_out": lambda b: _seat(b["seat"]),
    "resigned": lambda b: _seat(b["seat"]),
    "game_drawn": lambda b: True,
    "meld_made": lambda b: (
        _seat(b["seat"])
        and _card(b["card"])
        and _sorted_cards(b["hand"], 0, 10)
        and _table(b["table"])
    ),
    "hand_melded": lambda b: (
        _seat(b["seat"]) and _sorted_cards(b["hand"], 0, 10) and _table(b["table"])
    ),
    "hand_dealt": lambda b: _seat(b["seat"]) and _sorted_cards(b["cards"], 10, 10),
    "stakes_settled": lambda b: (
        _winner(b["winner"])
        and _count(b["amount"], 0)
        and _scores(b["scores"])
        and _count(b["next_stake"], 1)
    ),
    "match_ended": lambda b: _winner(b["winner"]) and _scores(b["scores"]),
    "deal_started": lambda b: (
        _count(b["number"], 1)
        and _seat(b["dealer"])
        and _count(b["stake"], 1)
        and _hex64(b["commitment"])
        and _algorithm(b["algorithm"])
    ),
    "deal_revealed": lambda b: (
        _count(b["number"], 1) and _hex64(b["seed"]) and _algorithm(b["algorithm"])
    ),
    "player_joined": lambda b: (
        _seat(b["seat"])
        and _name(b["name"])
        and (b["bot"] is None or (type(b["bot"]) is str and _BOT.fullmatch(b["bot"]) is not None))
    ),
}
"""Plain checks of the payload fields of every event type but ``table_created``.  A payload
that passes (with the right keys and ``v``) is exactly what pydantic would accept and write back
unchanged (``tests/services/test_audit.py`` checks it); anything else goes through
``events.upcast.parse_event``, which upcasts, validates and normalises."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """An event type's payload keys (``type``, ``v`` and fields), its version and its check."""

    keys: frozenset[str]
    bare: frozenset[str]
    caused: frozenset[str]
    version: int
    check: _Check


_SHAPES: dict[str, _Shape] = {}
for _kind, _check in _FAST_CHECKS.items():
    _cls = wd.TABLE_EVENT_TYPES[_kind]
    _keys = frozenset(_cls.model_fields)
    _bare = _keys | frozenset(_ENVELOPE)
    _SHAPES[_kind] = _Shape(_keys, _bare, _bare | {"causation"}, _cls.VERSION, _check)


def fast_payload_ok(payload: Mapping[str, Any]) -> bool:
    """Say whether a payload (no envelope keys) passes the plain checks of its type."""
    kind = payload.get("type")
    shape = _SHAPES.get(kind) if type(kind) is str else None
    if shape is None or payload.keys() != shape.keys:
        return False
    v = payload["v"]
    return type(v) is int and v == shape.version and shape.check(payload)


def _payload(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k not in BODY_KEYS}


def _decode(table_id: str, stored: StoredLike, checked_id: str = "") -> _Event:
    """Step 2 for one event: check the envelope fields and the payload (``checked_id`` is a
    command id already found valid: events of one command come one after the other)."""
    body = stored.body
    version = stored.version
    kind = body.get("type")
    command_id = body.get("command_id")
    moment = body.get("time")
    causation = body.get("causation")
    if command_id != checked_id and (type(command_id) is not str or not _ID.fullmatch(command_id)):
        raise _undecodable(table_id, version, kind, f"command_id {command_id!r} is not valid")
    if type(moment) is not int or not 0 <= moment <= _MAX_TIME:
        raise _undecodable(table_id, version, kind, f"time {moment!r} is not valid")
    if causation is not None and (
        type(causation) is not str or not _CAUSATION.fullmatch(causation)
    ):
        raise _undecodable(table_id, version, kind, f"causation {causation!r} is not valid")
    shape = _SHAPES.get(kind) if type(kind) is str else None
    if shape is not None:
        keys = body.keys()
        v = body.get("v")
        if (
            (keys == shape.bare or keys == shape.caused)
            and type(v) is int
            and v == shape.version
            and shape.check(body)
        ):
            return _Event(version, stored.hash, str(kind), body, len(shape.keys), command_id, True)
    try:
        model = parse_event(_payload(body))
    except ContractError as error:
        raise _undecodable(table_id, version, kind, f"{error.code}: {error}") from None
    if isinstance(model, wd.CommandRejected):
        raise _undecodable(table_id, version, kind, "a command_rejected is never stored")
    if isinstance(model, wd.TableCreated):
        try:
            rules_from_wire(model.rules)
        except ValueError as error:
            reason = f"the engine refuses the rules: {error}"
            raise _undecodable(table_id, version, kind, reason) from None
    payload = model.model_dump(mode="json")
    kept = model if isinstance(model, wd.TableCreated) else None
    return _Event(version, stored.hash, model.type, payload, len(payload), command_id, False, kept)


def _undecodable(table_id: str, version: int, kind: object, reason: str) -> _Failed:
    text = kind if type(kind) is str else None
    return _Failed(Failure(table_id, version, text, UNDECODABLE, reason))


# --- the audit -----------------------------------------------------------------------------------


def audit_table(
    table_id: str,
    events: Sequence[StoredLike],
    head: Head | None,
    corrupt: tuple[int, str] | None = None,
) -> TableReport:
    """Audit one table from its stored events (in stream order) and its head.

    ``head`` None skips the head check (a source without heads).  ``corrupt`` is
    ``(version, reason)`` when the store could not even read the body of that version:
    ``events`` then stops before it, and the audit reports it as undecodable once the events
    before it have passed the chain check.
    """
    audit = _Audit(table_id, events, head)
    try:
        audit.read(corrupt)
        audit.check_deals()
        audit.redecide()
        audit.check_head()
    except _Failed as failed:
        return audit.report(failed.failure)
    return audit.report(None)


def _gap(expected: int, version: int) -> str:
    if version == expected + 1:
        return f"version {expected} is missing"
    if version > expected:
        return f"versions {expected} to {version - 1} are missing"
    return f"version {version} comes again after {expected - 1}"


_DEAL_TYPES = frozenset({"deal_started", "hand_dealt", "stakes_settled", "deal_revealed"})


class _Audit:
    """One table's audit, step by step (see the module docstring)."""

    def __init__(self, table_id: str, stored: Sequence[StoredLike], head: Head | None) -> None:
        self.table_id = table_id
        self.stored = stored
        self.head = head
        self.events: list[_Event] = []
        self.deal_events: list[int] = []
        self.joins: list[int] = []
        self.decks: dict[int, tuple[Card, ...]] = {}
        self.reveals: dict[int, Mapping[str, Any]] = {}
        self.deals = 0
        self.running: int | None = None
        self.status: str | None = None

    def report(self, failure: Failure | None) -> TableReport:
        status = self.head.status if self.head is not None else self.status
        return TableReport(
            self.table_id,
            len(self.stored),
            self.deals,
            len(self.reveals),
            self.running,
            status,
            failure,
        )

    def fail(self, version: int, kind: str | None, code: str, reason: str) -> _Failed:
        return _Failed(Failure(self.table_id, version, kind, code, reason))

    def fail_at(self, event: _Event, code: str, reason: str) -> _Failed:
        return self.fail(event.version, event.type, code, reason)

    # -- steps 1 and 2 ---------------------------------------------------------------------------

    def read(self, corrupt: tuple[int, str] | None) -> None:
        """Check the chain (step 1) and decode the bodies (step 2) in one pass; a body that
        does not decode is reported only once the whole chain has held."""
        table_id = self.table_id
        events = self.events
        deal_events = self.deal_events
        joins = self.joins
        undecodable: _Failed | None = None
        checked_id = ""
        prev = GENESIS_HASH
        expected = 1
        for stored in self.stored:
            version = stored.version
            body = stored.body
            if version != expected:
                raise self.fail(version, _type_of(body), VERSION_GAP, _gap(expected, version))
            if body.get("version") != version or body.get("table_id") != table_id:
                raise self.fail(
                    version,
                    _type_of(body),
                    BROKEN_CHAIN,
                    f"the body is written for table {body.get('table_id')!r} version "
                    f"{body.get('version')!r}",
                )
            link = getattr(stored, "prev_hash", prev)
            if link != prev:
                raise self.fail(
                    version,
                    _type_of(body),
                    BROKEN_CHAIN,
                    f"it links to {str(link)[:12]}…, not to the hash of version {version - 1} "
                    f"({prev[:12]}…)",
                )
            try:
                computed = body_hash(prev, body)
            except (TypeError, ValueError) as error:
                raise self.fail(
                    version, _type_of(body), BAD_HASH, f"the body cannot be hashed: {error}"
                ) from None
            if computed != stored.hash:
                raise self.fail(
                    version,
                    _type_of(body),
                    BAD_HASH,
                    f"stored hash {stored.hash[:12]}…, but the body chained to version "
                    f"{version - 1} hashes to {computed[:12]}… (this event, or the one before "
                    "it, was changed)",
                )
            prev = computed
            expected += 1
            if undecodable is not None:
                continue
            try:
                event = _decode(table_id, stored, checked_id)
            except _Failed as failed:
                undecodable = failed
                continue
            checked_id = event.command_id
            kind = event.type
            if kind in _DEAL_TYPES:
                deal_events.append(len(events))
            elif kind == "player_joined":
                joins.append(len(events))
            events.append(event)
        if undecodable is not None:
            raise undecodable
        if corrupt is not None:
            version, reason = corrupt
            raise self.fail(version, None, UNDECODABLE, reason)

    # -- step 3 ----------------------------------------------------------------------------------

    def check_deals(self) -> None:
        started: dict[int, int] = {}
        dealt: dict[int, list[_Event]] = {}
        settled: dict[int, _Event] = {}
        revealed: dict[int, _Event] = {}
        current = 0
        events = self.events
        for i in self.deal_events:
            event = events[i]
            kind = event.type
            if kind == "deal_started":
                current = event.payload["number"]
                if current in started:
                    raise self.fail_at(event, EVENT_MISMATCH, f"deal {current} starts twice")
                started[current] = i
            elif kind == "hand_dealt":
                dealt.setdefault(current, []).append(event)
            elif kind == "stakes_settled":
                if current:
                    settled.setdefault(current, event)
            else:
                number = event.payload["number"]
                if number in revealed:
                    raise self.fail_at(event, EVENT_MISMATCH, f"deal {number} is revealed twice")
                revealed[number] = event
                start = started.get(number)
                self._check_reveal(None if start is None else events[start], event)
        self.deals = len(started)
        self.reveals = {number: event.payload for number, event in revealed.items()}
        for number, i in started.items():
            hands = dealt.get(number, [])
            if number in revealed:
                self._check_hands(events[i], hands, self.decks[number])
            elif number in settled:
                raise self.fail_at(
                    settled[number],
                    UNREVEALED_DEAL,
                    f"deal {number} is settled but its seed was never revealed",
                )
            else:
                self.running = number
                self.decks[number] = self._recorded_deck(i, hands)

    def _check_reveal(self, start: _Event | None, reveal: _Event) -> None:
        number = reveal.payload["number"]
        if start is None:
            raise self.fail_at(
                reveal, COMMITMENT_MISMATCH, f"deal {number} is revealed but was never committed"
            )
        seed_text = reveal.payload["seed"]
        algorithm = reveal.payload["algorithm"]
        committed = start.payload["commitment"]
        if algorithm != start.payload["algorithm"]:
            raise self.fail_at(
                reveal,
                COMMITMENT_MISMATCH,
                f"deal {number} was committed under {start.payload['algorithm']!r} "
                f"(version {start.version}) but revealed under {algorithm!r}",
            )
        seed = parse_seed(seed_text)
        if not verify(seed, committed):
            raise self.fail_at(
                reveal,
                COMMITMENT_MISMATCH,
                f"SHA-256 of the seed {seed_text[:12]}… is not the commitment {committed[:12]}… "
                f"of deal {number} (version {start.version})",
            )
        try:
            self.decks[number] = shuffle(seed, algorithm, deal_context(self.table_id, number))
        except FairnessError as error:
            raise self.fail_at(reveal, COMMITMENT_MISMATCH, str(error)) from None

    def _check_hands(self, start: _Event, hands: list[_Event], deck: tuple[Card, ...]) -> None:
        dealer = start.payload["dealer"]
        non_dealer, dealer_cards, _ = split_deck(deck)
        expected = {1 - dealer: _wire_cards(non_dealer), dealer: _wire_cards(dealer_cards)}
        for event in hands:
            seat = event.payload["seat"]
            want = expected[seat]
            got = event.payload["cards"]
            if got != want:
                wrong = " ".join(c for c in got if c not in want)
                missing = " ".join(c for c in want if c not in got)
                raise self.fail_at(
                    event,
                    DEALT_CARD_MISMATCH,
                    f"seat {seat} is dealt {wrong} where the deck of deal "
                    f"{start.payload['number']} deals {missing}",
                )

    def _recorded_deck(self, start: int, hands: list[_Event]) -> tuple[Card, ...]:
        """The deck of a running deal as far as its events show it: the dealt hands, then the
        turned cards in order, then the cards nobody has seen (in card order)."""
        events = self.events
        started = events[start]
        dealer = started.payload["dealer"]
        by_seat = {e.payload["seat"]: e for e in hands}
        seen: set[Card] = set()
        cards: dict[int, list[Card]] = {}
        for seat in (0, 1):
            event = by_seat.get(seat)
            if event is None:
                raise self.fail_at(started, DEALT_CARD_MISMATCH, f"seat {seat} is dealt no hand")
            cards[seat] = [_CARD_OF[c] for c in event.payload["cards"]]
            if not seen.isdisjoint(cards[seat]):
                raise self.fail_at(event, DEALT_CARD_MISMATCH, "both hands hold the same card")
            seen.update(cards[seat])
        deck: list[Card] = []
        for a, b in zip(cards[1 - dealer], cards[dealer], strict=True):
            deck += (a, b)
        for event in events[start:]:
            if event.type != "card_turned":
                continue
            card = _CARD_OF[event.payload["card"]]
            if card in seen:
                raise self.fail_at(
                    event,
                    TURNED_CARD_MISMATCH,
                    f"{event.payload['card']} was dealt or turned before in this deal",
                )
            seen.add(card)
            deck.append(card)
        deck += [c for c in ALL_CARDS if c not in seen]
        return tuple(deck)

    # -- step 4 ----------------------------------------------------------------------------------

    def redecide(self) -> None:
        events = self.events
        joins = self.joins
        count = len(events)
        match: Match | None = None
        seated = [False, False]
        commands: dict[str, int] = {}
        start = 0
        join = 0
        while start < count:
            first = events[start]
            command_id = first.command_id
            end = start + 1
            while end < count and events[end].command_id == command_id:
                end += 1
            if commands.setdefault(command_id, first.version) != first.version:
                raise self.fail_at(
                    first,
                    EVENT_MISMATCH,
                    f"command {command_id} was applied before, at version {commands[command_id]}",
                )
            group = events[start:end]
            if join < len(joins) and joins[join] < end:
                group = self._seat_players(group, seated, match is not None)
                while join < len(joins) and joins[join] < end:
                    join += 1
            if group:
                match = self._redecide_group(match, group, seated)
            start = end

    def _seat_players(self, group: list[_Event], seated: list[bool], created: bool) -> list[_Event]:
        """Seat the players a command's ``player_joined`` events name; return the other events.

        A join's events begin with its one ``player_joined``; a ``create_table`` seats its bots
        right after ``table_created``.
        """
        rest: list[_Event] = []
        opens = group[0].type == "table_created"
        for i, event in enumerate(group):
            if event.type != "player_joined":
                rest.append(event)
                continue
            if i > 0 and not (opens and all(e.type == "player_joined" for e in group[1:i])):
                raise self.fail_at(
                    event, EVENT_MISMATCH, "a player joins in the middle of a command"
                )
            if not (created or opens):
                raise self.fail_at(event, EVENT_MISMATCH, "a player joins a table not yet created")
            seat = event.payload["seat"]
            if seated[seat]:
                raise self.fail_at(event, EVENT_MISMATCH, f"seat {seat} is already taken")
            seated[seat] = True
        return rest

    def _redecide_group(
        self, match: Match | None, group: list[_Event], seated: list[bool]
    ) -> Match | None:
        first = group[0]
        command = self._command_of(first, seated)
        try:
            decided = decide(match, command)
        except EngineError as error:
            raise self.fail_at(first, ILLEGAL_MOVE, f"{error.code}: {error}") from None
        number = match.deal.number if match is not None and match.deal is not None else 0
        at = 0
        size = len(group)
        for engine_event in decided:
            kind = type(engine_event)
            if kind is ee.DealStarted or kind is ee.MatchStarted:
                self.status = "playing" if kind is ee.DealStarted else "open"
                for want in self._wire(engine_event, first):
                    if at >= size:
                        self._short(group, want)
                    if not group[at].same(want):
                        self._mismatch(group[at], want)
                    at += 1
            else:
                if at >= size:
                    self._short(group, _dump(to_wire(engine_event))[0])
                got = group[at]
                if not same_event(got, engine_event):
                    self._mismatch(got, _dump(to_wire(engine_event))[0])
                at += 1
                if kind is ee.StakesSettled and number in self.reveals:
                    want = _payload(self.reveals[number])
                    if at >= size:
                        self._short(group, want)
                    if not group[at].same(want):
                        self._mismatch(group[at], want)
                    at += 1
                elif kind is ee.MatchEnded:
                    self.status = "over"
            match = evolve(match, engine_event)
        if at < size:
            raise self.fail_at(
                group[at], EVENT_MISMATCH, "the command gives no such event: it is one too many"
            )
        return match

    def _short(self, group: list[_Event], want: Mapping[str, Any]) -> NoReturn:
        raise self.fail_at(
            group[-1],
            EVENT_MISMATCH,
            f"the command's events end here, but the engine goes on with {_compact(want)}",
        )

    def _mismatch(self, got: _Event, want: Mapping[str, Any]) -> NoReturn:
        if got.type == "card_turned" and want["type"] == "card_turned":
            raise self.fail_at(
                got,
                TURNED_CARD_MISMATCH,
                f"seat {want['seat']} turns {want['card']} from the deal's deck, "
                f"the table says {got.payload['card']}",
            )
        raise self.fail_at(
            got,
            EVENT_MISMATCH,
            f"the engine gives {_compact(want)}, the table says {_compact(_payload(got.payload))}",
        )

    def _command_of(self, first: _Event, seated: list[bool]) -> ea.Command:
        payload = first.payload
        kind = first.type
        if kind == "table_created":
            created = first.model
            assert created is not None  # kept by _decode
            rules = rules_from_wire(created.rules)
            return ea.NewMatch(rules, created.first_dealer, created.deals, created.target_score)
        if kind == "deal_started":
            return ea.StartDeal(self.decks[payload["number"]])
        if kind == "resigned":
            action: ea.Action | None = None
        else:
            action = _action_of(kind, payload)
            if action is None:
                raise self.fail_at(first, EVENT_MISMATCH, f"no command starts with a {kind}")
        seat = payload["seat"]
        if not seated[seat]:
            raise self.fail_at(first, ILLEGAL_MOVE, f"seat {seat} acts but nobody sits there")
        return ea.Resign(seat) if action is None else ea.Play(seat, action)

    def _wire(self, engine_event: ee.Event, first: _Event) -> list[dict[str, Any]]:
        """The wire events of ``DealStarted`` (with the recorded commitment) and
        ``MatchStarted`` (with the recorded turn clock)."""
        return _wire_of(engine_event, first.payload)

    # -- step 5 ----------------------------------------------------------------------------------

    def check_head(self) -> None:
        head = self.head
        if head is None:
            return
        last = self.events[-1] if self.events else None
        version = last.version if last else 0
        digest = last.hash if last else GENESIS_HASH
        problems = []
        if head.version != version:
            problems.append(f"version {head.version}, the last event is {version}")
        if head.hash != digest:
            problems.append(f"hash {head.hash[:12]}…, the last event's is {digest[:12]}…")
        if head.status != self.status:
            problems.append(f"status {head.status!r}, the events give {self.status!r}")
        if problems:
            raise self.fail(
                version, last.type if last else None, HEAD_MISMATCH, "head " + "; ".join(problems)
            )


# --- helpers of the audit ------------------------------------------------------------------------


def _type_of(body: Mapping[str, Any]) -> str | None:
    kind = body.get("type")
    return kind if type(kind) is str else None


def _wire_cards(cards: Iterable[Card]) -> list[str]:
    return [format_card(c) for c in sorted(cards, key=lambda c: (c % 10, c // 10))]


def _mask(cards: Iterable[str]) -> int:
    mask = 0
    for text in cards:
        mask |= 1 << _CARD_OF[text]
    return mask


def _melds(table: Iterable[Iterable[str]]) -> tuple[int, ...]:
    """``events.mapping.table_from_wire`` of a table of canonical cards."""
    return tuple(sorted(_mask(meld) for meld in table))


_TURN = ea.TurnCard()
_REFUSE = ea.Refuse()
_LEAVE = ea.Leave()
_FORCE = ea.Force()
_WAIVE = ea.Waive()


def _action_of(kind: str, payload: Mapping[str, Any]) -> ea.Action | None:
    """The action a move's first event records (None for events no move starts with)."""
    if kind == "card_turned":
        return _TURN
    if kind == "card_refused":
        return _REFUSE
    if kind == "card_left":
        return _LEAVE
    if kind == "meld_made":
        return ea.Take(_mask(payload["hand"]), _melds(payload["table"]))
    if kind == "card_discarded":
        return ea.Discard(_CARD_OF[payload["card"]])
    if kind == "force_demanded":
        return _FORCE
    if kind == "force_waived":
        return _WAIVE
    if kind == "hand_melded":
        return ea.MeldHand(_mask(payload["hand"]), _melds(payload["table"]))
    return None


def _dump(events: Iterable[wd.EventModel]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json") for e in events]


def _turned(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return t == "card_turned" and p["seat"] == e.seat and _CARD_OF[p["card"]] == e.card


def _declined(t: str, p: Mapping[str, Any], e: Any) -> bool:
    how = _DECLINES.get(t)
    return (
        how is e.how
        and p["seat"] == e.seat
        and _CARD_OF[p["card"]] == e.card
        and p["forceable"] == e.forceable
    )


def _wasted(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return t == "card_wasted" and _CARD_OF[p["card"]] == e.card


def _meld_made(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return (
        t == "meld_made"
        and p["seat"] == e.seat
        and _CARD_OF[p["card"]] == e.card
        and _mask(p["hand"]) == e.hand
        and _melds(p["table"]) == tuple(sorted(e.table))
    )


def _hand_melded(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return (
        t == "hand_melded"
        and p["seat"] == e.seat
        and _mask(p["hand"]) == e.hand
        and _melds(p["table"]) == tuple(sorted(e.table))
    )


def _discarded(t: str, p: Mapping[str, Any], e: Any) -> bool:
    return t == "card_discarded" and p["seat"] == e.seat and _CARD_OF[p["card"]] == e.card


def _settled(t: str, p: Mapping[str, Any], e: Any) -> bool:
    if t != "stakes_settled":
        return False
    scores = p["scores"]
    return bool(
        p["winner"] == e.winner
        and p["amount"] == e.amount
        and scores[0] == e.scores[0]
        and scores[1] == e.scores[1]
        and p["next_stake"] == e.next_stake
    )


def _ended(t: str, p: Mapping[str, Any], e: Any) -> bool:
    if t != "match_ended":
        return False
    scores = p["scores"]
    return bool(p["winner"] == e.winner and scores[0] == e.scores[0] and scores[1] == e.scores[1])


def _seat_only(kind: str) -> Callable[[str, Mapping[str, Any], Any], bool]:
    def same(t: str, p: Mapping[str, Any], e: Any) -> bool:
        return t == kind and p["seat"] == e.seat

    return same


_DECLINES = {"card_refused": ee.Decline.REFUSED, "card_left": ee.Decline.LEFT}
_SAME: dict[type, Callable[[str, Mapping[str, Any], Any], bool]] = {
    ee.CardTurned: _turned,
    ee.CardDeclined: _declined,
    ee.CardWasted: _wasted,
    ee.MeldMade: _meld_made,
    ee.CardDiscarded: _discarded,
    ee.StakesSettled: _settled,
    ee.MatchEnded: _ended,
    ee.WentOut: _seat_only("went_out"),
    ee.GameDrawn: lambda t, p, e: t == "game_drawn",
    ee.ForceDemanded: _seat_only("force_demanded"),
    ee.ForceWaived: _seat_only("force_waived"),
    ee.HandMelded: _hand_melded,
    ee.Resigned: _seat_only("resigned"),
}
"""For each engine event of a move, whether a canonical payload is its wire form: comparing
the fields is comparing ``to_wire``'s dump, since canonical payloads map to engine events one
to one (``tests/services/test_audit.py`` checks both ways), without building the dump."""


def same_event(got: _Event, engine_event: ee.Event) -> bool:
    """Say whether a recorded event is the wire form of an engine event (``to_wire``)."""
    same = _SAME.get(type(engine_event))
    if same is not None and got.canonical:
        return same(got.type, got.payload, engine_event)
    return got.same(_dump(to_wire(engine_event))[0])


def _compact(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


# --- the fast path: a clean table certified from its stored text ---------------------------------
#
# Nearly every table is clean, so the audit first tries to certify a table straight from what
# Redis holds (``audit_packed``); whatever it cannot certify -- a failure, or anything unusual --
# is read again by the store and goes through the full audit above, which names the failure.  A
# table certified here is one the full audit passes, with the same report (the tests run both
# over clean and tampered tables).  The fast path reads each body as the store writes it
# (``services/store/redis_store.py``: ``type``, ``v``, ``command_id``, ``causation``, ``time``,
# then the canonical JSON of the other fields without braces, the "payload text") and checks
# the same things in cheaper terms:
#
# * a move's events (the wire types of the engine's move events, ``_TEXT_OF``) are not decoded:
#   each payload text must be, character for character, the canonical wire text of the engine's
#   event, which is a valid event of the contract; so are a deal's ``deal_started`` and
#   ``hand_dealt`` (``_deal_texts``), and a ``deal_revealed`` or ``player_joined`` must pass the
#   plain checks and be written as canonical JSON writes it;
# * so the canonical JSON of such a body is its payload text with the envelope fields spliced in
#   at their sorted places (``_builder``), and it is hashed without being encoded again;
# * a ``table_created`` (one a table) is decoded and hashed exactly as the full audit does;
# * a move's command is read from as little as it needs (the seat that acts is the seat to act:
#   the engine's first event names it, and it must be the recorded one).

_BuildHashed = Callable[[str, str, str, str, str, int, str], str]


def _builder(kind: str, version: int, keys: Iterable[str]) -> _BuildHashed | None:
    """For a move's wire type, a function writing what its hash covers: the hash before, a
    newline and the canonical JSON of the body, from the envelope fields and the payload text
    (``prev, caused, command_id, table_id, time, version, text``; ``caused`` is
    ``"causation":"…",`` or empty).  None if a field sorts among the envelope fields."""
    fields = sorted(set(keys) - {"type", "v"})
    a = [k for k in fields if k < "causation"]  # then causation and command_id
    b = [k for k in fields if "command_id" < k < "table_id"]  # then table_id … version
    c = [k for k in fields if k > "version"]
    tv = f',"type":"{kind}","v":{version},"version":'
    if len(a) + len(b) + len(c) != len(fields) or (c and not b):
        return None
    if not a and not b:  # no payload fields (c is then empty too)

        def none(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            return f'{prev}\n{{{caused}"command_id":"{cid}","table_id":"{tid}","time":{at}{tv}{n}}}'

        return none
    if not a and not c:

        def b_only(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            return (
                f'{prev}\n{{{caused}"command_id":"{cid}",{p},"table_id":"{tid}","time":{at}'
                f"{tv}{n}}}"
            )

        return b_only
    if not b:

        def a_only(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            return (
                f'{prev}\n{{{p},{caused}"command_id":"{cid}","table_id":"{tid}","time":{at}'
                f"{tv}{n}}}"
            )

        return a_only
    kb = f',"{b[0]}":'
    kc = f',"{c[0]}":' if c else ""
    if not c:

        def ab(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            j = p.find(kb)
            return (
                f'{prev}\n{{{p[:j]},{caused}"command_id":"{cid}"{p[j:]},"table_id":"{tid}",'
                f'"time":{at}{tv}{n}}}'
            )

        return ab
    if not a:

        def bc(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            k = p.find(kc)
            return (
                f'{prev}\n{{{caused}"command_id":"{cid}",{p[:k]},"table_id":"{tid}",'
                f'"time":{at}{tv}{n}{p[k:]}}}'
            )

        return bc

    def abc(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
        j = p.find(kb)
        k = p.find(kc, j)
        return (
            f'{prev}\n{{{p[:j]},{caused}"command_id":"{cid}"{p[j:k]},"table_id":"{tid}",'
            f'"time":{at}{tv}{n}{p[k:]}}}'
        )

    return abc


_CARD_JSON: dict[Card, str] = {c: json.dumps(format_card(c)) for c in ALL_CARDS}
_WIRE_ORDER: tuple[Card, ...] = tuple(sorted(ALL_CARDS, key=lambda c: (c % 10, c // 10)))
_CARDS_TEXT: dict[int, str] = {}
_MELD_TEXT: dict[int, tuple[tuple[int, ...], str]] = {}
_CACHE_SIZE = 1 << 16


def _cards_text(mask: int) -> str:
    """The canonical JSON of a set of cards as the wire writes it (rank, then suit)."""
    text = _CARDS_TEXT.get(mask)
    if text is None:
        text = "[" + ",".join([_CARD_JSON[c] for c in _WIRE_ORDER if mask >> c & 1]) + "]"
        if len(_CARDS_TEXT) >= _CACHE_SIZE:
            _CARDS_TEXT.clear()
        _CARDS_TEXT[mask] = text
    return text


def _table_text(table: Iterable[int]) -> str:
    """The canonical JSON of a table as the wire writes it (melds ordered by their cards)."""
    melds = []
    for meld in table:
        info = _MELD_TEXT.get(meld)
        if info is None:
            keys = tuple((c % 10) * 4 + c // 10 for c in _WIRE_ORDER if meld >> c & 1)
            info = (keys, _cards_text(meld))
            if len(_MELD_TEXT) >= _CACHE_SIZE:
                _MELD_TEXT.clear()
            _MELD_TEXT[meld] = info
        melds.append(info)
    melds.sort()
    return "[" + ",".join([text for _, text in melds]) + "]"


def _winner_text(winner: int | None) -> str:
    return "null" if winner is None else f"{winner:d}"


_DECLINED = {ee.Decline.REFUSED: "card_refused", ee.Decline.LEFT: "card_left"}
_BOOL = {True: "true", False: "false"}

_TEXT_OF: dict[type, Callable[[Any], tuple[str, str]]] = {
    ee.CardTurned: lambda e: ("card_turned", f'"card":{_CARD_JSON[e.card]},"seat":{e.seat}'),
    ee.CardDeclined: lambda e: (
        _DECLINED[e.how],
        f'"card":{_CARD_JSON[e.card]},"forceable":{_BOOL[e.forceable]},"seat":{e.seat}',
    ),
    ee.CardWasted: lambda e: ("card_wasted", f'"card":{_CARD_JSON[e.card]}'),
    ee.MeldMade: lambda e: (
        "meld_made",
        f'"card":{_CARD_JSON[e.card]},"hand":{_cards_text(e.hand)},"seat":{e.seat},'
        f'"table":{_table_text(e.table)}',
    ),
    ee.HandMelded: lambda e: (
        "hand_melded",
        f'"hand":{_cards_text(e.hand)},"seat":{e.seat},"table":{_table_text(e.table)}',
    ),
    ee.CardDiscarded: lambda e: (
        "card_discarded",
        f'"card":{_CARD_JSON[e.card]},"seat":{e.seat}',
    ),
    ee.ForceDemanded: lambda e: ("force_demanded", f'"seat":{e.seat}'),
    ee.ForceWaived: lambda e: ("force_waived", f'"seat":{e.seat}'),
    ee.WentOut: lambda e: ("went_out", f'"seat":{e.seat}'),
    ee.Resigned: lambda e: ("resigned", f'"seat":{e.seat}'),
    ee.GameDrawn: lambda e: ("game_drawn", ""),
    ee.StakesSettled: lambda e: (
        "stakes_settled",
        f'"amount":{e.amount},"next_stake":{e.next_stake},'
        f'"scores":[{e.scores[0]},{e.scores[1]}],"winner":{_winner_text(e.winner)}',
    ),
    ee.MatchEnded: lambda e: (
        "match_ended",
        f'"scores":[{e.scores[0]},{e.scores[1]}],"winner":{_winner_text(e.winner)}',
    ),
}
"""For each engine event of a move: its wire type and the canonical JSON of its wire fields but
``type`` and ``v``, without braces -- ``to_wire``'s output, written directly (a test checks
both agree)."""

_TEXT_TYPES = frozenset(
    {
        "card_turned",
        "card_refused",
        "card_left",
        "card_wasted",
        "meld_made",
        "hand_melded",
        "card_discarded",
        "force_demanded",
        "force_waived",
        "went_out",
        "resigned",
        "game_drawn",
        "stakes_settled",
        "match_ended",
    }
)
"""The wire types of ``_TEXT_OF``: the fast path compares them with the engine's as text."""
_DICT_TYPES = frozenset(
    {"table_created", "player_joined", "deal_started", "hand_dealt", "deal_revealed"}
)
"""The other types a table holds: the fast path parses their payloads and checks them field by
field (``_checked_payload``), then compares their texts with what they must be
(``_deal_texts``, ``_reveal_text``, ``_joined_seat``); a ``table_created`` is decoded as the
full audit does (``_created``)."""

_FAST_SHAPES: dict[str, tuple[str, _BuildHashed | None]] = {}
for _kind in sorted(_TEXT_TYPES | _DICT_TYPES):
    _cls = wd.TABLE_EVENT_TYPES[_kind]
    _build = None if _kind == "table_created" else _builder(_kind, _cls.VERSION, _cls.model_fields)
    if _build is not None or _kind == "table_created":
        _FAST_SHAPES[_kind] = (str(_cls.VERSION), _build)
"""Each type the fast path reads: its ``v`` as text and, but for ``table_created``, its
``_builder``."""

_ACTIONS: dict[str, ea.Action] = {
    "card_turned": _TURN,
    "card_refused": _REFUSE,
    "card_left": _LEAVE,
    "force_demanded": _FORCE,
    "force_waived": _WAIVE,
}
_PLAYS: dict[str, tuple[ea.Play, ea.Play]] = {
    kind: (ea.Play(0, action), ea.Play(1, action)) for kind, action in _ACTIONS.items()
}
"""The command of a move without fields, by its first event's type and the seat to act."""
_SEAT_TEXT = {'"seat":0': 0, '"seat":1': 1}

_encode_str: Callable[[str], str] = json.encoder.encode_basestring
"""How canonical JSON writes a string (``canonical`` is made with it)."""
_SHA256 = hashlib.sha256()
"""Copied for each hash: half the time of ``hashlib.sha256(data)`` with OpenSSL 3 here."""
_json_decode = json.JSONDecoder().decode
"""A parser made as ``services.store.redis_store``'s is."""
_IDS = re.compile(rf"{_ID.pattern}(?:\x1f{_ID.pattern})*")
"""Command ids (``_ID``) joined by 0x1F."""
_TIME_TEXT = "(?:0|[1-9][0-9]{0,14})"
_TIMES = re.compile(rf"{_TIME_TEXT}(?:\x1f{_TIME_TEXT})*")
"""Times joined by 0x1F, each as the fast path takes it: as ``json`` writes it, below 2**53."""
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""A table id JSON writes as it is (every valid one)."""


class _Stored:
    """A stored event as ``_decode`` reads it."""

    __slots__ = ("body", "hash", "version")

    def __init__(self, version: int, body: dict[str, Any], digest: str) -> None:
        self.version = version
        self.body = body
        self.hash = digest


_WORDS = struct.Struct(">8I")
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_PAD = bytes([0x36]) * 32  # a 32-byte key is padded with zeros to SHA-256's 64-byte block
_PAD_O = bytes([0x5C]) * 32
_LIMITS = [(2**32 // (i + 1)) * (i + 1) for i in range(len(ALL_CARDS))]


def _shuffle_v1(seed: bytes, context: str) -> tuple[Card, ...]:
    """``events.fairness.shuffle`` for ``hmac-sha256-fy-v1`` in fewer steps (a test checks
    they agree): from the cards in order, Fisher-Yates for i = 39 … 1 with the 32-bit
    big-endian words of HMAC-SHA256(seed, context ":" counter), counter 0, 1, …, a word being
    skipped unless it is below the largest multiple of i + 1."""
    prefix = context.encode("utf-8") + b":"
    inner = _SHA256.copy()  # HMAC-SHA256 with a 32-byte key, from copies of its two states
    inner.update(seed.translate(_IPAD) + _PAD)
    outer = _SHA256.copy()
    outer.update(seed.translate(_OPAD) + _PAD_O)
    deck = list(ALL_CARDS)
    words: tuple[int, ...] = ()
    at = 8
    counter = 0
    i = len(deck) - 1
    while i:
        if at == 8:
            digest = inner.copy()
            digest.update(prefix + counter.to_bytes(4, "big"))
            block = outer.copy()
            block.update(digest.digest())
            words = _WORDS.unpack(block.digest())
            counter += 1
            at = 0
        word = words[at]
        at += 1
        if word < _LIMITS[i]:
            j = word % (i + 1)
            deck[i], deck[j] = deck[j], deck[i]
            i -= 1
    return tuple(deck)


def _deck_of(seed: bytes, algorithm: str, context: str) -> tuple[Card, ...]:
    """``events.fairness.shuffle``, the fast way for the algorithm every deal uses today."""
    if algorithm == SHUFFLE_ALGORITHM and len(seed) == 32:
        return _shuffle_v1(seed, context)
    return shuffle(seed, algorithm, context)


def audit_packed(
    table_id: str, head: Head, count: int, hashes: bytes, bodies: bytes
) -> TableReport | None:
    """Certify a clean table from its stored form, or return None: the full audit must say.

    ``hashes`` are the raw 32-byte hashes of versions 1 to ``count`` one after the other and
    ``bodies`` their stored bodies joined by the byte 0x1E (what ``_FAST_READ_LUA`` returns).
    A report returned here is the one :func:`audit_table` gives, and says the table is clean;
    None concludes nothing (the table may fail, or hold something this path does not read).
    """
    if count < 1 or len(hashes) != 32 * count or _PLAIN_ID.fullmatch(table_id) is None:
        return None
    try:
        rows = [text.split("\x1f") for text in bodies.decode("utf-8").split("\x1e")]
    except UnicodeDecodeError:
        return None
    if len(rows) != count:
        return None
    try:
        return _FastAudit(table_id, head, rows).run(hashes)
    except Exception:  # what unchecked text can cause (a wrong type, a missing key): give up
        return None


class _FastAudit:
    """One table's fast path (see ``audit_packed``); every method returns None or False when
    it cannot certify the table."""

    def __init__(self, table_id: str, head: Head, rows: list[list[str]]) -> None:
        self.table_id = table_id
        self.head = head
        self.rows = rows
        self.starts: list[int] = []  # the first row of each command
        self.deal_rows: list[int] = []  # deal_started, hand_dealt, stakes_settled, deal_revealed
        self.created: dict[int, tuple[dict[str, Any], ea.NewMatch]] = {}  # payload, command
        self.seats: dict[int, int] = {}  # the seat of each player_joined
        self.payloads: dict[int, dict[str, Any]] = {}  # of deal_started: checked, not compared
        self.decks: dict[int, tuple[Card, ...]] = {}
        self.reveals: dict[int, int] = {}  # the row of each deal's deal_revealed
        self.deals = 0
        self.running: int | None = None
        self.digests = ""

    def run(self, hashes: bytes) -> TableReport | None:
        last = self.read()
        if last is None or self.digests != hashes.hex() or not self.check_deals():
            return None
        status = self.redecide()
        head = self.head
        if status is None or (head.version, head.hash, head.status) != (
            len(self.rows),
            last,
            status,
        ):
            return None
        return TableReport(
            self.table_id, len(self.rows), self.deals, len(self.reveals), self.running, status
        )

    # -- steps 1 and 2 ---------------------------------------------------------------------------

    def read(self) -> str | None:
        """Hash every body; decode a ``table_created`` and check the players; returns the last
        hash.  The other payload texts are checked in steps 3 and 4."""
        table_id = self.table_id
        shapes = _FAST_SHAPES
        sha256 = _SHA256.copy
        digests: list[str] = []
        add = digests.append
        starts = self.starts
        deal_rows = self.deal_rows
        ids: list[str] = []  # of each command, checked below
        times: list[str] = []  # each time that differs from the one before, checked below
        prev = GENESIS_HASH
        last_id = last_time = ""
        for n, row in enumerate(self.rows, 1):
            kind, v, cid, causation, moment, text = row  # ValueError: not six parts
            shape = shapes.get(kind)
            if shape is None or v != shape[0]:
                return None
            if cid != last_id:
                last_id = cid
                starts.append(n - 1)
                ids.append(cid)
            if moment != last_time:
                last_time = moment
                times.append(moment)
            if causation:
                if _CAUSATION.fullmatch(causation) is None:
                    return None
                caused = f'"causation":"{causation}",'
            else:
                caused = ""
            build = shape[1]
            if build is not None:
                digest = sha256()
                digest.update(build(prev, caused, cid, table_id, moment, n, text).encode("utf-8"))
                prev = digest.hexdigest()
                if kind in _DEAL_TYPES:
                    deal_rows.append(n - 1)
                elif kind == "player_joined":
                    seat = _joined_seat(text)
                    if seat is None:
                        return None
                    self.seats[n - 1] = seat
            else:  # table_created: decoded as the full audit does (remembered by its text)
                known = _CREATED.get(text)
                if known is None:
                    body = _json_decode("{" + text + "}")
                    body["type"] = kind
                    body["v"] = int(v)
                    body["command_id"] = cid
                    if causation:
                        body["causation"] = causation
                    body["time"] = int(moment)
                    body["table_id"] = table_id
                    body["version"] = n
                    known = _created(table_id, text, _Stored(n, body, body_hash(prev, body)), cid)
                    if known is None:
                        return None
                payload, command, items = known
                self.created[n - 1] = (payload, command)
                envelope = [
                    f'"command_id":"{cid}"',
                    f'"table_id":"{table_id}"',
                    f'"time":{moment}',
                    '"type":"table_created"',
                    f'"v":{v}',
                    f'"version":{n}',
                ]
                if caused:
                    envelope.append(caused[:-1])
                whole = ",".join(sorted([*items, *envelope]))  # '"key":…' sort as their keys
                digest = sha256()
                digest.update(f"{prev}\n{{{whole}}}".encode())
                prev = digest.hexdigest()
            add(prev)
        self.digests = "".join(digests)
        # no part holds 0x1F, so these match when every id and every time does
        if _IDS.fullmatch("\x1f".join(ids)) is None or _TIMES.fullmatch("\x1f".join(times)) is None:
            return None
        if len(set(ids)) != len(ids):  # a command id used twice
            return None
        return prev

    # -- step 3 ----------------------------------------------------------------------------------

    def check_deals(self) -> bool:
        """``_Audit.check_deals``: commitments and decks (the dealt hands are compared with the
        deck in step 4, as the wire events of the deal's start)."""
        rows = self.rows
        started: dict[int, int] = {}
        dealt: dict[int, list[int]] = {}
        settled: set[int] = set()
        current = 0
        for i in self.deal_rows:
            kind = rows[i][0]
            if kind == "deal_started":
                payload = _checked_payload(kind, rows[i][5])
                if payload is None:
                    return False
                self.payloads[i] = payload
                current = payload["number"]
                if current in started:
                    return False
                started[current] = i
            elif kind == "hand_dealt":
                dealt.setdefault(current, []).append(i)
            elif kind == "stakes_settled":
                if current:
                    settled.add(current)
            else:
                reveal = _checked_payload(kind, rows[i][5])
                if reveal is None:
                    return False
                number = reveal["number"]
                start = started.get(number)
                algorithm = reveal["algorithm"]
                if rows[i][5] != _reveal_text(reveal) or number in self.reveals or start is None:
                    return False
                self.reveals[number] = i
                commit = self.payloads[start]
                seed = parse_seed(reveal["seed"])
                if algorithm != commit["algorithm"] or not verify(seed, commit["commitment"]):
                    return False
                self.decks[number] = _deck_of(seed, algorithm, deal_context(self.table_id, number))
        self.deals = len(started)
        for number, i in started.items():
            if number in self.reveals:
                continue
            if number in settled:
                return False
            self.running = number
            deck = self.recorded_deck(i, dealt.get(number, []))
            if deck is None:
                return False
            self.decks[number] = deck
        return True

    def recorded_deck(self, start: int, hands: list[int]) -> tuple[Card, ...] | None:
        """``_Audit._recorded_deck``: dealt hands, turned cards, unseen cards."""
        rows = self.rows
        dealer = self.payloads[start]["dealer"]
        by_seat = {}
        for i in hands:
            payload = _checked_payload("hand_dealt", rows[i][5])
            if payload is None:
                return None
            by_seat[payload["seat"]] = payload["cards"]
        seen: set[Card] = set()
        cards: dict[int, list[Card]] = {}
        for seat in (0, 1):
            if seat not in by_seat:
                return None
            cards[seat] = [_CARD_OF[c] for c in by_seat[seat]]
            if not seen.isdisjoint(cards[seat]):
                return None
            seen.update(cards[seat])
        deck: list[Card] = []
        for a, b in zip(cards[1 - dealer], cards[dealer], strict=True):
            deck += (a, b)
        for row in rows[start:]:
            if row[0] == "card_turned":  # its text is '"card":"XX","seat":N' (checked in step 4)
                card = _CARD_OF.get(row[5][8:10])
                if card is None or card in seen:
                    return None
                seen.add(card)
                deck.append(card)
        deck += [c for c in ALL_CARDS if c not in seen]
        return tuple(deck)

    # -- step 4 ----------------------------------------------------------------------------------

    def redecide(self) -> str | None:
        """``_Audit.redecide``, comparing payload texts; returns the status the events set."""
        rows = self.rows
        text_of = _TEXT_OF
        plays = _PLAYS
        reveals = self.reveals
        seated = [False, False]
        match: Match | None = None
        status: str | None = None
        starts = self.starts
        for lo, hi in zip(starts, [*starts[1:], len(rows)]):  # noqa: B905 - same length
            first = rows[lo]
            kind = first[0]
            deal = match.deal if match is not None else None
            group: Sequence[int] = range(lo, hi)
            by_kind = plays.get(kind)
            if by_kind is not None and deal is not None:  # a move without fields: the seat's
                seat = deal.to_act
                if not seated[seat]:
                    return None
                command: ea.Command = by_kind[seat]
            else:
                if kind == "player_joined" or kind == "table_created":
                    joined = self.seat_players(lo, hi, seated, match is not None)
                    if not joined:
                        if joined is None:
                            return None
                        continue
                    group = joined
                    first = rows[group[0]]
                    kind = first[0]
                other = self.command_of(group[0], kind, first[5], deal, seated)
                if other is None:
                    return None
                command = other
            try:
                decided = decide(match, command)
            except EngineError:
                return None
            at = 0
            size = len(group)
            for engine_event in decided:
                k = type(engine_event)
                text = text_of.get(k)
                if text is not None:
                    if at >= size:
                        return None
                    row = rows[group[at]]
                    if text(engine_event) != (row[0], row[5]):
                        return None
                    at += 1
                    if k is ee.StakesSettled:
                        reveal = reveals.get(deal.number if deal is not None else 0)
                        if reveal is not None:  # the service appends the deal's reveal here
                            if at >= size or rows[group[at]][5] != rows[reveal][5]:
                                return None
                            if rows[group[at]][0] != "deal_revealed":
                                return None
                            at += 1
                    elif k is ee.MatchEnded:
                        status = "over"
                elif isinstance(engine_event, ee.DealStarted):
                    status = "playing"
                    payload = self.payloads[group[0]]
                    for want in _deal_texts(engine_event, payload):
                        if at >= size or (rows[group[at]][0], rows[group[at]][5]) != want:
                            return None
                        at += 1
                else:  # MatchStarted
                    status = "open"
                    wire = _fast_wire(engine_event, self.created[group[0]][0])
                    if len(wire) != 1 or at >= size or group[at] not in self.created:
                        return None
                    if self.created[group[at]][0] != wire[0]:
                        return None
                    at += 1
                match = evolve(match, engine_event)
            if at < size:
                return None
        return status

    def seat_players(self, lo: int, hi: int, seated: list[bool], created: bool) -> list[int] | None:
        """``_Audit._seat_players``: seat a join's player, or a new table's; the rest."""
        rows = self.rows
        rest = [lo] if rows[lo][0] == "table_created" else []
        i = lo + len(rest)
        while i < hi and rows[i][0] == "player_joined":
            if not (created or rest):
                return None
            seat = self.seats[i]
            if seated[seat]:
                return None
            seated[seat] = True
            i += 1
            if not rest:  # a join seats one player
                break
        return rest + list(range(i, hi))

    def command_of(
        self, i: int, kind: str, text: str, deal: Deal | None, seated: list[bool]
    ) -> ea.Command | None:
        """``_Audit._command_of``, the seat of a move being the seat to act."""
        if kind == "table_created":
            return self.created[i][1]
        if kind == "deal_started":
            return ea.StartDeal(self.decks[self.payloads[i]["number"]])
        if kind == "resigned":
            seat = _SEAT_TEXT.get(text)
            return ea.Resign(seat) if seat is not None and seated[seat] else None
        action = _ACTIONS.get(kind)
        if action is None:
            if kind == "card_discarded":  # '"card":"XX","seat":N'
                action = ea.Discard(_CARD_OF[text[8:10]])
            elif kind == "meld_made" or kind == "hand_melded":
                action = _action_of(kind, _json_decode("{" + text + "}"))
            if action is None:
                return None
        if deal is None or not seated[deal.to_act]:
            return None
        return ea.Play(deal.to_act, action)


_PAYLOAD_KEYS = {kind: shape.keys - {"type", "v"} for kind, shape in _SHAPES.items()}


def _checked_payload(kind: str, text: str) -> dict[str, Any] | None:
    """A payload text parsed, if its fields pass the plain checks of ``kind`` (whether the
    text is canonical is checked by comparing it, elsewhere)."""
    payload: dict[str, Any] = _json_decode("{" + text + "}")
    if payload.keys() != _PAYLOAD_KEYS[kind] or not _SHAPES[kind].check(payload):
        return None
    return payload


def _reveal_text(reveal: Mapping[str, Any]) -> str:
    """The canonical payload text of a checked ``deal_revealed`` (plain hex and name)."""
    algorithm, number, seed = reveal["algorithm"], reveal["number"], reveal["seed"]
    return f'"algorithm":"{algorithm}","number":{number:d},"seed":"{seed}"'


def _joined_seat(text: str) -> int | None:
    """The seat of a ``player_joined`` payload text that passes the plain checks and is
    canonical, else None."""
    payload = _checked_payload("player_joined", text)
    if payload is None:
        return None
    bot = payload["bot"]
    canonical_text = (
        f'"bot":{"null" if bot is None else _encode_str(bot)},'
        f'"name":{_encode_str(payload["name"])},"seat":{payload["seat"]:d}'
    )
    return payload["seat"] if text == canonical_text else None


def _created(
    table_id: str, text: str, stored: _Stored, command_id: str
) -> tuple[dict[str, Any], ea.NewMatch, list[str]] | None:
    """What a ``table_created``'s payload text gives, remembered by the text (it depends on
    nothing else, and most tables share their rules): the payload as the full audit decodes
    it (``_decode``), its command, and its fields written as canonical JSON (``"key":value``,
    joined by commas they are the text: else the fast path gives up)."""
    try:
        event = _decode(table_id, stored, command_id)
    except _Failed:
        return None
    model = event.model
    if model is None:
        return None
    fields = _json_decode("{" + text + "}")
    items = [canonical({key: value}).decode("utf-8")[1:-1] for key, value in sorted(fields.items())]
    if ",".join(items) != text or not fields.keys().isdisjoint(BODY_KEYS | {"type", "v"}):
        return None
    rules = rules_from_wire(model.rules)
    command = ea.NewMatch(rules, model.first_dealer, model.deals, model.target_score)
    known = (dict(event.payload), command, items)
    if len(_CREATED) >= 256:
        _CREATED.clear()
    _CREATED[text] = known
    return known


def _deal_texts(engine_event: ee.DealStarted, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The wire types and payload texts of a deal's start (``to_wire``, as ``_TEXT_OF``), with
    the recorded commitment and algorithm (checked: plain hex and name)."""
    non_dealer, dealer, _ = split_deck(engine_event.deck)
    hands = {1 - engine_event.dealer: non_dealer, engine_event.dealer: dealer}
    masks = [sum(1 << c for c in hands[seat]) for seat in (0, 1)]
    return [
        (
            "deal_started",
            f'"algorithm":"{payload["algorithm"]}","commitment":"{payload["commitment"]}",'
            f'"dealer":{engine_event.dealer:d},"number":{engine_event.number:d},'
            f'"stake":{engine_event.stake:d}',
        ),
        ("hand_dealt", f'"cards":{_cards_text(masks[0])},"seat":0'),
        ("hand_dealt", f'"cards":{_cards_text(masks[1])},"seat":1'),
    ]


_MATCH_WIRE: dict[tuple[ee.MatchStarted, object], list[dict[str, Any]]] = {}
_CREATED: dict[str, tuple[dict[str, Any], ea.NewMatch, list[str]]] = {}
"""``_created`` by ``table_created`` payload text."""


def _fast_wire(engine_event: ee.Event, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``_wire_of`` of a ``MatchStarted``, remembered: most tables share their rules."""
    key = (engine_event, payload.get("turn_seconds"))
    wire = _MATCH_WIRE.get(key)  # type: ignore[arg-type]
    if wire is None:
        wire = _wire_of(engine_event, payload)
        if len(_MATCH_WIRE) >= 256:
            _MATCH_WIRE.clear()
        _MATCH_WIRE[key] = wire  # type: ignore[index]
    return wire


def _wire_of(engine_event: ee.Event, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The wire events of ``DealStarted`` (with the recorded commitment) and
    ``MatchStarted`` (with the recorded turn clock), from the first event's payload."""
    if isinstance(engine_event, ee.DealStarted):
        commitment, algorithm = payload["commitment"], payload["algorithm"]
        return _dump(to_wire(engine_event, commitment=commitment, algorithm=algorithm))
    return _dump(to_wire(engine_event, turn_seconds=payload.get("turn_seconds")))


# --- reading tables from a store -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadedTable:
    """A table as read for the audit: its events, its head, and where the store could not
    decode a stored body (``(version, reason)``; the events stop before it)."""

    table_id: str
    events: Sequence[StoredLike]
    head: Head
    corrupt: tuple[int, str] | None = None

    def audit(self) -> TableReport:
        """Return the audit of this table."""
        if not self.events and self.head.version == 0 and self.corrupt is None:
            failure = Failure(self.table_id, 0, None, NO_TABLE, "the store has no such table")
            return TableReport(self.table_id, 0, failure=failure)
        return audit_table(self.table_id, self.events, self.head, self.corrupt)


async def read_heads(store: EventStore, table_ids: Sequence[str]) -> dict[str, Head]:
    """The heads of many tables: one pipeline on Redis, one call each on other stores."""
    from services.store import Head, RedisEventStore

    if not isinstance(store, RedisEventStore):
        return {t: await store.head(t) for t in table_ids}
    async with store.client.pipeline(transaction=False) as pipe:
        for t in table_ids:
            pipe.hmget(store.keys.head(t), ["version", "hash", "status"])
        replies = await pipe.execute()
    heads: dict[str, Head] = {}
    for t, (version, digest, status) in zip(table_ids, replies, strict=True):
        heads[t] = (
            Head()
            if version is None
            else Head(
                int(version),
                digest.decode("ascii") if digest else GENESIS_HASH,
                status.decode("utf-8") if status is not None else None,
            )
        )
    return heads


async def load_tables(store: EventStore, table_ids: Sequence[str]) -> list[LoadedTable]:
    """Read many tables for the audit: their heads, then their events (``read_many``).

    A table whose events run past its head moved on while it was read: it is read once more.
    A table whose stored body the store cannot decode is read event by event up to it.
    """
    from services.store import StoreError

    heads = await read_heads(store, table_ids)
    try:
        stored: dict[str, Any] = await store.read_many(table_ids)
    except StoreError:
        stored = {}
    loaded: list[LoadedTable] = []
    for t in table_ids:
        if t not in stored:
            loaded.append(await _read_carefully(store, t, heads[t]))
            continue
        events = stored[t]
        head = heads[t]
        if events and events[-1].version > head.version:  # appended to while being read
            head = await store.head(t)
            events = await store.read(t)
        loaded.append(LoadedTable(t, events, head))
    return loaded


async def _read_carefully(store: EventStore, table_id: str, head: Head) -> LoadedTable:
    """Read a table whose batch read failed: the events up to the first body it cannot decode."""
    from services.store import RedisEventStore, StoredEvent, StoreError
    from services.store.redis_store import unpack_body

    try:
        return LoadedTable(table_id, await store.read(table_id), head)
    except StoreError as error:
        if not isinstance(store, RedisEventStore):
            return LoadedTable(table_id, [], head, (1, str(error)))
    entries: list[tuple[bytes, dict[bytes, bytes]]] = await store.client.xrange(
        store.keys.events(table_id)
    )  # type: ignore[assignment]
    events: list[StoredEvent] = []
    prev = GENESIS_HASH
    for entry_id, fields in entries:
        version = int(entry_id.split(b"-")[0])
        digest = fields.get(b"h", b"").hex()
        try:
            body = unpack_body(table_id, version, fields.get(b"b", b""))
        except StoreError as error:
            return LoadedTable(table_id, events, head, (version, str(error)))
        events.append(StoredEvent(table_id, version, body, digest, prev))
        prev = digest
    return LoadedTable(table_id, events, head)


_FAST_READ_LUA = """#!lua flags=no-writes
local head = redis.call('HMGET', KEYS[2], 'version', 'hash', 'status')
local e = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', ARGV[1])
local hs, bs = {}, {}
for i = 1, #e do
  local id, f = e[i][1], e[i][2]
  if id ~= i .. '-1' or #f ~= 4 then return {head[1], head[2], head[3], -1} end
  if f[1] == 'b' and f[3] == 'h' then
    bs[i], hs[i] = f[2], f[4]
  elseif f[1] == 'h' and f[3] == 'b' then
    bs[i], hs[i] = f[4], f[2]
  else
    return {head[1], head[2], head[3], -1}
  end
end
return {head[1], head[2], head[3], #e, table.concat(hs), table.concat(bs, '\\30')}
"""
"""The fast path's read of one table (read-only): its head (version, hash, status), then the
number of entries, their raw hashes one after the other and their stored bodies joined by 0x1E,
read in one step, so head and events agree.  The count is -1 when an entry is not the ``n-1``
of version ``n`` with exactly the fields ``b`` and ``h``: the store's own read takes it then.
KEYS: the table's stream and head; ARGV: the most entries to read."""

FAST_READ_MAX = 100_000
"""Longer tables are read by the store's own read, in chunks."""


@functools.cache
def _head_class() -> type[Head]:
    from services.store.base import Head  # not at the top: it imports redis

    return Head


def _head_of(version: bytes | None, digest: bytes | None, status: bytes | None) -> Head:
    """A head as ``read_heads`` makes it from the reply of HMGET version hash status."""
    head = _head_class()
    if version is None:
        return head()
    return head(
        int(version),
        digest.decode("ascii") if digest else GENESIS_HASH,
        status.decode("utf-8") if status is not None else None,
    )


async def read_packed(store: RedisEventStore, table_ids: Sequence[str]) -> list[list[Any]]:
    """The replies of ``_FAST_READ_LUA`` for many tables, in one pipeline."""
    script = getattr(store, "_audit_read", None)
    if script is None:
        script = store.client.register_script(_FAST_READ_LUA)
        setattr(store, "_audit_read", script)  # noqa: B010 - cached on the store it reads
    keys = store.keys
    async with store.client.pipeline(transaction=False) as pipe:
        for t in table_ids:
            await script(keys=[keys.events(t), keys.head(t)], args=[FAST_READ_MAX], client=pipe)
        replies: list[list[Any]] = await pipe.execute()
    return replies


def _audit_reply(table_id: str, reply: Sequence[Any]) -> TableReport | None:
    """``audit_packed`` of one reply of ``_FAST_READ_LUA`` (None: the full audit must say)."""
    count = reply[3]
    if count < 1 or count >= FAST_READ_MAX:
        return None
    return audit_packed(table_id, _head_of(*reply[:3]), count, reply[4], reply[5])


class _PackedReads:
    """The fast path's reads on one connection of the store's client: a batch's request is sent
    (:meth:`send`) before the batch before it is checked, so Redis runs it meanwhile, and its
    replies are read afterwards (:meth:`receive`; None if Redis refused the script: then
    :func:`read_packed` reads the batch again)."""

    def __init__(self, store: RedisEventStore) -> None:
        self.store = store
        self.sha: str | None = None

    async def send(self, table_ids: Sequence[str]) -> tuple[Any, int]:
        client = self.store.client
        if self.sha is None:
            self.sha = str(await client.script_load(_FAST_READ_LUA))
        keys = self.store.keys
        commands = [
            ("EVALSHA", self.sha, 2, keys.events(t), keys.head(t), FAST_READ_MAX) for t in table_ids
        ]
        pool = client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await connection.send_packed_command(connection.pack_commands(commands))
        except BaseException:
            await self.drop(connection)
            raise
        return connection, len(commands)

    async def receive(self, sent: tuple[Any, int]) -> list[list[Any]] | None:
        from redis.exceptions import ResponseError

        connection, count = sent
        try:
            replies = [await connection.read_response() for _ in range(count)]
        except ResponseError:  # NOSCRIPT (a flushed script cache), …: the rest is unread
            await self.drop(connection)
            return None
        except BaseException:
            await self.drop(connection)
            raise
        await self.store.client.connection_pool.release(connection)
        return replies

    async def drop(self, connection: Any) -> None:
        """Close a connection whose replies are not all read, and give it back."""
        self.sha = None
        try:
            await connection.disconnect()
        finally:
            await self.store.client.connection_pool.release(connection)


async def audit_store(
    store: EventStore, table_ids: Sequence[str], batch: int = 200
) -> AsyncGenerator[TableReport, None]:
    """Audit tables ``batch`` at a time, reading the next batch while auditing one.

    On Redis a table is first read and certified by the fast path (``audit_packed``); a table
    it does not certify is read again by the store and audited in full (``audit_table``).
    """
    from services.store import RedisEventStore

    if batch < 1:
        raise ValueError("batch must be at least 1")
    chunks = [table_ids[i : i + batch] for i in range(0, len(table_ids), batch)]
    if not chunks:
        return
    if not isinstance(store, RedisEventStore):
        pending = asyncio.ensure_future(load_tables(store, chunks[0]))
        for k in range(len(chunks)):
            loaded = await pending
            if k + 1 < len(chunks):
                pending = asyncio.ensure_future(load_tables(store, chunks[k + 1]))
                for _ in range(3):  # let the next read reach Redis before the CPU work starts
                    await asyncio.sleep(0)
            for table in loaded:
                yield table.audit()
        return
    reads = _PackedReads(store)
    sent: tuple[Any, int] | None = await reads.send(chunks[0])
    try:
        for k, chunk in enumerate(chunks):
            assert sent is not None
            replies = await reads.receive(sent)
            sent = None
            if replies is None:
                replies = await read_packed(store, chunk)
            if k + 1 < len(chunks):
                sent = await reads.send(chunks[k + 1])  # Redis reads it while this is checked
            for table_id, reply in zip(chunk, replies, strict=True):
                report = _audit_reply(table_id, reply)
                if report is None:
                    (table,) = await load_tables(store, [table_id])
                    report = table.audit()
                yield report
    finally:
        if sent is not None:  # the caller stopped early: the replies are never read
            await reads.drop(sent[0])


@dataclass
class AuditSummary:
    """The tally of an audit run."""

    tables: int = 0
    failed: int = 0
    events: int = 0
    running: int = 0
    seconds: float = 0.0
    failures: list[TableReport] = field(default_factory=list)

    def add(self, report: TableReport) -> None:
        """Count one table's report."""
        self.tables += 1
        self.events += report.events
        if report.failure is not None:
            self.failed += 1
            self.failures.append(report)
        elif report.running is not None:
            self.running += 1

    def merge(self, other: AuditSummary) -> None:
        """Count the tables of another tally (a share audited by another process)."""
        self.tables += other.tables
        self.events += other.events
        self.failed += other.failed
        self.running += other.running
        self.failures.extend(other.failures)

    @property
    def events_per_s(self) -> float:
        """Return the events read and checked per second of wall time."""
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """Return the tally as JSON-ready values (failed tables in full)."""
        return {
            "ok": self.failed == 0,
            "tables": self.tables,
            "tables_ok": self.tables - self.failed,
            "tables_failed": self.failed,
            "tables_running": self.running,
            "events": self.events,
            "seconds": round(self.seconds, 3),
            "events_per_s": round(self.events_per_s),
            "failures": [r.as_dict() for r in self.failures],
        }

    def text(self) -> str:
        """Return the tally as lines of text."""
        lines = [
            f"audited {self.tables} tables, {self.events} events in {self.seconds:.2f} s "
            f"({self.events_per_s:,.0f} events/s): {self.tables - self.failed} ok, "
            f"{self.failed} failed"
        ]
        if self.running:
            lines.append(
                f"  {self.running} table(s) have a deal still running: its cards can be checked "
                "once its seed is revealed"
            )
        lines += [f"FAILED {r.failure}" for r in self.failures]
        return "\n".join(lines) + "\n"


# --- command line --------------------------------------------------------------------------------


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--redis-url``, ``--namespace`` and ``--shards`` (shared with ``conquian replay``).

    Their defaults are the deployment's settings (``services/settings.py``): ``REDIS_URL`` (or
    ``CONQUIAN_REDIS_URL``), ``CONQUIAN_NAMESPACE`` (else ``cq``), ``CONQUIAN_SHARDS`` (else 16).
    """
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL") or os.environ.get("CONQUIAN_REDIS_URL"),
        help="the Redis of the event store (default: $REDIS_URL)",
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("CONQUIAN_NAMESPACE") or "cq",
        help="key namespace (default: $CONQUIAN_NAMESPACE, else cq)",
    )
    parser.add_argument(
        "--shards",
        default=os.environ.get("CONQUIAN_SHARDS") or "16",
        help="shards of the deployment (default: $CONQUIAN_SHARDS, else 16)",
    )


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``audit`` subcommand and its arguments."""
    parser = subparsers.add_parser(
        name,
        help="replay tables from the store and check chain, deals and moves",
        description="Replay tables from Redis and check the hash chain, every commitment "
        "against its revealed seed, every dealt and turned card against the deck, every move "
        "re-decided by the engine, and the head. Exits 0 when every table is clean, 1 when one "
        "fails (naming its first bad event), 2 on usage errors. See docs/audit.md.",
    )
    parser.add_argument("tables", nargs="*", metavar="TABLE", help="table ids to audit")
    parser.add_argument("--all", action="store_true", help="audit every table of the namespace")
    add_store_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object")
    parser.add_argument(
        "--batch", type=int, default=200, help="tables read per round trip (default 200)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="with --all: processes auditing shares of the tables (default 1)",
    )
    parser.set_defaults(handler=run, parser=parser)
    return parser


def store_keys(args: argparse.Namespace) -> KeySpace:
    """Check the store arguments and return the key space (``parser.error`` exits 2)."""
    from services.store.keys import KeySpace

    parser: argparse.ArgumentParser = args.parser
    if not args.redis_url:
        parser.error("give --redis-url or set REDIS_URL")
    try:
        shards = int(args.shards)
    except ValueError:
        parser.error(f"--shards must be a whole number, not {args.shards!r}")
    try:
        return KeySpace(args.namespace, shards)
    except ValueError as error:
        parser.error(str(error))


def run(args: argparse.Namespace) -> int:
    """Run ``conquian audit``; returns 0 (clean), 1 (a table failed) or 2 (usage)."""
    from services.store.keys import InvalidTableId, check_table_id

    parser: argparse.ArgumentParser = args.parser
    if bool(args.tables) == bool(args.all):
        parser.error("name the tables to audit, or give --all (not both)")
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.jobs > 1 and not args.all:
        parser.error("--jobs needs --all")
    for table_id in args.tables:
        try:
            check_table_id(table_id)
        except InvalidTableId as error:
            parser.error(str(error))
    keys = store_keys(args)
    try:
        return asyncio.run(_run(args, keys))
    except (OSError, ConnectionError, TimeoutError) as error:
        sys.stderr.write(f"conquian audit: cannot read the store: {error}\n")
        return 2
    except Exception as error:  # redis errors, without importing redis here
        if type(error).__module__.startswith("redis"):
            sys.stderr.write(f"conquian audit: cannot read the store: {error}\n")
            return 2
        raise


async def _run(args: argparse.Namespace, keys: KeySpace) -> int:
    import redis.asyncio

    from services.store import RedisEventStore

    client = redis.asyncio.Redis.from_url(args.redis_url, decode_responses=False)
    try:
        store = RedisEventStore(client, keys)
        if args.all:
            return await _audit_all(store, args)
        return await _audit_named(store, args)
    finally:
        await client.aclose()


async def _audit_named(store: EventStore, args: argparse.Namespace) -> int:
    summary = AuditSummary()
    reports: list[TableReport] = []
    started = time.perf_counter()
    async for report in audit_store(store, args.tables, args.batch):
        summary.add(report)
        reports.append(report)
    summary.seconds = time.perf_counter() - started
    if args.json:
        data = summary.as_dict()
        data["reports"] = [r.as_dict() for r in reports]
        sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    else:
        for report in reports:
            sys.stdout.write(report.summary() + "\n")
            sys.stdout.writelines(f"  note: {note}\n" for note in report.notes)
    return 0 if summary.failed == 0 else 1


async def _audit_all(store: EventStore, args: argparse.Namespace) -> int:
    summary = AuditSummary()
    started = time.perf_counter()
    table_ids = sorted([t async for t in store.tables()])
    if not table_ids:
        keys = store.keys
        sys.stderr.write(
            f"conquian audit: no tables in namespace {keys.ns!r} with {keys.shards} shards "
            "(are those the deployment's?)\n"
        )
    bar = _progress(sys.stderr, len(table_ids)) if sys.stderr.isatty() else None
    if args.jobs > 1 and len(table_ids) > 1:
        async for part in _audit_in_processes(args, store.keys, table_ids):
            summary.merge(part)
            if bar is not None:
                bar(summary, time.perf_counter() - started)
        summary.failures.sort(key=lambda report: report.table_id)
    else:
        async for report in audit_store(store, table_ids, args.batch):
            summary.add(report)
            if bar is not None:
                bar(summary, time.perf_counter() - started)
    summary.seconds = time.perf_counter() - started
    if bar is not None:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()
    if args.json:
        sys.stdout.write(json.dumps(summary.as_dict(), sort_keys=True) + "\n")
    else:
        sys.stdout.write(summary.text())
    return 0 if summary.failed == 0 else 1


SHARE_BATCHES = 20
"""With ``--jobs``, a process is given this many batches of tables at a time."""


async def _audit_in_processes(
    args: argparse.Namespace, keys: KeySpace, table_ids: Sequence[str]
) -> AsyncGenerator[AuditSummary, None]:
    """Audit the tables in ``args.jobs`` processes (each with its own connection to Redis),
    a share of consecutive tables at a time; yield each share's tally as it ends."""
    import concurrent.futures
    import multiprocessing

    jobs = min(args.jobs, len(table_ids))
    size = max(1, min(args.batch * SHARE_BATCHES, -(-len(table_ids) // jobs)))
    shares = [list(table_ids[i : i + size]) for i in range(0, len(table_ids), size)]
    loop = asyncio.get_running_loop()
    # fork where there is one: the processes start with everything imported (spawn costs a
    # second or so of imports); each opens its own connection, and asyncio knows a loop from
    # another process (the pool forks them all at once, before its own thread starts)
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        pending = [
            loop.run_in_executor(
                pool, _audit_share, args.redis_url, keys.ns, keys.shards, share, args.batch
            )
            for share in shares
        ]
        try:
            for done in asyncio.as_completed(pending):
                yield await done
        finally:
            for future in pending:
                future.cancel()


def _audit_share(url: str, ns: str, shards: int, table_ids: list[str], batch: int) -> AuditSummary:
    """One process's share of ``audit --all --jobs N``: the tally of these tables."""
    from services.store.keys import KeySpace

    async def audit_share() -> AuditSummary:
        import redis.asyncio

        from services.store import RedisEventStore

        client = redis.asyncio.Redis.from_url(url, decode_responses=False)
        try:
            summary = AuditSummary()
            store = RedisEventStore(client, KeySpace(ns, shards))
            async for report in audit_store(store, table_ids, batch):
                summary.add(report)
            return summary
        finally:
            await client.aclose()

    return asyncio.run(audit_share())


def _progress(stream: TextIO, total: int, width: int = 30) -> Callable[[AuditSummary, float], None]:
    """Return a callback that redraws a one-line bar on ``stream`` (a terminal), 10 times/s."""
    last = [0.0]

    def draw(summary: AuditSummary, elapsed: float) -> None:
        if elapsed - last[0] < 0.1 and summary.tables < total:
            return
        last[0] = elapsed
        filled = width * summary.tables // max(total, 1)
        rate = summary.events / elapsed if elapsed > 0 else 0.0
        stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {summary.tables}/{total} tables, "
            f"{summary.failed} failed, {rate:,.0f} events/s"
        )
        stream.flush()

    return draw
