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

The package's modules, one concept each: ``results`` (reason codes, :class:`TableReport`),
``hashing`` (step 1), ``plain_checks`` and ``decode`` (step 2), ``full_audit`` with
``audit_state``, ``deal_checks`` and ``redecide`` (the full audit, :func:`audit_table`), ``wire``
(engine events against their wire form), the fast path ``fast_audit`` with ``fast_redecide``,
``fast_text`` and ``fast_payloads``, ``store_reads`` (reading tables from a store),
``store_audit`` (:func:`audit_store`, :class:`AuditSummary`), ``archived`` (tables read from
the archive of finished tables, docs/archive.md) and ``cli`` (the command line).
On Redis, each table is first offered to a fast path (:func:`audit_packed`) that can only
certify a clean table, with the report :func:`audit_table` would give; anything it cannot
certify is read again and audited as above, which names the failure. ``docs/audit.md``
describes all of it with examples.
"""

from __future__ import annotations

from services.audit.cli import _progress as _progress
from services.audit.cli import add_parser, run
from services.audit.cli import add_store_arguments as add_store_arguments
from services.audit.cli import store_keys as store_keys
from services.audit.decode import _decode as _decode
from services.audit.decode import _Event as _Event
from services.audit.fast_audit import audit_packed as audit_packed
from services.audit.fast_payloads import _joined_seat as _joined_seat
from services.audit.fast_payloads import _reveal_text as _reveal_text
from services.audit.fast_text import _DICT_TYPES as _DICT_TYPES
from services.audit.fast_text import _FAST_SHAPES as _FAST_SHAPES
from services.audit.fast_text import _LOBBY_TYPES as _LOBBY_TYPES
from services.audit.fast_text import _TEXT_OF as _TEXT_OF
from services.audit.fast_text import _TEXT_TYPES as _TEXT_TYPES
from services.audit.fast_text import _deal_texts as _deal_texts
from services.audit.full_audit import audit_table
from services.audit.hashing import body_hash as body_hash
from services.audit.plain_checks import fast_payload_ok as fast_payload_ok
from services.audit.results import CODES, Failure, StoredLike, TableReport
from services.audit.store_audit import AuditSummary, audit_store
from services.audit.store_audit import _audit_reply as _audit_reply
from services.audit.store_reads import LoadedTable, load_tables
from services.audit.store_reads import _PackedReads as _PackedReads
from services.audit.store_reads import read_heads as read_heads
from services.audit.store_reads import read_packed as read_packed
from services.audit.wire import _fast_wire as _fast_wire
from services.audit.wire import _wire_of as _wire_of
from services.audit.wire import same_event as same_event

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
