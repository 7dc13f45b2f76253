"""Bots play seeded deals against each other: ``conquian selfplay`` and the functions behind it.

Deal ``i`` of a run with seed ``S`` is shuffled by its own ``random.Random`` derived from
``S`` and ``i`` alone, and its bots draw from another one, so every deal can be replayed on its
own.  Seat 0 deals the even deals and seat 1 the odd ones.  Each deal is a one-deal match
started with ``NewMatch``; ``play_deal`` returns its engine events.

``--record`` plays the deals through :class:`services.table_service.TableService` instead, with
wire commands, into an event store: table ``selfplay-<S>-<t>`` holds deals ``t*K … t*K+K-1``
(``K`` = ``--table-deals``, 1 by default), so the stored tables are exactly what the service
writes and ``conquian audit`` checks real tables.  The service shuffles each deal from a seed
with the commit-reveal algorithm of ``docs/fairness.md``; a recorded run derives those seeds
from ``S`` and the deal index (so it is reproducible, and its decks differ from an unrecorded
run's).  Such seeds are not secret: recorded selfplay is test data, not a fair game.

>>> result = run_selfplay(SelfplayConfig(deals=2, seed=1, players=("greedy", "random")))
>>> result.deals, sum(result.wins) + result.draws
(2, 2)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from engine.actions import NewMatch, Play, StartDeal
from engine.bots import BOTS, Bot, make_bot
from engine.cards import ALL_CARDS, Card
from engine.events import Event
from engine.game import decide, evolve
from engine.rules import CLASSIC, PRESETS, Rules
from engine.state import Match, Outcome

if TYPE_CHECKING:
    from events.commands import RuleOptions
    from services.cli import Subparsers
    from services.store.base import EventStore
    from services.store.keys import KeySpace

# --- playing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlayedDeal:
    """One finished deal: every engine event in order, the seats' commands and the outcome."""

    events: tuple[Event, ...]
    plays: tuple[Play, ...]
    outcome: Outcome


def deal_deck(seed: int, index: int) -> tuple[Card, ...]:
    """Return the shuffled deck of deal ``index`` of a run seeded with ``seed``."""
    deck = list(ALL_CARDS)
    random.Random(f"conquian/selfplay/{seed}/{index}/deck").shuffle(deck)
    return tuple(deck)


def bot_rng(seed: int, index: int) -> random.Random:
    """Return the random source the bots of deal ``index`` share."""
    return random.Random(f"conquian/selfplay/{seed}/{index}/bots")


def play_deal(
    bots: Sequence[Bot],
    deck: tuple[Card, ...],
    rng: random.Random,
    rules: Rules = CLASSIC,
    dealer: int = 0,
) -> PlayedDeal:
    """Play one deal as a one-deal match, ``bots[seat]`` acting for each seat, to its end."""
    events: list[Event] = []
    plays: list[Play] = []

    def apply(state: Match | None, new: list[Event]) -> Match | None:
        for event in new:
            state = evolve(state, event)
        events.extend(new)
        return state

    match = apply(None, decide(None, NewMatch(rules=rules, first_dealer=dealer, deals=1)))
    match = apply(match, decide(match, StartDeal(deck)))
    while match is not None and (seat := match.to_act) is not None:
        play = Play(seat, bots[seat].choose(match, seat, rng))
        plays.append(play)
        match = apply(match, decide(match, play))
    outcome = match.deal.outcome if match is not None and match.deal is not None else None
    if outcome is None:  # decide always ends a deal with an outcome
        raise RuntimeError("the deal stopped without an outcome")
    return PlayedDeal(tuple(events), tuple(plays), outcome)


@dataclass(frozen=True)
class SelfplayConfig:
    """A selfplay run: how many deals, the seed, the bot of each seat and the rule set."""

    deals: int
    seed: int
    players: tuple[str, str]
    rules: Rules = CLASSIC


@dataclass(frozen=True)
class SelfplayResult:
    """The tally of a run: wins per seat, draws and the number of actions played."""

    config: SelfplayConfig
    deals: int
    wins: tuple[int, int]
    draws: int
    actions: int

    @property
    def mean_actions(self) -> float:
        """Return the mean number of actions per deal."""
        return self.actions / self.deals if self.deals else 0.0

    def as_dict(self) -> dict[str, object]:
        """Return the result as the JSON object that ``--json`` prints."""
        decided = sum(self.wins)
        return {
            "deals": self.deals,
            "seed": self.config.seed,
            "rules": self.config.rules.name,
            "players": list(self.config.players),
            "wins": list(self.wins),
            "draws": self.draws,
            "decided": decided,
            "win_rate_decided": [round(w / decided, 4) if decided else None for w in self.wins],
            "actions": self.actions,
            "mean_actions": round(self.mean_actions, 3),
        }


DealHook = Callable[[int, PlayedDeal], None]


def run_selfplay(
    config: SelfplayConfig,
    on_deal: DealHook | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SelfplayResult:
    """Play the run's deals in order; ``on_deal(i, deal)`` sees each finished deal (recording).

    Raises KeyError for an unknown bot name.
    """
    bots = (make_bot(config.players[0]), make_bot(config.players[1]))
    wins = [0, 0]
    draws = actions = 0
    for i in range(config.deals):
        played = play_deal(
            bots, deal_deck(config.seed, i), bot_rng(config.seed, i), config.rules, i % 2
        )
        if played.outcome.winner is None:
            draws += 1
        else:
            wins[played.outcome.winner] += 1
        actions += len(played.plays)
        if on_deal is not None:
            on_deal(i, played)
        if progress is not None:
            progress(i + 1, config.deals)
    return SelfplayResult(config, config.deals, (wins[0], wins[1]), draws, actions)


# --- recording through the table service ---------------------------------------------------

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
    from events import commands as wc
    from events.mapping import to_wire_command
    from services.table_service import Outcome as ServiceOutcome
    from services.table_service import TableService

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

    async def send(command: wc.Command, seat: int | None) -> ServiceOutcome:
        outcome = await service.execute(command, seat)
        if not outcome.ok:
            raise RuntimeError(f"table {table_id}: {command.type} rejected: {outcome.result}")
        return outcome

    created = await send(
        wc.CreateTable(
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
            await send(wc.NextDeal(table_id=table_id, command_id=cid), 0)
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


# --- command line ----------------------------------------------------------------------------


def _deal_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _players(text: str) -> tuple[str, str]:
    names = [n.strip() for n in text.split(",")]
    if len(names) != 2 or not all(names):
        raise argparse.ArgumentTypeError(f"name two bots separated by a comma, not {text!r}")
    for name in names:
        if name not in BOTS:
            known = ", ".join(sorted(BOTS))
            raise argparse.ArgumentTypeError(f"unknown bot {name!r}; known: {known}")
    return names[0], names[1]


def _rules(text: str) -> Rules:
    if text not in PRESETS:
        known = ", ".join(sorted(PRESETS))
        raise argparse.ArgumentTypeError(f"unknown rule set {text!r}; known: {known}")
    return PRESETS[text]


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``selfplay`` subcommand and its arguments."""
    parser = subparsers.add_parser(
        name,
        help="let two bots play seeded deals and print the tally",
        description="Bots play N seeded deals (the deal alternates); prints wins per seat, "
        "draws and the mean number of actions per deal.",
    )
    parser.add_argument("--deals", type=_deal_count, default=100, help="deals to play (>= 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    parser.add_argument(
        "--players",
        type=_players,
        default=("greedy", "random"),
        help=f"bots of seat 0 and seat 1, e.g. greedy,random (known: {', '.join(sorted(BOTS))})",
    )
    parser.add_argument(
        "--rules",
        type=_rules,
        default=CLASSIC,
        help=f"rule preset (default classic; known: {', '.join(sorted(PRESETS))})",
    )
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object")
    record = parser.add_argument_group(
        "recording", "play through the table service and store each table (for conquian audit)"
    )
    record.add_argument(
        "--record",
        action="store_true",
        help="write the deals through the store as tables selfplay-<seed>-<n>",
    )
    record.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL") or os.environ.get("CONQUIAN_REDIS_URL"),
        help="Redis to record into (default: $REDIS_URL)",
    )
    record.add_argument(
        "--namespace",
        default=None,
        help="key namespace of the store (default: $CONQUIAN_NAMESPACE, else cq)",
    )
    record.add_argument(
        "--shards",
        type=_deal_count,
        default=None,
        help="shards of the deployment (default: $CONQUIAN_SHARDS, else 16)",
    )
    record.add_argument(
        "--table-deals",
        type=_deal_count,
        default=1,
        help="deals per recorded table, each table a match of that many deals (default 1)",
    )
    parser.set_defaults(handler=run, parser=parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``conquian selfplay`` with parsed arguments; returns the exit status."""
    config = SelfplayConfig(args.deals, args.seed, args.players, args.rules)
    show = sys.stdout.isatty() and sys.stderr.isatty()
    progress = _progress_bar(sys.stderr) if show else None
    recorded: dict[str, Any] | None = None
    if args.record:
        if not args.redis_url:
            args.parser.error("--record needs --redis-url or REDIS_URL")
        from services.store.keys import DEFAULT_NS, DEFAULT_SHARDS, KeySpace

        namespace = args.namespace or os.environ.get("CONQUIAN_NAMESPACE") or DEFAULT_NS
        try:
            shards = args.shards or int(os.environ.get("CONQUIAN_SHARDS") or DEFAULT_SHARDS)
            keys = KeySpace(namespace, shards)
        except ValueError as exc:
            args.parser.error(str(exc))
        result, tables = asyncio.run(_record(args.redis_url, keys, config, args, progress))
        recorded = {
            "namespace": keys.ns,
            "tables": len(tables),
            "first_table": tables[0].table_id,
            "last_table": tables[-1].table_id,
            "events": sum(t.events for t in tables),
        }
    elif args.namespace or args.shards or args.table_deals != 1:
        args.parser.error("--namespace, --shards and --table-deals need --record")
    else:
        result = run_selfplay(config, progress=progress)
    if args.json:
        data = result.as_dict()
        if recorded is not None:
            data["recorded"] = recorded
        sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    else:
        sys.stdout.write(format_result(result))
        if recorded is not None:
            sys.stdout.write(
                f"  recorded {recorded['tables']} tables ({recorded['first_table']} … "
                f"{recorded['last_table']}), {recorded['events']} events, "
                f"namespace {recorded['namespace']}\n"
            )
    return 0


async def _record(
    url: str,
    keys: KeySpace,
    config: SelfplayConfig,
    args: argparse.Namespace,
    progress: Callable[[int, int], None] | None,
) -> tuple[SelfplayResult, list[RecordedTable]]:
    from services.store import RedisEventStore
    from services.store.client import connect

    client = connect(url)
    try:
        store = RedisEventStore(client, keys)
        return await record_selfplay(config, store, args.table_deals, progress=progress)
    finally:
        await client.aclose()


def format_result(result: SelfplayResult) -> str:
    """Return the human-readable tally of a run."""
    config = result.config
    lines = [f"selfplay: {result.deals} deals, seed {config.seed}, rules {config.rules.name}"]
    decided = sum(result.wins)
    for seat, (name, wins) in enumerate(zip(config.players, result.wins, strict=True)):
        share = f" ({wins / decided:.1%} of decided deals)" if decided else ""
        lines.append(f"  seat {seat} {name:<8} wins {wins}{share}")
    lines.append(f"  draws {result.draws}")
    lines.append(f"  mean actions per deal {result.mean_actions:.1f}")
    return "\n".join(lines) + "\n"


def _progress_bar(stream: TextIO, width: int = 30) -> Callable[[int, int], None]:
    """Return a callback that redraws a one-line bar on ``stream`` (a terminal)."""

    def draw(done: int, total: int) -> None:
        filled = width * done // total
        line = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        stream.write("\r" + line)
        if done == total:
            stream.write("\r" + " " * len(line) + "\r")
        stream.flush()

    return draw
