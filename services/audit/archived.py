"""Auditing tables that left Redis for the archive (``docs/archive.md``).

An archived table holds its events as they were hashed and its head as Redis had it, so it is
audited by the same checks, with the same report, as it was in Redis (by the full audit,
``audit_table``: the fast path would first need the bodies in the store's form again, which
costs what it saves): :func:`audit_anywhere`
audits every table in Redis first and, for a table Redis no longer holds, reads the archive.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Collection, Sequence
from typing import TYPE_CHECKING

from services.audit.results import NO_TABLE, UNDECODABLE, Failure, TableReport
from services.audit.store_audit import audit_store
from services.audit.store_reads import LoadedTable

if TYPE_CHECKING:
    from services.archive.reads import ArchiveReader
    from services.store.base import EventStore

__all__ = ["audit_anywhere", "audit_archived"]


def audit_archived(reader: ArchiveReader, table_id: str) -> TableReport | None:
    """The audit of an archived table, None when the archive does not hold it.  A file the
    archive cannot read is ``audit/undecodable`` at version 0."""
    from services.archive.record import ArchiveError

    try:
        archived = reader.table(table_id)
        events = reader.events(table_id)
    except ArchiveError as error:
        failure = Failure(table_id, 0, None, UNDECODABLE, f"archived file: {error}")
        return TableReport(table_id, 0, failure=failure)
    if archived is None or events is None:
        return None
    return LoadedTable(table_id, events, archived.head).audit()


async def audit_anywhere(
    store: EventStore,
    reader: ArchiveReader | None,
    table_ids: Sequence[str],
    batch: int = 200,
    archived: Collection[str] = (),
) -> AsyncGenerator[TableReport, None]:
    """:func:`audit_store`, with a table Redis does not hold audited from the archive; the
    tables of ``archived`` (listed in the archive and not in Redis) are read from the archive
    straight away, after the others, instead of being looked for in Redis first."""
    in_redis = [t for t in table_ids if t not in archived] if archived else table_ids
    async for report in audit_store(store, in_redis, batch):
        if reader is not None and report.failure is not None and report.failure.code == NO_TABLE:
            report = audit_archived(reader, report.table_id) or report
        yield report
    if reader is None:
        return
    for table_id in table_ids:
        if table_id in archived:
            yield audit_archived(reader, table_id) or _missing(table_id)


def _missing(table_id: str) -> TableReport:
    failure = Failure(table_id, 0, None, NO_TABLE, "the store has no such table")
    return TableReport(table_id, 0, failure=failure)
