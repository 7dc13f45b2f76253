"""Views: a state and an engine event as a seat or a spectator sees them, as JSON-ready values.

What each viewer may see is decided by ``engine.secrecy.sees``, which every view and
``visible_event`` ask; the rules are in ``docs/services.md`` ("Secrecy") and ``docs/rules.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from engine.cards import CardMask, display_order, format_card
from engine.game import evolve
from engine.game_events import DealStarted, Event
from engine.legal import legal_actions
from engine.notation import format_action, format_event, format_hand, table_order
from engine.rules import Rules
from engine.secrecy import Viewer, check_viewer, sees
from engine.state import Deal, Match, Phase

JSON = dict[str, object]

NEXT_DEAL = "next_deal"
"""Starting the next deal, among a view's legal actions.  The engine's ``StartDeal`` carries the
deck, which a table service shuffles, so it has no action notation: a client sends the wire
command ``next_deal`` (``docs/api.md``)."""


@dataclass(frozen=True)
class DealtView:
    """A deal began, as one viewer sees it: number, dealer, stake and that viewer's hand.

    ``seat`` is the viewer (None for a spectator, whose ``hand`` is empty); the deck order of
    ``DealStarted`` is never part of it.
    """

    number: int
    dealer: int
    stake: int
    seat: int | None
    hand: CardMask


VisibleEvent = Event | DealtView


def seat_view(match: Match, seat: int, *, seated: bool = True) -> JSON:
    """Return what ``seat`` may see of the match, as JSON-ready values (see the module rules).

    ``seated`` says whether both seats are taken: a table service's table still waiting for a
    player passes False, and nobody is offered :data:`NEXT_DEAL` there.  Raises ValueError for
    a seat other than 0 or 1.
    """
    check_viewer(seat)
    return _views(match, (seat,), seated)[0]


def spectator_view(match: Match) -> JSON:
    """Return what a spectator may see of the match: public cards and the sizes of the rest."""
    return _views(match, (None,))[0]


def seat_parts(match: Match, *, seated: bool = True) -> tuple[JSON, JSON]:
    """Return what seat 0 and seat 1 each see beyond the spectator view: ``seat``, ``hand``
    (its own cards, None before the first deal) and ``legal_actions`` (the seat to act's, or
    between deals :data:`NEXT_DEAL` for both when ``seated``; see :func:`seat_view`).

    ``with_seat(spectator_view(match), seat_parts(match)[s])`` equals ``seat_view(match, s)``:
    a service may store the spectator view once and each seat's part beside it, and put a
    seat's view together when it is read (``tests/engine/test_views.py`` checks the identity
    at every state of many random games).
    """
    deal = match.deal
    return _seat_part(deal, 0, _legal_texts(match, 0, seated)), _seat_part(
        deal, 1, _legal_texts(match, 1, seated)
    )


def stored_parts(match: Match, *, seated: bool = True) -> tuple[JSON, JSON, JSON]:
    """Return the spectator view without ``seat`` and ``legal_actions`` (what every viewer
    sees alike, in the spectator view's order), then :func:`seat_parts`: what a service stores
    for a state, built in one pass.

    ``{"seat": None, **shared, "legal_actions": []}`` equals ``spectator_view(match)``.
    """
    deal = match.deal
    shared = _shared(match, None if deal is None else _deal_views(deal, (None,))[0])
    return (shared, *seat_parts(match, seated=seated))


def spectator_part() -> JSON:
    """Return what a spectator sees beyond the spectator-shaped fields: no seat, no hand of its
    own, no legal actions; ``with_seat(view, spectator_part())`` is the spectator's view."""
    return {"seat": None, "hand": None, "legal_actions": []}


def _legal_texts(match: Match, seat: int, seated: bool) -> list[str]:
    """The legal actions ``seat`` sees: the seat to act's in engine notation, :data:`NEXT_DEAL`
    for each seat between deals (when both seats are taken), else none."""
    if match.to_act is not None and sees(seat, match.to_act):
        return [format_action(a) for a in legal_actions(match)]
    if seated and match.between_deals:
        return [NEXT_DEAL]
    return []


def _seat_part(deal: Deal | None, seat: int, legal: list[str]) -> JSON:
    shown = deal is not None and sees(seat, seat)
    hand = _cards(deal.hands[seat]) if deal is not None and shown else None
    return {"seat": seat, "hand": hand, "legal_actions": legal}


def with_seat(view: Mapping[str, object], part: Mapping[str, object]) -> JSON:
    """Return a viewer's view from a spectator-shaped view (a dict with the fields of
    ``spectator_view``, maybe more) and that viewer's part from ``seat_parts`` (or
    :func:`spectator_part`): the part's ``seat`` and ``legal_actions``, and a seat's ``hand``
    in its place in ``deal.players``.

    Keys keep their order; ``view`` is not changed.  Raises ValueError for a part of another
    shape or for a view whose deal lacks the seat.
    """
    seat, hand = part.get("seat"), part.get("hand")
    if seat not in (0, 1, None) or not isinstance(part.get("legal_actions"), list):
        raise ValueError(f"not a seat part: {dict(part)!r}")
    if seat is None and (hand is not None or part["legal_actions"]):
        raise ValueError(f"a spectator holds no hand and has no legal actions: {dict(part)!r}")
    out = dict(view)
    out["seat"] = seat
    deal = out.get("deal")
    if seat is not None and isinstance(deal, dict):
        players = deal.get("players")
        if not isinstance(players, list) or len(players) != 2:
            raise ValueError(f"a deal without two players: {deal!r}")
        mine = {**players[seat], "hand": hand}
        deal = {**deal, "players": [mine, players[1]] if seat == 0 else [players[0], mine]}
        out["deal"] = deal
    elif seat is not None and hand is not None:
        raise ValueError(f"seat {seat} holds a hand but the view has no deal")
    out["legal_actions"] = part["legal_actions"]
    return out


def _views(match: Match, viewers: tuple[int | None, ...], seated: bool = True) -> list[JSON]:
    """Build the view of each viewer, None standing for a spectator.

    A hand goes into a viewer's view only when ``engine.secrecy.sees`` says so (revealed once
    the deal is over, ``_deal_views``), and legal actions only to the seat that owns them
    (``_legal_texts``).
    """
    deal = match.deal
    deals = [None] * len(viewers) if deal is None else _deal_views(deal, viewers)
    return [
        {
            "seat": viewer,
            **_shared(match, deal_view),
            "legal_actions": [] if viewer is None else _legal_texts(match, viewer, seated),
        }
        for viewer, deal_view in zip(viewers, deals, strict=True)
    ]


def _shared(match: Match, deal_view: JSON | None) -> JSON:
    """The fields of a view between ``seat`` and ``legal_actions``: the match as everyone sees
    it, with ``deal_view``, the deal as this viewer sees it."""
    return {
        "rules": dict(_rules_dict(match.rules)),
        "deals": match.deals,
        "target_score": match.target_score,
        "scores": list(match.scores),
        "next_stake": match.next_stake,
        "deals_played": match.deals_played,
        "results": [_outcome(o.termination.value, o.winner) for o in match.results],
        "match_over": match.over,
        "winner": match.winner,
        "deal": deal_view,
    }


def _deal_views(deal: Deal, viewers: tuple[int | None, ...]) -> list[JSON]:
    """The deal as each viewer sees it: the same but for which hands are shown."""
    over = deal.phase is Phase.OVER
    outcome = deal.outcome
    players: dict[tuple[int, bool], JSON] = {}

    def player(seat: int, viewer: int | None) -> JSON:
        shown = sees(viewer, seat, revealed=over)
        made = players.get((seat, shown))
        if made is None:
            made = players[seat, shown] = _player(deal, seat, shown)
        return made

    return [
        {
            "number": deal.number,
            "dealer": deal.dealer,
            "stake": deal.stake,
            "phase": deal.phase.value,
            "to_act": None if over else deal.to_act,
            "players": [player(0, viewer), player(1, viewer)],
            "centre": None if deal.centre is None else format_card(deal.centre),
            "declined": None if deal.declined is None else deal.declined.value,
            "stock_count": len(deal.stock),
            "waste_count": len(deal.waste),
            "outcome": None
            if outcome is None
            else _outcome(outcome.termination.value, outcome.winner),
        }
        for viewer in viewers
    ]


def _player(deal: Deal, seat: int, shown: bool) -> JSON:
    hand = deal.hands[seat]
    return {
        "seat": seat,
        "table": [list(meld) for meld in _table_cards(deal.tables[seat])],
        "hand": _cards(hand) if shown else None,
        "hand_count": hand.bit_count(),
    }


def _outcome(termination: str, winner: int | None) -> JSON:
    return {"termination": termination, "winner": winner}


def _cards(mask: CardMask) -> list[str]:
    return list(_card_texts(mask))


# Views are built at every event for every viewer: the text of a card set or a table is
# remembered (a mask or a tuple of masks is its own key; the values are immutable tuples).
@lru_cache(maxsize=65_536)
def _card_texts(mask: CardMask) -> tuple[str, ...]:
    return tuple(format_card(c) for c in display_order(mask))


@lru_cache(maxsize=65_536)
def _table_cards(table: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(_card_texts(meld) for meld in table_order(table))


@lru_cache(maxsize=64)
def _rules_dict(rules: Rules) -> tuple[tuple[str, object], ...]:
    return tuple(rules.as_dict().items())


def visible_event(event: Event, seat: int | None) -> VisibleEvent:
    """Return what ``seat`` (None for a spectator) may see of an event.

    ``DealStarted`` becomes a ``DealtView`` with the viewer's own hand (none for spectators);
    every other event is public and comes back as it is.  Raises ValueError for another seat.
    """
    check_viewer(seat)
    if isinstance(event, DealStarted):
        return DealtView(event.number, event.dealer, event.stake, seat, _dealt_hand(event, seat))
    return event


def _dealt_hand(event: DealStarted, seat: Viewer) -> CardMask:
    """The dealt cards ``seat`` ``sees`` (its own; none for a spectator), dealt as the engine
    deals them (``evolve`` is the one place dealing lives)."""
    deal = evolve(Match(), event).deal
    if deal is None:
        return 0
    return sum(hand for owner, hand in enumerate(deal.hands) if sees(seat, owner))


def format_visible_event(event: VisibleEvent) -> str:
    """Format an event a viewer may see as one transcript line (``engine.notation``).

    A ``DealtView`` reads ``deal 2: dealer 1, stake 2, hand AC 2C …`` (no hand for spectators).
    """
    if isinstance(event, DealtView):
        hand = f", hand {format_hand(event.hand)}" if event.seat is not None else ""
        return f"deal {event.number}: dealer {event.dealer}, stake {event.stake}{hand}"
    return format_event(event)


def transcript(events: list[Event], seat: int | None) -> list[str]:
    """Return the lines of a match's events as ``seat`` (None for a spectator) may read them."""
    return [format_visible_event(visible_event(e, seat)) for e in events]
