"""Serving the gateway alone: ``python -m services.gateway``.

(``conquian serve``, ``services/serve/cli.py``, supervises it with every other service; the deploy
files run ``uvicorn --factory services.gateway.app:create_app``.)

Settings come from the environment (``services.settings``); ``--host``/``--port`` override
``CONQUIAN_HTTP_HOST``/``CONQUIAN_HTTP_PORT``.  ``--with-worker`` and ``--with-projector`` run
an engine worker and a projector in the same process (a one-process deployment for development:
their metrics then show on the gateway's ``/metrics``).  Seat tokens travel in WebSocket query
strings: ``create_app`` makes uvicorn's log lines show ``token=<redacted>`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from services.log import configure
from services.serve.gc_tuning import settle_long_lived
from services.settings import Settings, load_settings

MAX_WS_MESSAGE = 64 * 1024


async def serve(
    settings: Settings, *, with_worker: bool = False, with_projector: bool = False
) -> None:
    """Serve the gateway until SIGINT/SIGTERM; run a worker and a projector beside it if asked."""
    import uvicorn

    from services.gateway.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        host=settings.http_host,
        port=settings.http_port,
        ws_max_size=MAX_WS_MESSAGE,
        proxy_headers=True,
        timeout_graceful_shutdown=10,
        log_config=None,
    )
    server = uvicorn.Server(config)
    stop = asyncio.Event()
    helpers: list[asyncio.Task[Any]] = []
    if with_worker:
        from services.engine_worker import run_worker

        helpers.append(asyncio.create_task(run_worker(settings, stop)))
    if with_projector:
        from services.projector.run import run_projector

        helpers.append(asyncio.create_task(run_projector(settings, stop)))
    try:
        await server.serve()
    finally:
        stop.set()
        for task in helpers:
            with contextlib.suppress(Exception):
                await task


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to listen on (CONQUIAN_HTTP_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on (CONQUIAN_HTTP_PORT)")
    parser.add_argument(
        "--with-worker", action="store_true", help="run an engine worker in this process"
    )
    parser.add_argument(
        "--with-projector", action="store_true", help="run a projector in this process"
    )


def run(args: argparse.Namespace) -> int:
    """Run the server from parsed arguments; returns the exit status."""
    overrides: dict[str, Any] = {}
    if args.host:
        overrides["http_host"] = args.host
    if args.port is not None:
        overrides["http_port"] = args.port
    settings = load_settings(**overrides)
    configure(settings.log_level)
    settle_long_lived()
    asyncio.run(serve(settings, with_worker=args.with_worker, with_projector=args.with_projector))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m services.gateway``."""
    parser = argparse.ArgumentParser(prog="python -m services.gateway", description=__doc__)
    _arguments(parser)
    return run(parser.parse_args(argv))
