"""A table as the services see it, and its one fold: events in, an immutable ``Table`` out.

The engine worker folds with the deal seeds (each deck is its shuffle); the projector folds
without them (``seeded=False``: each stock is a placeholder of the cards in neither hand).
Why the placeholder is exact and leaks nothing: ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine import game_events
from engine.cards import FULL_MASK, Card, CardMask, iter_cards, parse_card
from engine.codes import Code, CodedError
from engine.game import evolve
from engine.state import Match, changed
from events.chain import GENESIS_HASH
from events.domain import (
    BotFailed,
    CardTurned,
    CommandRejected,
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
from events.fairness import deal_context, parse_seed, shuffle
from events.mapping import cards_from_wire, to_engine
from events.upcast import parse_event
from services.store.keys import TOKEN_PREFIX

SEED_PREFIX = "seed:"
SEED_KEY = SEED_PREFIX + "{number}"
"""The secret-hash field of a deal's seed (hex) until and after it is revealed."""
TOKEN_KEY = TOKEN_PREFIX + "{seat}"
"""The field of the SHA-256 of a seat's token among a table's secrets (stored in its tokens
hash, apart from the seeds)."""


class FoldError(CodedError, ValueError):
    """A table's events cannot be folded (a gap, a missing hand, a card that is not where the
    events say it is) or it has no views yet; ``code`` is stable."""

    code = Code.PROJECTOR_FOLD_FAILED.value


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
class PendingDeal:
    """A ``deal_started`` of an unseeded fold, waiting for its two ``hand_dealt`` events."""

    number: int
    dealer: int
    stake: int
    hands: tuple[CardMask | None, CardMask | None] = (None, None)


@dataclass(frozen=True)
class Table:
    """A table at a version: match state, seats, clock, secret seeds and deal algorithms.

    ``hash`` is the newest event's, :data:`GENESIS_HASH` before the first or in a fold given no
    hashes (the projector's).  ``seeded`` says each deal's deck comes from its seed; an
    unseeded table (the projector's) never holds a seed and has ``pending`` inside a deal's
    start.
    """

    table_id: str
    version: int = 0
    hash: str = GENESIS_HASH
    match: Match | None = None
    seats: tuple[SeatHolder | None, SeatHolder | None] = (None, None)
    turn_seconds: int | None = None
    seeds: Mapping[int, bytes] = field(default_factory=dict)
    algorithms: Mapping[int, str] = field(default_factory=dict)
    rematch_agreed: frozenset[int] = frozenset()
    """The seats whose player asked for a rematch after the match (``rematch_agreed``)."""
    rematch_table: str | None = None
    """The rematch's table once both seats agreed (``rematch_opened``)."""
    seeded: bool = True
    pending: PendingDeal | None = None

    @property
    def exists(self) -> bool:
        """Say whether the table has been created."""
        return self.match is not None

    @property
    def deal_number(self) -> int:
        """Return the number of the current (or last) deal, 0 before the first."""
        return 0 if self.match is None or self.match.deal is None else self.match.deal.number

    @property
    def status(self) -> str:
        """``open`` before the first deal, ``playing`` from then on, ``over`` after the match."""
        match = self.match
        if match is not None and match.over:
            return "over"
        if match is None or match.deal is None:
            return "open"
        return "playing"

    def deck_of(self, number: int) -> tuple[Card, ...]:
        """Return the deck of deal ``number`` from its secret seed (docs/fairness.md)."""
        algorithm = self.algorithms.get(number)
        if algorithm is None:
            raise KeyError(f"table {self.table_id}: deal {number} has no algorithm recorded")
        return shuffle(self.seeds[number], algorithm, deal_context(self.table_id, number))

    def with_secrets(self, secrets: Mapping[str, str]) -> Table:
        """Return the table with the deal seeds of ``secrets``; other fields (seat-token
        digests, which only the gateway's admission reads) are not a table's."""
        seeds = {
            int(key.removeprefix(SEED_PREFIX)): parse_seed(value)
            for key, value in secrets.items()
            if key.startswith(SEED_PREFIX)
        }
        return changed(self, seeds={**self.seeds, **seeds}) if seeds else self

    # --- folding -------------------------------------------------------------------------------

    def next(
        self, events: Sequence[EventModel], match: Match | None, secrets: Mapping[str, str]
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

    def stored_as(self, version: int, hash: str) -> Table:
        """Return the table with the version and hash of its newest event, once stored."""
        return changed(self, version=version, hash=hash)

    def apply(self, event: EventModel, version: int) -> Table:
        """Return the table after one of its events, stored at ``version`` (its hash unchanged).

        Raises FoldError when an unseeded table's deal does not fit its events.
        """
        if isinstance(event, CommandRejected):  # never stored; tolerate it all the same
            return changed(self, version=version)
        table = self._seated(event)
        if not self.seeded and isinstance(event, _DEALING):
            return table._unseen_deck(event, version)
        match = table.match
        for engine_event in to_engine(event, table.deck_of):
            match = evolve(match, engine_event)
        return changed(table, version=version, match=match)

    def _seated(self, event: EventModel) -> Table:
        """Return the table with what an event changes besides the match: a seat taken or
        given up, a bot's failure (standing until the next event), the turn clock, a deal's
        shuffle algorithm, the rematch (the table itself for any other event)."""
        if isinstance(event, BotFailed):
            holder = self.seats[event.seat]
            if holder is None:  # never decided so; a fold takes the stream as it is
                return self
            failed = changed(holder, failure=BotFailure(event.code, event.message))
            return changed(self, seats=_with_seat(self.seats, event.seat, failed))
        table = self
        first, second = self.seats
        if (first is not None and first.failure) or (second is not None and second.failure):
            cleared = [None if h is None else changed(h, failure=None) for h in self.seats]
            table = changed(self, seats=(cleared[0], cleared[1]))
        if isinstance(event, PlayerJoined):
            holder = SeatHolder(event.name, event.bot)
            return changed(table, seats=_with_seat(table.seats, event.seat, holder))
        if isinstance(event, PlayerLeft):
            return changed(table, seats=_with_seat(table.seats, event.seat, None))
        if isinstance(event, RematchAgreed):
            return changed(table, rematch_agreed=table.rematch_agreed | {event.seat})
        if isinstance(event, RematchOpened):
            return changed(table, rematch_table=event.next_table_id)
        if isinstance(event, TableCreated):
            return changed(table, turn_seconds=event.turn_seconds)
        if isinstance(event, DealStarted):
            return changed(table, algorithms={**table.algorithms, event.number: event.algorithm})
        return table

    # --- an unseeded deal: the placeholder stock -----------------------------------------------

    def _unseen_deck(self, event: EventModel, version: int) -> Table:
        """Fold a deal's start, a dealt hand or a turned card without the deal's seed."""
        if isinstance(event, DealStarted):
            pending = PendingDeal(event.number, event.dealer, event.stake)
            return changed(self, version=version, pending=pending)
        if isinstance(event, HandDealt):
            return self._dealt(event, version)
        assert isinstance(event, CardTurned)  # the last of _DEALING
        match = self.match
        deal = None if match is None else match.deal
        turned = parse_card(event.card)
        if match is None or deal is None or turned not in deal.stock:
            raise FoldError(f"table {self.table_id}: {event.card} was not in the stock")
        stock = (turned, *(c for c in deal.stock if c != turned))  # the engine pops the first
        match = changed(match, deal=changed(deal, stock=stock))
        return changed(self, version=version, match=evolve(match, to_engine(event)[0]))

    def _dealt(self, event: HandDealt, version: int) -> Table:
        """Take a dealt hand; with both, start the deal over a placeholder stock."""
        pending = self.pending
        if pending is None:
            raise FoldError(f"table {self.table_id}: hand_dealt without a deal_started")
        hand = cards_from_wire(event.cards)
        if hand.bit_count() != 10 or pending.hands[event.seat] is not None:
            raise FoldError(f"table {self.table_id}: bad hand_dealt for seat {event.seat}")
        hands = (hand, pending.hands[1]) if event.seat == 0 else (pending.hands[0], hand)
        if hands[0] is None or hands[1] is None:
            return changed(self, version=version, pending=changed(pending, hands=hands))
        if hands[0] & hands[1]:
            raise FoldError(f"table {self.table_id}: deal {pending.number} hands share cards")
        deck = _placeholder_deck(pending.dealer, hands[0], hands[1])
        started = game_events.DealStarted(pending.number, pending.dealer, pending.stake, deck)
        return changed(self, version=version, pending=None, match=evolve(self.match, started))


_DEALING = (DealStarted, HandDealt, CardTurned)
"""The events an unseeded fold takes its own way (:meth:`Table._unseen_deck`)."""


def _with_seat(
    seats: tuple[SeatHolder | None, SeatHolder | None], seat: int, holder: SeatHolder | None
) -> tuple[SeatHolder | None, SeatHolder | None]:
    return (holder, seats[1]) if seat == 0 else (seats[0], holder)


def _placeholder_deck(dealer: int, hand0: CardMask, hand1: CardMask) -> tuple[Card, ...]:
    """A deck that deals exactly these hands (the non-dealer first, one card at a time, as
    ``engine.game`` deals) over a stock of the twenty other cards in ascending order."""
    hands = (hand0, hand1)
    non_dealer = tuple(iter_cards(hands[1 - dealer]))
    dealer_cards = tuple(iter_cards(hands[dealer]))
    deck: list[Card] = []
    for a, b in zip(non_dealer, dealer_cards, strict=True):
        deck += (a, b)
    deck += iter_cards(FULL_MASK & ~(hand0 | hand1))
    return tuple(deck)


def event_of(body: Mapping[str, object]) -> EventModel:
    """Return the wire event of a stored body (``events.envelope``), upcast to this version.

    Raises ValueError for a body that is not an event.
    """
    return parse_event({k: v for k, v in body.items() if k not in BODY_KEYS})


def fold_table(
    table_id: str,
    stored: Iterable[tuple[int, str, Mapping[str, object]]],
    secrets: Mapping[str, str],
    start: Table | None = None,
) -> Table:
    """Fold ``(version, hash, body)`` triples of a table's events onto ``start`` (or nothing),
    with the table's secret hash (``secrets``)."""
    table = (start or Table(table_id)).with_secrets(secrets)
    last_hash = None
    for version, hash, body in stored:
        table = table.apply(event_of(body), version)
        last_hash = hash
    return table if last_hash is None else changed(table, hash=last_hash)
