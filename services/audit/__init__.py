"""``conquian audit``: replay a table from its stored events and check everything it claims.

:func:`audit_table` is the full audit, pure and trusting only the published algorithms; on Redis
a fast path certifies clean tables first.  ``docs/audit.md`` has the checks in order, the reason
codes and the modules of this package.
"""

from __future__ import annotations

from services.audit.cli import _progress as _progress
from services.audit.cli import add_parser, run
from services.audit.cli import add_store_arguments as add_store_arguments
from services.audit.cli import store_keys as store_keys
from services.audit.decode import _decode as _decode
from services.audit.decode import _Decoded as _Decoded
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
