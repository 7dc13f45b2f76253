"""Mapping between engine values and the wire: events both ways, commands one way.

The orders it writes cards and tables in, and how a deal's deck is split into a public
``deal_started`` and secret ``hand_dealt`` events: ``docs/events.md`` ("Module notes").

>>> to_wire(game_events.CardTurned(1, 26))
[CardTurned(type='card_turned', v=1, seat=1, card='7H')]
>>> table_to_wire(table_from_wire((("JH", "6H", "7H"), ("KC", "KD", "KH"))))
(('6H', '7H', 'JH'), ('KC', 'KD', 'KH'))
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar, cast

from engine import actions, game_events
from engine.cards import Card, CardMask, display_order, format_card, mask_of, parse_card
from engine.codes import Code
from engine.game_events import Decline
from engine.melds import Meld
from engine.notation import parse_action
from engine.rules import Rules
from engine.views import NEXT_DEAL
from events import commands, domain
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

WireMelds = tuple[tuple[str, ...], ...]

_CODE = re.compile(domain.CODE_PATTERN)
_WireEvent = TypeVar("_WireEvent", bound=domain.EventModel)


# --- cards, melds, tables and rules --------------------------------------------------------------


def cards_to_wire(mask: CardMask) -> tuple[str, ...]:
    """Return the cards of a bitmask as text in rank order, then suit (``2D 2H 5C``)."""
    return tuple(format_card(c) for c in display_order(mask))


def cards_from_wire(cards: Iterable[str]) -> CardMask:
    """Return the bitmask of card texts (the order does not matter)."""
    return mask_of(parse_card(c) for c in cards)


def table_to_wire(table: Iterable[Meld]) -> WireMelds:
    """Return a table as melds of card text, each in rank order, melds ordered by their cards."""
    melds = [cards_to_wire(m) for m in table]
    return tuple(sorted(melds, key=lambda meld: [_rank_suit(c) for c in meld]))


def _rank_suit(text: str) -> tuple[int, int]:
    c = parse_card(text)
    return (c % 10, c // 10)


def table_from_wire(table: Iterable[Iterable[str]]) -> tuple[Meld, ...]:
    """Return a table as the engine's sorted tuple of meld bitmasks."""
    return tuple(sorted(cards_from_wire(meld) for meld in table))


def rules_to_wire(rules: Rules) -> domain.RuleSet:
    """Return the complete wire rule set of an engine rule set."""
    return domain.RuleSet.model_validate(rules.as_dict())


def rules_from_wire(rules: domain.RuleSet) -> Rules:
    """Return the engine rule set of a wire rule set (checked by ``Rules.from_dict``)."""
    return Rules.from_dict(rules.model_dump())


# --- engine events to the wire -------------------------------------------------------------------


def _made(model: type[_WireEvent], **fields: Any) -> _WireEvent:
    """Return a wire event of fields mapped from engine values, without validating them again.

    Engine values are valid by construction and the mapping writes them in canonical form
    (``format_card``, rank-then-suit order, tuples), so validating every card of a hand or a
    table again only spent time (``docs/performance.md``, "Module notes"); events of a field or
    two are quicker validated than constructed.  A test checks that every event mapped from
    random games equals its validated form (``model_validate`` of its own dump).
    """
    return cast(_WireEvent, model.model_construct(**fields))


def to_wire(
    event: game_events.Event,
    *,
    commitment: str | None = None,
    algorithm: str = SHUFFLE_ALGORITHM,
    turn_seconds: int | None = None,
) -> list[domain.TableEvent]:
    """Return the wire events of one engine event, in order.

    ``DealStarted`` needs ``commitment`` (the hex SHA-256 of the deal's seed) and becomes
    ``deal_started`` then ``hand_dealt`` for seat 0 and seat 1; ``CardDeclined`` becomes
    ``card_refused`` or ``card_left``; ``MatchStarted`` becomes ``table_created`` with
    ``turn_seconds``.  Raises ValueError when a ``DealStarted`` comes without a commitment.
    """
    match event:
        case game_events.MatchStarted():
            return [_table_created(event, turn_seconds)]
        case game_events.DealStarted():
            if commitment is None:
                raise ValueError(f"deal {event.number}: a deal_started needs the commitment")
            return _deal_started(event, commitment, algorithm)
        case game_events.MeldMade(seat=seat, card=card, hand=hand, table=table):
            return [
                _made(
                    domain.MeldMade,
                    seat=seat,
                    card=format_card(card),
                    hand=cards_to_wire(hand),
                    table=table_to_wire(table),
                )
            ]
        case game_events.HandMelded(seat=seat, hand=hand, table=table):
            return [
                _made(
                    domain.HandMelded,
                    seat=seat,
                    hand=cards_to_wire(hand),
                    table=table_to_wire(table),
                )
            ]
        case _:
            return [_simple_to_wire(event)]


def _table_created(
    event: game_events.MatchStarted, turn_seconds: int | None
) -> domain.TableCreated:
    return domain.TableCreated(
        rules=rules_to_wire(event.rules),
        deals=event.deals,
        target_score=event.target_score,
        turn_seconds=turn_seconds,
        first_dealer=event.first_dealer,
    )


def _deal_started(
    event: game_events.DealStarted, commit: str, algorithm: str
) -> list[domain.TableEvent]:
    non_dealer, dealer, _stock = split_deck(event.deck)
    hands = {1 - event.dealer: non_dealer, event.dealer: dealer}
    started = domain.DealStarted(
        number=event.number,
        dealer=event.dealer,
        stake=event.stake,
        commitment=commit,
        algorithm=algorithm,
    )
    dealt = [
        _made(domain.HandDealt, seat=s, cards=cards_to_wire(mask_of(hands[s]))) for s in (0, 1)
    ]
    return [started, dealt[0], dealt[1]]


@lru_cache(maxsize=4096)
def _simple_to_wire(event: game_events.Event) -> domain.TableEvent:
    """Map the engine events whose fields carry over one to one (cards as text).

    Remembered: the same few hundred events (a seat and a card) come back at every deal, and
    validating one again cost 2.5 µs (the card's check); engine events are frozen values and
    wire events frozen models, so one instance serves every table.
    """
    match event:
        case game_events.CardTurned(seat=seat, card=card):
            return domain.CardTurned(seat=seat, card=format_card(card))
        case game_events.CardDeclined(seat=seat, card=card, how=how, forceable=forceable):
            kind: type[domain.CardRefused | domain.CardLeft]
            kind = domain.CardRefused if how is Decline.REFUSED else domain.CardLeft
            return kind(seat=seat, card=format_card(card), forceable=forceable)
        case game_events.ForceDemanded(seat=seat):
            return domain.ForceDemanded(seat=seat)
        case game_events.ForceWaived(seat=seat):
            return domain.ForceWaived(seat=seat)
        case game_events.CardWasted(card=card):
            return domain.CardWasted(card=format_card(card))
        case game_events.CardDiscarded(seat=seat, card=card):
            return domain.CardDiscarded(seat=seat, card=format_card(card))
        case game_events.WentOut(seat=seat):
            return domain.WentOut(seat=seat)
        case game_events.GameDrawn():
            return domain.GameDrawn()
        case game_events.Resigned(seat=seat):
            return domain.Resigned(seat=seat)
        case game_events.StakesSettled(
            winner=winner, amount=amount, scores=scores, next_stake=stake
        ):
            return domain.StakesSettled(
                winner=winner, amount=amount, scores=scores, next_stake=stake
            )
        case game_events.MatchEnded(winner=winner, scores=scores):
            return domain.MatchEnded(winner=winner, scores=scores)
    raise TypeError(f"not an engine event with a one-to-one wire form: {event!r}")


# --- wire events to the engine -------------------------------------------------------------------


def to_engine(event: domain.EventModel, deck_of: DeckOf | None = None) -> list[game_events.Event]:
    """Return the engine events of one wire event: one, or none for wire-only events.

    ``hand_dealt``, ``player_joined``, ``player_left``, ``rematch_agreed``, ``rematch_opened``,
    ``deal_revealed``, ``bot_failed`` and ``command_rejected`` have no engine counterpart (the
    hands are in the deck of ``deal_started``).  ``deal_started`` takes its deck from
    ``deck_of(number)``; raises ValueError when ``deck_of`` is None.
    """
    match event:
        case domain.TableCreated():
            rules = rules_from_wire(event.rules)
            return [
                game_events.MatchStarted(rules, event.first_dealer, event.deals, event.target_score)
            ]
        case domain.DealStarted(number=number, dealer=dealer, stake=stake):
            if deck_of is None:
                raise ValueError(f"deal {number}: rebuilding deal_started needs deck_of")
            return [game_events.DealStarted(number, dealer, stake, tuple(deck_of(number)))]
        case domain.CardRefused(seat=seat, card=card, forceable=forceable):
            return [game_events.CardDeclined(seat, parse_card(card), Decline.REFUSED, forceable)]
        case domain.CardLeft(seat=seat, card=card, forceable=forceable):
            return [game_events.CardDeclined(seat, parse_card(card), Decline.LEFT, forceable)]
        case domain.MeldMade(seat=seat, card=card, hand=hand, table=table):
            made = game_events.MeldMade(
                seat, parse_card(card), cards_from_wire(hand), table_from_wire(table)
            )
            return [made]
        case domain.HandMelded(seat=seat, hand=hand, table=table):
            return [game_events.HandMelded(seat, cards_from_wire(hand), table_from_wire(table))]
        case (
            domain.HandDealt()
            | domain.PlayerJoined()
            | domain.DealRevealed()
            | domain.BotFailed()
            | domain.CommandRejected()
        ):
            return []
        case domain.PlayerLeft() | domain.RematchAgreed() | domain.RematchOpened():
            return []
        case _:
            return [_simple_to_engine(event)]


def _simple_to_engine(event: domain.EventModel) -> game_events.Event:
    """Map back the wire events whose fields carry over one to one."""
    match event:
        case domain.CardTurned(seat=seat, card=card):
            return game_events.CardTurned(seat, parse_card(card))
        case domain.ForceDemanded(seat=seat):
            return game_events.ForceDemanded(seat)
        case domain.ForceWaived(seat=seat):
            return game_events.ForceWaived(seat)
        case domain.CardWasted(card=card):
            return game_events.CardWasted(parse_card(card))
        case domain.CardDiscarded(seat=seat, card=card):
            return game_events.CardDiscarded(seat, parse_card(card))
        case domain.WentOut(seat=seat):
            return game_events.WentOut(seat)
        case domain.GameDrawn():
            return game_events.GameDrawn()
        case domain.Resigned(seat=seat):
            return game_events.Resigned(seat)
        case domain.StakesSettled(winner=winner, amount=amount, scores=scores, next_stake=stake):
            return game_events.StakesSettled(winner, amount, scores, stake)
        case domain.MatchEnded(winner=winner, scores=scores):
            return game_events.MatchEnded(winner, scores)
    raise TypeError(f"not a wire event with a one-to-one engine form: {event!r}")


# --- commands ------------------------------------------------------------------------------------


def to_engine_command(
    command: commands.CommandModel,
    seat: int | None,
    *,
    deck: Sequence[Card] | None = None,
    first_dealer: int = 0,
) -> actions.Command | None:
    """Return the engine command of a wire command sent by ``seat`` (from the seat token).

    ``create_table`` becomes ``NewMatch`` with ``first_dealer`` (the service draws it);
    ``next_deal`` becomes ``StartDeal`` with ``deck`` (the service shuffles it); ``join``,
    ``leave_table``, ``rematch`` and ``report_bot_failure`` are handled by the service alone
    and give None.  Raises ValueError when a play or ``resign`` comes without a seat, or
    ``next_deal`` without a deck.
    """
    if isinstance(command, commands.CreateTable):
        rules = command.to_rules()
        return actions.NewMatch(rules, first_dealer, command.deals, command.target_score)
    if isinstance(
        command, commands.Join | commands.LeaveTable | commands.Rematch | commands.ReportBotFailure
    ):
        return None
    if isinstance(command, commands.NextDeal):
        if deck is None:
            raise ValueError("next_deal needs the shuffled deck")
        return actions.StartDeal(tuple(deck))
    if seat is None:
        raise ValueError(f"a {type(command).__name__} command needs the sender's seat")
    if isinstance(command, commands.Resign):
        return actions.Resign(seat)
    return actions.Play(seat, _action(command))


def _action(command: commands.CommandModel) -> actions.Action:
    match command:
        case commands.Turn():
            return actions.TurnCard()
        case commands.Take(hand=hand, table=table):
            wire_table = None if table is None else table_from_wire(table)
            return actions.Take(cards_from_wire(hand), wire_table)
        case commands.Refuse():
            return actions.Refuse()
        case commands.Leave():
            return actions.Leave()
        case commands.Force():
            return actions.Force()
        case commands.Waive():
            return actions.Waive()
        case commands.Discard(card=card):
            return actions.Discard(parse_card(card))
        case commands.MeldHand(hand=hand, table=table):
            return actions.MeldHand(cards_from_wire(hand), table_from_wire(table))
    raise TypeError(f"not a play command: {command!r}")


def to_wire_command(
    action: actions.Action, table_id: str, command_id: str, expected_version: int | None = None
) -> commands.Command:
    """Return the wire command of an engine action (what a bot or a client library sends)."""
    common: dict[str, object] = {
        "table_id": table_id,
        "command_id": command_id,
        "expected_version": expected_version,
    }
    match action:
        case actions.TurnCard():
            return commands.Turn.model_validate(common)
        case actions.Take(hand=hand, table=table):
            wire_table = None if table is None else table_to_wire(table)
            return commands.Take.model_validate(
                {**common, "hand": cards_to_wire(hand), "table": wire_table}
            )
        case actions.Refuse():
            return commands.Refuse.model_validate(common)
        case actions.Leave():
            return commands.Leave.model_validate(common)
        case actions.Force():
            return commands.Force.model_validate(common)
        case actions.Waive():
            return commands.Waive.model_validate(common)
        case actions.Discard(card=card):
            return commands.Discard.model_validate({**common, "card": format_card(card)})
        case actions.MeldHand(hand=hand, table=table):
            return commands.MeldHand.model_validate(
                {**common, "hand": cards_to_wire(hand), "table": table_to_wire(table)}
            )
    raise TypeError(f"not an engine action: {action!r}")


def legal_to_wire(
    text: str, table_id: str, command_id: str, expected_version: int | None = None
) -> commands.Command:
    """Return the wire command of one of a view's ``legal_actions``: ``next_deal``
    (``engine.views.NEXT_DEAL``) or an action in engine notation (``docs/notation.md``).

    Raises ``engine.errors.NotationError`` for a text that is neither.
    """
    if text == NEXT_DEAL:
        return commands.NextDeal(
            table_id=table_id, command_id=command_id, expected_version=expected_version
        )
    return to_wire_command(parse_action(text), table_id, command_id, expected_version)


# --- fairness and rejections ---------------------------------------------------------------------


def reveal(number: int, seed: bytes, algorithm: str = SHUFFLE_ALGORITHM) -> domain.DealRevealed:
    """Return the ``deal_revealed`` event of deal ``number`` shuffled from ``seed``."""
    return domain.DealRevealed(number=number, seed=seed_hex(seed), algorithm=algorithm)


def revealed_deck(table_id: str, event: domain.DealRevealed) -> tuple[Card, ...]:
    """Return the deck a revealed seed determines (docs/fairness.md), top of the deal first."""
    return shuffle(parse_seed(event.seed), event.algorithm, deal_context(table_id, event.number))


def revealed_decks(
    table_id: str, events: Iterable[domain.EventModel]
) -> dict[int, tuple[Card, ...]]:
    """Return the deck of every revealed deal by number, each checked against its commitment.

    An auditor passes ``revealed_decks(...).__getitem__`` as ``deck_of`` to ``to_engine``.
    Raises ValueError when a seed does not match the commitment of its deal or its algorithm
    differs, or when a deal is revealed without having started.
    """
    started: dict[int, domain.DealStarted] = {}
    decks: dict[int, tuple[Card, ...]] = {}
    for event in events:
        if isinstance(event, domain.DealStarted):
            started[event.number] = event
        elif isinstance(event, domain.DealRevealed):
            deal = started.get(event.number)
            if deal is None:
                raise ValueError(f"deal {event.number} is revealed but never started")
            seed = parse_seed(event.seed)
            if not verify(seed, deal.commitment) or deal.algorithm != event.algorithm:
                raise ValueError(f"deal {event.number}: the seed does not match the commitment")
            decks[event.number] = revealed_deck(table_id, event)
    return decks


def rejection(command_id: str | None, error: Exception) -> domain.CommandRejected:
    """Return the ``command_rejected`` event of an error with a stable ``code`` attribute.

    Engine, contract, fairness and store errors all have one; any other error is reported as
    ``command/failed``.  The message is the error's text, cut to 500 characters.
    """
    code = getattr(error, "code", None)
    if not isinstance(code, str) or not _CODE.fullmatch(code):
        code = Code.COMMAND_FAILED.value
    text = str(error)
    message = text if len(text) <= 500 else text[:497] + "..."
    return domain.CommandRejected(command_id=command_id, code=code, message=message)
