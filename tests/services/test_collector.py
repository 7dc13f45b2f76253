"""services.collector: full collections leave the survivors frozen; cycles wait for the thaw."""

from __future__ import annotations

import gc
import weakref

from services.collector import settle_long_lived


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_survivors_are_frozen_and_plain_garbage_still_goes() -> None:
    restore = settle_long_lived(thaw_every=3600)
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0  # what start-up built
        kept = [Node() for _ in range(1000)]
        gc.collect()
        assert gc.get_freeze_count() >= frozen + len(kept)  # survived a full collection
        assert gc.get_count()[0] < 100 and len(gc.get_objects(generation=2)) < 100
        gone = weakref.ref(kept[0])
        del kept  # no cycle: reference counting frees them, frozen or not
        assert gone() is None
    finally:
        restore()
    assert gc.get_freeze_count() == 0


def test_a_frozen_cycle_is_collected_after_the_thaw() -> None:
    restore = settle_long_lived(thaw_every=3600)
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        gc.collect()  # the cycle survives (still referenced) and is frozen
        cycle = weakref.ref(a)
        del a, b
        gc.collect()
        assert cycle() is not None  # frozen garbage cycles wait for the thaw
    finally:
        restore()
    gc.collect()
    assert cycle() is None

    restore = settle_long_lived(thaw_every=0)  # every full collection thaws
    try:
        c, d = Node(), Node()
        c.other, d.other = d, c
        gc.collect()
        later = weakref.ref(c)
        del c, d
        gc.collect()  # the thawed heap is walked: the cycle goes
        assert later() is None
    finally:
        restore()
