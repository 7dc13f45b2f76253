"""A wire command decided on a table: the engine's rules, then the table's own (seats, deals,
rematch, bot failures); events out, or an error with a stable code.

``insecure_deal_key`` makes seeds computable in advance: never set it where real games are
dealt (``docs/services.md``, "Module notes").
"""

from __future__ import annotations

import hmac
import secrets as random_source
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import game
from engine.actions import StartDeal
from engine.bots import BOTS
from engine.codes import Code, CodedError
from engine.errors import EngineError
from engine.game_events import Event, StakesSettled
from engine.state import Match
from events.base import ContractError
from events.commands import (
    Command,
    CreateTable,
    Join,
    LeaveTable,
    NextDeal,
    Rematch,
    ReportBotFailure,
)
from events.domain import (
    BotFailed,
    PlayerJoined,
    PlayerLeft,
    RematchAgreed,
    RematchOpened,
    TableEvent,
)
from events.fairness import SHUFFLE_ALGORITHM, commitment, deal_context, new_seed, seed_hex, shuffle
from events.mapping import reveal, to_engine_command, to_wire
from services.tables.table import SEED_KEY, TOKEN_KEY, SeatHolder, Table

__all__ = [
    "DECISION_ERRORS",
    "Decision",
    "Sources",
    "TableError",
    "TokenHasher",
    "decide",
    "draw_dealer",
]


class TableError(CodedError):
    """A command the table cannot take, apart from the rules of play; ``code`` is stable."""

    code = Code.TABLE_ERROR.value

    def __init__(self, code: Code | str, message: str) -> None:
        super().__init__(message)
        self.code = str(code)


DECISION_ERRORS = (EngineError, ContractError, TableError, ValueError)
"""The errors that reject a command: its rejection is recorded under its id."""


@dataclass(frozen=True)
class Decision:
    """What a command does: wire events to append, secrets to write and the client's result.

    ``match`` is the engine's match after the events, folded while deciding, so that the table
    after the append is known without mapping the wire events back (``Table.next``).
    """

    events: list[TableEvent]
    match: Match | None
    secrets: dict[str, str] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)


TokenHasher = Callable[[str, int, str], str]
"""Returns the SHA-256 hex of the token of ``(table_id, seat, command_id)`` for a join."""


def draw_dealer() -> int:
    """Return a fresh first dealer, seat 0 or 1."""
    return random_source.randbelow(2)


@dataclass(frozen=True)
class Sources:
    """What a decision takes from outside the table: each deal's secret seed and a new table's
    first dealer (fresh, or keyed by ``insecure_deal_key``), a joining seat's token hash."""

    seed_source: Callable[[], bytes] = new_seed
    dealer_source: Callable[[], int] = draw_dealer
    insecure_deal_key: bytes | None = None
    token_hasher: TokenHasher | None = None

    def seed(self, table_id: str, number: int) -> bytes:
        """Return a fresh secret seed, or, with an insecure deal key, the keyed one."""
        if self.insecure_deal_key is None:
            return self.seed_source()
        return hmac.digest(self.insecure_deal_key, f"seed/{table_id}/{number}".encode(), "sha256")

    def first_dealer(self, table_id: str) -> int:
        """Return a new table's first dealer: drawn, or, with an insecure deal key, keyed."""
        if self.insecure_deal_key is None:
            return self.dealer_source()
        return hmac.digest(self.insecure_deal_key, f"dealer/{table_id}".encode(), "sha256")[0] & 1


def decide(table: Table, command: Command, seat: int | None, sources: Sources) -> Decision:
    """Return what a command sent by ``seat`` (None for create and join) does to a table.

    Raises one of :data:`DECISION_ERRORS`, each with a stable code.
    """
    if command.expected_version is not None and command.expected_version != table.version:
        raise TableError(
            Code.COMMAND_STALE_VERSION,
            f"expected version {command.expected_version}, "
            f"table {table.table_id} is at {table.version}",
        )
    if isinstance(command, CreateTable):
        return _create(table, command, sources)
    if not table.exists:
        raise TableError(Code.TABLE_NOT_FOUND, f"no table {table.table_id!r}")
    if isinstance(command, Join):
        return _join(table, command, sources)
    if seat is None or table.seats[seat] is None:
        raise TableError(Code.SEAT_REQUIRED, "only a seated player may send this command")
    if isinstance(command, LeaveTable):
        return _leave(table, seat, sources)
    if isinstance(command, Rematch):
        return _rematch(table, command, seat)
    if isinstance(command, ReportBotFailure):
        return _bot_failed(table, command, seat)
    if isinstance(command, NextDeal):
        if None in table.seats:
            raise TableError(Code.TABLE_NOT_FULL, "a deal starts only with both seats taken")
        return _next_deal(table, sources)
    engine_command = to_engine_command(command, seat)
    if engine_command is None:  # pragma: no cover - join is handled above
        raise TableError(Code.COMMAND_UNSUPPORTED, f"{command.type} needs no engine")
    engine_events = game.decide(table.match, engine_command)
    return Decision(_with_reveals(table, engine_events), game.fold(engine_events, table.match))


def _create(table: Table, command: CreateTable, sources: Sources) -> Decision:
    if table.exists:
        raise TableError(Code.TABLE_EXISTS, f"table {table.table_id!r} already exists")
    unknown = sorted(set((command.bots or {}).values()) - set(BOTS))
    if unknown:  # refused here, or the table would wait on a bot that never moves
        known = ", ".join(sorted(BOTS))
        raise TableError(Code.TABLE_UNKNOWN_BOT, f"unknown bot {unknown[0]!r}; known: {known}")
    dealer = sources.first_dealer(table.table_id)
    engine_command = to_engine_command(command, None, first_dealer=dealer)
    assert engine_command is not None  # create_table always maps to NewMatch
    events: list[TableEvent] = []
    engine_events = game.decide(None, engine_command)
    for engine_event in engine_events:
        events += to_wire(engine_event, turn_seconds=command.turn_seconds)
    for bot_seat, bot in sorted((command.bots or {}).items()):
        events.append(PlayerJoined(seat=bot_seat, name=f"{bot} bot", bot=bot))
    return Decision(events, game.fold(engine_events), result={"first_dealer": dealer})


def _join(table: Table, command: Join, sources: Sources) -> Decision:
    free = [s for s in (0, 1) if table.seats[s] is None]
    if command.seat is not None and command.seat not in free:
        raise TableError(Code.SEAT_TAKEN, f"seat {command.seat} is taken")
    if not free:
        raise TableError(Code.TABLE_FULL, f"table {table.table_id} has no free seat")
    seat = free[0] if command.seat is None else command.seat
    secrets: dict[str, str] = {}
    if sources.token_hasher is not None:
        token_hash = sources.token_hasher(table.table_id, seat, command.command_id)
        secrets[TOKEN_KEY.format(seat=seat)] = token_hash
    joined = PlayerJoined(seat=seat, name=command.name)
    seats = list(table.seats)
    seats[seat] = SeatHolder(command.name)
    decision = Decision([joined], table.match, secrets, {"seat": seat})
    if None not in seats and table.deal_number == 0:  # both seated: the first deal starts
        started = _next_deal(table, sources)
        decision = Decision(
            [joined, *started.events],
            started.match,
            {**secrets, **started.secrets},
            decision.result,
        )
    return decision


def _leave(table: Table, seat: int, sources: Sources) -> Decision:
    """Free ``seat`` before the first deal; its token hash is emptied with the event."""
    if table.deal_number > 0:
        raise TableError(
            Code.TABLE_STARTED,
            f"table {table.table_id} has dealt: a seat is given up only before the first deal",
        )
    secrets = {TOKEN_KEY.format(seat=seat): ""} if sources.token_hasher is not None else {}
    return Decision([PlayerLeft(seat=seat)], table.match, secrets, {"seat": seat})


def _rematch(table: Table, command: Rematch, seat: int) -> Decision:
    """Record ``seat``'s wish to play again; when every seat agrees (a bot at once), open the
    rematch at ``command.next_table_id``.  Asking again changes nothing."""
    if table.match is None or not table.match.over:
        raise TableError(
            Code.TABLE_NOT_OVER, f"the match of table {table.table_id} is not over yet"
        )
    if command.next_table_id == table.table_id:
        raise TableError(Code.COMMAND_INVALID, "a rematch is at another table")
    events: list[TableEvent] = []
    if seat not in table.rematch_agreed:
        events.append(RematchAgreed(seat=seat))
    bots = {s for s, h in enumerate(table.seats) if h is not None and h.bot is not None}
    agreed = sorted(table.rematch_agreed | {seat} | bots)
    opened = table.rematch_table
    if opened is None and len(agreed) == 2:
        opened = command.next_table_id
        events.append(RematchOpened(next_table_id=opened))
    result = {"seat": seat, "rematch": {"agreed": agreed, "table_id": opened}}
    return Decision(events, table.match, {}, result)


def _bot_failed(table: Table, command: ReportBotFailure, seat: int) -> Decision:
    """Record that the seat's bot could not move (the bots runner sends this as the bot)."""
    holder = table.seats[seat]
    if holder is None or holder.bot is None:
        raise TableError(Code.COMMAND_UNSUPPORTED, f"seat {seat} holds no bot to report on")
    failed = BotFailed(seat=seat, bot=holder.bot, code=command.code, message=command.message)
    return Decision([failed], table.match)


def _next_deal(table: Table, sources: Sources) -> Decision:
    number = table.deal_number + 1
    seed = sources.seed(table.table_id, number)
    deck = shuffle(seed, SHUFFLE_ALGORITHM, deal_context(table.table_id, number))
    engine_events = game.decide(table.match, StartDeal(deck))
    events: list[TableEvent] = []
    for engine_event in engine_events:
        events += to_wire(engine_event, commitment=commitment(seed))
    return Decision(
        events,
        game.fold(engine_events, table.match),
        {SEED_KEY.format(number=number): seed_hex(seed)},
        {"deal": number},
    )


def _with_reveals(table: Table, engine_events: list[Event]) -> list[TableEvent]:
    """Map engine events to the wire, revealing the deal's seed when the deal ends."""
    events: list[TableEvent] = []
    number = table.deal_number
    for engine_event in engine_events:
        events += to_wire(engine_event)
        if isinstance(engine_event, StakesSettled) and number in table.seeds:
            events.append(reveal(number, table.seeds[number], table.algorithms[number]))
    return events
