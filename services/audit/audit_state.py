"""The state of one table's full audit, shared by its steps (``full_audit``, ``deal_checks``,
``redecide``), and how it fails."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.cards import Card
from services.audit.decode import _Decoded
from services.audit.results import Failure, StoredLike, TableReport, _Failed

if TYPE_CHECKING:
    from services.store.base import Head


class _AuditState:
    """One table's audit: what it has read and found so far, and its failures."""

    def __init__(self, table_id: str, stored: Sequence[StoredLike], head: Head | None) -> None:
        self.table_id = table_id
        self.stored = stored
        self.head = head
        self.events: list[_Decoded] = []
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

    def fail_at(self, event: _Decoded, code: str, reason: str) -> _Failed:
        return self.fail(event.version, event.type, code, reason)
