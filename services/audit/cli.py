"""``conquian audit`` on the command line: its arguments and output, and ``--all --jobs N``
in processes."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from services.audit.archived import audit_anywhere
from services.audit.results import TableReport
from services.audit.store_audit import AuditSummary

if TYPE_CHECKING:
    from services.archive.reads import ArchiveReader
    from services.cli import Subparsers
    from services.store.base import EventStore
    from services.store.keys import KeySpace


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--redis-url``, ``--namespace``, ``--shards`` and ``--archive-dir`` (shared with
    ``conquian replay`` and ``conquian archive``).

    Their defaults are the deployment's settings (``services/settings.py``): ``REDIS_URL`` (or
    ``CONQUIAN_REDIS_URL``), ``CONQUIAN_NAMESPACE`` (else ``cq``), ``CONQUIAN_SHARDS`` (else 16),
    ``CONQUIAN_ARCHIVE_DIR`` (else none: Redis alone).
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
    parser.add_argument(
        "--archive-dir",
        default=os.environ.get("CONQUIAN_ARCHIVE_DIR") or None,
        help="the archive of finished tables (default: $CONQUIAN_ARCHIVE_DIR, else none)",
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


def _reader(archive_dir: str | None, namespace: str) -> ArchiveReader | None:
    """The reader of the archive of finished tables, None without one (Redis alone)."""
    from services.archive.reads import ArchiveReader, open_archive

    archive = open_archive(archive_dir, namespace)
    return None if archive is None else ArchiveReader(archive, cache_size=4)


async def _run(args: argparse.Namespace, keys: KeySpace) -> int:
    from services.store import RedisEventStore
    from services.store.client import connect

    client = connect(args.redis_url)
    reader = _reader(args.archive_dir, keys.ns)
    try:
        store = RedisEventStore(client, keys)
        if args.all:
            return await _audit_all(store, reader, args)
        return await _audit_named(store, reader, args)
    finally:
        await client.aclose()


async def _audit_named(
    store: EventStore, reader: ArchiveReader | None, args: argparse.Namespace
) -> int:
    summary = AuditSummary()
    reports: list[TableReport] = []
    started = time.perf_counter()
    async for report in audit_anywhere(store, reader, args.tables, args.batch):
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


async def _audit_all(
    store: EventStore, reader: ArchiveReader | None, args: argparse.Namespace
) -> int:
    summary = AuditSummary()
    started = time.perf_counter()
    listed = {t async for t in store.tables()}
    archived: set[str] = set()
    if reader is not None:  # a table in both (archived, not deleted yet) is audited once
        archived = set(reader.archive.list()) - listed
    table_ids = sorted(listed | archived)
    if not table_ids:
        keys = store.keys
        sys.stderr.write(
            f"conquian audit: no tables in namespace {keys.ns!r} with {keys.shards} shards "
            "(are those the deployment's?)\n"
        )
    bar = _progress(sys.stderr, len(table_ids)) if sys.stderr.isatty() else None
    if args.jobs > 1 and len(table_ids) > 1:
        async for part in _audit_in_processes(args, store.keys, table_ids, archived):
            summary.merge(part)
            if bar is not None:
                bar(summary, time.perf_counter() - started)
        summary.failures.sort(key=lambda report: report.table_id)
    else:
        async for report in audit_anywhere(store, reader, table_ids, args.batch, archived):
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
    args: argparse.Namespace, keys: KeySpace, table_ids: Sequence[str], archived: set[str]
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
                pool,
                _audit_share,
                args.redis_url,
                keys.ns,
                keys.shards,
                share,
                args.batch,
                args.archive_dir,
                [t for t in share if t in archived],
            )
            for share in shares
        ]
        try:
            for done in asyncio.as_completed(pending):
                yield await done
        finally:
            for future in pending:
                future.cancel()


def _audit_share(
    url: str,
    ns: str,
    shards: int,
    table_ids: list[str],
    batch: int,
    archive_dir: str | None,
    archived: list[str],
) -> AuditSummary:
    """One process's share of ``audit --all --jobs N``: the tally of these tables."""
    from services.store.keys import KeySpace

    async def audit_share() -> AuditSummary:
        from services.store import RedisEventStore
        from services.store.client import connect

        client = connect(url)
        try:
            summary = AuditSummary()
            store = RedisEventStore(client, KeySpace(ns, shards))
            reader = _reader(archive_dir, ns)
            reports = audit_anywhere(store, reader, table_ids, batch, set(archived))
            async for report in reports:
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
