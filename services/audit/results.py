"""Reason codes and results of the audit: what a table's audit found, and its first failure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

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
