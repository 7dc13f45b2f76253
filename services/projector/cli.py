"""The command line: ``conquian project`` and ``python -m services.projector``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence
from typing import Any

from services.gc_tuning import YOUNG_BACKSTOP, settle_long_lived
from services.project_cli import arguments
from services.projector.records import ProjectorBusy
from services.projector.run import Projector, projector_for, run_projector
from services.settings import Settings, load_settings
from services.store.client import connect


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, object] = {}
    if args.redis_url:
        overrides["redis_url"] = args.redis_url
    if args.namespace:
        overrides["namespace"] = args.namespace
    if args.shards:
        overrides["shards"] = args.shards
    return load_settings(**overrides)


def run_command(args: argparse.Namespace) -> int:
    """Run ``conquian project`` with its parsed arguments (``services.project_cli``)."""
    from services.log import configure

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
