"""Fixtures of the service tests: default settings on the test's namespace, and a whole
deployment in one process on them (``tests/services/gateway_stack.py``).  A test file that needs
other settings defines its own ``settings``, which overrides this one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.settings import Settings, load_settings
from tests.services.gateway_stack import TEST_SECRET, Stack


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret=TEST_SECRET,
        result_wait_ms=5000,
    )


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    async with Stack(settings) as running:
        yield running
