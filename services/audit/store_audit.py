"""Auditing the tables of a store in batches (:func:`audit_store`: the fast path first on
Redis, the full audit for what it does not certify), and the tally of a run (``AuditSummary``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from services.audit.fast_audit import audit_packed
from services.audit.results import TableReport
from services.audit.store_reads import (
    FAST_READ_MAX,
    _head_of,
    _PackedReads,
    load_tables,
    read_packed,
)

if TYPE_CHECKING:
    from services.store.base import EventStore


def _audit_reply(table_id: str, reply: Sequence[Any]) -> TableReport | None:
    """``audit_packed`` of one reply of ``_FAST_READ_LUA`` (None: the full audit must say)."""
    count = reply[3]
    if count < 1 or count >= FAST_READ_MAX:
        return None
    return audit_packed(table_id, _head_of(*reply[:3]), count, reply[4], reply[5])


async def _audit_replies(
    store: EventStore, chunk: Sequence[str], replies: Sequence[Any]
) -> AsyncGenerator[TableReport, None]:
    """The reports of ``chunk`` from the fast path's ``replies``: each table the fast path does
    not certify is read again and audited in full."""
    for table_id, reply in zip(chunk, replies, strict=True):
        report = _audit_reply(table_id, reply)
        if report is None:
            (table,) = await load_tables(store, [table_id])
            report = table.audit()
        yield report


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
    if isinstance(store.client, RedisCluster):  # no one connection reaches every table
        for chunk in chunks:
            async for report in _audit_replies(store, chunk, await read_packed(store, chunk)):
                yield report
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
            async for report in _audit_replies(store, chunk, replies):
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
