"""``conquian project``: the projector's subcommand, kept apart so that ``conquian`` starts fast.

The projector itself (Redis client, settings, engine) is imported only when the subcommand
runs; see :mod:`services.projector`.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.cli import Subparsers

__all__ = ["add_parser", "arguments", "run"]


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``project`` subcommand and its arguments."""
    parser = subparsers.add_parser(
        name,
        help="keep table views up to date from the shard feeds",
        description="Follows every shard feed and writes each table's public, seat and "
        "spectator views with the checkpoint.  Runs until SIGINT/SIGTERM unless --once or "
        "--rebuild is given.",
    )
    arguments(parser)
    parser.set_defaults(handler=run)
    return parser


def arguments(parser: argparse.ArgumentParser) -> None:
    """Add the arguments of ``conquian project`` and ``python -m services.projector``."""
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="rebuild every view from the event streams, then exit (see --follow)",
    )
    parser.add_argument(
        "--once", action="store_true", help="apply what the feeds hold now, then exit"
    )
    parser.add_argument(
        "--follow", action="store_true", help="after --rebuild, keep following the feeds"
    )
    parser.add_argument("--redis-url", help="Redis URL (default: REDIS_URL or settings)")
    parser.add_argument("--namespace", help="key namespace (default: CONQUIAN_NAMESPACE)")
    parser.add_argument("--shards", type=int, help="number of shards (default: CONQUIAN_SHARDS)")
    parser.add_argument(
        "--metrics-port", type=int, default=0, help="serve Prometheus metrics on this port"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``conquian project`` with parsed arguments; returns the exit status."""
    from services.projector import run_command

    return run_command(args)
