"""``services.lru.Lru``: bounded, least recently used first out."""

from __future__ import annotations

from services.lru import Lru


def test_remember_evicts_the_least_recently_used() -> None:
    cache: Lru[str, int] = Lru(2)
    cache.remember("a", 1)
    cache.remember("b", 2)
    assert cache.recall("a") == 1  # a is now the most recent
    cache.remember("c", 3)
    assert list(cache) == ["a", "c"]
    cache.remember("a", 4)  # storing again refreshes too
    cache.remember("d", 5)
    assert dict(cache) == {"a": 4, "d": 5}


def test_recall_of_a_missing_key_is_none_and_changes_nothing() -> None:
    cache: Lru[str, int] = Lru(3)
    cache.remember("a", 1)
    assert cache.recall("zz") is None
    assert cache.get("a") == 1 and len(cache) == 1 and cache.size == 3
