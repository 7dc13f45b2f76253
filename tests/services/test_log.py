"""services.log: JSON lines with the bound fields, each line one write (services share stderr)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from services import log


class Writes:
    """A stream that keeps each ``write`` call apart."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return len(text)

    def flush(self) -> None:
        return None


@pytest.fixture
def stream() -> Iterator[Writes]:
    handlers = logging.root.handlers[:]
    writes = Writes()
    log.configure("INFO", stream=writes)
    yield writes
    structlog.reset_defaults()
    log._configured = False
    logging.root.handlers[:] = handlers


def test_a_line_is_one_write_of_json_with_the_bound_fields(stream: Writes) -> None:
    logger = log.get_logger("engine_worker", worker="w1").bind(table="T1", seat=0)
    logger.info("command accepted", command_id="c-1", version=7)
    # another process writing to the same stderr between two writes of one line would have
    # joined two lines into one: each line must be a single write, newline included
    (line,) = stream.calls
    assert line.endswith("\n") and line.count("\n") == 1
    record = json.loads(line)
    assert record["event"] == "command accepted"
    assert record["logger"] == "engine_worker" and record["worker"] == "w1"
    assert (record["table"], record["seat"], record["command_id"], record["version"]) == (
        "T1",
        0,
        "c-1",
        7,
    )
    assert record["level"] == "info" and record["timestamp"].endswith("Z")


def test_below_the_level_nothing_is_written(stream: Writes) -> None:
    log.get_logger("projector").debug("view", table="T1", version=3)
    assert stream.calls == []
