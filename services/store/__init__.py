"""The event store: per-table hash-chained event streams on Redis, and the same in memory.

>>> from services.store import KeySpace, MemoryEventStore, RedisEventStore  # doctest: +SKIP
"""

from .base import (
    GENESIS_HASH,
    AppendRequest,
    AppendResult,
    EventStore,
    FeedEntry,
    Head,
    InvalidEvent,
    NewEvent,
    StoredEvent,
    StoreError,
    VersionConflict,
)
from .keys import DEFAULT_NS, DEFAULT_SHARDS, InvalidTableId, KeySpace, command_key
from .memory_store import MemoryEventStore
from .redis_store import RedisEventStore

__all__ = [
    "DEFAULT_NS",
    "DEFAULT_SHARDS",
    "GENESIS_HASH",
    "AppendRequest",
    "AppendResult",
    "EventStore",
    "FeedEntry",
    "Head",
    "InvalidEvent",
    "InvalidTableId",
    "KeySpace",
    "MemoryEventStore",
    "NewEvent",
    "RedisEventStore",
    "StoreError",
    "StoredEvent",
    "VersionConflict",
    "command_key",
]
