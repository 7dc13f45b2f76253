"""Counts and latencies of a run: totals, and the same per interval for the live display and
the report's time series.

A latency is recorded when the tool learns of what it waited for (see ``docs/loadtest.md``):
``result`` from sending a command to holding its result, ``view`` from sending it to holding a
view of the acting seat built to at least the version the result names.  Percentiles are the
nearest-rank ones of every sample (no histogram, no sampling): a run of a few million
commands keeps a few tens of MB of floats.

>>> percentile([0.3, 0.1, 0.2], 0.5)
0.2
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = ("result", "view")
"""The latencies measured for each command."""


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the nearest-rank ``q`` quantile (0 < q ≤ 1) of ``values``, None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def summary_ms(values: Sequence[float]) -> dict[str, Any]:
    """Return count, p50, p95, p99, max and mean of latencies in seconds, as milliseconds."""
    if not values:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)] * 1000, 3)

    return {
        "count": len(ordered),
        "p50": at(0.50),
        "p95": at(0.95),
        "p99": at(0.99),
        "max": round(ordered[-1] * 1000, 3),
        "mean": round(sum(ordered) / len(ordered) * 1000, 3),
    }


@dataclass
class Interval:
    """What happened in one interval of the run."""

    sent: int = 0
    results: int = 0
    rejected: int = 0
    errors: int = 0
    tables_started: int = 0
    tables_finished: int = 0
    moves_seen: int = 0
    latencies: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})


class Stats:
    """Everything counted in a run; :meth:`cut` closes the current interval."""

    def __init__(self) -> None:
        self.sent = 0
        self.results = 0
        self.accepted = 0
        self.rejections: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.retries: Counter[str] = Counter()
        self.bad_sent = 0
        self.tables_started = 0
        self.tables_finished = 0
        self.deals_finished = 0
        self.moves_seen = 0
        self.setup: dict[str, array[float]] = {"create": array("d"), "join": array("d")}
        self.latencies: dict[str, array[float]] = {k: array("d") for k in KINDS}
        self.interval = Interval()

    # --- recording ---------------------------------------------------------------------------

    def command_sent(self, bad: bool = False) -> None:
        """Count a command sent (``bad``: one the rules must refuse)."""
        self.sent += 1
        self.bad_sent += bad
        self.interval.sent += 1

    def result(self, seconds: float, code: str | None) -> None:
        """Count a command's result after ``seconds``; ``code`` is its rejection code."""
        self.results += 1
        self.interval.results += 1
        self.latencies["result"].append(seconds)
        self.interval.latencies["result"].append(seconds)
        if code is None:
            self.accepted += 1
        else:
            self.rejections[code] += 1
            self.interval.rejected += 1

    def view(self, seconds: float) -> None:
        """Record the time from a command to the view of its version."""
        self.latencies["view"].append(seconds)
        self.interval.latencies["view"].append(seconds)

    def setup_done(self, kind: str, seconds: float) -> None:
        """Record the answer time of a create or a join."""
        self.setup[kind].append(seconds)

    def error(self, code: str) -> None:
        """Count a failure that is no rejection (a transport error, a timeout, …)."""
        self.errors[code] += 1
        self.interval.errors += 1

    def retried(self, code: str) -> None:
        """Count a call sent again after ``code`` (``--retry``: the service was away)."""
        self.retries[code] += 1

    def table_started(self) -> None:
        """Count a table created and seated."""
        self.tables_started += 1
        self.interval.tables_started += 1

    def table_finished(self, deals: int) -> None:
        """Count a table whose match is over after ``deals`` deals."""
        self.tables_finished += 1
        self.deals_finished += deals
        self.interval.tables_finished += 1

    def moves(self, count: int) -> None:
        """Count moves seen on bot tables (commands the tool did not send)."""
        self.moves_seen += count
        self.interval.moves_seen += count

    # --- reading -----------------------------------------------------------------------------

    def cut(self) -> Interval:
        """Return the interval that ends now and start the next one."""
        done, self.interval = self.interval, Interval()
        return done

    def counts(self) -> dict[str, Any]:
        """Return the run's counts so far (cheap: no percentile)."""
        return {
            "commands": {
                "sent": self.sent,
                "results": self.results,
                "unanswered": self.sent - self.results,
                "accepted": self.accepted,
                "rejected": sum(self.rejections.values()),
                "refused_on_purpose": self.bad_sent,
            },
            "rejections": dict(sorted(self.rejections.items())),
            "errors": dict(sorted(self.errors.items())),
            "retries": dict(sorted(self.retries.items())),
            "tables": {
                "started": self.tables_started,
                "finished": self.tables_finished,
                "deals_finished": self.deals_finished,
            },
            "moves_seen": self.moves_seen,
        }

    def totals(self) -> dict[str, Any]:
        """Return the run's counts and latency summaries (milliseconds)."""
        return {
            **self.counts(),
            "latency_ms": {k: summary_ms(v) for k, v in self.latencies.items()},
            "setup_latency_ms": {k: summary_ms(v) for k, v in self.setup.items()},
        }
