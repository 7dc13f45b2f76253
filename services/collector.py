"""The cyclic garbage collector, set for a long-running service.

A service keeps many long-lived objects: the folded tables of its caches, each a few thousand
tuples, dataclasses and models.  CPython's full (generation 2) collection walks every one of
them, and while the caches fill and turn over it runs every few seconds; under 3,000 commands/s
an engine worker paused 27 – 126 ms in each (``docs/performance.md``), and for that long it
answered nothing.

:func:`settle_long_lived` freezes (``gc.freeze()``) what start-up built and, after each full
collection, what survived it: the next full collection walks only what is newer, and pauses for
a few milliseconds.  Frozen objects are still freed by reference counting as soon as nothing
refers to them (an evicted table holds no reference cycle); only garbage *cycles* among frozen
objects wait, until the first full collection after ``thaw_every`` seconds, which unfreezes
everything so that the full collection after it walks the whole heap once (one long pause in a
quarter of an hour instead of one every few seconds).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

THAW_EVERY = 900.0
"""Seconds between two full collections that walk the whole heap (frozen objects included)."""


def settle_long_lived(thaw_every: float = THAW_EVERY) -> Callable[[], None]:
    """Freeze what exists now and what each full collection leaves; return a function that
    puts the collector back as it was (tests)."""
    gc.collect()
    gc.freeze()
    thawed = time.monotonic()

    def after_collection(phase: str, info: dict[str, Any]) -> None:
        nonlocal thawed
        if phase != "stop" or info.get("generation") != 2:
            return
        now = time.monotonic()
        if now - thawed >= thaw_every:
            thawed = now
            gc.unfreeze()  # the next full collection walks everything, frozen cycles included
        else:
            gc.freeze()

    gc.callbacks.append(after_collection)

    def restore() -> None:
        if after_collection in gc.callbacks:
            gc.callbacks.remove(after_collection)
        gc.unfreeze()

    return restore
