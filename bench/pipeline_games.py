"""The games of the pipeline benchmark (``bench/pipeline.py``): whole bot matches played in memory
beforehand, each table's wire commands in stream order with the version each leads to, and the
orders in which the driver sends them (round-robin for a flood, staggered for a steady load).
"""

from __future__ import annotations

import argparse
import hashlib
import pickle
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.bots import make_bot
from events.commands import Command, CreateTable, Join, NextDeal
from events.mapping import to_wire_command
from services.store import MemoryEventStore
from services.tables.service import TableService

DEAL_KEY = "5eed" * 8
"""The insecure deal key of the benchmark (hex): the worker deals what the generator dealt."""
FIXED_CLOCK_MS = 1_700_000_000_000


@dataclass
class Game:
    """A table's commands in stream order: (entry fields, version after the command)."""

    table_id: str
    commands: list[tuple[dict[str, str], int, str]] = field(default_factory=list)

    @property
    def final(self) -> int:
        return self.commands[-1][1]


async def generate(
    prefix: str, count: int, deals: int, bots: Sequence[str], seed: int
) -> list[Game]:
    """Play ``count`` whole matches in memory and record their wire commands."""
    service = TableService(
        MemoryEventStore(),
        clock=lambda: FIXED_CLOCK_MS,
        insecure_deal_key=bytes.fromhex(DEAL_KEY),
    )
    players = [make_bot(bots[0]), make_bot(bots[1])]
    games = []
    for i in range(count):
        table_id = f"{prefix}{i:05d}"
        rng = random.Random(f"{seed}/{table_id}")
        game = Game(table_id)

        async def run(command: Command, seat: int | None, game: Game = game) -> None:
            outcome = await service.execute(command, seat)
            if not outcome.ok:
                raise RuntimeError(f"generator: {command!r} refused: {outcome.result}")
            fields = {
                "c": command.model_dump_json(exclude_none=True),
                "s": "" if seat is None else str(seat),
                "r": "0",
            }
            game.commands.append((fields, outcome.last_version, command.command_id))

        await run(CreateTable(table_id=table_id, command_id=f"{table_id}-c", deals=deals), None)
        await run(Join(table_id=table_id, command_id=f"{table_id}-j0", name="ann"), None)
        await run(Join(table_id=table_id, command_id=f"{table_id}-j1", name="bob"), None)
        for step in range(10_000):  # a deal takes ~50 commands; bounded all the same
            table = service.cached(table_id)
            assert table is not None and table.match is not None
            match = table.match
            if match.over:
                break
            command_id = f"{table_id}-{step:04d}"
            if match.to_act is None:  # between deals
                await run(
                    NextDeal(
                        table_id=table_id, command_id=command_id, expected_version=table.version
                    ),
                    0,
                )
                continue
            seat = match.to_act
            action = players[seat].choose(match, seat, rng)
            await run(to_wire_command(action, table_id, command_id, table.version), seat)
        games.append(game)
    return games


async def games_for(args: argparse.Namespace) -> dict[str, list[Game]]:
    """The games of every phase, from ``--games-cache`` when it holds the same parameters."""
    plan = {
        "warmup": ("w", args.warmup_tables),
        "flood": ("f", args.flood_tables),
        "load": ("l", args.load_tables),
        "low": ("q", args.low_tables),
    }
    params = [plan, args.deals, args.bots, args.seed, DEAL_KEY]
    digest = hashlib.sha256(repr(params).encode()).hexdigest()[:16]
    cache = Path(args.games_cache) if args.games_cache else None
    if cache is not None and cache.is_file():
        with cache.open("rb") as fh:
            stored = pickle.load(fh)
        if stored.get("digest") == digest:
            return stored["games"]  # type: ignore[no-any-return]
    games = {}
    for phase, (prefix, count) in plan.items():
        games[phase] = await generate(prefix, count, args.deals, args.bots.split(","), args.seed)
    if cache is not None:
        with cache.open("wb") as fh:
            pickle.dump({"digest": digest, "games": games}, fh)
    return games


Order = list[tuple[Game, int]]
"""Commands to send, as (game, index of the command in the game)."""


def interleave(games: Sequence[Game]) -> Order:
    """(game, command index) round-robin over the tables: step 0 of every table, then step 1…"""
    longest = max(len(g.commands) for g in games)
    return [(g, k) for k in range(longest) for g in games if k < len(g.commands)]


def staggered(games: Sequence[Game], commands: int, seed: int) -> tuple[Order, Order]:
    """A steady state: tables at every stage of their game, new ones opening as others end.

    The caller takes about ``2 * commands / L`` tables, so that about half of them are active
    at once and each plays one command every ``seconds / L`` (0.2 s for 10 s): a fast bot table.

    Command ``k`` of table ``j`` gets the virtual time ``o_j + k`` (in steps of one command per
    active table), with offsets ``o_j`` uniform in ``[-L_j, X]``: the commands before time 0 are
    the *prefix* (sent beforehand, not measured); the measured part is the next ``commands``
    ones in virtual-time order.  ``X`` is chosen so that ``commands`` fit: with ``N`` tables of
    mean length ``L`` about ``N·L/(L+X)`` tables are active at any time, ``X`` steps each.
    """
    n = len(games)
    mean = sum(len(g.commands) for g in games) / n
    if commands >= n * mean:
        raise ValueError(f"{n} tables hold fewer than the {commands} commands asked for")
    span = commands * mean / (n * mean - commands) * 1.05
    rng = random.Random(f"stagger/{seed}")
    timed: list[tuple[float, int, Game, int]] = []
    for j, game in enumerate(games):
        offset = rng.uniform(-len(game.commands), span)
        timed += [(offset + k, j, game, k) for k in range(len(game.commands))]
    timed.sort(key=lambda x: (x[0], x[1]))
    prefix = [(g, k) for t, _, g, k in timed if t < 0]
    measured = [(g, k) for t, _, g, k in timed if t >= 0][:commands]
    return prefix, measured


def reached(order: Order) -> dict[str, int]:
    """The version each table of ``order`` reaches with its last command there."""
    out: dict[str, int] = {}
    for game, k in order:
        out[game.table_id] = max(out.get(game.table_id, 0), game.commands[k][1])
    return out
