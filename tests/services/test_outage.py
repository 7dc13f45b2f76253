"""The backoff every service uses while Redis is away (``services.store.outage``)."""

from __future__ import annotations

import itertools
from typing import Any

import redis.exceptions

from services.store.outage import FIRST_PAUSE_S, MAX_PAUSE_S, OUTAGE_ERRORS, Outage


class Lines:
    """A logger that keeps its lines."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    info = warning


def test_the_pause_doubles_up_to_a_second_and_each_outage_is_logged_once() -> None:
    log = Lines()
    outage = Outage(log, "read")
    error = redis.exceptions.ConnectionError("Connection refused")
    pauses = [outage.failed(error) for _ in range(10)]
    assert pauses[0] == FIRST_PAUSE_S
    assert all(b == min(2 * a, MAX_PAUSE_S) for a, b in itertools.pairwise(pauses))
    assert max(pauses) == MAX_PAUSE_S == 1.0
    assert outage.ongoing
    outage.ok()
    outage.ok()  # nothing to say the second time
    assert [event for event, _ in log.lines] == ["redis_unavailable", "redis_back"]
    assert log.lines[1][1]["failures"] == 10 and log.lines[1][1]["loop"] == "read"
    assert outage.failed(error) == FIRST_PAUSE_S  # a new outage starts small again


def test_an_outage_is_what_redis_raises_while_away_not_a_refused_command() -> None:
    away = [
        redis.exceptions.ConnectionError("refused"),
        redis.exceptions.TimeoutError("timeout"),
        redis.exceptions.BusyLoadingError("loading the AOF"),
        redis.exceptions.ReadOnlyError("a replica now"),
        ConnectionRefusedError(111, "refused"),
    ]
    assert all(isinstance(e, OUTAGE_ERRORS) for e in away)
    assert not isinstance(redis.exceptions.ResponseError("WRONGTYPE"), OUTAGE_ERRORS)
    assert not isinstance(redis.exceptions.NoScriptError("NOSCRIPT"), OUTAGE_ERRORS)
