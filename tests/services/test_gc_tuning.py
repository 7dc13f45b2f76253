"""services.serve.gc_tuning: full collections leave survivors frozen; cycles wait for the thaw."""

from __future__ import annotations

import gc
import weakref

from services.serve.gc_tuning import collect_at_rest, settle_long_lived


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


def test_young_threshold_is_set_and_put_back() -> None:
    before = gc.get_threshold()
    restore = settle_long_lived(thaw_every=3600, young_threshold=50_000)
    try:
        assert gc.get_threshold() == (50_000, *before[1:])
    finally:
        restore()
    assert gc.get_threshold() == before


def test_collect_at_rest_waits_for_enough_young_objects() -> None:
    restore = settle_long_lived(thaw_every=3600, young_threshold=1_000_000)
    try:
        collected: list[int] = []

        def seen(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                collected.append(info["generation"])

        gc.callbacks.append(seen)
        try:
            few = [Node() for _ in range(100)]
            assert collect_at_rest(at_rest=5_000) is None and collected == []
            many = [Node() for _ in range(6_000)]
            assert collect_at_rest(at_rest=5_000) == 0 and collected == [0]
            assert gc.get_count()[0] < 100  # the young generation was walked and emptied
        finally:
            gc.callbacks.remove(seen)
        del few, many
    finally:
        restore()


def test_collect_at_rest_frees_a_dropped_cycle() -> None:
    restore = settle_long_lived(thaw_every=3600, young_threshold=1_000_000)
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a
        cycle = weakref.ref(a)
        del a, b  # garbage now, but only the collector can free a cycle
        kept = [Node() for _ in range(3_000)]
        assert cycle() is not None
        assert collect_at_rest(at_rest=2_000) is not None
        assert cycle() is None
        del kept
    finally:
        restore()


def test_collect_at_rest_takes_the_generation_the_interpreter_would() -> None:
    restore = settle_long_lived(thaw_every=3600, young_threshold=1_000_000)
    try:
        _, middle_threshold, old_threshold = gc.get_threshold()
        generations = []
        for _ in range((middle_threshold + 2) * (old_threshold + 2)):
            kept = [Node() for _ in range(300)]
            generations.append(collect_at_rest(at_rest=200))
            del kept
        # an older generation once the younger one's collections passed its threshold, as in
        # CPython's own choice (counts above the threshold, from the full collection at start)
        assert generations[: middle_threshold + 2] == [0] * (middle_threshold + 1) + [1]
        first_full = generations.index(2)
        assert first_full == (middle_threshold + 2) * (old_threshold + 1)
        assert generations.count(1) == old_threshold + 1
    finally:
        restore()
