"""A streams run polls a waiting table at a pace set by how long results take."""

from __future__ import annotations

import pytest

from services.loadtest.options import Options
from services.loadtest.streams import FIRST_POLL, MAX_POLL, StreamsDriver

pytestmark = pytest.mark.redis


async def test_polls_start_later_when_results_take_longer(redis_url: str, redis_ns: str) -> None:
    """Feed entries and result hints wake a table; a poll is for a lost hint only. With 10,000
    tables a result takes seconds, and polls every quarter second read each table six times a
    command: the pause grows with the typical wait."""
    driver = StreamsDriver(Options(via="streams", redis_url=redis_url, namespace=redis_ns))
    try:
        assert driver.poll_start() == (FIRST_POLL, MAX_POLL)  # nothing seen yet
        for _ in range(1000):
            driver.observe(0.01)
        assert driver.poll_start() == (FIRST_POLL, MAX_POLL)  # fast results: the floor
        for _ in range(1000):
            driver.observe(5.0)
        first, longest = driver.poll_start()
        assert first == pytest.approx(10.0, rel=0.01) and longest == pytest.approx(20.0, rel=0.01)
    finally:
        await driver.client.aclose()
