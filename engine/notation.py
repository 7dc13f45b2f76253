"""Text notation for whole positions, actions and events: one line each, parsed and formatted.

Every notation name is importable from here (``docs/notation.md`` has the grammar).

>>> text = "offered 0 | t0 2S3S4S5S 7H7D7C7S | h0 KC QC | c JC"
>>> format_position(parse_position(text))
'offered 0 | t0 2S3S4S5S 7C7D7H7S | h0 QC KC | c JC'
>>> format_action(parse_action("take kc qc => jcqckc"))
'take QC KC => JCQCKC'
"""

from __future__ import annotations

from functools import lru_cache

from engine.actions import Action, Discard, Force, Leave, MeldHand, Refuse, Take, TurnCard, Waive
from engine.card_notation import (
    NONE,
    _distinct,
    format_hand,
    format_meld,
    format_outcome,
    format_table,
    parse_meld,
    parse_outcome,
    table_order,
)
from engine.cards import CardMask, format_card, format_cards, parse_card
from engine.errors import NotationError
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
from engine.melds import Meld
from engine.position_notation import (
    NO_DEAL,
    _format_rules,
    _opt,
    format_position,
    parse_position,
    position_is_complete,
)

__all__ = [
    "NONE",
    "NO_DEAL",
    "format_action",
    "format_event",
    "format_hand",
    "format_meld",
    "format_outcome",
    "format_position",
    "format_table",
    "parse_action",
    "parse_meld",
    "parse_outcome",
    "parse_position",
    "position_is_complete",
    "table_order",
]

# --- actions ---------------------------------------------------------------------------------

_SIMPLE: dict[str, Action] = dict(
    turn=TurnCard(), refuse=Refuse(), leave=Leave(), force=Force(), waive=Waive()
)
_SIMPLE_NAMES = {type(action): name for name, action in _SIMPLE.items()}


def format_action(action: Action) -> str:
    """Format an action: ``turn``, ``take 5S KC KD KH => 2S3S4S5S6S KCKDKH``, ``discard QD`` …

    A take or hand meld lists its hand cards in rank order, then ``=>`` and the whole table
    after it; a take that leaves the table to the engine (``table`` None) has no ``=>``.
    """
    if isinstance(action, Discard):
        return f"discard {format_card(action.card)}"
    if isinstance(action, Take | MeldHand):
        return _take_text("take" if isinstance(action, Take) else "meld", action.hand, action.table)
    return _SIMPLE_NAMES[type(action)]


# Every view lists the legal takes of the seat to act, and the same takes come back state after
# state: their text is remembered (a hand mask and a tuple of melds are their own key).
@lru_cache(maxsize=65_536)
def _take_text(verb: str, hand: CardMask, table: tuple[Meld, ...] | None) -> str:
    cards = f" {format_hand(hand)}" if hand else ""
    return verb + cards + ("" if table is None else f" => {format_table(table)}")


def parse_action(text: str) -> Action:
    """Parse the text of an action as ``format_action`` writes it (any case, any spacing).

    Raises NotationError naming the text when it is not an action.
    """
    words = text.split()
    verb = words[0].lower() if words else ""
    try:
        if verb in _SIMPLE and len(words) == 1:
            return _SIMPLE[verb]
        if verb == "discard" and len(words) == 2:
            return Discard(parse_card(words[1]))
        if verb in ("take", "meld"):
            return _parse_take(verb, words[1:])
    except NotationError as exc:
        raise NotationError(f"{exc.message} in the action {text!r}", text=exc.text) from None
    raise NotationError(
        f"not an action: {text!r} (turn, take, meld, refuse, leave, discard C, force, waive)",
        text=text,
    )


def _parse_take(verb: str, words: list[str]) -> Take | MeldHand:
    table: tuple[Meld, ...] | None = None
    if "=>" in words:
        split = words.index("=>")
        melds = words[split + 1 :]
        table = tuple(sorted(parse_meld(w) for w in melds if melds != [NONE]))
        words = words[:split]
    hand = _distinct(words)
    if verb == "take":
        return Take(hand, table)
    if table is None:
        raise NotationError("a meld names its table after '=>'", text=" ".join(words))
    return MeldHand(hand, table)


# --- events ----------------------------------------------------------------------------------


def format_event(event: Event) -> str:
    """Format a domain event as one transcript line, e.g. ``0 takes 6S with 5S => 2S3S4S5S6S``.

    Seats are written as numbers; ``DealStarted`` shows the whole deck (``engine.views``
    redacts it for players and spectators).
    """
    match event:
        case MatchStarted(rules, first, deals, target):
            head = f"match: rules {_format_rules(rules)}, deals {_opt(deals)}"
            return f"{head}, target {_opt(target)}, first dealer {first}"
        case DealStarted(number, dealer, stake, deck):
            return f"deal {number}: dealer {dealer}, stake {stake}, deck {format_cards(deck)}"
        case CardTurned(seat, card):
            return f"{seat} turns {format_card(card)}"
        case CardDeclined(seat, card, how, forceable):
            verb = "refuses" if how is Decline.REFUSED else "leaves"
            return f"{seat} {verb} {format_card(card)}" + (", forceable" if forceable else "")
        case ForceDemanded(seat) | ForceWaived(seat):
            return f"{seat} {'forces' if isinstance(event, ForceDemanded) else 'waives'}"
        case CardWasted(card):
            return f"{format_card(card)} goes to the waste"
        case MeldMade(seat, card, hand, table):
            used = f" with {format_hand(hand)}" if hand else ""
            return f"{seat} takes {format_card(card)}{used} => {format_table(table)}"
        case HandMelded(seat, hand, table):
            return f"{seat} melds {format_hand(hand)} => {format_table(table)}"
        case CardDiscarded(seat, card):
            return f"{seat} discards {format_card(card)}"
        case WentOut(seat):
            return f"{seat} goes out"
        case GameDrawn():
            return "the deal is drawn"
        case Resigned(seat):
            return f"{seat} resigns"
        case StakesSettled(winner, amount, (a, b), next_stake):
            who = "no winner" if winner is None else f"{winner} wins {amount}"
            return f"{who}: score {a}:{b}, next stake {next_stake}"
        case MatchEnded(winner, (a, b)):
            return f"match over: {'tie' if winner is None else f'{winner} wins'} {a}:{b}"
    raise NotationError(f"not an event: {event!r}", text=repr(event))
