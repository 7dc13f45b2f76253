"""The one place the rules of play live: every legal action of the seat to act.

``decide`` accepts an action only when it is listed here, bots choose from this list and
forcing is decided here.  The list is deterministic and sorted by ``action_key``.
"""

from __future__ import annotations

from engine.actions import (
    ACTION_ORDER,
    Action,
    Discard,
    Force,
    Leave,
    MeldHand,
    Refuse,
    Take,
    TurnCard,
    Waive,
)
from engine.cards import Card, iter_cards
from engine.melds import Meld, fits_somewhere, is_meld, meld_arrangements
from engine.rules import Forcing, Rules
from engine.state import Deal, Match, Phase


def action_key(action: Action) -> tuple[object, ...]:
    """Return the sort key of an action: kind, then hand cards, then preferred arrangement."""
    kind = ACTION_ORDER[type(action)]
    if isinstance(action, Discard):
        return (kind, action.card)
    if isinstance(action, Take | MeldHand):
        return (kind, action.hand, *_arrangement_key(action.table or ()))
    return (kind,)


def _arrangement_key(table: tuple[Meld, ...]) -> tuple[object, ...]:
    return (len(table), table)


def _take_key(take: Take, kept: frozenset[Meld]) -> tuple[object, ...]:
    table = take.table or ()
    return (take.hand, -len(kept.intersection(table)), *_arrangement_key(table))


def forceable(deal: Deal, seat: int, card: Card, rules: Rules) -> bool:
    """Say whether ``card`` lays off as it is on one of ``seat``'s melds (classic forcing).

    No hand card and no rearranging count; the run limit applies.  Always False when forcing
    is off.
    """
    if rules.forcing is Forcing.OFF:
        return False
    bit = 1 << card
    return any(is_meld(m | bit, rules.max_run_length) for m in deal.tables[seat])


def takes(deal: Deal, seat: int, rules: Rules) -> list[Take]:
    """List every take of the centre card: each set of hand cards with each resulting table."""
    if deal.centre is None:
        return []
    old = deal.tables[seat]
    required = 1 << deal.centre
    for m in old:
        required |= m
    if not fits_somewhere(deal.centre, required | deal.hands[seat], rules.max_run_length):
        return []
    found = [
        Take(used, table)
        for used, table in meld_arrangements(required, deal.hands[seat], rules.max_run_length)
    ]
    kept = frozenset(old)
    found.sort(key=lambda t: _take_key(t, kept))
    return found


def hand_melds(deal: Deal, seat: int, rules: Rules) -> list[MeldHand]:
    """List the hand melds a seat may lay down without a centre card (variant only)."""
    if not rules.hand_melds_without_centre_card:
        return []
    required = 0
    for m in deal.tables[seat]:
        required |= m
    return sorted(
        (
            MeldHand(used, table)
            for used, table in meld_arrangements(required, deal.hands[seat], rules.max_run_length)
            if used
        ),
        key=action_key,
    )


_last: tuple[Match | None, list[Action]] = (None, [])


def legal_actions(match: Match) -> list[Action]:
    """Return every legal action of the seat to act; empty when nobody is to act.

    The order is fixed: hand melds, takes, then refuse or leave.  Takes are ordered by their
    hand cards (as a bitmask); among takes with the same hand cards the first is the default
    arrangement: the one that keeps the most existing melds, then has the fewest melds.
    The list of the last state asked about is remembered (states are immutable), so that a
    caller's enumeration and ``decide``'s membership check cost one computation.
    """
    global _last
    seen, listed = _last
    if seen is match:
        return list(listed)
    actions = _legal_actions(match)
    _last = (match, actions)
    return list(actions)


def _legal_actions(match: Match) -> list[Action]:
    deal = match.deal
    if match.over or deal is None or deal.phase is Phase.OVER:
        return []
    rules = match.rules
    seat = deal.to_act
    phase = deal.phase
    if phase is Phase.TURN:
        return [TurnCard()]
    if phase is Phase.DISCARD:
        return [Discard(c) for c in iter_cards(deal.hands[seat])]
    if phase is Phase.FORCE_WINDOW:
        return [Force(), Waive()]
    if phase is Phase.FORCED:
        return list(takes(deal, seat, rules))
    actions: list[Action] = [*hand_melds(deal, seat, rules), *takes(deal, seat, rules)]
    compulsory = (
        deal.centre is not None
        and rules.forcing is Forcing.AUTOMATIC
        and forceable(deal, seat, deal.centre, rules)
    )
    if not compulsory:
        actions.append(Refuse() if phase is Phase.OFFERED else Leave())
    return actions


def is_legal(match: Match, action: Action) -> bool:
    """Say whether ``action`` is one of ``legal_actions(match)`` without listing them all.

    The fast path of ``decide``: a take or hand meld is checked directly (disjoint valid melds
    whose cards are exactly the old table, the centre card for a take, and the named hand
    cards), everything else by the phase.  A property test proves it agrees with the list.
    """
    deal = match.deal
    if match.over or deal is None or deal.phase is Phase.OVER:
        return False
    rules, seat, phase = match.rules, deal.to_act, deal.phase
    if isinstance(action, Take):
        if phase not in _TAKE_PHASES or deal.centre is None or action.table is None:
            return False
        return _is_arrangement(deal, seat, rules, action.hand, action.table, 1 << deal.centre)
    if isinstance(action, MeldHand):
        if phase not in _MELD_PHASES or not rules.hand_melds_without_centre_card:
            return False
        return action.hand != 0 and _is_arrangement(deal, seat, rules, action.hand, action.table, 0)
    if isinstance(action, Discard):
        return phase is Phase.DISCARD and bool(deal.hands[seat] >> action.card & 1)
    if isinstance(action, Refuse | Leave):
        wanted = Phase.OFFERED if isinstance(action, Refuse) else Phase.TURNED
        if phase is not wanted or deal.centre is None:
            return False
        return not (
            rules.forcing is Forcing.AUTOMATIC and forceable(deal, seat, deal.centre, rules)
        )
    if isinstance(action, Force | Waive):
        return phase is Phase.FORCE_WINDOW
    return isinstance(action, TurnCard) and phase is Phase.TURN


_TAKE_PHASES = frozenset({Phase.OFFERED, Phase.TURNED, Phase.FORCED})
_MELD_PHASES = frozenset({Phase.OFFERED, Phase.TURNED})


def _is_arrangement(
    deal: Deal, seat: int, rules: Rules, hand: int, table: tuple[Meld, ...], centre: int
) -> bool:
    """Say whether ``table`` (sorted) is disjoint valid melds of old table + centre + hand."""
    if hand < 0 or hand & ~deal.hands[seat] or list(table) != sorted(table):
        return False
    union = 0
    for meld in table:
        if union & meld or not is_meld(meld, rules.max_run_length):
            return False
        union |= meld
    required = centre
    for meld in deal.tables[seat]:
        required |= meld
    return union == required | hand and not (hand & required)


def default_take(match: Match, hand: int) -> Take | None:
    """Return the take with these hand cards that the engine picks when no table is named.

    The rule: among the legal tables for these hand cards, keep the most of the player's
    existing melds unchanged, then use the fewest melds, then the lowest in card order.
    """
    deal = match.deal
    if deal is None:
        return None
    for take in takes(deal, deal.to_act, match.rules):
        if take.hand == hand:
            return take
    return None
