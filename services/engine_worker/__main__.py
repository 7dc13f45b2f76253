"""``python -m services.engine_worker``: run an engine worker until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from services.engine_worker.worker import run_worker
from services.log import configure
from services.serve.gc_tuning import YOUNG_BACKSTOP, settle_long_lived
from services.settings import load_settings


def main() -> int:
    """Run an engine worker with the settings of the environment (on uvloop if there); serve
    its metrics on ``CONQUIAN_METRICS_PORT`` when set."""
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


if __name__ == "__main__":
    sys.exit(main())
