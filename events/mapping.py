"""Mapping between engine values and the wire: events both ways, commands one way.

The orders it writes cards and tables in, and how a deal's deck is split into a public
``deal_started`` and secret ``hand_dealt`` events: ``docs/events.md`` ("Module notes").

>>> to_wire(ee.CardTurned(1, 26))
[CardTurned(type='card_turned', v=1, seat=1, card='7H')]
>>> table_to_wire(table_from_wire((("JH", "6H", "7H"), ("KC", "KD", "KH"))))
(('6H', '7H', 'JH'), ('KC', 'KD', 'KH'))
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from engine import actions as ea
from engine import game_events as ee
from engine.cards import Card, CardMask, display_order, format_card, mask_of, parse_card
from engine.codes import Code
from engine.melds import Meld
from engine.notation import parse_action
from engine.rules import Rules
from engine.views import NEXT_DEAL
from events import commands as wc
from events import domain as wd
from events.fairness import (
    SHUFFLE_ALGORITHM,
    deal_context,
    parse_seed,
    seed_hex,
    shuffle,
    split_deck,
    verify,
)

__all__ = [
    "DeckOf",
    "cards_from_wire",
    "cards_to_wire",
    "legal_to_wire",
    "rejection",
    "reveal",
    "revealed_deck",
    "revealed_decks",
    "rules_from_wire",
    "rules_to_wire",
    "table_from_wire",
    "table_to_wire",
    "to_engine",
    "to_engine_command",
    "to_wire",
    "to_wire_command",
]

DeckOf = Callable[[int], Sequence[Card]]
"""Returns the deck of a deal by its number (1-based), top of the deal first."""

WireTable = tuple[tuple[str, ...], ...]

_CODE = re.compile(wd.CODE_PATTERN)
_Event = TypeVar("_Event", bound=wd.EventModel)


# --- cards, melds, tables and rules --------------------------------------------------------------


def cards_to_wire(mask: CardMask) -> tuple[str, ...]:
    """Return the cards of a bitmask as text in rank order, then suit (``2D 2H 5C``)."""
    return tuple(format_card(c) for c in display_order(mask))


def cards_from_wire(cards: Iterable[str]) -> CardMask:
    """Return the bitmask of card texts (the order does not matter)."""
    return mask_of(parse_card(c) for c in cards)


def table_to_wire(table: Iterable[Meld]) -> WireTable:
    """Return a table as melds of card text, each in rank order, melds ordered by their cards."""
    melds = [cards_to_wire(m) for m in table]
    return tuple(sorted(melds, key=lambda meld: [_rank_suit(c) for c in meld]))


def _rank_suit(text: str) -> tuple[int, int]:
    c = parse_card(text)
    return (c % 10, c // 10)


def table_from_wire(table: Iterable[Iterable[str]]) -> tuple[Meld, ...]:
    """Return a table as the engine's sorted tuple of meld bitmasks."""
    return tuple(sorted(cards_from_wire(meld) for meld in table))


def rules_to_wire(rules: Rules) -> wd.RuleSet:
    """Return the complete wire rule set of an engine rule set."""
    return wd.RuleSet.model_validate(rules.as_dict())


def rules_from_wire(rules: wd.RuleSet) -> Rules:
    """Return the engine rule set of a wire rule set (checked by ``Rules.from_dict``)."""
    return Rules.from_dict(rules.model_dump())


# --- engine events to the wire -------------------------------------------------------------------


def _made(model: type[_Event], **fields: Any) -> _Event:
    """Return a wire event of fields mapped from engine values, without validating them again.

    Engine values are valid by construction and the mapping writes them in canonical form
    (``format_card``, rank-then-suit order, tuples), so validating every card of a hand or a
    table again only spent time (``docs/performance.md``, "Module notes"); events of a field or
    two are quicker validated than constructed.  A test checks that every event mapped from
    random games equals its validated form (``model_validate`` of its own dump).
    """
    return cast(_Event, model.model_construct(**fields))


def to_wire(
    event: ee.Event,
    *,
    commitment: str | None = None,
    algorithm: str = SHUFFLE_ALGORITHM,
    turn_seconds: int | None = None,
) -> list[wd.TableEvent]:
    """Return the wire events of one engine event, in order.

    ``DealStarted`` needs ``commitment`` (the hex SHA-256 of the deal's seed) and becomes
    ``deal_started`` then ``hand_dealt`` for seat 0 and seat 1; ``CardDeclined`` becomes
    ``card_refused`` or ``card_left``; ``MatchStarted`` becomes ``table_created`` with
    ``turn_seconds``.  Raises ValueError when a ``DealStarted`` comes without a commitment.
    """
    match event:
        case ee.MatchStarted():
            return [_table_created(event, turn_seconds)]
        case ee.DealStarted():
            if commitment is None:
                raise ValueError(f"deal {event.number}: a deal_started needs the commitment")
            return _deal_started(event, commitment, algorithm)
        case ee.CardDeclined(seat=seat, card=card, how=how, forceable=forceable):
            kind: type[wd.CardRefused | wd.CardLeft]
            kind = wd.CardRefused if how is ee.Decline.REFUSED else wd.CardLeft
            return [kind(seat=seat, card=format_card(card), forceable=forceable)]
        case ee.MeldMade(seat=seat, card=card, hand=hand, table=table):
            return [
                _made(
                    wd.MeldMade,
                    seat=seat,
                    card=format_card(card),
                    hand=cards_to_wire(hand),
                    table=table_to_wire(table),
                )
            ]
        case ee.HandMelded(seat=seat, hand=hand, table=table):
            return [
                _made(
                    wd.HandMelded, seat=seat, hand=cards_to_wire(hand), table=table_to_wire(table)
                )
            ]
        case _:
            return [_simple_to_wire(event)]


def _table_created(event: ee.MatchStarted, turn_seconds: int | None) -> wd.TableCreated:
    return wd.TableCreated(
        rules=rules_to_wire(event.rules),
        deals=event.deals,
        target_score=event.target_score,
        turn_seconds=turn_seconds,
        first_dealer=event.first_dealer,
    )


def _deal_started(event: ee.DealStarted, commit: str, algorithm: str) -> list[wd.TableEvent]:
    non_dealer, dealer, _stock = split_deck(event.deck)
    hands = {1 - event.dealer: non_dealer, event.dealer: dealer}
    started = wd.DealStarted(
        number=event.number,
        dealer=event.dealer,
        stake=event.stake,
        commitment=commit,
        algorithm=algorithm,
    )
    dealt = [_made(wd.HandDealt, seat=s, cards=cards_to_wire(mask_of(hands[s]))) for s in (0, 1)]
    return [started, dealt[0], dealt[1]]


def _simple_to_wire(event: ee.Event) -> wd.TableEvent:
    """Map the engine events whose fields carry over one to one (cards as text)."""
    match event:
        case ee.CardTurned(seat=seat, card=card):
            return wd.CardTurned(seat=seat, card=format_card(card))
        case ee.ForceDemanded(seat=seat):
            return wd.ForceDemanded(seat=seat)
        case ee.ForceWaived(seat=seat):
            return wd.ForceWaived(seat=seat)
        case ee.CardWasted(card=card):
            return wd.CardWasted(card=format_card(card))
        case ee.CardDiscarded(seat=seat, card=card):
            return wd.CardDiscarded(seat=seat, card=format_card(card))
        case ee.WentOut(seat=seat):
            return wd.WentOut(seat=seat)
        case ee.GameDrawn():
            return wd.GameDrawn()
        case ee.Resigned(seat=seat):
            return wd.Resigned(seat=seat)
        case ee.StakesSettled(winner=winner, amount=amount, scores=scores, next_stake=stake):
            return wd.StakesSettled(winner=winner, amount=amount, scores=scores, next_stake=stake)
        case ee.MatchEnded(winner=winner, scores=scores):
            return wd.MatchEnded(winner=winner, scores=scores)
    raise TypeError(f"not an engine event with a one-to-one wire form: {event!r}")


# --- wire events to the engine -------------------------------------------------------------------


def to_engine(event: wd.EventModel, deck_of: DeckOf | None = None) -> list[ee.Event]:
    """Return the engine events of one wire event: one, or none for wire-only events.

    ``hand_dealt``, ``player_joined``, ``player_left``, ``rematch_agreed``, ``rematch_opened``,
    ``deal_revealed``, ``bot_failed`` and ``command_rejected`` have no engine counterpart (the
    hands are in the deck of ``deal_started``).  ``deal_started`` takes its deck from
    ``deck_of(number)``; raises ValueError when ``deck_of`` is None.
    """
    match event:
        case wd.TableCreated():
            rules = rules_from_wire(event.rules)
            return [ee.MatchStarted(rules, event.first_dealer, event.deals, event.target_score)]
        case wd.DealStarted(number=number, dealer=dealer, stake=stake):
            if deck_of is None:
                raise ValueError(f"deal {number}: rebuilding deal_started needs deck_of")
            return [ee.DealStarted(number, dealer, stake, tuple(deck_of(number)))]
        case wd.CardRefused(seat=seat, card=card, forceable=forceable):
            return [ee.CardDeclined(seat, parse_card(card), ee.Decline.REFUSED, forceable)]
        case wd.CardLeft(seat=seat, card=card, forceable=forceable):
            return [ee.CardDeclined(seat, parse_card(card), ee.Decline.LEFT, forceable)]
        case wd.MeldMade(seat=seat, card=card, hand=hand, table=table):
            made = ee.MeldMade(
                seat, parse_card(card), cards_from_wire(hand), table_from_wire(table)
            )
            return [made]
        case wd.HandMelded(seat=seat, hand=hand, table=table):
            return [ee.HandMelded(seat, cards_from_wire(hand), table_from_wire(table))]
        case (
            wd.HandDealt()
            | wd.PlayerJoined()
            | wd.DealRevealed()
            | wd.BotFailed()
            | wd.CommandRejected()
        ):
            return []
        case wd.PlayerLeft() | wd.RematchAgreed() | wd.RematchOpened():
            return []
        case _:
            return [_simple_to_engine(event)]


def _simple_to_engine(event: wd.EventModel) -> ee.Event:
    """Map back the wire events whose fields carry over one to one."""
    match event:
        case wd.CardTurned(seat=seat, card=card):
            return ee.CardTurned(seat, parse_card(card))
        case wd.ForceDemanded(seat=seat):
            return ee.ForceDemanded(seat)
        case wd.ForceWaived(seat=seat):
            return ee.ForceWaived(seat)
        case wd.CardWasted(card=card):
            return ee.CardWasted(parse_card(card))
        case wd.CardDiscarded(seat=seat, card=card):
            return ee.CardDiscarded(seat, parse_card(card))
        case wd.WentOut(seat=seat):
            return ee.WentOut(seat)
        case wd.GameDrawn():
            return ee.GameDrawn()
        case wd.Resigned(seat=seat):
            return ee.Resigned(seat)
        case wd.StakesSettled(winner=winner, amount=amount, scores=scores, next_stake=stake):
            return ee.StakesSettled(winner, amount, scores, stake)
        case wd.MatchEnded(winner=winner, scores=scores):
            return ee.MatchEnded(winner, scores)
    raise TypeError(f"not a wire event with a one-to-one engine form: {event!r}")


# --- commands ------------------------------------------------------------------------------------


def to_engine_command(
    command: wc.CommandModel,
    seat: int | None,
    *,
    deck: Sequence[Card] | None = None,
    first_dealer: int = 0,
) -> ea.Command | None:
    """Return the engine command of a wire command sent by ``seat`` (from the seat token).

    ``create_table`` becomes ``NewMatch`` with ``first_dealer`` (the service draws it);
    ``next_deal`` becomes ``StartDeal`` with ``deck`` (the service shuffles it); ``join``,
    ``leave_table``, ``rematch`` and ``report_bot_failure`` are handled by the service alone
    and give None.  Raises ValueError when a play or ``resign`` comes without a seat, or
    ``next_deal`` without a deck.
    """
    if isinstance(command, wc.CreateTable):
        rules = command.to_rules()
        return ea.NewMatch(rules, first_dealer, command.deals, command.target_score)
    if isinstance(command, wc.Join | wc.LeaveTable | wc.Rematch | wc.ReportBotFailure):
        return None
    if isinstance(command, wc.NextDeal):
        if deck is None:
            raise ValueError("next_deal needs the shuffled deck")
        return ea.StartDeal(tuple(deck))
    if seat is None:
        raise ValueError(f"a {type(command).__name__} command needs the sender's seat")
    if isinstance(command, wc.Resign):
        return ea.Resign(seat)
    return ea.Play(seat, _action(command))


def _action(command: wc.CommandModel) -> ea.Action:
    match command:
        case wc.Turn():
            return ea.TurnCard()
        case wc.Take(hand=hand, table=table):
            wire_table = None if table is None else table_from_wire(table)
            return ea.Take(cards_from_wire(hand), wire_table)
        case wc.Refuse():
            return ea.Refuse()
        case wc.Leave():
            return ea.Leave()
        case wc.Force():
            return ea.Force()
        case wc.Waive():
            return ea.Waive()
        case wc.Discard(card=card):
            return ea.Discard(parse_card(card))
        case wc.MeldHand(hand=hand, table=table):
            return ea.MeldHand(cards_from_wire(hand), table_from_wire(table))
    raise TypeError(f"not a play command: {command!r}")


def to_wire_command(
    action: ea.Action, table_id: str, command_id: str, expected_version: int | None = None
) -> wc.Command:
    """Return the wire command of an engine action (what a bot or a client library sends)."""
    common: dict[str, object] = {
        "table_id": table_id,
        "command_id": command_id,
        "expected_version": expected_version,
    }
    match action:
        case ea.TurnCard():
            return wc.Turn.model_validate(common)
        case ea.Take(hand=hand, table=table):
            wire_table = None if table is None else table_to_wire(table)
            return wc.Take.model_validate(
                {**common, "hand": cards_to_wire(hand), "table": wire_table}
            )
        case ea.Refuse():
            return wc.Refuse.model_validate(common)
        case ea.Leave():
            return wc.Leave.model_validate(common)
        case ea.Force():
            return wc.Force.model_validate(common)
        case ea.Waive():
            return wc.Waive.model_validate(common)
        case ea.Discard(card=card):
            return wc.Discard.model_validate({**common, "card": format_card(card)})
        case ea.MeldHand(hand=hand, table=table):
            return wc.MeldHand.model_validate(
                {**common, "hand": cards_to_wire(hand), "table": table_to_wire(table)}
            )
    raise TypeError(f"not an engine action: {action!r}")


def legal_to_wire(
    text: str, table_id: str, command_id: str, expected_version: int | None = None
) -> wc.Command:
    """Return the wire command of one of a view's ``legal_actions``: ``next_deal``
    (``engine.views.NEXT_DEAL``) or an action in engine notation (``docs/notation.md``).

    Raises ``engine.errors.NotationError`` for a text that is neither.
    """
    if text == NEXT_DEAL:
        return wc.NextDeal(
            table_id=table_id, command_id=command_id, expected_version=expected_version
        )
    return to_wire_command(parse_action(text), table_id, command_id, expected_version)


# --- fairness and rejections ---------------------------------------------------------------------


def reveal(number: int, seed: bytes, algorithm: str = SHUFFLE_ALGORITHM) -> wd.DealRevealed:
    """Return the ``deal_revealed`` event of deal ``number`` shuffled from ``seed``."""
    return wd.DealRevealed(number=number, seed=seed_hex(seed), algorithm=algorithm)


def revealed_deck(table_id: str, event: wd.DealRevealed) -> tuple[Card, ...]:
    """Return the deck a revealed seed determines (docs/fairness.md), top of the deal first."""
    return shuffle(parse_seed(event.seed), event.algorithm, deal_context(table_id, event.number))


def revealed_decks(table_id: str, events: Iterable[wd.EventModel]) -> dict[int, tuple[Card, ...]]:
    """Return the deck of every revealed deal by number, each checked against its commitment.

    An auditor passes ``revealed_decks(...).__getitem__`` as ``deck_of`` to ``to_engine``.
    Raises ValueError when a seed does not match the commitment of its deal or its algorithm
    differs, or when a deal is revealed without having started.
    """
    started: dict[int, wd.DealStarted] = {}
    decks: dict[int, tuple[Card, ...]] = {}
    for event in events:
        if isinstance(event, wd.DealStarted):
            started[event.number] = event
        elif isinstance(event, wd.DealRevealed):
            deal = started.get(event.number)
            if deal is None:
                raise ValueError(f"deal {event.number} is revealed but never started")
            seed = parse_seed(event.seed)
            if not verify(seed, deal.commitment) or deal.algorithm != event.algorithm:
                raise ValueError(f"deal {event.number}: the seed does not match the commitment")
            decks[event.number] = revealed_deck(table_id, event)
    return decks


def rejection(command_id: str | None, error: Exception) -> wd.CommandRejected:
    """Return the ``command_rejected`` event of an error with a stable ``code`` attribute.

    Engine, contract, fairness and store errors all have one; any other error is reported as
    ``command/failed``.  The message is the error's text, cut to 500 characters.
    """
    code = getattr(error, "code", None)
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        code = Code.COMMAND_FAILED.value
    text = str(error)
    message = text if len(text) <= 500 else text[:497] + "..."
    return wd.CommandRejected(command_id=command_id, code=code, message=message)
