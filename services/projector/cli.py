"""The command line: ``conquian project`` and ``python -m services.projector``.

The parser is built without importing the projector itself (Redis client, engine), so that
``conquian`` starts fast; :func:`run_command` imports it when the subcommand runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.projector.run import Projector
    from services.settings import Settings

__all__ = ["add_parser", "arguments", "main", "run_command"]


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
    parser.set_defaults(handler=run_command)
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


def _settings(args: argparse.Namespace) -> Settings:
    from services.settings import load_settings

    overrides: dict[str, object] = {}
    if args.redis_url:
        overrides["redis_url"] = args.redis_url
    if args.namespace:
        overrides["namespace"] = args.namespace
    if args.shards:
        overrides["shards"] = args.shards
    return load_settings(**overrides)


def run_command(args: argparse.Namespace) -> int:
    """Run ``conquian project`` with its parsed arguments; returns the exit status."""
    from services.log import configure
    from services.projector.records import ProjectorBusy

    settings = _settings(args)
    configure(settings.log_level)
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port)
    try:
        return _run_loop(_run(args, settings))
    except ProjectorBusy as exc:
        sys.stderr.write(f"conquian project: {exc}\n")
        return 1


def _run_loop(main: Any) -> int:
    """Run the projector's coroutine on uvloop if installed (less CPU per round), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)  # type: ignore[no-any-return]
    return uvloop.run(main)  # type: ignore[no-any-return]


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from services.projector.run import projector_for
    from services.store.client import connect

    if args.follow or not (args.once or args.rebuild):
        await _follow_until_signalled(args, settings)
        return 0
    redis = connect(settings.redis_url)
    projector = projector_for(redis, settings)
    try:
        if args.rebuild:
            return await _rebuild_once(projector)
        return await _catch_up_once(projector, settings)
    finally:
        with contextlib.suppress(Exception):
            await projector.release()
        await redis.aclose()


async def _follow_until_signalled(args: argparse.Namespace, settings: Settings) -> None:
    """Follow the shards (rebuilding first with ``--rebuild``) until SIGINT or SIGTERM."""
    from services.projector.run import run_projector
    from services.serve.gc_tuning import YOUNG_BACKSTOP, settle_long_lived

    settle_long_lived(young_threshold=YOUNG_BACKSTOP)  # with collect_at_rest between batches
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await run_projector(settings, stop, rebuild=args.rebuild)


async def _rebuild_once(projector: Projector) -> int:
    """``--rebuild``: rebuild every view, print what was done; 1 when a table failed."""
    rebuilt = await projector.rebuild()
    sys.stdout.write(
        f"rebuilt {rebuilt.tables} tables from {rebuilt.events} events "
        f"({rebuilt.deleted} stale view keys deleted, {rebuilt.failed} failed)\n"
    )
    return 1 if rebuilt.failed else 0


async def _catch_up_once(projector: Projector, settings: Settings) -> int:
    """``--once``: apply every entry of the shards whose lease is free; 1 when a table failed."""
    held = await projector.claim()
    busy = sorted(set(range(settings.shards)) - held)
    stats = await projector.catch_up(held)
    skipped = f"; shards {', '.join(map(str, busy))} held by another projector" if busy else ""
    sys.stdout.write(
        f"applied {stats.entries} feed entries, {stats.events} events, "
        f"{stats.tables} tables written{skipped}\n"
    )
    return 1 if stats.failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m services.projector``: the same arguments as ``conquian project``."""
    parser = argparse.ArgumentParser(prog="python -m services.projector")
    arguments(parser)
    return run_command(parser.parse_args(argv))
