"""``conquian archive``: move the finished tables of a namespace from Redis into the archive.

Archives the tables of the index of finished tables (``KeySpace.sealed``) whose match ended
more than ``--older-than`` seconds ago; ``--scan`` first indexes the finished tables that ended
before the appends wrote that index.  Prints a summary (or, with ``--json``, one object) and
exits 0 when every table it took up was archived, 1 when one was left in Redis (each named,
with its reason), 2 on usage errors.  See docs/archive.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.archive.mover import ArchiveTally
    from services.cli import Subparsers
    from services.store.keys import KeySpace

__all__ = ["add_parser", "run"]


def _default_age_s() -> float:
    raw = os.environ.get("CONQUIAN_ARCHIVE_AFTER_MS")
    try:
        return int(raw) / 1000 if raw else 3600.0
    except ValueError:
        return 3600.0


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``archive`` subcommand and its arguments."""
    from services.audit.cli import add_store_arguments

    parser = subparsers.add_parser(
        name,
        help="move finished tables out of Redis into the archive, verified first",
        description="Write each finished table to the archive, read it back and check its hash "
        "chain and head, then delete its keys from Redis (only if its head is unchanged). "
        "Exits 0 when every table was archived, 1 when one was left in Redis, 2 on usage "
        "errors. See docs/archive.md.",
    )
    add_store_arguments(parser)
    parser.add_argument(
        "--older-than",
        type=float,
        default=_default_age_s(),
        metavar="SECONDS",
        help="archive tables whose match ended this long ago "
        "(default: $CONQUIAN_ARCHIVE_AFTER_MS, else 3600 s)",
    )
    parser.add_argument(
        "--scan",
        action="store_true",
        help="first index the finished tables that ended before the index was written",
    )
    parser.add_argument("--limit", type=int, default=None, help="archive at most this many")
    parser.add_argument("--batch", type=int, default=100, help="tables a batch (default 100)")
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object")
    parser.set_defaults(handler=run, parser=parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``conquian archive``: 0 (all archived), 1 (a table left in Redis), 2 (usage)."""
    from services.audit.cli import store_keys

    parser: argparse.ArgumentParser = args.parser
    if not args.archive_dir:
        parser.error("give --archive-dir or set CONQUIAN_ARCHIVE_DIR")
    if args.older_than < 0:
        parser.error("--older-than must be >= 0")
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    keys = store_keys(args)
    try:
        tally, indexed = asyncio.run(_run(args, keys))
    except Exception as error:  # connection problems, without importing redis here
        if isinstance(error, OSError) or type(error).__module__.startswith("redis"):
            sys.stderr.write(f"conquian archive: cannot reach the store: {error}\n")
            return 2
        raise
    if args.json:
        data = tally.as_dict()
        data["indexed"] = indexed
        sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    else:
        sys.stdout.write(_text(tally, indexed))
    return 0 if not tally.refused and not tally.moved else 1


async def _run(args: argparse.Namespace, keys: KeySpace) -> tuple[ArchiveTally, int]:
    from services.archive.folder import FolderArchive
    from services.archive.mover import Archiver
    from services.archive.redis_tables import index_finished
    from services.followers.feed import time_ms
    from services.store.client import connect
    from services.store.redis_store import RedisEventStore

    client = connect(args.redis_url)
    try:
        store = RedisEventStore(client, keys)
        indexed = await index_finished(store) if args.scan else 0
        archive = FolderArchive(args.archive_dir, keys.ns)
        archiver = Archiver(store, archive, batch=args.batch)
        before = time_ms() - int(args.older_than * 1000)
        return await archiver.archive_due(before, args.limit), indexed
    finally:
        await client.aclose()


def _text(tally: ArchiveTally, indexed: int) -> str:
    rate = tally.archived / tally.seconds if tally.seconds > 0 else 0.0
    lines = []
    if indexed:
        lines.append(f"indexed {indexed} finished tables that ended before the index")
    lines.append(
        f"archived {tally.archived} tables ({tally.written} written, {tally.kept} already in "
        f"the archive), {tally.events} events, {tally.bytes:,} bytes in {tally.seconds:.2f} s "
        f"({rate:,.0f} tables/s)"
    )
    if tally.gone:
        lines.append(f"  {tally.gone} indexed table(s) were no longer in Redis")
    lines += [f"LEFT IN REDIS {refusal}" for refusal in tally.refused]
    lines += [
        f"LEFT IN REDIS {t}: archive/head_moved: it changed while archived" for t in tally.moved
    ]
    return "\n".join(lines) + "\n"
