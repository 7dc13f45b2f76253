"""Text notation for whole positions, actions and events: one line each, parsed and formatted.

A position is fields separated by `` | ``; each field is a key and its values, and a field at
its default is left out, so a worked case reads like the rule book (docs/notation.md has the
grammar).  ``format_position(parse_position(s)) == s`` for every canonical ``s`` and
``parse_position(format_position(m)) == m`` for every reachable ``m``.  Positions may name fewer
than 40 cards; ``position_is_complete`` checks that a position holds each card exactly once.

>>> text = "offered 0 | t0 2S3S4S5S 7H7D7C7S | h0 KC QC | c JC"
>>> format_position(parse_position(text))
'offered 0 | t0 2S3S4S5S 7C7D7H7S | h0 QC KC | c JC'
>>> format_action(parse_action("take kc qc => jcqckc"))
'take QC KC => JCQCKC'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields as dataclass_fields
from typing import TypeVar

from engine import events as ev
from engine.actions import Action, Discard, Force, Leave, MeldHand, Refuse, Take, TurnCard, Waive
from engine.cards import (
    ALL_CARDS,
    FULL_MASK,
    Card,
    CardMask,
    display_order,
    format_card,
    format_cards,
    iter_cards,
    parse_card,
    rank_of,
    suit_of,
)
from engine.errors import NotationError
from engine.events import Decline
from engine.melds import Meld, is_meld
from engine.rules import PRESETS, Rules
from engine.state import Deal, Match, Outcome, Phase, Termination

NONE = "-"  # an empty table, hand or place; no limit; no winner
NO_DEAL = "no_deal"
_PHASES = {p.value: p for p in Phase}
_SEATS = ("0", "1")
_PLACES = ("t0", "t1", "h0", "h1", "c", "s", "w")  # the fields that hold cards
_DEAL_KEYS = ("deal", "dealer", "stake", "outcome", "declined", *_PLACES)
_MATCH_KEYS = ("rules", "deals", "target", "score", "results", "played", "first", "next")
_KEYS = frozenset((*_MATCH_KEYS, *_DEAL_KEYS, "phase", "match_over"))
_RULE_OPTIONS = tuple(f.name for f in dataclass_fields(Rules) if f.name != "name")
_T = TypeVar("_T")
_CARDS = {format_card(c): c for c in ALL_CARDS}

# --- cards, melds, tables and outcomes -------------------------------------------------------


def format_hand(mask: CardMask) -> str:
    """Format a set of cards in rank order, then suit (``2D 2H 5C JS``); ``-`` when empty."""
    return format_cards(display_order(mask)) if mask else NONE


def format_meld(meld: Meld) -> str:
    """Format a meld as its cards run together in rank, then suit order: ``5S6S7S``, ``KCKDKH``."""
    return "".join(format_card(c) for c in display_order(meld))


def table_order(table: Iterable[Meld]) -> list[Meld]:
    """Return melds in reading order: by their lowest card's rank, then its suit."""
    return sorted(table, key=lambda m: min((rank_of(c), suit_of(c)) for c in iter_cards(m)))


def format_table(table: Iterable[Meld]) -> str:
    """Format melds in reading order (``table_order``), space-separated; ``-`` when empty."""
    return " ".join(format_meld(m) for m in table_order(table)) or NONE


def parse_meld(text: str) -> Meld:
    """Parse cards run together (``5s6s7s``) into a bitmask; it need not be a valid meld.

    Raises NotationError naming the text when a card does not parse or repeats.
    """
    try:
        if len(text) % 2:
            raise NotationError("a meld is 2-character cards run together", text=text)
        return _distinct([text[i : i + 2] for i in range(0, len(text), 2)])
    except NotationError as exc:
        raise NotationError(f"{exc.message} in the meld {text!r}", text=exc.text) from None


def _card(text: str) -> Card:
    """Parse a card, looking the usual upper-case form up first (positions are long)."""
    found = _CARDS.get(text)
    return parse_card(text) if found is None else found


def _distinct(words: list[str]) -> CardMask:
    """Return the mask of card texts; raises NotationError when one is not a card or repeats."""
    mask = 0
    for word in words:
        bit = 1 << _card(word)
        if mask & bit:
            raise NotationError(f"the card {word} is named twice", text=word)
        mask |= bit
    return mask


def format_outcome(outcome: Outcome) -> str:
    """Format how a deal ended: ``out:0``, ``resign:1`` (the number is the winner) or ``draw``."""
    winner = "" if outcome.winner is None else f":{outcome.winner}"
    return outcome.termination.value + winner


def parse_outcome(text: str) -> Outcome:
    """Parse ``out:0``, ``resign:1`` or ``draw``; raises NotationError naming the text."""
    term, _, winner = text.lower().partition(":")
    if term not in {t.value for t in Termination} or winner not in ("", *_SEATS):
        raise NotationError(f"not an outcome (out:S, resign:S, draw): {text!r}", text=text)
    return Outcome(Termination(term), int(winner) if winner else None)


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
        verb = "take" if isinstance(action, Take) else "meld"
        hand = f" {format_hand(action.hand)}" if action.hand else ""
        table = "" if action.table is None else f" => {format_table(action.table)}"
        return verb + hand + table
    return _SIMPLE_NAMES[type(action)]


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


# --- positions: formatting -------------------------------------------------------------------


def format_position(match: Match) -> str:
    """Format a match and its running deal as one line of fields (docs/notation.md).

    Fields are written in a fixed order and left out when they hold their default.  Raises
    NotationError for a state the notation cannot hold (a winner of a match that is not over).
    """
    if match.winner is not None and not match.over:
        raise NotationError("a match that is not over has no winner", text=str(match.winner))
    deal = match.deal
    fields = [
        *_match_values(match),
        *(_deal_values(deal, match.rules) if deal else [(NO_DEAL, "", None)]),
        ("next", str(match.next_stake), str(deal.stake if deal else match.rules.base_stake)),
        *([("match_over", _opt(match.winner), None)] if match.over else []),
    ]
    return " | ".join(f"{key} {value}".rstrip() for key, value, dflt in fields if value != dflt)


_Values = list[tuple[str, str, str | None]]  # (key, value, default) of each field, in order


def _match_values(match: Match) -> _Values:
    return [
        ("rules", _format_rules(match.rules), "classic"),
        ("deals", _opt(match.deals), "1"),
        ("target", _opt(match.target_score), NONE),
        ("score", f"{match.scores[0]}:{match.scores[1]}", "0:0"),
        ("results", " ".join(format_outcome(o) for o in match.results), ""),
        ("played", str(match.deals_played), str(len(match.results))),
        ("first", str(match.first_dealer), str(_default_first(match.deal))),
    ]


def _deal_values(deal: Deal, rules: Rules) -> _Values:
    return [
        ("deal", str(deal.number), "1"),
        ("dealer", str(deal.dealer), "1"),
        ("stake", str(deal.stake), str(rules.base_stake)),
        (deal.phase.value, str(deal.to_act), None),
        ("outcome", format_outcome(deal.outcome) if deal.outcome else NONE, NONE),
        ("t0", format_table(deal.tables[0]), NONE),
        ("t1", format_table(deal.tables[1]), NONE),
        ("h0", format_hand(deal.hands[0]), NONE),
        ("h1", format_hand(deal.hands[1]), NONE),
        ("c", NONE if deal.centre is None else format_card(deal.centre), NONE),
        ("declined", deal.declined.value if deal.declined else NONE, NONE),
        ("s", format_cards(deal.stock) or NONE, NONE),
        ("w", format_cards(deal.waste) or NONE, NONE),
    ]


def _default_first(deal: Deal | None) -> int:
    """Return the first dealer implied by the running deal's number and dealer."""
    return 0 if deal is None else (deal.dealer - deal.number + 1) % 2


def _opt(value: int | None) -> str:
    return NONE if value is None else str(value)


def _format_rules(rules: Rules) -> str:
    """Name the rule set, then each option that differs from the preset of that name.

    A name that is no preset is followed by all of its options.  Raises NotationError for a
    name that is not one word (empty, or with a space, ``|`` or ``=``).
    """
    if not rules.name or any(ch.isspace() or ch in "|=" for ch in rules.name):
        raise NotationError(f"a rule set name must be one word: {rules.name!r}", text=rules.name)
    mine = rules.as_dict()
    base = PRESETS[rules.name].as_dict() if rules.name in PRESETS else {}
    options = [
        f"{k}={_option_text(mine[k])}" for k in _RULE_OPTIONS if k not in base or base[k] != mine[k]
    ]
    return " ".join([rules.name, *options])


def _option_text(value: object) -> str:
    if value is None or isinstance(value, bool):
        return {None: NONE, True: "yes", False: "no"}[value]
    return str(value)


# --- positions: parsing ----------------------------------------------------------------------


class _Fields:
    """The fields of a position text by key, with typed readers whose errors quote the field."""

    def __init__(self, text: str) -> None:
        self.values: dict[str, list[str]] = {}
        self.raw: dict[str, str] = {}
        for part in text.split("|"):
            words = part.split()
            key = words[0].lower() if words else ""
            if key in _PHASES or key == NO_DEAL:
                key, words = "phase", ["phase", key, *words[1:]]
            if key not in _KEYS or key in self.values:
                why = "repeated" if key in self.values else "unknown or empty"
                raise NotationError(f"{why} field {part.strip()!r} in {text!r}", text=part.strip())
            self.values[key] = words[1:]
            self.raw[key] = part.strip()

    def error(self, key: str, why: str) -> NotationError:
        return NotationError(f"{why} in the field {self.raw[key]!r}", text=self.raw[key])

    def parsed(self, key: str, parse: Callable[[str], _T]) -> list[_T]:
        """Parse each value of a field (none for a lone ``-``), quoting the field on errors."""
        words = self.values.get(key, [])
        try:
            return [parse(w) for w in words if words != [NONE]]
        except NotationError as exc:
            raise self.error(key, exc.message) from None

    def one(self, key: str) -> str | None:
        if key in self.values and len(self.values[key]) != 1:
            raise self.error(key, "expected one value")
        return self.values[key][0] if key in self.values else None

    def number(self, key: str, default: int, low: int = 0, high: int | None = None) -> int:
        word = self.one(key)
        if word is None:
            return default
        if not (word.isascii() and word.isdigit() and low <= int(word) <= (high or int(word))):
            raise self.error(key, "expected seat 0 or 1" if high else f"a whole number >= {low}")
        return int(word)

    def optional(
        self, key: str, default: int | None, low: int = 0, high: int | None = None
    ) -> int | None:
        """Read a number that may be ``-`` for none."""
        word = self.one(key)
        if word is None or word == NONE:
            return default if word is None else None
        return self.number(key, 0, low, high)


def parse_position(text: str) -> Match:
    """Parse a position written in the notation into a ``Match`` (docs/notation.md).

    Cards not named anywhere are simply absent.  Raises NotationError naming the bad field:
    unknown or repeated keys, bad numbers or cards, a card in two places, a table meld that is
    not a meld under the rules.
    """
    fields = _Fields(text)
    rules = _parse_rules(fields)
    deal = _parse_deal(fields, rules)
    results = tuple(fields.parsed("results", parse_outcome))
    over = "match_over" in fields.values
    return Match(
        rules=rules,
        first_dealer=fields.number("first", _default_first(deal), high=1),
        deals=fields.optional("deals", 1, low=1),
        target_score=fields.optional("target", None),
        scores=_parse_score(fields),
        next_stake=fields.number("next", deal.stake if deal else rules.base_stake),
        deals_played=fields.number("played", len(results)),
        deal=deal,
        results=results,
        over=over,
        winner=fields.optional("match_over", None, high=1),
    )


def _parse_score(fields: _Fields) -> tuple[int, int]:
    a, colon, b = (fields.one("score") or "0:0").partition(":")
    if not (colon and a.isascii() and a.isdigit() and b.isascii() and b.isdigit()):
        raise fields.error("score", "expected a score such as 3:1")
    return (int(a), int(b))


def _parse_rules(fields: _Fields) -> Rules:
    words = fields.values.get("rules", ["classic"])
    name = words[0] if words else ""
    options = dict(w.partition("=")[::2] for w in words[1:])
    unknown = set(options) - set(_RULE_OPTIONS)
    if unknown or (name not in PRESETS and set(options) != set(_RULE_OPTIONS)):
        why = f"unknown options {sorted(unknown)}" if unknown else f"no preset {name!r}"
        known = ", ".join(sorted(PRESETS))
        raise fields.error("rules", f"{why} (presets: {known}; other names list every option)")
    values = PRESETS[name].as_dict() if name in PRESETS else {}
    values |= {k: _option_value(v) for k, v in options.items()}
    try:
        return Rules.from_dict({**values, "name": name})
    except (ValueError, TypeError) as exc:
        raise fields.error("rules", str(exc)) from None


def _option_value(text: str) -> object:
    words: dict[str, object] = {NONE: None, "yes": True, "no": False}
    if text.lower() in words:
        return words[text.lower()]
    return int(text) if text.isascii() and text.isdigit() else text.lower()


def _parse_deal(fields: _Fields, rules: Rules) -> Deal | None:
    phase = fields.values.get("phase", [])
    if not phase:
        raise NotationError("a position needs a phase field such as 'offered 0', or 'no_deal'")
    if phase[0] == NO_DEAL:
        extra = [k for k in _DEAL_KEYS if k in fields.values] + phase[1:]
        if extra:
            raise fields.error("phase", f"no_deal takes no deal fields, got {extra}")
        return None
    if len(phase) != 2 or phase[1] not in _SEATS:
        raise fields.error("phase", "expected the phase and the seat to act, e.g. 'offered 0'")
    tables = (_table(fields, "t0", rules), _table(fields, "t1", rules))
    places = _places(fields, tables)
    declined = fields.one("declined")
    outcomes = fields.parsed("outcome", parse_outcome) if fields.one("outcome") else []
    return Deal(
        number=fields.number("deal", 1, low=1),
        dealer=fields.number("dealer", 1, high=1),
        stake=fields.number("stake", rules.base_stake, low=1),
        phase=_PHASES[phase[0]],
        to_act=int(phase[1]),
        hands=(_mask(places["h0"]), _mask(places["h1"])),
        tables=tables,
        stock=places["s"],
        waste=places["w"],
        centre=places["c"][0] if places["c"] else None,
        declined=None if declined in (None, NONE) else _decline(fields, str(declined)),
        outcome=outcomes[0] if len(outcomes) == 1 else None,
    )


def _table(fields: _Fields, key: str, rules: Rules) -> tuple[Meld, ...]:
    melds = fields.parsed(key, parse_meld)
    for meld in melds:
        if not is_meld(meld, rules.max_run_length):
            raise fields.error(key, f"{format_meld(meld)} is not a meld under {rules.name} rules")
    return tuple(sorted(melds))


def _places(
    fields: _Fields, tables: tuple[tuple[Meld, ...], tuple[Meld, ...]]
) -> dict[str, tuple[Card, ...]]:
    """Read the cards of each place; raises NotationError naming a card placed twice."""
    places = {f"t{s}": tuple(c for m in t for c in iter_cards(m)) for s, t in enumerate(tables)}
    places |= {key: tuple(fields.parsed(key, _card)) for key in _PLACES[2:]}
    if len(places["c"]) > 1:
        raise fields.error("c", "expected one centre card")
    seen: dict[Card, str] = {}
    for key, cards in places.items():
        for card in cards:
            if card in seen:
                where = "twice" if seen[card] == key else f"also in {seen[card]!r}"
                raise fields.error(key, f"{format_card(card)} is {where}")
            seen[card] = key
    return places


def _decline(fields: _Fields, word: str) -> Decline:
    if word.lower() not in ("refused", "left"):
        raise fields.error("declined", "expected 'refused' or 'left'")
    return Decline(word.lower())


def _mask(cards: Iterable[Card]) -> CardMask:
    return sum(1 << c for c in cards)


def position_is_complete(match: Match) -> bool:
    """Say whether the running deal holds each of the 40 cards exactly once (RULES.md case 18).

    Counts the stock, the centre card, the waste, both hands and both tables; False when no
    deal has been dealt.
    """
    deal = match.deal
    if deal is None:
        return False
    loose = (*deal.stock, *deal.waste, *([] if deal.centre is None else [deal.centre]))
    masks = [*deal.hands, *deal.tables[0], *deal.tables[1], *(1 << c for c in loose)]
    union = 0
    for mask in masks:
        union |= mask
    return union == FULL_MASK and sum(m.bit_count() for m in masks) == 40


# --- events ----------------------------------------------------------------------------------


def format_event(event: ev.Event) -> str:
    """Format a domain event as one transcript line, e.g. ``0 takes 6S with 5S => 2S3S4S5S6S``.

    Seats are written as numbers; ``DealStarted`` shows the whole deck (``engine.views``
    redacts it for players and spectators).
    """
    match event:
        case ev.MatchStarted(rules, first, deals, target):
            head = f"match: rules {_format_rules(rules)}, deals {_opt(deals)}"
            return f"{head}, target {_opt(target)}, first dealer {first}"
        case ev.DealStarted(number, dealer, stake, deck):
            return f"deal {number}: dealer {dealer}, stake {stake}, deck {format_cards(deck)}"
        case ev.CardTurned(seat, card):
            return f"{seat} turns {format_card(card)}"
        case ev.CardDeclined(seat, card, how, forceable):
            verb = "refuses" if how is Decline.REFUSED else "leaves"
            return f"{seat} {verb} {format_card(card)}" + (", forceable" if forceable else "")
        case ev.ForceDemanded(seat) | ev.ForceWaived(seat):
            return f"{seat} {'forces' if isinstance(event, ev.ForceDemanded) else 'waives'}"
        case ev.CardWasted(card):
            return f"{format_card(card)} goes to the waste"
        case ev.MeldMade(seat, card, hand, table):
            used = f" with {format_hand(hand)}" if hand else ""
            return f"{seat} takes {format_card(card)}{used} => {format_table(table)}"
        case ev.HandMelded(seat, hand, table):
            return f"{seat} melds {format_hand(hand)} => {format_table(table)}"
        case ev.CardDiscarded(seat, card):
            return f"{seat} discards {format_card(card)}"
        case ev.WentOut(seat):
            return f"{seat} goes out"
        case ev.GameDrawn():
            return "the deal is drawn"
        case ev.Resigned(seat):
            return f"{seat} resigns"
        case ev.StakesSettled(winner, amount, (a, b), next_stake):
            who = "no winner" if winner is None else f"{winner} wins {amount}"
            return f"{who}: score {a}:{b}, next stake {next_stake}"
        case ev.MatchEnded(winner, (a, b)):
            return f"match over: {'tie' if winner is None else f'{winner} wins'} {a}:{b}"
    raise NotationError(f"not an event: {event!r}", text=repr(event))
