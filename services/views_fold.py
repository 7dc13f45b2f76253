"""A table's read models folded from its wire events alone: no deal seed, no deck order.

:class:`TableFold` folds with a placeholder stock; why that is exact and leaks nothing, and the
view parts it writes: ``docs/services.md`` ("Module notes").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine import game_events as ee
from engine.cards import FULL_MASK, Card, CardMask, iter_cards, parse_card
from engine.codes import Code, CodedError
from engine.game import evolve
from engine.state import Match, changed
from engine.views import stored_parts
from events import domain as wd
from events.envelope import BODY_KEYS
from events.mapping import cards_from_wire, to_engine
from events.upcast import parse_event
from services.table import Table
from services.view_parts import PUBLIC, PUBLIC_ONLY, SEAT_PARTS, dump_view

__all__ = ["FoldError", "TableFold", "dump_views", "status_of", "table_views", "view_dicts"]


class FoldError(CodedError, ValueError):
    """A table's events cannot be folded into views (a gap, a missing hand, a card that is not
    where the events say it is); ``code`` is stable."""

    code = Code.PROJECTOR_FOLD_FAILED.value


@dataclass
class _PendingDeal:
    """A ``deal_started`` waiting for its two ``hand_dealt`` events."""

    number: int
    dealer: int
    stake: int
    hands: dict[int, CardMask] = field(default_factory=dict)


class TableFold:
    """A table folded from its stored events, for views: match state without the deck order,
    seats, turn clock and the version and time of the newest event folded.

    Mutable on purpose: the projector keeps one per table in memory and folds each new event
    onto it.  ``apply_body`` takes stored bodies (``services.store``), ``apply`` wire events.
    """

    __slots__ = (
        "_pending",
        "match",
        "rematch_agreed",
        "rematch_table",
        "seats",
        "table_id",
        "turn_seconds",
        "updated_at",
        "version",
    )

    def __init__(self, table_id: str) -> None:
        self.table_id = table_id
        self.version = 0
        self.match: Match | None = None
        self.seats: list[dict[str, Any] | None] = [None, None]
        self.turn_seconds: int | None = None
        self.updated_at: int | None = None
        self.rematch_agreed: frozenset[int] = frozenset()
        self.rematch_table: str | None = None
        self._pending: _PendingDeal | None = None

    # --- folding -------------------------------------------------------------------------------

    def apply_body(self, version: int, body: Mapping[str, Any]) -> bool:
        """Fold one stored event (its full body) at ``version``; False when already folded.

        Raises FoldError when ``version`` is not the next one, or the event does not fit.
        """
        if version <= self.version:
            return False
        if version != self.version + 1:
            raise FoldError(
                f"table {self.table_id}: event {version} follows version {self.version}"
            )
        try:
            event = parse_event({k: v for k, v in body.items() if k not in BODY_KEYS})
        except ValueError as exc:
            raise FoldError(f"table {self.table_id} version {version}: {exc}") from exc
        if not isinstance(event, wd.CommandRejected):  # never stored; tolerate it all the same
            self.apply(event, version)
        else:
            self.version = version
        time = body.get("time")
        if isinstance(time, int) and not isinstance(time, bool):
            self.updated_at = time
        return True

    def apply(self, event: wd.EventModel, version: int) -> None:
        """Fold one wire event at ``version`` (the caller checks the order)."""
        if isinstance(event, wd.BotFailed):
            seat = self.seats[event.seat]
            if seat is not None:  # as services.table: the failure stands until the next event
                seat["bot_failure"] = {"code": event.code, "message": event.message}
            self.version = version
            return
        for seat in self.seats:
            if seat is not None and seat["bot_failure"] is not None:
                seat["bot_failure"] = None
        if isinstance(event, wd.PlayerJoined):
            self.seats[event.seat] = {"name": event.name, "bot": event.bot, "bot_failure": None}
        elif isinstance(event, wd.PlayerLeft):
            self.seats[event.seat] = None
        elif isinstance(event, wd.RematchAgreed):
            self.rematch_agreed |= {event.seat}
        elif isinstance(event, wd.RematchOpened):
            self.rematch_table = event.next_table_id
        elif isinstance(event, wd.TableCreated):
            self.turn_seconds = event.turn_seconds
            self._evolve(to_engine(event))
        elif isinstance(event, wd.DealStarted):
            self._pending = _PendingDeal(event.number, event.dealer, event.stake)
        elif isinstance(event, wd.HandDealt):
            self._deal(event)
        elif isinstance(event, wd.CardTurned):
            self._turn(event)
        else:
            self._evolve(to_engine(event))
        self.version = version

    def _evolve(self, events: list[ee.Event]) -> None:
        match = self.match
        for engine_event in events:
            match = evolve(match, engine_event)
        self.match = match

    def _deal(self, event: wd.HandDealt) -> None:
        pending = self._pending
        if pending is None:
            raise FoldError(f"table {self.table_id}: hand_dealt without a deal_started")
        hand = cards_from_wire(event.cards)
        if hand.bit_count() != 10 or event.seat in pending.hands:
            raise FoldError(f"table {self.table_id}: bad hand_dealt for seat {event.seat}")
        pending.hands[event.seat] = hand
        if len(pending.hands) < 2:
            return
        if pending.hands[0] & pending.hands[1]:
            raise FoldError(f"table {self.table_id}: deal {pending.number} hands share cards")
        deck = _placeholder_deck(pending.dealer, pending.hands[0], pending.hands[1])
        self._pending = None
        self._evolve([ee.DealStarted(pending.number, pending.dealer, pending.stake, deck)])

    def _turn(self, event: wd.CardTurned) -> None:
        """Move the turned card to the front of the placeholder stock, then let the engine pop."""
        match = self.match
        deal = None if match is None else match.deal
        turned = parse_card(event.card)
        if match is None or deal is None or turned not in deal.stock:
            raise FoldError(f"table {self.table_id}: {event.card} was not in the stock")
        stock = (turned, *(c for c in deal.stock if c != turned))
        self.match = changed(match, deal=changed(deal, stock=stock))
        self._evolve(to_engine(event))

    # --- views ---------------------------------------------------------------------------------

    @property
    def status(self) -> str:
        """``open`` before the first deal, ``playing`` from then on, ``over`` after the match."""
        return status_of(self.match)

    def view_dicts(self) -> dict[str, dict[str, Any]]:
        """Return every view part as a JSON-ready dict (see the module docstring).

        Raises FoldError before the table is created or in the middle of a deal's start.
        """
        match = self.match
        if match is None or self._pending is not None:
            raise FoldError(f"table {self.table_id} at version {self.version} has no views")
        seats = [  # the fold keeps its own
            None if s is None else {**s, "bot_failure": _copy(s["bot_failure"])} for s in self.seats
        ]
        bots = {i for i, s in enumerate(seats) if s is not None and s.get("bot") is not None}
        rematch = rematch_view(self.rematch_agreed, bots, self.rematch_table)
        return view_dicts(
            self.table_id, self.version, match, seats, self.turn_seconds, self.updated_at, rematch
        )

    def views(self) -> dict[str, str]:
        """Return every view part as JSON text, by part name."""
        return dump_views(self.view_dicts())


_PUBLIC_HEAD = ("table_id", "version", *PUBLIC_ONLY)
"""The public part's first fields: the head, then the table's own fields."""


def status_of(match: Match | None) -> str:
    """Return a table's status by its match: ``open`` before the first deal, ``playing`` from
    then on, ``over`` after the match."""
    if match is not None and match.over:
        return "over"
    if match is None or match.deal is None:
        return "open"
    return "playing"


def rematch_view(
    agreed: frozenset[int], bots: set[int], table: str | None
) -> dict[str, Any] | None:
    """Return the ``rematch`` of a public view once a seat asked for one (None before): the
    seats that agreed (a bot's at once) and the rematch's table once both did."""
    if not agreed:
        return None
    return {"agreed": sorted(agreed | bots), "table_id": table}


def view_dicts(
    table_id: str,
    version: int,
    match: Match,
    seats: list[dict[str, Any] | None],
    turn_seconds: int | None,
    updated_at: int | None,
    rematch: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Return every view part of a table at ``version`` as a JSON-ready dict, by part name.

    The one place a table's stored views are built: the projector's fold and the engine
    worker's append (``TableService.views_after``) both call it, so equal tables give equal
    bytes.  ``seats`` are ``{"name", "bot"}`` or None, put in the public view as they are;
    ``updated_at`` the time (ms) of the newest event; ``rematch`` (:func:`rematch_view`) ends
    the public view once a seat asked for a rematch.
    """
    shared, seat0, seat1 = stored_parts(match, seated=None not in seats)
    own = (table_id, version, status_of(match), seats, turn_seconds, match.to_act, updated_at)
    public: dict[str, Any] = dict(zip(_PUBLIC_HEAD, own, strict=True))
    public.update(shared)
    if rematch is not None:
        public["rematch"] = rematch
    return {
        PUBLIC: public,
        SEAT_PARTS[0]: {"table_id": table_id, "version": version, **seat0},
        SEAT_PARTS[1]: {"table_id": table_id, "version": version, **seat1},
    }


def table_views(table: Table, updated_at: int) -> dict[str, str]:
    """Return the view parts of a service table (``services.table``) as JSON text, by part
    name: what the projector folds from the same events, byte for byte.

    ``updated_at`` is the time (ms) of the table's newest event.  Raises ValueError for a
    table not created yet.
    """
    if table.match is None:
        raise ValueError(f"table {table.table_id} at version {table.version} has no views")
    seats: list[dict[str, Any] | None] = [None if s is None else s.public() for s in table.seats]
    bots = {i for i, s in enumerate(table.seats) if s is not None and s.bot is not None}
    rematch = rematch_view(table.rematch_agreed, bots, table.rematch_table)
    views = view_dicts(
        table.table_id, table.version, table.match, seats, table.turn_seconds, updated_at, rematch
    )
    return dump_views(views)


def dump_views(views: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Return view parts (:func:`view_dicts`) as JSON text, by part name."""
    return {part: dump_view(view) for part, view in views.items()}


def _copy(failure: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if failure is None else dict(failure)


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
