"""Commands in, events out: load a table, decide with the engine, append atomically.

``insecure_deal_key`` makes seeds computable in advance: never set it where real games are
dealt.  What ``TableService.execute`` does: ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets as random_source
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import actions as ea
from engine import game_events as ee
from engine.bots import BOTS
from engine.codes import Code, CodedError
from engine.errors import EngineError
from engine.game import decide, fold
from engine.state import Match
from events import commands as wc
from events import domain as wd
from events.base import ContractError
from events.fairness import SHUFFLE_ALGORITHM, commitment, deal_context, new_seed, seed_hex, shuffle
from events.mapping import rejection, reveal, to_engine_command, to_wire
from services import compact_json
from services.log import get_logger
from services.lru import Lru
from services.store.base import AppendRequest, AppendResult, EventStore, VersionConflict
from services.store.keys import command_key, other_command_keys
from services.table import SEED_KEY, TOKEN_KEY, SeatHolder, Table, fold_table
from services.views_fold import table_views

MAX_CONFLICT_RETRIES = 5

_log = get_logger("table_service")


class TableError(CodedError):
    """A command the table cannot take, apart from the rules of play; ``code`` is stable."""

    code = Code.TABLE_ERROR.value

    def __init__(self, code: Code | str, message: str) -> None:
        super().__init__(message)
        self.code = str(code)


@dataclass(frozen=True)
class Decision:
    """What a command does: wire events to append, secrets to write and the client's result.

    ``match`` is the engine's match after the events, folded while deciding, so that the table
    after the append is known without mapping the wire events back (``Table.next``).
    """

    events: list[wd.TableEvent]
    match: Match | None
    secrets: dict[str, str] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """The answer to a command: accepted or rejected, its result, versions and the new table."""

    ok: bool
    result: dict[str, Any]
    duplicate: bool = False
    first_version: int = 0
    last_version: int = 0
    table: Table | None = None
    viewed: bool = False
    """The table's views at ``last_version`` were stored with the append (see
    :meth:`TableService.views_after`)."""

    @property
    def code(self) -> str | None:
        """Return the rejection code, None when accepted."""
        code = self.result.get("code")
        return None if self.ok or not isinstance(code, str) else code


@dataclass(frozen=True)
class Plan:
    """A command decided on a table, before its append: the append to make and what it means.

    ``following`` is the table after the decision's events (its hash not known before they are
    stored), None for a rejection, whose append records ``result`` under the command id.
    """

    table: Table
    command: wc.Command
    seat: int | None
    request: AppendRequest
    result: dict[str, Any]
    following: Table | None


SEALS_IN_FLIGHT = 4
"""Seals a table service runs at once.  A batch can end hundreds of tables (a flood of 10,000
tables ended 774 on one step); one connection a seal took the client's whole pool (redis-py's
100), and the worker's appends and acknowledgements failed with it (docs/performance.md,
"Lost hints")."""

ID_TAKEN = compact_json.dumps(
    {
        "ok": False,
        "code": Code.COMMAND_ID_TAKEN,
        "message": "another seat used this command id at this table: "
        "send the command with an id of your own",
    }
)
"""The result the store records for a command whose id another seat (or a create or join) used
at the table (``services.store.keys.other_command_keys``)."""

DECISION_ERRORS = (EngineError, ContractError, TableError, ValueError)
"""The errors that reject a command: its rejection is recorded under its id."""


TokenHasher = Callable[[str, int, str], str]
"""Returns the SHA-256 hex of the token of ``(table_id, seat, command_id)`` for a join."""


class TableService:
    """Executes wire commands against tables in an event store, with a cache of folded tables."""

    def __init__(
        self,
        store: EventStore,
        *,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
        seed_source: Callable[[], bytes] = new_seed,
        dealer_source: Callable[[], int] = lambda: random_source.randbelow(2),
        token_hasher: TokenHasher | None = None,
        cache_size: int = 20_000,
        insecure_deal_key: bytes | None = None,
        store_views: bool = True,
    ) -> None:
        self.store = store
        self.store_views = store_views and store.keeps_views
        """Build each append's views for the store to keep with it (``views_after``): on for a
        store that keeps views, unless turned off (the projector then folds every table)."""
        self.clock = clock
        self.seed_source = seed_source
        self.dealer_source = dealer_source
        self.insecure_deal_key = insecure_deal_key
        self.token_hasher = token_hasher
        self._cache: Lru[str, Table] = Lru(cache_size)
        self._sealing: set[asyncio.Task[None]] = set()
        self._seal_slots = asyncio.Semaphore(SEALS_IN_FLIGHT)

    # --- loading -------------------------------------------------------------------------------

    async def load(self, table_id: str, *, fresh: bool = False) -> Table:
        """Return the table at its latest version: the cached fold brought up to date.

        A table the store has no event of (a ``create_table`` about to be decided) costs the
        head alone: with no event there is no stream to read and no secret, since the append
        that writes a table's first events writes its first secrets too.
        """
        cached = None if fresh else self._cache.get(table_id)
        head = await self.store.head(table_id)
        if cached is not None and cached.version == head.version and cached.hash == head.hash:
            self._remember(cached)
            return cached
        if head.version == 0:
            table = Table(table_id)
            self._remember(table)
            return table
        start = cached if cached is not None and cached.version < head.version else None
        after = start.version if start else 0
        stored = await self.store.read(table_id, after + 1)
        secrets = await self.store.secrets(table_id)
        table = fold_table(table_id, ((e.version, e.hash, e.body) for e in stored), secrets, start)
        self._remember(table)
        return table

    def cached(self, table_id: str) -> Table | None:
        """Return the cached table, if any (the engine worker trusts it while it owns the shard)."""
        return self._cache.get(table_id)

    def _remember(self, table: Table) -> None:
        self._cache.remember(table.table_id, table)

    # --- executing -----------------------------------------------------------------------------

    async def execute(self, command: wc.Command, seat: int | None) -> Outcome:
        """Apply a command sent by ``seat`` (None for table-level commands such as create/join).

        Retries on a version conflict with the table reloaded; a command id seen before on the
        table returns the first outcome and appends nothing.
        """
        table = self._cache.get(command.table_id) or await self.load(command.table_id)
        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                return await self._attempt(table, command, seat)
            except VersionConflict:
                table = await self.load(command.table_id, fresh=True)
        raise TableError(Code.TABLE_BUSY, f"table {command.table_id}: too many concurrent writers")

    async def _attempt(self, table: Table, command: wc.Command, seat: int | None) -> Outcome:
        plan = self.plan(table, command, seat, self.clock())
        return self.finish(plan, await self.store.append_request(plan.request))

    def plan(self, table: Table, command: wc.Command, seat: int | None, now: int) -> Plan:
        """Decide ``command`` on ``table`` (events timed ``now``): the append of its events,
        with the table's views when the store keeps them, or of its rejection.

        ``execute`` and ``services.table_batch.execute_many`` both append what this plans.
        """
        key = command_key(command.command_id, seat)
        taken = other_command_keys(command.command_id, seat)
        try:
            decision = self.decide(table, command, seat)
        except DECISION_ERRORS as error:
            rejected = rejection(command.command_id, error)
            result = {"ok": False, "code": rejected.code, "message": rejected.message}
            request = AppendRequest(
                table.table_id,
                table.version,
                table.hash,
                key,
                (),
                compact_json.dumps(result),
                taken_by=taken,
                taken_result=ID_TAKEN,
            )
            return Plan(table, command, seat, request, result, None)
        result = {"ok": True, **decision.result}
        following = table.next(decision.events, decision.match, decision.secrets)
        request = AppendRequest(
            table.table_id,
            table.version,
            table.hash,
            key,
            [_body(e, command.command_id, now) for e in decision.events],
            compact_json.dumps(result),
            decision.secrets or None,
            _status(table, decision.events),
            self.views_after(following, now) if decision.events else None,
            taken,
            ID_TAKEN,
        )
        return Plan(table, command, seat, request, result, following)

    def finish(self, plan: Plan, appended: AppendResult) -> Outcome:
        """The outcome of a planned append, with the table cached at its new version (the
        first outcome when the command id was seen before); a table whose match it ended is
        sealed (:meth:`seal_soon`)."""
        if appended.duplicate:
            return _replayed(appended)
        if appended.refused:  # the command id is another seat's
            return Outcome(False, json.loads(appended.result), table=plan.table)
        if plan.following is None:
            return Outcome(False, plan.result, table=plan.table)
        new = plan.following.stored_as(appended)
        self._remember(new)
        if plan.request.status == "over":  # the table's last event: give memory back
            self.seal_soon(new.table_id)
        return Outcome(
            True,
            plan.result,
            False,
            appended.first_version,
            appended.last_version,
            new,
            plan.request.views is not None,
        )

    def views_after(self, following: Table, now: int) -> dict[str, str] | None:
        """Return the view parts of ``following`` (a decided command's table, its events
        timed ``now``) for the append to store with the events, or None when the store keeps
        no views or they cannot be built (the projector then builds them from the feed).

        Built by ``services.views_fold``, as the projector builds them: so a view is current
        when the command's answer is, and the projector, finding it current, skips the table.
        """
        if not self.store_views:
            return None
        try:
            return table_views(following, now)
        except Exception:  # views are derived data: never a reason to refuse a command
            _log.exception("views not built", table=following.table_id, version=following.version)
            return None

    def seal_soon(self, table_id: str) -> None:
        """Give back the memory a finished table's stream keeps for more appends
        (``EventStore.seal``, after its last event), in a task of its own: nothing waits for it
        (no command comes after a table's last event), so a command or a batch does not wait a
        round trip for it.  At most :data:`SEALS_IN_FLIGHT` seals hold a connection at once; the
        others wait their turn.  A failure is logged: the table is whole either way."""
        task = asyncio.create_task(self._seal(table_id), name="seal")
        self._sealing.add(task)
        task.add_done_callback(self._sealing.discard)

    async def _seal(self, table_id: str) -> None:
        async with self._seal_slots:
            try:
                await self.store.seal(table_id)
            except Exception:
                _log.exception("seal failed", table=table_id)

    async def sealed(self) -> None:
        """Wait until the seals started by :meth:`seal_soon` are done."""
        while self._sealing:
            await asyncio.gather(*self._sealing)

    # --- deciding ------------------------------------------------------------------------------

    def decide(self, table: Table, command: wc.Command, seat: int | None) -> Decision:
        """Return what a command does to a table, or raise an error with a stable code."""
        if command.expected_version is not None and command.expected_version != table.version:
            raise TableError(
                Code.COMMAND_STALE_VERSION,
                f"expected version {command.expected_version}, "
                f"table {table.table_id} is at {table.version}",
            )
        if isinstance(command, wc.CreateTable):
            return self._create(table, command)
        if not table.exists:
            raise TableError(Code.TABLE_NOT_FOUND, f"no table {table.table_id!r}")
        if isinstance(command, wc.Join):
            return self._join(table, command)
        if seat is None or table.seats[seat] is None:
            raise TableError(Code.SEAT_REQUIRED, "only a seated player may send this command")
        if isinstance(command, wc.LeaveTable):
            return self._leave(table, seat)
        if isinstance(command, wc.Rematch):
            return self._rematch(table, command, seat)
        if isinstance(command, wc.ReportBotFailure):
            return self._bot_failed(table, command, seat)
        if isinstance(command, wc.NextDeal):
            if None in table.seats:
                raise TableError(Code.TABLE_NOT_FULL, "a deal starts only with both seats taken")
            return self._next_deal(table)
        engine_command = to_engine_command(command, seat)
        if engine_command is None:  # pragma: no cover - join is handled above
            raise TableError(Code.COMMAND_UNSUPPORTED, f"{command.type} needs no engine")
        engine_events = decide(table.match, engine_command)
        return Decision(self._with_reveals(table, engine_events), fold(engine_events, table.match))

    def _create(self, table: Table, command: wc.CreateTable) -> Decision:
        if table.exists:
            raise TableError(Code.TABLE_EXISTS, f"table {table.table_id!r} already exists")
        unknown = sorted(set((command.bots or {}).values()) - set(BOTS))
        if unknown:  # refused here, or the table would wait on a bot that never moves
            known = ", ".join(sorted(BOTS))
            raise TableError(Code.TABLE_UNKNOWN_BOT, f"unknown bot {unknown[0]!r}; known: {known}")
        dealer = self._first_dealer(table.table_id)
        engine_command = to_engine_command(command, None, first_dealer=dealer)
        assert engine_command is not None  # create_table always maps to NewMatch
        events: list[wd.TableEvent] = []
        engine_events = decide(None, engine_command)
        for engine_event in engine_events:
            events += to_wire(engine_event, turn_seconds=command.turn_seconds)
        for bot_seat, bot in sorted((command.bots or {}).items()):
            events.append(wd.PlayerJoined(seat=bot_seat, name=f"{bot} bot", bot=bot))
        return Decision(events, fold(engine_events), result={"first_dealer": dealer})

    def _join(self, table: Table, command: wc.Join) -> Decision:
        free = [s for s in (0, 1) if table.seats[s] is None]
        if command.seat is not None and command.seat not in free:
            raise TableError(Code.SEAT_TAKEN, f"seat {command.seat} is taken")
        if not free:
            raise TableError(Code.TABLE_FULL, f"table {table.table_id} has no free seat")
        seat = free[0] if command.seat is None else command.seat
        secrets: dict[str, str] = {}
        if self.token_hasher is not None:
            token_hash = self.token_hasher(table.table_id, seat, command.command_id)
            secrets[TOKEN_KEY.format(seat=seat)] = token_hash
        joined = wd.PlayerJoined(seat=seat, name=command.name)
        seats = list(table.seats)
        seats[seat] = SeatHolder(command.name)
        decision = Decision([joined], table.match, secrets, {"seat": seat})
        if None not in seats and table.deal_number == 0:  # both seated: the first deal starts
            started = self._next_deal(table)
            decision = Decision(
                [joined, *started.events],
                started.match,
                {**secrets, **started.secrets},
                decision.result,
            )
        return decision

    def _leave(self, table: Table, seat: int) -> Decision:
        """Free ``seat`` before the first deal; its token hash is emptied with the event."""
        if table.deal_number > 0:
            raise TableError(
                Code.TABLE_STARTED,
                f"table {table.table_id} has dealt: a seat is given up only before the first deal",
            )
        secrets = {TOKEN_KEY.format(seat=seat): ""} if self.token_hasher is not None else {}
        return Decision([wd.PlayerLeft(seat=seat)], table.match, secrets, {"seat": seat})

    def _rematch(self, table: Table, command: wc.Rematch, seat: int) -> Decision:
        """Record ``seat``'s wish to play again; when every seat agrees (a bot at once), open
        the rematch at ``command.next_table_id``.  Asking again changes nothing."""
        if table.match is None or not table.match.over:
            raise TableError(
                Code.TABLE_NOT_OVER, f"the match of table {table.table_id} is not over yet"
            )
        if command.next_table_id == table.table_id:
            raise TableError(Code.COMMAND_INVALID, "a rematch is at another table")
        events: list[wd.TableEvent] = []
        if seat not in table.rematch_agreed:
            events.append(wd.RematchAgreed(seat=seat))
        bots = {s for s, h in enumerate(table.seats) if h is not None and h.bot is not None}
        agreed = sorted(table.rematch_agreed | {seat} | bots)
        opened = table.rematch_table
        if opened is None and len(agreed) == 2:
            opened = command.next_table_id
            events.append(wd.RematchOpened(next_table_id=opened))
        result = {"seat": seat, "rematch": {"agreed": agreed, "table_id": opened}}
        return Decision(events, table.match, {}, result)
    def _bot_failed(self, table: Table, command: wc.ReportBotFailure, seat: int) -> Decision:
        """Record that the seat's bot could not move (the bots runner sends this as the bot)."""
        holder = table.seats[seat]
        if holder is None or holder.bot is None:
            raise TableError(Code.COMMAND_UNSUPPORTED, f"seat {seat} holds no bot to report on")
        failed = wd.BotFailed(seat=seat, bot=holder.bot, code=command.code, message=command.message)
        return Decision([failed], table.match)

    def _next_deal(self, table: Table) -> Decision:
        seed = self._seed(table.table_id, table.deal_number + 1)
        number = table.deal_number + 1
        deck = shuffle(seed, SHUFFLE_ALGORITHM, deal_context(table.table_id, number))
        engine_events = decide(table.match, ea.StartDeal(deck))
        events: list[wd.TableEvent] = []
        for engine_event in engine_events:
            events += to_wire(engine_event, commitment=commitment(seed))
        return Decision(
            events,
            fold(engine_events, table.match),
            {SEED_KEY.format(number=number): seed_hex(seed)},
            {"deal": number},
        )

    def _seed(self, table_id: str, number: int) -> bytes:
        """Return a fresh secret seed, or, with an insecure deal key, the keyed one."""
        if self.insecure_deal_key is None:
            return self.seed_source()
        return hmac.digest(self.insecure_deal_key, f"seed/{table_id}/{number}".encode(), "sha256")

    def _first_dealer(self, table_id: str) -> int:
        if self.insecure_deal_key is None:
            return self.dealer_source()
        return hmac.digest(self.insecure_deal_key, f"dealer/{table_id}".encode(), "sha256")[0] & 1

    def _with_reveals(self, table: Table, engine_events: list[ee.Event]) -> list[wd.TableEvent]:
        """Map engine events to the wire, revealing the deal's seed when the deal ends."""
        events: list[wd.TableEvent] = []
        number = table.deal_number
        for engine_event in engine_events:
            events += to_wire(engine_event)
            if isinstance(engine_event, ee.StakesSettled) and number in table.seeds:
                events.append(reveal(number, table.seeds[number], table.algorithms[number]))
        return events


def _body(event: wd.TableEvent, command_id: str, now: int) -> dict[str, Any]:
    """Return the stored body of a new event: payload, command id and time (events/envelope.py)."""
    body: dict[str, Any] = event.model_dump(mode="json")
    body["command_id"] = command_id
    body["time"] = now
    return body


def _status(table: Table, events: list[wd.TableEvent]) -> str | None:
    for event in reversed(events):
        if isinstance(event, wd.MatchEnded):
            return "over"
        if isinstance(event, wd.TableCreated):
            return "open"
        if isinstance(event, wd.DealStarted):
            return "playing"
    return None


def _replayed(appended: AppendResult) -> Outcome:
    result: dict[str, Any] = json.loads(appended.result) if appended.result else {}
    return Outcome(
        bool(result.get("ok")), result, True, appended.first_version, appended.last_version
    )
