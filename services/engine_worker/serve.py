"""Running an engine worker: ``run_worker`` in a loop of yours, ``main`` as the process."""

from __future__ import annotations

import asyncio
import os
import signal

from services.collector import YOUNG_BACKSTOP, settle_long_lived
from services.engine_worker.worker import EngineWorker
from services.log import configure, get_logger
from services.outage import connect_when_up
from services.settings import Settings, load_settings


async def run_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Run an engine worker until ``stop`` is set (forever when None), then stop cleanly."""
    stop = stop or asyncio.Event()
    probe = await connect_when_up(settings.redis_url, get_logger("engine_worker"), stop)
    if probe is None:  # stopped before Redis answered
        return
    await probe.aclose()
    worker = EngineWorker(settings)
    try:
        await worker.start(stop)
        await worker.run(stop)
    finally:
        await worker.close()


def main() -> int:
    """``python -m services.engine_worker``: run until SIGTERM or SIGINT (on uvloop if there)."""
    settings = load_settings()
    configure(settings.log_level)
    settle_long_lived(young_threshold=YOUNG_BACKSTOP)  # with collect_at_rest between batches
    port = os.environ.get("CONQUIAN_METRICS_PORT")
    if port:
        from prometheus_client import start_http_server

        start_http_server(int(port), addr=settings.http_host)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_worker(settings, stop)

    try:  # uvloop (installed with uvicorn[standard]) cuts the event loop's share of the CPU
        import uvloop
    except ImportError:
        asyncio.run(serve())
    else:
        uvloop.run(serve())
    return 0
