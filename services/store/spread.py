"""Where the shards are: which master of a Redis Cluster holds each shard's slot.

Every key of a shard carries its hash tag ``{sNN}``, so a shard lives in one slot, on one
master. :func:`shard_spread` asks the cluster client's slot map; ``conquian shards`` prints it.
How many shards a master needs for an even load: ``docs/deploy.md``, "Redis Cluster".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

from services.store.keys import KeySpace

if TYPE_CHECKING:
    from services.cli import Subparsers


async def shard_spread(client: Any, keys: KeySpace) -> dict[str, list[int]]:
    """The shards of ``keys`` by the address (``host:port``) of the master holding them; one
    Redis holds them all (named by the client's own address)."""
    if not isinstance(client, RedisCluster):
        kwargs = client.connection_pool.connection_kwargs
        where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
        return {str(where): list(range(keys.shards))}
    await client.initialize()
    spread: dict[str, list[int]] = {node.name: [] for node in client.get_primaries()}
    for shard in range(keys.shards):
        node = client.get_node_from_key(keys.shard_prefix(shard))
        where = "uncovered" if node is None else node.name  # a slot no master serves
        spread.setdefault(where, []).append(shard)
    return spread


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """``conquian shards``: the shards each Redis master holds."""
    parser = subparsers.add_parser(
        name,
        help="show which Redis master holds each shard (one Redis: all of them)",
        description="Print the shards of the deployment by the Redis master that holds them: "
        "on a Redis Cluster, the master of each shard's slot. A master with far more shards "
        "than the others takes that much more of the load (docs/deploy.md).",
    )
    parser.add_argument("--redis-url", help="Redis URL (default: REDIS_URL or settings)")
    parser.add_argument("--namespace", help="key namespace (default: CONQUIAN_NAMESPACE)")
    parser.add_argument("--shards", type=int, help="number of shards (default: CONQUIAN_SHARDS)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Print the spread; 0."""
    from services.settings import load_settings
    from services.store.client import connect

    overrides = {
        key: value
        for key, value in (
            ("redis_url", args.redis_url),
            ("namespace", args.namespace),
            ("shards", args.shards),
        )
        if value is not None
    }
    settings = load_settings(**overrides)

    async def spread() -> dict[str, list[int]]:
        client = connect(settings.redis_url)
        try:
            return await shard_spread(client, settings.keys)
        finally:
            await client.aclose()

    found = asyncio.run(spread())
    if args.json:
        sys.stdout.write(json.dumps(found, sort_keys=True) + "\n")
        return 0
    mean = settings.shards / max(len(found), 1)
    for where, shards in sorted(found.items()):
        share = len(shards) / mean if mean else 0.0
        listed = " ".join(str(s) for s in shards) or "-"
        sys.stdout.write(f"{where}  {len(shards):4d} shards ({share:.2f} x even)  {listed}\n")
    return 0
