"""The projector's views: folded without the seeds, they equal the engine's views of the true
state.

Tables are driven by ``TableService`` with bots choosing from the true state (seeds and all);
the projector only ever sees the streams.  The secrecy scan looks for card texts in the raw
JSON of each view: a seat's view never names a card of the opponent's hand (before the deal
ends) or of the stock, a spectator's or the public view names no hand card and no stock card.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from engine.bots import make_bot
from engine.cards import format_card
from engine.rules import PRESETS
from engine.state import Match, Phase
from engine.views import seat_view, spectator_view
from events import commands as wc
from events.envelope import BODY_KEYS
from events.mapping import cards_to_wire, revealed_decks, to_engine, to_wire_command
from events.upcast import parse_event
from services.store import EventStore, KeySpace, MemoryEventStore
from services.table import Table, fold_table
from services.table_service import Outcome, TableService
from services.views_fold import VIEW_PARTS, FoldError, TableFold

CARD = re.compile(r"[A2-7JQK][CDHS]")
FIXTURE = Path(__file__).parents[1] / "events" / "fixtures" / "table_v1.jsonl"
SHARDS = 4


# --- driving tables --------------------------------------------------------------------------


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

    def _id(self) -> str:
        self.commands += 1
        return f"{self.table_id}-cmd-{self.commands:05d}"

    async def _run(self, command: wc.Command, seat: int | None) -> Outcome:
        outcome = await self.service.execute(command, seat)
        assert outcome.ok, outcome.result
        self.table = outcome.table if outcome.table is not None else self.table
        return outcome

    async def start(self) -> None:
        """Create the table (seat 1 a bot) and join seat 0: the first deal starts."""
        await self._run(
            wc.CreateTable(
                command_id=self._id(),
                table_id=self.table_id,
                rules=self.rules,
                deals=self.deals,
                turn_seconds=30,
                bots={1: "greedy"},
            ),
            None,
        )
        await self._run(wc.Join(command_id=self._id(), table_id=self.table_id, name="ana"), 0)

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
            await self._run(wc.NextDeal(command_id=self._id(), table_id=self.table_id), 0)
        elif self.rng.random() < self.resign_chance:
            await self._run(wc.Resign(command_id=self._id(), table_id=self.table_id), seat)
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
    service = TableService(store)
    rng = random.Random(seed)
    games = []
    for i in range(count):
        game = Game(service, f"{prefix}-{i}", rng, **options)
        await game.start()
        await game.play()
        games.append(game)
    return games


# --- checking views --------------------------------------------------------------------------


def plain(value: object) -> Any:
    """JSON round trip: tuples become lists, as in a stored view."""
    return json.loads(json.dumps(value))


def engine_parts(view: str) -> dict[str, Any]:
    """A stored seat or spectator view without the projector's own fields."""
    data = json.loads(view)
    data.pop("table_id")
    data.pop("version")
    return data  # type: ignore[no-any-return]


def assert_views_equal_engine(views: dict[str, str], match: Match, table_id: str) -> None:
    """The seat and spectator views are the engine's views of the true state; the public view
    is the spectator view plus the table's own fields."""
    for seat in (0, 1):
        assert engine_parts(views[f"seat{seat}"]) == plain(seat_view(match, seat)), seat
    spectator = plain(spectator_view(match))
    assert engine_parts(views["spectator"]) == spectator
    public = json.loads(views["public"])
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


def test_card_scan_finds_cards_in_legal_actions_and_tables() -> None:
    text = '{"legal_actions":["take 5S KC KD KH => 2S3S4S5S6S KCKDKH"],"name":"ana"}'
    assert set(CARD.findall(text)) == {"5S", "KC", "KD", "KH", "2S", "3S", "4S", "6S"}


# --- the fold without seeds ------------------------------------------------------------------


@pytest.mark.slow
async def test_views_without_seeds_equal_the_engine_views_at_every_version() -> None:
    """Many random bot games on every rule preset: at every version the fold can show (every
    version but the two inside a deal's start), the views equal the engine's views of the
    state folded with the seeds, and they never name a secret card."""
    store = MemoryEventStore(KeySpace("mem", shards=SHARDS))
    games: list[Game] = []
    for i, rules in enumerate(sorted(PRESETS)):
        games += await play_games(
            store, 6, seed=100 + i, prefix=f"fold-{i}", rules=rules, deals=3, resign_chance=0.01
        )
    checked = 0
    for game in games:
        table_id = game.table_id
        secrets = await store.secrets(table_id)
        truth: Table | None = None
        fold = TableFold(table_id)
        for e in await store.read(table_id):
            truth = fold_table(table_id, [(e.version, e.hash, e.body)], secrets, truth)
            assert fold.apply_body(e.version, e.body)
            starting = e.body["type"] == "deal_started"
            if starting or (e.body["type"] == "hand_dealt" and e.body["seat"] == 0):
                with pytest.raises(FoldError):  # inside a deal's start: no views
                    fold.views()
                continue
            assert truth.match is not None
            views = fold.views()
            assert json.loads(views["public"])["version"] == e.version
            assert_views_equal_engine(views, truth.match, table_id)
            assert_secret(views, truth.match)
            checked += 1
        assert game.over and fold.status == "over"
    assert checked > 5_000


async def test_feed_positions_never_end_inside_a_deal_start() -> None:
    store = MemoryEventStore(KeySpace("mem", shards=SHARDS))
    await play_games(store, 3, seed=7, deals=3)
    for shard in range(SHARDS):
        for entry in await store.read_feed(shard, count=100_000):
            fold = TableFold(entry.table_id)
            for e in await store.read(entry.table_id, 1, entry.last_version):
                fold.apply_body(e.version, e.body)
            assert set(fold.views()) == set(VIEW_PARTS)


def fixture_log() -> list[dict[str, Any]]:
    """The v1 fixture's stored bodies (its lines without ``hash`` and ``prev_hash``)."""
    lines = FIXTURE.read_text("utf-8").splitlines()
    return [
        {k: v for k, v in json.loads(line).items() if k not in ("hash", "prev_hash")}
        for line in lines
        if line
    ]


def test_views_of_the_v1_fixture_equal_the_views_of_its_revealed_decks() -> None:
    """An old table log (v1 events, upcast on read) folds the same as with its revealed decks."""
    log = fixture_log()
    table_id = log[0]["table_id"]
    events = [parse_event({k: v for k, v in e.items() if k not in BODY_KEYS}) for e in log]
    decks = revealed_decks(table_id, events)
    from engine.game import evolve

    match: Match | None = None
    fold = TableFold(table_id)
    for raw, event in zip(log, events, strict=True):
        for engine_event in to_engine(event, decks.__getitem__):
            match = evolve(match, engine_event)
        fold.apply_body(raw["version"], raw)
        if raw["type"] == "deal_started" or (raw["type"] == "hand_dealt" and raw["seat"] == 0):
            continue
        assert match is not None
        assert_views_equal_engine(fold.views(), match, table_id)
    public = json.loads(fold.views()["public"])
    assert public["seats"] == [{"name": "Ana", "bot": None}, {"name": "Greedy", "bot": "greedy"}]
    assert public["status"] == "over" and public["turn_seconds"] == 30


def test_fold_rejects_a_gap_and_a_card_that_is_not_in_the_stock() -> None:
    log = fixture_log()
    fold = TableFold("T-fixture-v1")
    with pytest.raises(FoldError):
        fold.apply_body(2, log[1])
    for raw in log[:6]:  # created, two joins, deal started, two hands
        fold.apply_body(raw["version"], raw)
    assert not fold.apply_body(3, log[2])  # already folded: nothing happens
    hands = {c for raw in log[4:6] for c in raw["cards"]}
    with pytest.raises(FoldError, match="not in the stock"):
        fold.apply_body(7, {"type": "card_turned", "v": 1, "seat": 1, "card": min(hands)})


def test_placeholder_stock_holds_exactly_the_unseen_cards() -> None:
    """The placeholder never claims a card that is seen elsewhere: 40 cards in all."""
    log = fixture_log()
    fold = TableFold(log[0]["table_id"])
    for raw in log:
        fold.apply_body(raw["version"], raw)
        match = fold.match
        if match is None or match.deal is None:
            continue
        deal = match.deal
        seen = deal.hands[0] | deal.hands[1] | deal.table_masks[0] | deal.table_masks[1]
        loose = [*deal.stock, *deal.waste, *([] if deal.centre is None else [deal.centre])]
        mask = 0
        for c in loose:
            assert not (seen | mask) >> c & 1
            mask |= 1 << c
        assert (seen | mask).bit_count() == 40
