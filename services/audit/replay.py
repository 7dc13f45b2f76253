"""``conquian replay``: a table's stored events as a readable transcript, or its position.

What it shows of hands and how it treats tampered tables: ``docs/audit.md`` ("Replay").
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.cards import ALL_CARDS, Card, format_cards, parse_card
from engine.game import evolve
from engine.notation import format_event, format_position
from engine.secrecy import sees
from engine.state import Match, changed
from events.base import ContractError
from events.domain import (
    BotFailed,
    CardTurned,
    DealRevealed,
    DealStarted,
    EventModel,
    HandDealt,
    PlayerJoined,
    PlayerLeft,
    RematchAgreed,
    RematchOpened,
    TableCreated,
)
from events.envelope import BODY_KEYS
from events.fairness import FairnessError, deal_context, parse_seed, shuffle, verify
from events.mapping import to_engine
from events.upcast import parse_event

if TYPE_CHECKING:
    from services.cli import Subparsers
    from services.store.base import StoredEvent
    from services.store.keys import KeySpace

__all__ = ["ReplayedEvent", "add_parser", "parse_events", "position_at", "run", "transcript"]


@dataclass(frozen=True)
class ReplayedEvent:
    """A stored event read for the replay: the parsed event, or why it could not be read."""

    version: int
    event: EventModel | None
    error: str | None = None


def parse_events(events: Sequence[StoredEvent]) -> list[ReplayedEvent]:
    """Parse (and upcast) the payload of each stored event."""
    out: list[ReplayedEvent] = []
    for stored in events:
        payload = {k: v for k, v in stored.body.items() if k not in BODY_KEYS}
        try:
            out.append(ReplayedEvent(stored.version, parse_event(payload)))
        except ContractError as error:
            out.append(ReplayedEvent(stored.version, None, f"{error.code}: {error}"))
    return out


class _Deals:
    """What the events say about each deal: start, revealed seed and deck, hands, turned cards."""

    def __init__(self, table_id: str, events: Sequence[ReplayedEvent]) -> None:
        self.table_id = table_id
        self.started: dict[int, DealStarted] = {}
        self.revealed: dict[int, DealRevealed] = {}
        self.hands: dict[int, dict[int, tuple[str, ...]]] = {}
        self.turned: dict[int, list[str]] = {}
        current = 0
        for replayed in events:
            event = replayed.event
            if isinstance(event, DealStarted):
                current = event.number
                self.started[current] = event
            elif isinstance(event, HandDealt):
                self.hands.setdefault(current, {})[event.seat] = event.cards
            elif isinstance(event, CardTurned):
                self.turned.setdefault(current, []).append(event.card)
            elif isinstance(event, DealRevealed):
                self.revealed[event.number] = event

    def matches(self, number: int) -> bool | None:
        """Say whether the revealed seed of a deal matches its commitment (None: not revealed)."""
        reveal = self.revealed.get(number)
        start = self.started.get(number)
        if reveal is None or start is None:
            return None
        try:
            seed = parse_seed(reveal.seed)
        except FairnessError:
            return False
        return verify(seed, start.commitment) and reveal.algorithm == start.algorithm

    def deck(self, number: int) -> tuple[Card, ...]:
        """The deck of a deal: from its revealed seed, else as far as its events show it (the
        dealt hands, the turned cards, then the unseen cards in card order)."""
        reveal = self.revealed.get(number)
        if reveal is not None:
            try:
                context = deal_context(self.table_id, number)
                return shuffle(parse_seed(reveal.seed), reveal.algorithm, context)
            except FairnessError:
                pass
        start = self.started.get(number)
        dealer = start.dealer if start is not None else 0
        hands = self.hands.get(number, {})
        seen: list[Card] = []
        halves = [[parse_card(c) for c in hands.get(s, ())] for s in (1 - dealer, dealer)]
        for a, b in zip(*halves, strict=False):
            seen += (a, b)
        seen += [parse_card(c) for c in self.turned.get(number, ()) if parse_card(c) not in seen]
        return (*seen, *(c for c in ALL_CARDS if c not in seen))


def transcript(
    table_id: str, events: Sequence[ReplayedEvent], seat: int | None = None
) -> list[str]:
    """Return the lines of a table's transcript, deal by deal (``docs/audit.md``, "Replay")."""
    deals = _Deals(table_id, events)
    lines: list[str] = []
    current = 0
    for replayed in events:
        event = replayed.event
        version = replayed.version
        if event is None:
            lines.append(f"{version:>5}  ?? {replayed.error}")
            continue
        if isinstance(event, DealStarted):
            current = event.number
            lines.append("")
            lines.append(f"deal {event.number}: dealer {event.dealer}, stake {event.stake}")
        text = _line(event, deals, current, seat)
        lines += [f"{version:>5}  {text[0]}", *(f"       {more}" for more in text[1:])]
    return lines


def _line(event: EventModel, deals: _Deals, current: int, seat: int | None) -> list[str]:
    """The text of one event (the first line, then any more)."""
    if isinstance(event, TableCreated):
        (started,) = to_engine(event)
        clock = f"{event.turn_seconds} s a turn" if event.turn_seconds else "none"
        return [f"table {deals.table_id}: {format_event(started)}, turn clock {clock}"]
    if isinstance(event, PlayerJoined):
        who = f" (bot {event.bot})" if event.bot else ""
        return [f"seat {event.seat}: {event.name}{who}"]
    if isinstance(event, PlayerLeft):
        return [f"seat {event.seat}: left before the first deal"]
    if isinstance(event, RematchAgreed):
        return [f"seat {event.seat}: agrees to a rematch"]
    if isinstance(event, RematchOpened):
        return [f"rematch at table {event.next_table_id}"]
    if isinstance(event, BotFailed):
        return [f"seat {event.seat}: the {event.bot} bot failed, {event.code}: {event.message}"]
    if isinstance(event, DealStarted):
        return [f"committed to the deck: {event.commitment} ({event.algorithm})"]
    if isinstance(event, HandDealt):
        if sees(seat, event.seat, revealed=current in deals.revealed):
            return [f"hand {event.seat}: {' '.join(event.cards)}"]
        return [f"hand {event.seat}: {len(event.cards)} cards, hidden until the deal is revealed"]
    if isinstance(event, DealRevealed):
        ok = deals.matches(event.number)
        verdict = "matches the commitment" if ok else "DOES NOT MATCH the commitment"
        lines = [f"deal {event.number} revealed: seed {event.seed}, {verdict}"]
        if ok:
            lines.append(f"deck {format_cards(deals.deck(event.number))}")
        return lines
    engine_events = to_engine(event)
    if not engine_events:  # pragma: no cover - every other table event maps to the engine
        return [event.TYPE]
    return [format_event(engine_events[0])]


def position_at(
    table_id: str, events: Sequence[ReplayedEvent], version: int, seat: int | None = None
) -> tuple[str, list[str]]:
    """Return the position after ``version`` and notes on what it leaves out.

    Raises ValueError when no match has started by then.
    """
    deals = _Deals(table_id, events)
    match: Match | None = None
    for replayed in events:
        if replayed.version > version:
            break
        if replayed.event is None:
            continue
        for engine_event in to_engine(replayed.event, deals.deck):
            match = evolve(match, engine_event)
    if match is None:
        raise ValueError(f"table {table_id} has no match at version {version}")
    notes: list[str] = []
    deal = match.deal
    if deal is not None and deal.number not in deals.revealed:
        hidden: dict[str, Any] = {"stock": ()}
        what = [f"the stock ({len(deal.stock)} cards)"]
        hands = list(deal.hands)
        for owner in (0, 1):
            if not sees(seat, owner):
                what.append(f"hand {owner} ({deal.hands[owner].bit_count()} cards)")
                hands[owner] = 0
        hidden["hands"] = (hands[0], hands[1])
        match = changed(match, deal=changed(deal, **hidden))
        notes.append(
            f"deal {deal.number} is not revealed: left out {', '.join(what)}"
            + ("" if seat is None else f"; hand {seat} is shown to seat {seat}")
        )
    return format_position(match), notes


# --- command line --------------------------------------------------------------------------------


def add_parser(subparsers: Subparsers, name: str) -> argparse.ArgumentParser:
    """Add the ``replay`` subcommand and its arguments."""
    from services.audit import add_store_arguments

    parser = subparsers.add_parser(
        name,
        help="print a table's transcript deal by deal, or its position at a version",
        description="Print the transcript of a table from the event store, deal by deal; "
        "hands are shown once their deal is revealed (or --seat's own). With --at, print the "
        "position after that version instead.",
    )
    parser.add_argument("table", metavar="TABLE", help="the table id")
    parser.add_argument(
        "--at", type=int, metavar="VERSION", help="print the position after this version"
    )
    parser.add_argument(
        "--seat", type=int, choices=(0, 1), help="show this seat's own hand in running deals"
    )
    add_store_arguments(parser)
    parser.set_defaults(handler=run, parser=parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``conquian replay``: 0 on success, 1 for a missing table, 2 on usage errors."""
    from services.audit import store_keys
    from services.store.keys import InvalidTableId, check_table_id

    parser: argparse.ArgumentParser = args.parser
    try:
        check_table_id(args.table)
    except InvalidTableId as error:
        parser.error(str(error))
    if args.at is not None and args.at < 1:
        parser.error("--at must be a version >= 1")
    keys = store_keys(args)
    try:
        stored = asyncio.run(_read(args.redis_url, keys, args.table, args.archive_dir))
    except Exception as error:  # connection problems, without importing redis here
        if isinstance(error, OSError) or type(error).__module__.startswith("redis"):
            sys.stderr.write(f"conquian replay: cannot read the store: {error}\n")
            return 2
        raise
    if not stored:
        sys.stderr.write(f"conquian replay: no table {args.table!r}\n")
        return 1
    events = parse_events(stored)
    if args.at is None:
        sys.stdout.writelines(line + "\n" for line in transcript(args.table, events, args.seat))
        return 0
    last = stored[-1].version
    if args.at > last:
        parser.error(f"--at {args.at} is past the table's last version, {last}")
    at = next((e for e in events if e.version == args.at), None)
    kind = at.event.TYPE if at is not None and at.event is not None else "??"
    try:
        position, notes = position_at(args.table, events, args.at, args.seat)
    except ValueError as error:
        sys.stderr.write(f"conquian replay: {error}\n")
        return 1
    sys.stdout.write(f"{args.table} after version {args.at} ({kind}):\n{position}\n")
    sys.stdout.writelines(f"note: {note}\n" for note in notes)
    return 0


async def _read(
    url: str, keys: KeySpace, table_id: str, archive_dir: str | None = None
) -> list[StoredEvent]:
    """The table's events from Redis, else from the archive (``--archive-dir``)."""
    from services.archive.reads import ArchiveBackedStore, ArchiveReader, open_archive
    from services.store import EventStore, RedisEventStore
    from services.store.client import connect

    client = connect(url)
    try:
        store: EventStore = RedisEventStore(client, keys)
        archive = open_archive(archive_dir, keys.ns)
        if archive is not None:
            store = ArchiveBackedStore(RedisEventStore(client, keys), ArchiveReader(archive, 1))
        return await store.read(table_id)
    finally:
        await client.aclose()
