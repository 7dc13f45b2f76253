"""The bots runner: plays the seats given to the engine's bots through the command streams.

Run with ``python -m services.followers.bots_runner``.  How it follows the feeds, its
deterministic command ids and its reports of failed bots: ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

import asyncio
import random
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from engine.actions import Action, Play
from engine.bots import Bot, make_bot
from engine.codes import Code, CodedError
from engine.errors import EngineError
from engine.game import decide
from engine.state import Match
from events.commands import Command, NextDeal, ReportBotFailure
from events.mapping import to_wire_command
from services import log as service_log
from services.followers.feed import (
    FeedFollower,
    between_deals,
    command_fields,
    follow_through_outages,
    run_until_signal,
    table_setups,
    time_ms,
)
from services.lru import Lru
from services.serve.gc_tuning import settle_long_lived
from services.settings import Settings, load_settings
from services.store.client import as_text
from services.store.keys import KeySpace
from services.store.outage import OUTAGE_ERRORS, connect_when_up
from services.store.redis_store import RedisEventStore
from services.tables.service import TableService
from services.tables.table import Table
from services.tasks import cancel_and_wait

FOLLOWER_NAME = "bots"
"""The name of the runner's feed checkpoints: ``<ns>:{sNN}:ckpt:bots``."""

RESEND_AFTER_S = 5.0
"""A bot's command not seen applied this long after it was sent is sent again, with the same
command id (applied at most once): a Redis master killed before its AOF had the command loses
it, and no feed entry will come for the table again (``docs/services.md``, "Bots")."""


LINGER_MS = 10
"""The runner's pause after a feed batch that made a bot move: the next move of a game between
bots waits at most this much longer, and a busy deployment's entries come ten milliseconds'
worth a read."""

IDLE_LINGER_MS = 100
"""The pause after a batch that made no bot move (tables of people only, or no bot due): a
bot's first move after such a batch waits at most this much longer (docs/services.md)."""


@dataclass(frozen=True)
class BotCommand:
    """A command a bot seat sends: the table version it decided at, its seat and the command."""

    table_id: str
    version: int
    seat: int
    command: Command


class BotError(CodedError):
    """The bot on ``seat`` could not choose its move: a stable ``code`` and a public message
    (never the bot's own error text, which may name a card of its hand)."""

    def __init__(self, seat: int, bot: str, code: Code, message: str) -> None:
        super().__init__(message)
        self.seat = seat
        self.bot = bot
        self.code = code.value
        self.message = message


def bot_command_id(version: int, seat: int) -> str:
    """Return the deterministic command id of a bot's move at ``version``: ``bot-0012-1``."""
    return f"bot-{version:04d}-{seat}"


def bot_failure_id(version: int, seat: int) -> str:
    """Return the command id of the report of a bot's failure at ``version``:
    ``bot-0012-1-failed``."""
    return f"{bot_command_id(version, seat)}-failed"


def bot_rng(table_id: str, version: int, seat: int) -> random.Random:
    """Return the random source of the bot on ``seat`` deciding at ``version`` of the table."""
    return random.Random(f"conquian/bots/{table_id}/{version}/{seat}")


def bot_seats(table: Table) -> list[int]:
    """Return the seats held by bots, lowest first."""
    return [s for s, holder in enumerate(table.seats) if holder is not None and holder.bot]


def bot_command(table: Table, bot_for: Callable[[str], Bot] = make_bot) -> BotCommand | None:
    """Return the command a bot seat of ``table`` sends now, or None when no bot is due.

    ``bot_for`` returns the bot of a name (raises KeyError for an unknown one).  Raises
    :class:`BotError` when the bot due cannot move (:func:`failure_command` reports it).
    """
    match = table.match
    if match is None or match.over:
        return None
    version = table.version
    seat = match.to_act
    if seat is not None:
        holder = table.seats[seat]
        if holder is None or not holder.bot or holder.failure is not None:
            return None  # no bot, or its failure stands: the next event lets it try again
        rng = bot_rng(table.table_id, version, seat)
        action = _choose(holder.bot, bot_for, match, seat, rng)
        command = to_wire_command(action, table.table_id, bot_command_id(version, seat), version)
        return BotCommand(table.table_id, version, seat, command)
    seats = bot_seats(table)
    if not seats or not between_deals(table):
        return None
    seat = seats[0]
    next_deal = NextDeal(
        command_id=bot_command_id(version, seat),
        table_id=table.table_id,
        expected_version=version,
    )
    return BotCommand(table.table_id, version, seat, next_deal)


def _choose(
    name: str, bot_for: Callable[[str], Bot], match: Match, seat: int, rng: random.Random
) -> Action:
    """The move the bot ``name`` chooses on ``seat``; raises :class:`BotError` when there is no
    such bot, when it raises, or when the rules refuse its move."""
    try:
        bot = bot_for(name)
    except KeyError:
        raise BotError(seat, name, Code.BOT_UNKNOWN, f"no bot is named {name!r}") from None
    try:
        action = bot.choose(match, seat, rng)
    except Exception as error:
        message = f"the {name} bot raised {type(error).__name__} choosing its move"
        raise BotError(seat, name, Code.BOT_FAILED, message) from error
    try:
        decide(match, Play(seat, action))
    except (EngineError, TypeError, ValueError) as error:
        code = getattr(error, "code", type(error).__name__)
        message = f"the {name} bot chose a move the rules refuse ({code})"
        raise BotError(seat, name, Code.BOT_ILLEGAL_ACTION, message) from error
    return action


def failure_command(table: Table, error: BotError) -> BotCommand:
    """Return the report of a bot's failure at the table's version, sent as the bot's seat."""
    report = ReportBotFailure(
        command_id=bot_failure_id(table.version, error.seat),
        table_id=table.table_id,
        expected_version=table.version,
        code=error.code,
        message=error.message,
    )
    return BotCommand(table.table_id, table.version, error.seat, report)


def _where(error: BaseException) -> str | None:
    """Where the bot's own error was raised (file and line): for the log, without its text."""
    cause = error.__cause__
    frames = traceback.extract_tb(cause.__traceback__) if cause is not None else []
    return f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else None


class BotsRunner:
    """Sends the commands of bot seats for the tables of feed batches (``docs/services.md``)."""

    def __init__(
        self,
        client: Redis,
        keys: KeySpace,
        *,
        service: TableService | None = None,
        clock: Callable[[], int] = time_ms,
        remember: int = 100_000,
        resend_after_s: float = RESEND_AFTER_S,
    ) -> None:
        self.client = client
        self.keys = keys
        self.service = service or TableService(RedisEventStore(client, keys))
        self.clock = clock
        self.resend_after_s = resend_after_s
        self.log: Any = service_log.get_logger("bots_runner")
        self._bots: dict[str, Bot] = {}
        self._awaiting: dict[str, tuple[int, float]] = {}
        """The tables whose bot command was sent and not yet seen applied: the version it was
        sent at (not sent again from a feed entry at that version) and when (monotonic, for
        :meth:`resend_overdue`)."""
        self._follow: Lru[str, bool] = Lru(remember)
        """Tables looked at: True where a bot sits (each feed entry loads the table), False
        where no bot will ever act (none sits there: bots sit at creation; or the match is
        over)."""

    def bot(self, name: str) -> Bot:
        """Return the (shared, stateless) bot of a name."""
        bot = self._bots.get(name)
        if bot is None:
            bot = self._bots[name] = make_bot(name)
        return bot

    async def handle(self, tables: Iterable[str]) -> list[BotCommand]:
        """Look at each of ``tables`` (those of a feed batch, each once) and send the bot
        commands due, in one call."""
        batch = list(tables)
        new = [t for t in batch if t not in self._follow]
        if new:  # their creation, not their whole history: most tables have no bot
            setups = await table_setups(self.service.store, new)
            for table_id in new:
                setup = setups.get(table_id)
                self._follow.remember(table_id, setup is None or setup.bots)
        watched = [t for t in batch if self._follow.get(t)]
        if not watched:
            return []
        moves: list[BotCommand] = []
        for table in await self._current(watched):
            move = self.decide(table)
            if move is not None:
                moves.append(move)
        await self.send(moves)
        return moves

    async def _current(self, table_ids: Sequence[str]) -> list[Table]:
        """The tables loaded together, each :meth:`_seen`; a table that fails to load is
        logged and left out (the others go on; its next feed entry or check tries again)."""
        tables: list[Table] = []
        for table_id, table in (await self.service.load_many(table_ids)).items():
            if isinstance(table, Exception):
                self.log.error("table not loaded", table=table_id, error=repr(table))
                continue
            self._seen(table)
            tables.append(table)
        return tables

    async def consider(self, table_id: str) -> BotCommand | None:
        """Load a table and send its bot's command if one is due and not yet sent by this runner."""
        table = await self.service.load(table_id)
        self._seen(table)
        move = self.decide(table)
        if move is not None:
            await self.send([move])
        return move

    def _seen(self, table: Table) -> None:
        """Forget the command awaited at ``table`` once the table has moved past it."""
        awaited = self._awaiting.get(table.table_id)
        if awaited is not None and table.version > awaited[0]:
            del self._awaiting[table.table_id]

    async def resend_overdue(self) -> list[BotCommand]:
        """Send again the bot commands sent :attr:`resend_after_s` ago or more whose table has
        not moved since (the same command ids: a command that did arrive is not applied
        twice), and the command due now at a table that went back to an older version (its
        last events lost with a master); return what was sent."""
        now = time.monotonic()
        due = [t for t, (_, at) in self._awaiting.items() if now - at >= self.resend_after_s]
        if not due:
            return []
        moves: list[BotCommand] = []
        for table in await self._current(due):
            if table.table_id not in self._awaiting:
                continue  # it moved on: its feed entries bring it back
            move = self._command(table)
            if move is None:
                del self._awaiting[table.table_id]
                continue
            moves.append(move)
        if moves:
            self.log.warning(
                "bot commands sent again",
                tables=len(moves),
                commands=[m.command.command_id for m in moves[:20]],
            )
            await self.send(moves)
        return moves

    def decide(self, table: Table) -> BotCommand | None:
        """Return the bot's command at ``table`` if one is due and not yet sent by this runner
        (a bot that cannot move: the report of its failure)."""
        table_id = table.table_id
        if table.version > 0 and (not bot_seats(table) or (table.match and table.match.over)):
            self._follow.remember(table_id, False)
            return None
        awaited = self._awaiting.get(table_id)
        if awaited is not None and awaited[0] == table.version:
            return None
        return self._command(table)

    def _command(self, table: Table) -> BotCommand | None:
        """The bot's command due at ``table`` (a bot that cannot move: the report of its
        failure)."""
        try:
            return bot_command(table, self.bot)
        except BotError as error:  # reported to the table, not only logged
            self.log.error(
                "bot_failed",
                table=table.table_id,
                version=table.version,
                seat=error.seat,
                bot=error.bot,
                code=error.code,
                error=type(error.__cause__).__name__ if error.__cause__ else None,
                at=_where(error),
            )
            return failure_command(table, error)

    async def send(self, moves: Sequence[BotCommand]) -> None:
        """XADD ``moves`` to their command streams in one pipeline, as :func:`submit_command`
        does one, and remember each table's version as sent."""
        if not moves:
            return
        received = self.clock()
        async with self.client.pipeline(transaction=False) as pipe:
            for move in moves:
                shard = self.keys.shard_of(move.table_id)
                pipe.xadd(self.keys.cmd(shard), command_fields(move.command, move.seat, received))
            entry_ids = await pipe.execute()
        sent_at = time.monotonic()
        for move, entry_id in zip(moves, entry_ids, strict=True):
            self._awaiting[move.table_id] = (move.version, sent_at)
            self.log.info(
                "bot_command",
                table=move.table_id,
                seat=move.seat,
                command_id=move.command.command_id,
                version=move.version,
                type=move.command.type,
                entry=as_text(entry_id),
            )


async def run_bots(
    settings: Settings,
    stop: asyncio.Event | None = None,
    *,
    block_ms: int = 500,
) -> None:
    """Follow every shard feed and play the bot seats until ``stop`` is set."""
    log: Any = service_log.get_logger("bots_runner")
    client = await connect_when_up(settings.redis_url, log, stop)
    if client is None:
        return
    try:
        runner = BotsRunner(client, settings.keys)
        follower = FeedFollower(
            client,
            settings.keys,
            FOLLOWER_NAME,
            count=settings.batch_size,
            block_ms=block_ms,
            linger_ms=LINGER_MS,
            idle_linger_ms=IDLE_LINGER_MS,
        )
        log.info("bots_runner_started", shards=settings.shards, namespace=settings.namespace)
        resending = asyncio.create_task(_resend_overdue(runner, stop, log), name="resend")
        try:
            await follow_through_outages(follower, runner.handle, stop, log)
        finally:
            await cancel_and_wait(resending)
    finally:
        await client.aclose()
        log.info("bots_runner_stopped")


async def _resend_overdue(runner: BotsRunner, stop: asyncio.Event | None, log: Any) -> None:
    """Every second, :meth:`BotsRunner.resend_overdue` (a failure is logged, and tried again
    a second later)."""
    while stop is None or not stop.is_set():
        await asyncio.sleep(1.0)
        try:
            await runner.resend_overdue()
        except OUTAGE_ERRORS:
            pass  # Redis away: the feeds' outage is logged by the follower
        except Exception:
            log.exception("resending overdue bot commands failed")


def main() -> None:
    """``python -m services.followers.bots_runner``: run until SIGINT or SIGTERM."""
    settings = load_settings()
    service_log.configure(settings.log_level)
    settle_long_lived()
    run_until_signal(lambda stop: run_bots(settings, stop))


if __name__ == "__main__":
    main()
