"""Fixtures of the event-store tests: ``store`` runs each contract test against both stores.

The Redis fixtures (``redis_url``, ``redis_client``, ``redis_ns``) come from tests/conftest.py.
"""

from __future__ import annotations

import pytest

from services.store import EventStore, KeySpace, MemoryEventStore, RedisEventStore


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def store(request: pytest.FixtureRequest) -> EventStore:
    """The memory store and the Redis store (on the test's own key namespace)."""
    if request.param == "memory":
        return MemoryEventStore(KeySpace("mem", shards=4))
    client = request.getfixturevalue("redis_client")
    ns = request.getfixturevalue("redis_ns")
    return RedisEventStore(client, KeySpace(ns, shards=4))
