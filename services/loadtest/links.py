"""What a driver does for one table, whatever carries it: the ``TableLink`` protocol, and the
loop that plays a scripted table through one.

A table has at most one command in flight: the tool sends a move, waits for its result, then
for a view of the sending seat built to at least the result's version, and only then looks for
the next move (whose seat's view must be at the newest version known).  The time from the send
to the result and to that view are the two latencies of the report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from services.loadtest.pacing import Pacer
from services.loadtest.play import Move, TablePlay, command_json
from services.loadtest.stats import Stats


class NoService(Exception):
    """The service to load does not answer: the run does not start."""


class TableGivenUp(Exception):
    """A table the tool stops playing; ``code`` is counted among the run's errors."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass
class Context:
    """What every table of a run shares: counters, pacing, deadlines and the stop signal."""

    stats: Stats
    pacer: Pacer
    result_timeout: float
    stop: asyncio.Event = field(default_factory=asyncio.Event)


class TableLink(Protocol):
    """One table as a driver carries it (``gateway`` or ``streams``)."""

    play: TablePlay

    async def open(self, stats: Stats) -> None:
        """Create the table and seat both players (or the bots); raise TableGivenUp."""

    async def send(self, seat: int, command: Mapping[str, Any]) -> float:
        """Send a seat's command; return the time it went out (``time.perf_counter``)."""

    async def result(self, command_id: str, deadline: float) -> tuple[Mapping[str, Any], float]:
        """Return a command's result and when it arrived; raise TableGivenUp at the deadline."""

    async def view_at(self, seat: int, version: int, deadline: float) -> float:
        """Return when a view of ``seat`` at ``version`` or later arrived (feeding ``play``)."""

    async def changed(self, deadline: float) -> None:
        """Wait until a newer view of either seat arrived (feeding ``play``)."""

    async def watch(self, deadline: float, stats: Stats) -> int:
        """Watch a bot table until its match is over; count its moves; return its deals."""

    async def close(self) -> None:
        """Let go of the table's connections."""


def _code(result: Mapping[str, Any]) -> str | None:
    """Return a result's rejection code, None for an accepted command."""
    if result.get("ok") is True:
        return None
    code = result.get("code")
    return code if isinstance(code, str) else "result/unknown"


async def play_scripted(link: TableLink, context: Context) -> bool:
    """Play a table's match to its end; return False when stopped before it ended.

    Raises TableGivenUp when a result or a view does not come in time.
    """
    play = link.play
    sent = 0
    while not play.over:
        if context.stop.is_set():
            return False
        move = play.next_move()
        if move is None:
            await link.changed(time.perf_counter() + context.result_timeout)
            continue
        await context.pacer.wait()
        if context.stop.is_set():
            return False
        sent += 1
        command_id = f"{play.table_id}-{sent:05d}"
        await _one(link, context, move, command_id)
    return True


async def _one(link: TableLink, context: Context, move: Move, command_id: str) -> None:
    """Send one move and wait for its result and, when accepted, its view."""
    stats = context.stats
    command = command_json(move, link.play.table_id, command_id)
    stats.command_sent(move.bad)
    started = await link.send(move.seat, command)
    deadline = started + context.result_timeout
    result, arrived = await link.result(command_id, deadline)
    if result.get("ok") is None or result.get("pending"):  # no result: the gateway stopped waiting
        raise TableGivenUp("result/pending", f"{command_id} was still queued")
    code = _code(result)
    stats.result(arrived - started, code)
    if code is not None:
        if not move.bad:
            raise TableGivenUp("result/unexpected_rejection", f"{command_id}: {code}")
        return
    if move.bad:
        raise TableGivenUp("result/accepted_out_of_turn", f"{command_id} was accepted")
    version = result.get("version")
    if not isinstance(version, int):
        raise TableGivenUp("result/no_version", f"{command_id}: {dict(result)!r}")
    link.play.see_version(version)
    seen = await link.view_at(move.seat, version, deadline)
    stats.view(seen - started)
