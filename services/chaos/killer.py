"""When and what a chaos run kills: a seeded schedule, and the log of the kills made.

The kinds are killed in rounds: each round is every kind once, in an order shuffled by the
seed, so that a short run still kills each kind.  Between two kills the killer waits for the
killed process to be replaced, then a pause drawn uniformly between half and one and a half
times the interval.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from services.chaos.targets import Targets

REPLACE_TIMEOUT_S = 120.0
"""How long a killed process may take to come back before the run says it did not."""


@dataclass(frozen=True)
class Kill:
    """One SIGKILL: when (seconds into the run), what, and how long until it was replaced."""

    at: float
    kind: str
    pid: int
    back_s: float | None
    """None: not replaced within ``REPLACE_TIMEOUT_S``."""

    def as_dict(self) -> dict[str, Any]:
        """Return the kill as JSON data."""
        data = asdict(self)
        data["back_s"] = None if self.back_s is None else round(self.back_s, 3)
        data["at"] = round(self.at, 3)
        return data


def rounds(kinds: Sequence[str], rng: random.Random) -> Iterator[str]:
    """Yield the kinds to kill, forever: every kind once a round, each round shuffled.

    >>> it = rounds(["a", "b", "c"], random.Random(1))
    >>> sorted(next(it) for _ in range(3)), sorted(next(it) for _ in range(3))
    (['a', 'b', 'c'], ['a', 'b', 'c'])
    """
    while True:
        order = list(kinds)
        rng.shuffle(order)
        yield from order


class Killer:
    """Kill processes of the given kinds at seeded random moments until told to stop."""

    def __init__(self, targets: Targets, kinds: Sequence[str], interval: float, seed: int) -> None:
        self.targets = targets
        self.interval = interval
        self.rng = random.Random(seed)
        self.order = rounds(kinds, self.rng)
        self.kills: list[Kill] = []
        self.missed: Counter[str] = Counter()
        """Kinds that had no process to kill when their turn came."""

    def run(self, started: float, until: float, stopped: Callable[[], bool]) -> None:
        """Kill until ``until`` (``time.monotonic``) or until ``stopped()`` says so."""
        while True:
            pause = self.rng.uniform(0.5, 1.5) * self.interval
            if not _sleep_until(min(until, time.monotonic() + pause), stopped):
                return
            if time.monotonic() >= until:
                return
            self.kill_one(next(self.order), started)

    def kill_one(self, kind: str, started: float) -> Kill | None:
        """Kill a process of ``kind`` and wait for its replacement; log and return the kill."""
        at = time.monotonic()
        try:
            pid = self.targets.kill(kind, self.rng.randrange(1 << 16))
        except LookupError:
            self.missed[kind] += 1
            return None
        back = self.targets.replace(kind, pid, REPLACE_TIMEOUT_S)
        kill = Kill(at - started, kind, pid, back)
        self.kills.append(kill)
        return kill

    def counts(self) -> dict[str, int]:
        """Return the kills made of each kind."""
        return dict(Counter(kill.kind for kill in self.kills))


def _sleep_until(deadline: float, stopped: Callable[[], bool]) -> bool:
    """Sleep until ``deadline``; return False when ``stopped()`` said so first."""
    while time.monotonic() < deadline:
        if stopped():
            return False
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
    return not stopped()
