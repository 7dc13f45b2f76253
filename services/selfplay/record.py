"""``conquian selfplay --record``: a selfplay run played through the table service into a store.

``--record`` plays the deals through :class:`services.tables.service.TableService`, not the
engine directly, with wire commands, into an event store: table ``selfplay-<S>-<t>`` holds
deals ``t*K … t*K+K-1`` (``K`` = ``--table-deals``, 1 by default), so the stored tables are
exactly what the service writes and ``conquian audit`` checks real tables.  The service
shuffles each deal from a seed with the commit-reveal algorithm of ``docs/fairness.md``; a
recorded run derives those seeds from ``S`` and the deal index (so it is reproducible, and its
decks differ from an unrecorded run's).  Such seeds are not secret: recorded selfplay is test
data, not a fair game.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.bots import make_bot
from engine.codes import Code
from engine.rules import PRESETS, Rules
from engine.state import Outcome
from services.selfplay.deals import SelfplayConfig, SelfplayResult, bot_rng

if TYPE_CHECKING:
    from events.commands import RuleOptions
    from services.store.base import EventStore

TABLE_ID = "selfplay-{seed}-{index}"
"""The id of recorded table ``index`` of a run seeded with ``seed``."""


def table_id_of(seed: int, index: int) -> str:
    """Return the id of recorded table ``index`` of a run seeded with ``seed``."""
    return TABLE_ID.format(seed=seed, index=index)


def deal_seed(seed: int, index: int) -> bytes:
    """Return the 32-byte shuffle seed of deal ``index`` of a recorded run (not secret)."""
    return hashlib.sha256(f"conquian/selfplay/{seed}/{index}/seed".encode()).digest()


def command_id_of(table_id: str, version: int) -> str:
    """Return the id of the command sent to ``table_id`` at ``version``: 26 characters, like a
    ULID, and the same on every run, so that re-recording a table is idempotent."""
    return hashlib.sha256(f"{table_id}@{version}".encode()).hexdigest()[:26]


@dataclass(frozen=True)
class RecordedTable:
    """One recorded table: its id, the outcome of each of its deals, actions and events."""

    table_id: str
    outcomes: tuple[Outcome, ...]
    actions: int
    events: int


def _wire_rules(rules: Rules) -> str | RuleOptions:
    from events.commands import RuleOptions

    if PRESETS.get(rules.name) == rules:
        return rules.name
    return RuleOptions.model_validate(rules.as_dict())


class RecordingConflict(RuntimeError):
    """A recorded table moved under the recorder: another player (a running service's bots
    runner, say) acts for its bot seats, so the seed's games cannot be recorded there."""


async def record_table(
    store: EventStore,
    config: SelfplayConfig,
    index: int,
    first: int,
    count: int,
    clock: Callable[[], int] | None = None,
) -> RecordedTable:
    """Play deals ``first … first+count-1`` of a run as one table, through ``TableService``.

    The table is created with both bots seated (``create_table`` with ``bots``), seat 0 asks
    for the first deal (and every next one), and each bot action goes in as the wire command of
    ``events.mapping.to_wire_command``, with the id :func:`command_id_of` the table's version.
    A table this run recorded before (same seed, same namespace) is continued where it stands,
    so a finished one is left as it is.  Raises RuntimeError when the service rejects a command
    (a table of that id made otherwise; or a bug, since bots only play legal actions).
    """
    from events.commands import Command, CreateTable, NextDeal
    from events.mapping import to_wire_command
    from services.tables.results import CommandResult
    from services.tables.service import TableService

    table_id = table_id_of(config.seed, index)
    seeds = iter([deal_seed(config.seed, first + k) for k in range(count)])
    service = TableService(
        store,
        seed_source=lambda: next(seeds),
        dealer_source=lambda: first % 2,
        cache_size=1,
    )
    if clock is not None:
        service.clock = clock
    bots = (make_bot(config.players[0]), make_bot(config.players[1]))
    actions = 0

    async def send(command: Command, seat: int | None) -> CommandResult:
        outcome = await service.execute(command, seat)
        if outcome.code == Code.COMMAND_STALE_VERSION:
            raise RecordingConflict(
                f"table {table_id} moved while it was being recorded ({outcome.result['message']}):"
                " something else plays its bot seats, such as the bots runner of a service"
                " serving this namespace; record into a namespace of its own (--namespace)"
            )
        if not outcome.ok:
            raise RuntimeError(f"table {table_id}: {command.type} rejected: {outcome.result}")
        return outcome

    created = await send(
        CreateTable(
            table_id=table_id,
            command_id=command_id_of(table_id, 0),
            rules=_wire_rules(config.rules),
            deals=count,
            bots={0: config.players[0], 1: config.players[1]},
        ),
        None,
    )
    resumed = created.duplicate
    table = await service.load(table_id, fresh=True)
    rng = bot_rng(config.seed, first)
    while (match := table.match) is not None and not match.over:
        cid = command_id_of(table_id, table.version)
        seat = match.to_act
        if seat is None:  # between deals: seat 0 asks for the next one
            await send(NextDeal(table_id=table_id, command_id=cid), 0)
            rng = bot_rng(config.seed, first + table.deal_number)
        else:
            action = bots[seat].choose(match, seat, rng)
            await send(to_wire_command(action, table_id, cid, table.version), seat)
            actions += 1
        cached = service.cached(table_id)
        table = cached if cached is not None else await service.load(table_id)
    outcomes = () if table.match is None else table.match.results
    if resumed:  # count the moves already stored too: one command each
        stored = await store.read(table_id)
        commands = {e.body["command_id"] for e in stored}
        actions = len(commands) - 1 - sum(e.body["type"] == "deal_started" for e in stored)
    return RecordedTable(table_id, outcomes, actions, table.version)


async def record_selfplay(
    config: SelfplayConfig,
    store: EventStore,
    table_deals: int = 1,
    concurrency: int = 16,
    progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], int] | None = None,
) -> tuple[SelfplayResult, list[RecordedTable]]:
    """Record the run's deals as tables of ``table_deals`` deals each, ``concurrency`` tables
    at a time; returns the tally (over the recorded deals) and the tables in order."""
    if table_deals < 1 or concurrency < 1:
        raise ValueError("table_deals and concurrency must be at least 1")
    starts = list(range(0, config.deals, table_deals))
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(index: int, first: int) -> RecordedTable:
        nonlocal done
        async with gate:
            count = min(table_deals, config.deals - first)
            recorded = await record_table(store, config, index, first, count, clock)
        done += 1
        if progress is not None:
            progress(done, len(starts))
        return recorded

    tables = await asyncio.gather(*(one(i, first) for i, first in enumerate(starts)))
    wins = [0, 0]
    draws = 0
    for outcome in (o for t in tables for o in t.outcomes):
        if outcome.winner is None:
            draws += 1
        else:
            wins[outcome.winner] += 1
    deals = sum(len(t.outcomes) for t in tables)
    actions = sum(t.actions for t in tables)
    return SelfplayResult(config, deals, (wins[0], wins[1]), draws, actions), list(tables)
