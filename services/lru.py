"""A bounded in-memory cache that forgets the least recently used entry first.

The services keep folded tables (engine worker, projector), seat-token matches (gateway), deal
starts (gateway feed) and the last move sent per table (bots runner) in memory, each bounded:
:class:`Lru` is that one mechanism.  It is an ``OrderedDict``, so reads, ``pop`` and iteration
work as usual; :meth:`Lru.remember` stores and evicts, :meth:`Lru.recall` reads and marks used.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

__all__ = ["Lru"]

K = TypeVar("K")
V = TypeVar("V")


class Lru(OrderedDict[K, V]):
    """At most ``size`` entries; storing one past that drops the least recently used."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def remember(self, key: K, value: V) -> None:
        """Store ``value`` under ``key`` as the most recently used, evicting beyond ``size``."""
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)

    def recall(self, key: K) -> V | None:
        """Return the value under ``key`` (None when absent), marking it most recently used."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value
