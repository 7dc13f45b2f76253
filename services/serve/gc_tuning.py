"""Tuning the cyclic garbage collector for a long-running service.

:func:`settle_long_lived` freezes what survived full collections; :func:`collect_at_rest`
collects between two batches.  Why, with the measured pauses: ``docs/performance.md``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

THAW_EVERY = 900.0
"""Seconds between two full collections that walk the whole heap (frozen objects included)."""
YOUNG_BACKSTOP = 50_000
"""Generation 0's threshold in a service that calls :func:`collect_at_rest` between batches:
the collector runs by itself only for a batch that keeps this many more objects alive."""
AT_REST = 2_000
"""Young objects left at a batch boundary that are worth a collection there."""


def settle_long_lived(
    thaw_every: float = THAW_EVERY, young_threshold: int | None = None
) -> Callable[[], None]:
    """Freeze what exists now and what each full collection leaves; with ``young_threshold``,
    set generation 0's threshold to it (for a service calling :func:`collect_at_rest`).  Return
    a function that puts the collector back as it was (tests)."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    if young_threshold is not None:
        gc.set_threshold(young_threshold, *thresholds[1:])
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
        gc.set_threshold(*thresholds)
        gc.unfreeze()

    return restore


def collect_at_rest(at_rest: int = AT_REST) -> int | None:
    """Between two batches: collect when at least ``at_rest`` young objects were left since the
    last collection; return the generation collected (None: too few to be worth it).

    The generation is the one the interpreter would choose: the oldest whose count passed its
    threshold (generation 1 counts collections of generation 0, generation 2 those of 1).
    """
    young, middle, old = gc.get_count()
    if young < at_rest:
        return None
    _, middle_threshold, old_threshold = gc.get_threshold()
    generation = 2 if old > old_threshold else 1 if middle > middle_threshold else 0
    gc.collect(generation)
    return generation
