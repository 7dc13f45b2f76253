"""``conquian lobby --rebuild``: write the lobby row of every table in Redis from its events.

For a deployment whose tables predate the lobby, or a lobby whose keys were lost: every table
head is scanned (every master of a cluster), its table folded (``TableService.load``) and its
row written, 100 a script call; a row never replaces a newer one, so running it beside the
engine workers is safe.  ``docs/api.md`` ("Lobby").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.settings import Settings

BATCH = 100


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``lobby`` subcommand and its arguments."""
    parser = subparsers.add_parser(
        name,
        help="rebuild the lobby's index of waiting and running tables",
        description="Writes the lobby row of every table in Redis from its events.",
    )
    parser.add_argument("--rebuild", action="store_true", required=True)
    parser.add_argument("--redis-url", help="Redis URL (default: REDIS_URL)")
    parser.add_argument("--namespace", help="key namespace (default: CONQUIAN_NAMESPACE)")
    parser.add_argument("--shards", type=int, help="shard count (default: CONQUIAN_SHARDS)")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Rebuild the lobby; print ``{"tables", "waiting", "running"}`` as JSON."""
    from services.settings import load_settings

    overrides: dict[str, object] = {}
    for name in ("redis_url", "namespace", "shards"):
        if getattr(args, name):
            overrides[name] = getattr(args, name)
    counts = asyncio.run(rebuild(load_settings(**overrides)))
    sys.stdout.write(json.dumps(counts) + "\n")
    return 0


async def rebuild(settings: Settings) -> dict[str, int]:
    """Write every table's lobby row; return how many tables, and how many are listed."""
    from services.lobby import listing
    from services.store.client import connect
    from services.store.redis_store import RedisEventStore
    from services.tables.service import TableService

    client = connect(settings.redis_url)
    keys = settings.keys
    service = TableService(RedisEventStore(client, keys), cache_size=BATCH)
    counts = {"tables": 0, "waiting": 0, "running": 0}
    rows: list[listing.LobbyRow] = []
    try:
        async for table_id in service.store.tables():
            row = listing.lobby_row(await service.load(table_id))
            first = await service.store.read(table_id, 1, 1)
            created = first[0].body.get("time") if first else None
            if isinstance(created, int):
                row = replace(row, created=created)
            counts["tables"] += 1
            if row.status is not None:
                counts[row.status] += 1
            rows.append(row)
            if len(rows) == BATCH:
                await listing.write_rows(client, keys, rows, service.clock())
                rows = []
        await listing.write_rows(client, keys, rows, service.clock())
    finally:
        await client.aclose()
    return counts
