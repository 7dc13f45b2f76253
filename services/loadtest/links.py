"""What a driver does for one table, whatever carries it: the ``TableLink`` protocol, and the
loop that plays a scripted table through one (``docs/loadtest.md``, "Module notes").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from services.loadtest.ledger import Ledger
from services.loadtest.pacing import Pacer
from services.loadtest.play import Move, TablePlay, command_json
from services.loadtest.stats import Stats

T = TypeVar("T")


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
    retry: bool = False
    retry_for: float = 600.0
    """With ``retry``, how long one command may be tried again before its table is given up."""
    ledger: Ledger | None = None


RETRY_PAUSE = 0.1
RETRY_PAUSE_MAX = 1.0
UNAVAILABLE = frozenset({"store/unavailable", "table/busy", "view/not_ready"})
"""Answers that say the service is away or busy, not that it refused: send the call again."""
RETRIED = frozenset({"result/timeout", "result/pending", "view/timeout", "redis/error"})
"""Failures of the carrier that a call made again may get past (with every ``ws/`` and
``http/`` failure, and the ``UNAVAILABLE`` answers)."""


def retry_pause(attempt: int) -> float:
    """Return the seconds before the ``attempt``-th call made again (from 1): ``RETRY_PAUSE``
    doubling up to ``RETRY_PAUSE_MAX``."""
    return min(RETRY_PAUSE_MAX, RETRY_PAUSE * 2.0 ** (attempt - 1))


def may_retry(code: str) -> bool:
    """Say whether a call that failed with ``code`` is worth making again under ``--retry``.

    >>> [may_retry(c) for c in ("ws/closed", "store/unavailable", "move/not_your_turn")]
    [True, True, False]
    """
    return code in RETRIED or code in UNAVAILABLE or code.startswith(("ws/", "http/"))


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

    async def reconnect(self) -> None:
        """Open the table's connections again after a failure (``--retry``); raise
        TableGivenUp when the service is still away."""

    async def close(self) -> None:
        """Let go of the table's connections."""


def _code(result: Mapping[str, Any]) -> str | None:
    """Return a result's rejection code, None for an accepted command."""
    if result.get("ok") is True:
        return None
    code = result.get("code")
    return code if isinstance(code, str) else "result/unknown"


def check_answer(result: Mapping[str, Any], command_id: str, retry: bool) -> None:
    """Raise TableGivenUp for an answer that decides nothing: still queued
    (``result/pending``), or with ``retry`` one that says the service is away or busy (its
    code, one of :data:`UNAVAILABLE`), which the caller may make again."""
    if result.get("ok") is None or result.get("pending"):  # the gateway stopped waiting
        raise TableGivenUp("result/pending", f"{command_id} was still queued")
    code = result.get("code")
    if retry and result.get("ok") is False and code in UNAVAILABLE:
        raise TableGivenUp(str(code), f"{command_id}: {result.get('message')}")


def count_answer(
    context: Context,
    table_id: str,
    command_id: str,
    move: Move,
    result: Mapping[str, Any],
    waited: float,
) -> int | None:
    """Count a move's answer, ``waited`` seconds after its send; return the version of an
    accepted move (written to the ledger), None for one refused as it had to be.

    Raises TableGivenUp for a legal move refused, a move out of turn accepted, or an
    acceptance without a version.
    """
    code = _code(result)
    context.stats.result(waited, code)
    if code is not None:
        if not move.bad:
            raise TableGivenUp("result/unexpected_rejection", f"{command_id}: {code}")
        return None
    if move.bad:
        raise TableGivenUp("result/accepted_out_of_turn", f"{command_id} was accepted")
    version = result.get("version")
    if not isinstance(version, int):
        raise TableGivenUp("result/no_version", f"{command_id}: {dict(result)!r}")
    if context.ledger is not None:
        context.ledger.accepted(table_id, command_id, move.seat, version)
    return version


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
            await _ride_out(link, context, time.perf_counter(), lambda: _changed(link, context))
            continue
        await context.pacer.wait()
        if context.stop.is_set():
            return False
        sent += 1
        command_id = f"{play.table_id}-{sent:05d}"
        await _one(link, context, move, command_id)
    return True


async def _changed(link: TableLink, context: Context) -> None:
    await link.changed(time.perf_counter() + context.result_timeout)


async def _one(link: TableLink, context: Context, move: Move, command_id: str) -> None:
    """Send one move and wait for its result and, when accepted, its view (riding out the
    service's restarts with ``retry``: the latencies then count from the first send)."""
    stats = context.stats
    command = command_json(move, link.play.table_id, command_id)
    stats.command_sent(move.bad)
    first = time.perf_counter()

    async def answered() -> tuple[Mapping[str, Any], float, float]:
        started = await link.send(move.seat, command)
        result, arrived = await link.result(command_id, started + context.result_timeout)
        check_answer(result, command_id, context.retry)
        return result, arrived, started

    result, arrived, started = await _ride_out(link, context, first, answered)
    if context.retry:
        started = first
    table_id = link.play.table_id
    version = count_answer(context, table_id, command_id, move, result, arrived - started)
    if version is None:
        return
    link.play.see_version(version)

    async def viewed() -> float:
        return await link.view_at(move.seat, version, time.perf_counter() + context.result_timeout)

    seen = await _ride_out(link, context, first, viewed)
    stats.view(seen - started)


async def _ride_out(
    link: TableLink, context: Context, since: float, call: Callable[[], Awaitable[T]]
) -> T:
    """Return what ``call`` returns; with ``context.retry``, make it again on reconnected
    links while it fails for want of the service, for up to ``retry_for`` seconds."""
    attempt = 0
    while True:
        try:
            if attempt:
                await link.reconnect()
            return await call()
        except TableGivenUp as error:
            late = time.perf_counter() - since > context.retry_for
            if not context.retry or late or not may_retry(error.code):
                raise
            attempt += 1
            context.stats.retried(error.code)
            await asyncio.sleep(retry_pause(attempt))
