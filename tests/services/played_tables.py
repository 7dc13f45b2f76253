"""Tables played by two bots through ``TableService``, and the checks of their views and of the
projector's checkpoints, shared by the projector's tests (``test_projector.py``, its restart
test), those of the views stored with the appends (``test_inline_views.py``) and of the view
parts (``test_stored_parts.py``).  The test modules used to import these from
``test_projector.py``.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import redis.asyncio

from engine.bots import make_bot
from engine.cards import format_card
from engine.state import Match, Phase
from engine.views import seat_view, spectator_view
from events.commands import Command, CreateTable, Join, NextDeal, Resign
from events.mapping import cards_to_wire, to_wire_command
from services.store import EventStore, KeySpace, RedisEventStore
from services.tables.results import CommandResult
from services.tables.service import TableService
from services.tables.stored_parts import STORED_PARTS, TableFold, assemble
from services.tables.table import Table

SHARDS = 4
"""Shards of the key spaces these tests build."""
CARD = re.compile(r"[A2-7JQK][CDHS]")
"""A card's text, for the secrecy scans of the views' raw JSON."""


class Game:
    """One table played by two bots through ``TableService`` (seat 0 joins, seat 1 is a bot)."""

    def __init__(
        self,
        service: TableService,
        table_id: str,
        rng: random.Random,
        *,
        rules: str = "classic",
        deals: int = 2,
        resign_chance: float = 0.0,
    ) -> None:
        self.service = service
        self.table_id = table_id
        self.rng = rng
        self.rules = rules
        self.deals = deals
        self.resign_chance = resign_chance
        self.bots = (make_bot(rng.choice(("greedy", "random"))), make_bot("greedy"))
        self.commands = 0
        self.table: Table | None = None
        self.outcomes: list[CommandResult] = []

    def _id(self) -> str:
        self.commands += 1
        return f"{self.table_id}-cmd-{self.commands:05d}"

    async def _run(self, command: Command, seat: int | None) -> CommandResult:
        outcome = await self.service.execute(command, seat)
        assert outcome.ok, outcome.result
        self.table = outcome.table if outcome.table is not None else self.table
        self.outcomes.append(outcome)
        return outcome

    async def start(self) -> None:
        """Create the table (seat 1 a bot) and join seat 0: the first deal starts."""
        await self._run(
            CreateTable(
                command_id=self._id(),
                table_id=self.table_id,
                rules=self.rules,
                deals=self.deals,
                turn_seconds=30,
                bots={1: "greedy"},
            ),
            None,
        )
        await self._run(Join(command_id=self._id(), table_id=self.table_id, name="ana"), 0)

    @property
    def over(self) -> bool:
        return self.table is not None and self.table.match is not None and self.table.match.over

    async def step(self) -> bool:
        """Send the next command; False when the match is over."""
        assert self.table is not None and self.table.match is not None
        match = self.table.match
        if match.over:
            return False
        seat = match.to_act
        if seat is None:
            await self._run(NextDeal(command_id=self._id(), table_id=self.table_id), 0)
        elif self.rng.random() < self.resign_chance:
            await self._run(Resign(command_id=self._id(), table_id=self.table_id), seat)
        else:
            action = self.bots[seat].choose(match, seat, self.rng)
            await self._run(to_wire_command(action, self.table_id, self._id()), seat)
        return True

    async def play(self, commands: int | None = None) -> None:
        """Play ``commands`` more commands (to the end when None)."""
        n = 0
        while (commands is None or n < commands) and await self.step():
            n += 1


async def play_games(
    store: EventStore, count: int, seed: int, *, prefix: str = "tbl", **options: Any
) -> list[Game]:
    service = TableService(store, store_views=False)
    rng = random.Random(seed)
    games = []
    for i in range(count):
        game = Game(service, f"{prefix}-{i}", rng, **options)
        await game.start()
        await game.play()
        games.append(game)
    return games


async def feed_end(client: redis.asyncio.Redis, keys: KeySpace, shard: int) -> str | None:
    last = await client.xrevrange(keys.feed(shard), "+", "-", count=1)
    return last[0][0].decode() if last else None


async def assert_checkpoints_at_feed_ends(client: redis.asyncio.Redis, keys: KeySpace) -> None:
    for shard in range(SHARDS):
        ckpt = await client.get(keys.ckpt(shard, "projector"))
        end = await feed_end(client, keys, shard)
        assert (ckpt.decode() if ckpt else None) == end, shard


# --- checking views ---------------------------------------------------------------------------


def plain(value: object) -> Any:
    """JSON round trip: tuples become lists, as in a stored view."""
    return json.loads(json.dumps(value))


def engine_parts(view: dict[str, Any] | None) -> dict[str, Any]:
    """A seat or spectator view without the projector's own fields."""
    assert view is not None
    data = dict(view)
    data.pop("table_id")
    data.pop("version")
    return data


def assert_views_equal_engine(views: dict[str, str], match: Match, table_id: str) -> None:
    """The seat and spectator views put together from the stored parts are the engine's views
    of the true state; the public view is the spectator view plus the table's own fields."""
    assert set(views) == set(STORED_PARTS)
    public = json.loads(views["public"])
    seated = None not in public["seats"]  # nobody is offered next_deal before both sit
    for seat in (0, 1):
        part = json.loads(views[f"seat{seat}"])
        assert set(part) == {"table_id", "version", "seat", "hand", "legal_actions"}, seat
        got = assemble(f"seat{seat}", public, part)
        assert engine_parts(got) == plain(seat_view(match, seat, seated=seated)), seat
    spectator = plain(spectator_view(match))
    assert engine_parts(assemble("spectator", public)) == spectator
    assert public["table_id"] == table_id
    for key, value in spectator.items():
        if key not in ("seat", "legal_actions"):
            assert public[key] == value, key
    assert public["to_act"] == match.to_act


def assert_secret(views: dict[str, str], match: Match) -> None:
    """Scan the raw JSON of every part for cards it must not name."""
    deal = match.deal
    if deal is None:
        return
    stock = {format_card(c) for c in deal.stock}
    hands = [set(cards_to_wire(deal.hands[s])) for s in (0, 1)]
    over = deal.phase is Phase.OVER
    for part, text in views.items():
        seen = set(CARD.findall(text))
        assert not seen & stock, (part, seen & stock)
        if over:
            continue
        hidden = {"seat0": hands[1], "seat1": hands[0]}.get(part, hands[0] | hands[1])
        assert not seen & hidden, (part, seen & hidden)


async def read_views(
    client: redis.asyncio.Redis, keys: KeySpace, table_id: str
) -> dict[str, str] | None:
    raw = await client.mget([keys.table_view(table_id, p) for p in STORED_PARTS])
    if any(v is None for v in raw):
        assert all(v is None for v in raw), "a table's view parts are written together"
        return None
    return {p: v.decode("utf-8") for p, v in zip(STORED_PARTS, raw, strict=True)}


async def folded_views(store: EventStore, table_id: str) -> dict[str, str]:
    """The projector's views of a table's stored events."""
    fold = TableFold(table_id)
    for e in await store.read(table_id):
        fold.apply_body(e.version, e.body)
    return fold.views()


async def all_view_values(client: redis.asyncio.Redis, ns: str) -> dict[str, bytes]:
    keys = sorted([k async for k in client.scan_iter(match=f"{ns}:*:view:*")])
    values = await client.mget(keys) if keys else []
    return dict(zip(keys, values, strict=True))


async def assert_views_current(
    client: redis.asyncio.Redis, keys: KeySpace, store: RedisEventStore, games: list[Game]
) -> None:
    for game in games:
        views = await read_views(client, keys, game.table_id)
        assert views is not None and game.table is not None and game.table.match is not None
        head = await store.head(game.table_id)
        for part, text in views.items():
            assert json.loads(text)["version"] == head.version == game.table.version, part
        assert_views_equal_engine(views, game.table.match, game.table_id)
        assert_secret(views, game.table.match)
