"""``decide`` turns a command into events or raises a typed error; ``evolve`` folds an event.

Folding the events of a match with ``fold`` rebuilds its state exactly.  ``decide`` never
changes anything: a rejected command leaves the state as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from functools import reduce
from typing import TypeVar

from engine import errors
from engine.actions import (
    Command,
    Discard,
    Force,
    Leave,
    MeldHand,
    NewMatch,
    Play,
    Refuse,
    Resign,
    StartDeal,
    Take,
    TurnCard,
    Waive,
)
from engine.cards import ALL_CARDS, Card, format_card, format_cards, iter_cards
from engine.game_events import (
    CardDeclined,
    CardDiscarded,
    CardTurned,
    CardWasted,
    DealStarted,
    Decline,
    Event,
    ForceDemanded,
    ForceWaived,
    GameDrawn,
    HandMelded,
    MatchEnded,
    MatchStarted,
    MeldMade,
    Resigned,
    StakesSettled,
    WentOut,
)
from engine.legal import default_take, forceable, is_legal
from engine.melds import is_meld
from engine.rules import Forcing, StakeOnDraw
from engine.state import Deal, Match, Outcome, Phase, Termination, changed

_PHASE_ACTIONS: dict[Phase, tuple[type, ...]] = {
    Phase.TURN: (TurnCard,),
    Phase.OFFERED: (Take, Refuse, MeldHand),
    Phase.TURNED: (Take, Leave, MeldHand),
    Phase.DISCARD: (Discard,),
    Phase.FORCE_WINDOW: (Force, Waive),
    Phase.FORCED: (Take, Refuse, Leave),  # declining is answered with move/must_take
}


_T = TypeVar("_T")

# --- decide ----------------------------------------------------------------------------------


def decide(match: Match | None, command: Command) -> list[Event]:
    """Return the events a command causes, or raise an ``EngineError`` with a stable code.

    Raises MatchOver, DealOver, NotYourTurn, WrongPhase, UnknownCard, IllegalTake, MustTake,
    InvalidMatch, InvalidDeck or MoveError.
    """
    if isinstance(command, NewMatch):
        if match is not None:
            raise errors.WrongPhase("the match has already started")
        _check_match_settings(command)
        return [
            MatchStarted(command.rules, command.first_dealer, command.deals, command.target_score)
        ]
    if match is None:
        raise errors.WrongPhase("no match has started: send NewMatch first")
    if match.over:
        raise errors.MatchOver(f"the match is over (scores {match.scores[0]}:{match.scores[1]})")
    if isinstance(command, StartDeal):
        return _decide_start_deal(match, command.deck)
    if isinstance(command, Resign):
        return _decide_resign(match, command.seat)
    return _decide_play(match, command)


def _check_match_settings(command: NewMatch) -> None:
    if command.first_dealer not in (0, 1):
        raise errors.InvalidMatch(
            f"the first dealer must be seat 0 or 1, not {command.first_dealer!r}"
        )
    for name, value in (("deals", command.deals), ("target_score", command.target_score)):
        if value is not None and value < 1:
            raise errors.InvalidMatch(f"{name} must be at least 1 or unset, not {value!r}")
    if command.deals is None and command.target_score is None:
        raise errors.InvalidMatch("set deals, target_score or both: a match must be able to end")


def _decide_start_deal(match: Match, deck: tuple[Card, ...]) -> list[Event]:
    if not match.between_deals:
        number = match.deal.number if match.deal is not None else 0
        raise errors.WrongPhase(f"deal {number} is still being played")
    if sorted(deck) != list(ALL_CARDS):
        raise errors.InvalidDeck(f"a deck must hold each of the 40 cards once, got {len(deck)}")
    number = match.deals_played + 1
    return [DealStarted(number, match.next_dealer, match.next_stake, tuple(deck))]


def _decide_resign(match: Match, seat: int) -> list[Event]:
    _check_seat(seat)
    events: list[Event] = [Resigned(seat)]
    deal = match.deal
    if deal is not None and deal.phase is not Phase.OVER:
        outcome = Outcome(Termination.RESIGN, 1 - seat)
        events.append(_settlement(match, deal, outcome.winner))
    scores = events[-1].scores if isinstance(events[-1], StakesSettled) else match.scores
    events.append(MatchEnded(1 - seat, scores))
    return events


def _check_seat(seat: int) -> None:
    if seat not in (0, 1):
        raise errors.NotYourTurn(f"there is no seat {seat!r}: seats are 0 and 1")


def _decide_play(match: Match, play: Play) -> list[Event]:
    deal = match.deal
    _check_seat(play.seat)
    if deal is None or deal.phase is Phase.OVER:
        raise errors.DealOver("no deal is being played: the next deal has not started")
    if play.seat != deal.to_act:
        raise errors.NotYourTurn(f"seat {play.seat} acted but seat {deal.to_act} is to act")
    action = play.action
    if not isinstance(action, _PHASE_ACTIONS[deal.phase]):
        raise errors.WrongPhase(f"{type(action).__name__} is not allowed in phase {deal.phase}")
    if isinstance(action, Take) and action.table is None:
        action = _resolve_take(match, deal, action)
    if isinstance(action, Take | MeldHand) and action.table is not None:
        action = replace(action, table=tuple(sorted(action.table)))
    if not is_legal(match, action):
        raise _why_illegal(match, deal, action)
    return _events_of(match, deal, action)


def _resolve_take(match: Match, deal: Deal, take: Take) -> Take:
    _check_hand(deal, take.hand)
    chosen = default_take(match, take.hand)
    if chosen is None:
        raise errors.IllegalTake(
            f"{format_card(_centre(deal))} with {_cards(take.hand) or 'no hand cards'} "
            "does not fit the table in any arrangement",
            reason="no_arrangement",
        )
    return chosen


def _centre(deal: Deal) -> Card:
    if deal.centre is None:  # every phase that accepts a take has a centre card
        raise errors.WrongPhase("there is no centre card")
    return deal.centre


def _cards(mask: int) -> str:
    return format_cards(iter_cards(mask))


def _check_hand(deal: Deal, hand: int) -> None:
    missing = hand & ~deal.hands[deal.to_act]
    if missing:
        raise errors.UnknownCard(f"not in the hand of seat {deal.to_act}: {_cards(missing)}")


def _why_illegal(match: Match, deal: Deal, action: object) -> errors.MoveError:
    """Explain why an action of the right kind is not among the legal actions."""
    if isinstance(action, Discard):
        return errors.UnknownCard(f"cannot discard {format_card(action.card)}: not in the hand")
    if isinstance(action, Refuse | Leave):
        verb = "refuse" if isinstance(action, Refuse) else "leave"
        return errors.MustTake(f"cannot {verb} {format_card(_centre(deal))}: it must be taken")
    if isinstance(action, Take | MeldHand):
        _check_hand(deal, action.hand)
        return _why_illegal_table(match, deal, action)
    return errors.MoveError(f"{action!r} is not legal here")


def _why_illegal_table(match: Match, deal: Deal, action: Take | MeldHand) -> errors.IllegalTake:
    seat = deal.to_act
    table = action.table or ()
    expected = deal.table_masks[seat] | action.hand
    if isinstance(action, Take):
        expected |= 1 << _centre(deal)
    got = 0
    for meld in table:
        if got & meld:
            return errors.IllegalTake(f"a card is in two melds: {_cards(got & meld)}", "overlap")
        got |= meld
    if got != expected:
        detail = f"missing {_cards(expected & ~got)}" if expected & ~got else ""
        extra = f"unexpected {_cards(got & ~expected)}" if got & ~expected else ""
        reason = "; ".join(x for x in (detail, extra) if x)
        return errors.IllegalTake(
            f"the new table must hold the old table, the centre card "
            f"and the named hand cards: {reason}",
            "cards",
        )
    for meld in table:
        if not is_meld(meld, match.rules.max_run_length):
            return errors.IllegalTake(f"not a valid meld: {_cards(meld)}", "invalid_meld")
    return errors.IllegalTake("hand cards need a centre card (variant off)", "no_centre_card")


def _events_of(match: Match, deal: Deal, action: object) -> list[Event]:
    seat = deal.to_act
    rules = match.rules
    if isinstance(action, TurnCard):
        return [CardTurned(seat, deal.stock[0])]
    if isinstance(action, Refuse | Leave):
        card = _centre(deal)
        how = Decline.REFUSED if isinstance(action, Refuse) else Decline.LEFT
        window = rules.forcing is Forcing.OPTIONAL and forceable(deal, seat, card, rules)
        events: list[Event] = [CardDeclined(seat, card, how, window)]
        if how is Decline.REFUSED and not window:
            events += _after_refusal(match, deal, seat, card)
        return events
    if isinstance(action, Force):
        return [ForceDemanded(seat)]
    if isinstance(action, Waive):
        waived: list[Event] = [ForceWaived(seat)]
        if deal.declined is Decline.REFUSED:
            waived += _after_refusal(match, deal, 1 - seat, _centre(deal))
        return waived
    if isinstance(action, Take):
        made: list[Event] = [MeldMade(seat, _centre(deal), action.hand, action.table or ())]
        if action.hand == deal.hands[seat]:
            settled = _settlement(match, deal, seat)
            made += [WentOut(seat), settled, *_match_end(match, settled)]
        return made
    if isinstance(action, MeldHand):
        return [HandMelded(seat, action.hand, action.table)]
    if isinstance(action, Discard):
        return [CardDiscarded(seat, action.card)]
    raise errors.MoveError(f"unknown action {action!r}")


def _after_refusal(match: Match, deal: Deal, seat: int, card: Card) -> list[Event]:
    """The refused card goes to the waste; the refuser turns the next card, or the deal is drawn."""
    if deal.stock:
        return [CardWasted(card), CardTurned(seat, deal.stock[0])]
    settled = _settlement(match, deal, None)
    return [CardWasted(card), GameDrawn(), settled, *_match_end(match, settled)]


def _settlement(match: Match, deal: Deal, winner: int | None) -> StakesSettled:
    """Pay the deal's stake to the winner and set the next stake (RULES.md 8)."""
    rules = match.rules
    scores = list(match.scores)
    if winner is not None:
        scores[winner] += deal.stake
        next_stake = rules.base_stake
    elif rules.stake_on_draw is StakeOnDraw.DOUBLE:
        next_stake = deal.stake * 2
    elif rules.stake_on_draw is StakeOnDraw.CARRY:
        next_stake = deal.stake + rules.base_stake
    else:
        next_stake = rules.base_stake
    amount = deal.stake if winner is not None else 0
    return StakesSettled(winner, amount, (scores[0], scores[1]), next_stake)


def _match_end(match: Match, settled: StakesSettled) -> list[Event]:
    """End the match after the set number of deals or when a player reaches the target score."""
    played = match.deals_played + 1
    by_deals = match.deals is not None and played >= match.deals
    by_score = match.target_score is not None and max(settled.scores) >= match.target_score
    if not (by_deals or by_score):
        return []
    a, b = settled.scores
    winner = None if a == b else (0 if a > b else 1)
    return [MatchEnded(winner, settled.scores)]


# --- evolve ----------------------------------------------------------------------------------


def evolve(match: Match | None, event: Event) -> Match:
    """Return the state after an event; it never fails on events that ``decide`` produced."""
    if isinstance(event, MatchStarted):
        return Match(
            event.rules,
            event.first_dealer,
            event.deals,
            event.target_score,
            next_stake=event.rules.base_stake,
        )
    if match is None:
        return Match()
    if isinstance(event, DealStarted):
        return changed(match, deal=_dealt(event))
    if isinstance(event, StakesSettled):
        outcome = match.deal.outcome if match.deal else None
        results = (*match.results, outcome) if outcome else match.results
        return changed(
            match,
            scores=event.scores,
            next_stake=event.next_stake,
            deals_played=match.deals_played + 1,
            results=results,
        )
    if isinstance(event, MatchEnded):
        return changed(match, over=True, winner=event.winner, scores=event.scores)
    if match.deal is None:
        return match
    return changed(match, deal=_evolve_deal(match.deal, event))


def _dealt(event: DealStarted) -> Deal:
    """Deal 10 cards each, one at a time, the non-dealer first; the rest is the stock."""
    deck = event.deck
    non_dealer = 1 - event.dealer
    hands = [0, 0]
    for i in range(20):
        hands[non_dealer if i % 2 == 0 else event.dealer] |= 1 << deck[i]
    return Deal(
        event.number,
        event.dealer,
        event.stake,
        Phase.TURN,
        non_dealer,
        (hands[0], hands[1]),
        ((), ()),
        tuple(deck[20:]),
    )


def _evolve_deal(deal: Deal, event: Event) -> Deal:
    if isinstance(event, CardTurned):
        return changed(
            deal,
            stock=deal.stock[1:],
            centre=event.card,
            phase=Phase.TURNED,
            to_act=event.seat,
            declined=None,
        )
    if isinstance(event, CardDeclined):
        if event.forceable:
            return changed(
                deal, phase=Phase.FORCE_WINDOW, to_act=1 - event.seat, declined=event.how
            )
        if event.how is Decline.LEFT:
            return changed(deal, phase=Phase.OFFERED, to_act=1 - event.seat)
        return changed(deal, declined=event.how)
    if isinstance(event, ForceDemanded):
        return changed(deal, phase=Phase.FORCED, to_act=1 - event.seat)
    if isinstance(event, ForceWaived):
        if deal.declined is Decline.LEFT:
            return changed(deal, phase=Phase.OFFERED, to_act=event.seat, declined=None)
        return changed(deal, to_act=1 - event.seat)
    if isinstance(event, CardWasted):
        return changed(deal, waste=(*deal.waste, event.card), centre=None, declined=None)
    if isinstance(event, MeldMade):
        return changed(
            deal,
            hands=_set(deal.hands, event.seat, deal.hands[event.seat] & ~event.hand),
            tables=_set(deal.tables, event.seat, event.table),
            centre=None,
            phase=Phase.DISCARD,
            declined=None,
        )
    if isinstance(event, HandMelded):
        return changed(
            deal,
            hands=_set(deal.hands, event.seat, deal.hands[event.seat] & ~event.hand),
            tables=_set(deal.tables, event.seat, event.table),
        )
    if isinstance(event, CardDiscarded):
        return changed(
            deal,
            hands=_set(deal.hands, event.seat, deal.hands[event.seat] & ~(1 << event.card)),
            centre=event.card,
            phase=Phase.OFFERED,
            to_act=1 - event.seat,
        )
    if isinstance(event, WentOut):
        return changed(deal, phase=Phase.OVER, outcome=Outcome(Termination.OUT, event.seat))
    if isinstance(event, GameDrawn):
        return changed(deal, phase=Phase.OVER, outcome=Outcome(Termination.DRAW, None))
    if isinstance(event, Resigned) and deal.phase is not Phase.OVER:
        return changed(deal, phase=Phase.OVER, outcome=Outcome(Termination.RESIGN, 1 - event.seat))
    return deal


def _set(pair: tuple[_T, _T], seat: int, value: _T) -> tuple[_T, _T]:
    return (value, pair[1]) if seat == 0 else (pair[0], value)


def fold(events: Iterable[Event], match: Match | None = None) -> Match | None:
    """Fold events onto a state (None before the match starts) and return the result."""
    return reduce(evolve, events, match)
