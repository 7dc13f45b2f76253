"""One table of ``--via streams``: a plain object that says what to read, takes the replies and
decides its next command; the loop of ``services.loadtest.streams`` carries every table at once.

What is read in each wait and why: ``docs/loadtest.md`` ("Module notes").
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import orjson

from services.loadtest.links import TableGivenUp, check_answer, count_answer
from services.loadtest.play import Move, TablePlay, command_json
from services.store.keys import KeySpace, command_key

if TYPE_CHECKING:
    from services.loadtest.streams import StreamsPlay

Call = tuple[Any, ...]
"""A Redis command as its arguments, the name first and one key second."""


class Wait(enum.Enum):
    """What a table waits for."""

    SETUP = "setup"  # the record of its create or a join
    RESULT = "result"  # the record of its move
    VIEW = "view"  # the sending seat's part at the version its move was accepted at
    CHANGE = "change"  # newer parts: those it holds offer no move
    WATCH = "watch"  # a bot table's public part to say the match is over
    SEND = "send"  # its turn to send (a paced slot, a retry's pause)
    DONE = "done"


TIMEOUTS = {
    Wait.SETUP: "result/timeout",
    Wait.RESULT: "result/timeout",
    Wait.VIEW: "view/timeout",
    Wait.CHANGE: "view/timeout",
    Wait.WATCH: "watch/timeout",
}
"""The error of each wait that lasts past its deadline."""


class StreamTable:
    """A table's state between two reads (see the module docstring)."""

    __slots__ = (
        "accepted",
        "attempt",
        "command",
        "command_id",
        "deadline",
        "due",
        "field",
        "first",
        "kind",
        "move",
        "news_after",
        "part_keys",
        "play",
        "poll",
        "public_key",
        "record_key",
        "sent",
        "sent_at",
        "since",
        "slot",
        "stream",
        "table_id",
        "timer",
        "wait",
    )

    def __init__(self, table_id: str, slot: int, keys: KeySpace, play: TablePlay) -> None:
        self.table_id = table_id
        self.slot = slot
        self.play = play
        self.stream = keys.cmd(keys.shard_of(table_id))
        self.record_key = keys.command_ids(table_id)
        self.part_keys = (keys.table_view(table_id, "seat0"), keys.table_view(table_id, "seat1"))
        self.public_key = keys.table_view(table_id, "public")
        self.wait = Wait.SETUP
        self.kind = "create"
        """The command in flight: ``create``, ``join`` or ``move``."""
        self.command = b""
        self.command_id = ""
        self.field = ""
        self.move: Move | None = None
        self.first = self.sent_at = self.since = self.deadline = self.due = 0.0
        self.poll = 0.0
        self.attempt = 0
        self.accepted = 0
        """The version the move in flight was accepted at (the view to wait for)."""
        self.news_after = 0
        """A feed entry up to this version is no news to the table."""
        self.sent = 0
        self.timer = -1
        """The number of the loop's timer that is the table's (-1: none)."""

    # --- what the loop asks -------------------------------------------------------------------

    def calls(self) -> list[Call]:
        """Return the reads of the table's wait: the record of the command in flight, the seats'
        parts, the public part (at a match's end, and for a bot table).  The parts of a table
        share its shard's hash tag: one ``MGET`` reads them on a cluster too."""
        wait = self.wait
        if wait is Wait.SETUP:
            return [("HGET", self.record_key, self.field)]
        if wait is Wait.WATCH:
            return [("GET", self.public_key)]
        if wait is Wait.RESULT:
            return [("HGET", self.record_key, self.field), ("MGET", *self.part_keys)]
        if wait is Wait.CHANGE:
            return [("MGET", *self.part_keys, self.public_key)]
        return [("MGET", *self.part_keys)]

    def awaits(self, command_id: str, seat: int | None) -> bool:
        """Say whether a result hint names the command the table waits for."""
        if self.wait not in (Wait.RESULT, Wait.SETUP) or command_id != self.command_id:
            return False
        return seat is None or self.move is None or seat == self.move.seat

    def xadd(self, at_ms: str) -> Call:
        """Return the XADD of the command in flight, as the gateway enqueues it."""
        seat = "" if self.move is None else str(self.move.seat)
        return ("XADD", self.stream, "*", "c", self.command, "s", seat, "r", at_ms)

    # --- setting up ---------------------------------------------------------------------------

    def setup(self, run: StreamsPlay, kind: str, command: dict[str, Any]) -> None:
        """Make ``command`` (a create or a join) the one to send next."""
        self.kind = kind
        self.move = None
        self.command_id = self.field = str(command["command_id"])
        self.command = orjson.dumps(command)
        self.attempt = 0
        self.first = 0.0
        self.wait = Wait.SEND
        self.due = 0.0

    def sending(self, run: StreamsPlay, now: float) -> None:
        """Note that the command in flight was handed to a pipeline at ``now`` (again, after a
        failure: the latencies count from its first send with ``--retry``)."""
        self.sent_at = now
        if not self.first:
            self.first = now
        self.wait = Wait.SETUP if self.move is None else Wait.RESULT
        self.news_after = self.play.version
        self.deadline = now + run.context.result_timeout
        self.poll = run.first_poll

    # --- deciding -----------------------------------------------------------------------------

    def decide(self, run: StreamsPlay, now: float) -> None:
        """Choose the next move from the parts held, or wait for newer ones; once the run
        stops, end the table instead."""
        if run.context.stop.is_set():
            run.table_done(self, now, finished=False)
            return
        move = self.play.next_move()
        if move is None:
            self.changing(run, now)
            return
        self.move = move
        self.kind = "move"
        self.sent += 1
        self.command_id = f"{self.table_id}-{self.sent:05d}"
        self.field = command_key(self.command_id, move.seat)
        self.attempt = 0
        self.first = 0.0
        self.command = orjson.dumps(command_json(move, self.table_id, self.command_id))
        self.wait = Wait.SEND
        self.due = run.context.pacer.slot(now) if run.context.pacer.rate else 0.0

    def changing(self, run: StreamsPlay, now: float) -> None:
        """Wait for parts newer than those held (read at once: the public part may say the
        match is over)."""
        self.wait = Wait.CHANGE
        self.attempt = 0
        self.news_after = min(self.play.versions)
        self.since = now
        self.deadline = now + run.context.result_timeout
        self.poll = run.first_poll

    # --- taking replies -----------------------------------------------------------------------

    def take(self, run: StreamsPlay, replies: list[Any], at: float) -> bool:
        """Take the replies of :meth:`calls`; return whether the table moved on (else it waits
        on: a poll, or a feed entry).

        Raises TableGivenUp for a failed read, a refusal the table cannot play on from, or a
        wait past its deadline.
        """
        for reply in replies:
            if isinstance(reply, Exception):
                raise TableGivenUp("redis/error", repr(reply))
        wait = self.wait
        if wait is Wait.SETUP:
            moved = self._setup_answer(run, replies[0], at)
        elif wait is Wait.WATCH:
            moved = self._watched(run, replies[0], at)
        elif wait is Wait.RESULT:
            self._see_parts(*replies[1])
            moved = self._answer(run, replies[0], at)
        elif wait is Wait.VIEW:
            self._see_parts(*replies[0])
            moved = self._viewed(run, at)
        else:
            moved = self._changed(run, replies[0], at)
        if not moved and at >= self.deadline:
            raise TableGivenUp(TIMEOUTS[self.wait], f"table {self.table_id}")
        return moved

    def _see_parts(self, seat0: bytes | None, seat1: bytes | None) -> None:
        see = self.play.see_view
        if seat0 is not None:
            see(0, orjson.loads(seat0))
        if seat1 is not None:
            see(1, orjson.loads(seat1))

    def _record(self, raw: bytes) -> dict[str, Any]:
        _first, last, text = raw.split(b" ", 2)
        result: dict[str, Any] = orjson.loads(text) if text else {}
        result["version"] = int(last)
        return result

    def _setup_answer(self, run: StreamsPlay, raw: bytes | None, at: float) -> bool:
        if raw is None:
            return False
        run.driver.observe(at - self.sent_at)
        result = self._record(raw)
        if result.get("ok") is not True:
            raise TableGivenUp(f"{self.kind}/{result.get('code')}", f"{self.table_id}: {result}")
        run.stats.setup_done(self.kind, at - self.first)
        self.play.see_version(result["version"])
        run.setup_done(self, at)
        return True

    def _answer(self, run: StreamsPlay, raw: bytes | None, at: float) -> bool:
        if raw is None:
            return False
        run.driver.observe(at - self.sent_at)
        result = self._record(raw)
        context = run.context
        check_answer(result, self.command_id, context.retry)
        move = self.move
        assert move is not None, "a move's record"
        started = self.first if context.retry else self.sent_at
        version = count_answer(context, self.table_id, self.command_id, move, result, at - started)
        if version is None:  # refused, as a move out of turn must be: play the move in turn
            self.decide(run, at)
            return True
        self.play.see_version(version)
        self.accepted = version
        self.wait = Wait.VIEW
        self.attempt = 0
        self.news_after = self.play.versions[move.seat]
        self.deadline = at + context.result_timeout
        self.poll = run.first_poll
        return self._viewed(run, at)

    def _viewed(self, run: StreamsPlay, at: float) -> bool:
        move = self.move
        assert move is not None, "a move's view"
        held = self.play.versions[move.seat]
        if held < self.accepted:
            self.news_after = held
            return False
        started = self.first if run.context.retry else self.sent_at
        run.stats.view(at - started)
        self.decide(run, at)
        return True

    def _changed(self, run: StreamsPlay, parts: list[Any], at: float) -> bool:
        before = list(self.play.versions)
        self._see_parts(parts[0], parts[1])
        public = parts[2]
        if public is not None:
            data = orjson.loads(public)
            if data.get("match_over") is True:
                self.play.see_end(int(data.get("deals_played") or 0))
                run.table_done(self, at, finished=True)
                return True
        unchanged = self.play.versions == before
        if unchanged and not run.context.stop.is_set():
            return False  # nothing new: wait on
        self.decide(run, at)  # a move, a new wait for newer parts, or the end of a stopped run
        return True

    def _watched(self, run: StreamsPlay, raw: bytes | None, at: float) -> bool:
        if raw is None:
            return False
        public = orjson.loads(raw)
        if public.get("status") != "over":
            return False
        self.play.see_end(int(public.get("deals_played") or 0))
        run.table_done(self, at, finished=True)
        return True
