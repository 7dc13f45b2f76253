"""A table as the service sees it: the engine match, the seats, the deal seeds and the head.

``Table`` is folded from the table's stored events plus its secret hash (the deal seeds, which
turn each ``deal_started`` back into the engine's ``DealStarted`` with its deck).  It is an
immutable value: ``apply`` returns the next one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from engine.cards import Card
from engine.game import evolve
from engine.state import Match, changed
from events import domain as wd
from events.chain import GENESIS_HASH
from events.envelope import BODY_KEYS
from events.fairness import deal_context, parse_seed, shuffle
from events.mapping import to_engine
from events.upcast import parse_event

SEED_KEY = "seed:{number}"
"""The secret-hash field of a deal's seed (hex) until and after it is revealed."""
TOKEN_KEY = "token:{seat}"
"""The secret-hash field of the SHA-256 of a seat's token."""


class Head(Protocol):
    """Where an append left a table: its last version and that event's hash."""

    @property
    def last_version(self) -> int: ...

    @property
    def last_hash(self) -> str: ...


@dataclass(frozen=True)
class BotFailure:
    """Why a seat's bot could not move (a ``bot_failed`` event): a stable code and a message."""

    code: str
    message: str


@dataclass(frozen=True)
class SeatHolder:
    """Who holds a seat: a display name and, for a bot, the bot's name and its standing
    failure (the last event was its ``bot_failed``; any later event clears it)."""

    name: str
    bot: str | None = None
    failure: BotFailure | None = None

    def public(self) -> dict[str, object]:
        """The seat as the public view shows it: ``name``, ``bot``, ``bot_failure``."""
        failure = self.failure
        shown = None if failure is None else {"code": failure.code, "message": failure.message}
        return {"name": self.name, "bot": self.bot, "bot_failure": shown}


@dataclass(frozen=True)
class Table:
    """A table at a version: match state, seats, clock, secret seeds and deal algorithms."""

    table_id: str
    version: int = 0
    hash: str = GENESIS_HASH
    match: Match | None = None
    seats: tuple[SeatHolder | None, SeatHolder | None] = (None, None)
    turn_seconds: int | None = None
    seeds: Mapping[int, bytes] = field(default_factory=dict)
    algorithms: Mapping[int, str] = field(default_factory=dict)
    token_hashes: Mapping[int, str] = field(default_factory=dict)
    rematch_agreed: frozenset[int] = frozenset()
    """The seats whose player asked for a rematch after the match (``rematch_agreed``)."""
    rematch_table: str | None = None
    """The rematch's table once both seats agreed (``rematch_opened``)."""

    @property
    def exists(self) -> bool:
        """Say whether the table has been created."""
        return self.match is not None

    @property
    def deal_number(self) -> int:
        """Return the number of the current (or last) deal, 0 before the first."""
        return 0 if self.match is None or self.match.deal is None else self.match.deal.number

    def deck_of(self, number: int) -> tuple[Card, ...]:
        """Return the deck of deal ``number`` from its secret seed (docs/fairness.md)."""
        algorithm = self.algorithms.get(number)
        if algorithm is None:
            raise KeyError(f"table {self.table_id}: deal {number} has no algorithm recorded")
        return shuffle(self.seeds[number], algorithm, deal_context(self.table_id, number))

    def with_secrets(self, secrets: Mapping[str, str]) -> Table:
        """Return the table with the seeds and token hashes of its secret hash."""
        if not secrets:
            return self
        seeds = dict(self.seeds)
        tokens = dict(self.token_hashes)
        for key, value in secrets.items():
            kind, _, number = key.partition(":")
            if kind == "seed":
                seeds[int(number)] = parse_seed(value)
            elif kind == "token" and value:  # emptied when its player left the seat
                tokens[int(number)] = value
            elif kind == "token":
                tokens.pop(int(number), None)
        return changed(self, seeds=seeds, token_hashes=tokens)

    def next(
        self, events: Sequence[wd.TableEvent], match: Match | None, secrets: Mapping[str, str]
    ) -> Table:
        """Return the table after a decided command's events, its match already folded by the
        engine, before the events are stored: its version counts them, its hash is still the
        one before (:meth:`stored_as` sets it).

        The same table as ``with_secrets`` then ``apply`` of each event would give, without
        mapping the wire events back to the engine (and shuffling a new deal's deck again).
        """
        table = self.with_secrets(secrets)
        for event in events:
            table = table._seated(event)
        return changed(table, version=self.version + len(events), match=match)

    def stored_as(self, appended: Head) -> Table:
        """Return the table with the version and hash of the last event stored."""
        return changed(self, version=appended.last_version, hash=appended.last_hash)

    def apply(self, event: wd.TableEvent, version: int, hash: str) -> Table:
        """Return the table after one of its events (stored at ``version`` with ``hash``)."""
        table = changed(self._seated(event), version=version, hash=hash)
        match = table.match
        for engine_event in to_engine(event, table.deck_of):
            match = evolve(match, engine_event)
        return changed(table, match=match)

    def _seated(self, event: wd.TableEvent) -> Table:
        """Return the table with what an event changes besides the match: a seat taken or
        given up, a bot's failure (standing until the next event), the turn clock, a deal's
        shuffle algorithm, the rematch (the table itself for any other event)."""
        if isinstance(event, wd.BotFailed):
            holder = self.seats[event.seat]
            if holder is None:  # never decided so; a fold takes the stream as it is
                return self
            failed = changed(holder, failure=BotFailure(event.code, event.message))
            return changed(self, seats=_with_seat(self.seats, event.seat, failed))
        table = self
        if any(h is not None and h.failure is not None for h in self.seats):
            cleared = [None if h is None else changed(h, failure=None) for h in self.seats]
            table = changed(self, seats=(cleared[0], cleared[1]))
        if isinstance(event, wd.PlayerJoined):
            holder = SeatHolder(event.name, event.bot)
            return changed(table, seats=_with_seat(table.seats, event.seat, holder))
        if isinstance(event, wd.PlayerLeft):
            return changed(table, seats=_with_seat(table.seats, event.seat, None))
        if isinstance(event, wd.RematchAgreed):
            return changed(table, rematch_agreed=table.rematch_agreed | {event.seat})
        if isinstance(event, wd.RematchOpened):
            return changed(table, rematch_table=event.next_table_id)
        if isinstance(event, wd.TableCreated):
            return changed(table, turn_seconds=event.turn_seconds)
        if isinstance(event, wd.DealStarted):
            return changed(table, algorithms={**table.algorithms, event.number: event.algorithm})
        return table


def _with_seat(
    seats: tuple[SeatHolder | None, SeatHolder | None], seat: int, holder: SeatHolder | None
) -> tuple[SeatHolder | None, SeatHolder | None]:
    return (holder, seats[1]) if seat == 0 else (seats[0], holder)


def fold_table(
    table_id: str,
    stored: Iterable[tuple[int, str, Mapping[str, object]]],
    secrets: Mapping[str, str],
    start: Table | None = None,
) -> Table:
    """Fold ``(version, hash, body)`` triples of a table's events onto ``start`` (or nothing)."""
    table = (start or Table(table_id)).with_secrets(secrets)
    for version, hash, body in stored:
        event = parse_event({k: v for k, v in body.items() if k not in BODY_KEYS})
        if isinstance(event, wd.CommandRejected):  # never stored; tolerate it all the same
            continue
        table = table.apply(event, version, hash)
    return table
