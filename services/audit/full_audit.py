"""The full audit of one table (:func:`audit_table`): chain, decoding, deals, moves and head,
the first failure named (the package docstring lists the checks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from events.chain import GENESIS_HASH
from services.audit.deal_checks import _DEAL_TYPES, _DealChecks
from services.audit.decode import _decode
from services.audit.hashing import body_hash
from services.audit.redecide import _Redecide
from services.audit.results import (
    BAD_HASH,
    BROKEN_CHAIN,
    HEAD_MISMATCH,
    UNDECODABLE,
    VERSION_GAP,
    StoredLike,
    TableReport,
    _Failed,
)

if TYPE_CHECKING:
    from services.store.base import Head


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


class _Audit(_DealChecks, _Redecide):
    """One table's audit, step by step (see the package docstring): steps 1, 2 and 5 here, 3 in
    ``_DealChecks``, 4 in ``_Redecide``."""

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


def _type_of(body: Mapping[str, Any]) -> str | None:
    kind = body.get("type")
    return kind if type(kind) is str else None
