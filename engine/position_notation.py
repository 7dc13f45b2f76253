"""Text notation for whole positions: a match and its running deal on one line, both ways.

A position is fields separated by `` | ``; each field is a key and its values, and a field at
its default is left out, so a worked case reads like the rule book (docs/notation.md has the
grammar).  ``format_position(parse_position(s)) == s`` for every canonical ``s`` and
``parse_position(format_position(m)) == m`` for every reachable ``m``.  Positions may name fewer
than 40 cards; ``position_is_complete`` checks that a position holds each card exactly once.

>>> text = "offered 0 | t0 2S3S4S5S 7H7D7C7S | h0 KC QC | c JC"
>>> format_position(parse_position(text))
'offered 0 | t0 2S3S4S5S 7C7D7H7S | h0 QC KC | c JC'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import fields as dataclass_fields
from typing import TypeVar

from engine.card_notation import (
    _SEATS,
    NONE,
    _card,
    format_hand,
    format_meld,
    format_outcome,
    format_table,
    parse_meld,
    parse_outcome,
)
from engine.cards import FULL_MASK, Card, CardMask, format_card, format_cards, iter_cards
from engine.errors import NotationError
from engine.game_events import Decline
from engine.melds import Meld, is_meld
from engine.rules import PRESETS, Rules
from engine.state import Deal, Match, Phase

NO_DEAL = "no_deal"
_PHASES = {p.value: p for p in Phase}
_PLACES = ("t0", "t1", "h0", "h1", "c", "s", "w")  # the fields that hold cards
_DEAL_KEYS = ("deal", "dealer", "stake", "outcome", "declined", *_PLACES)
_MATCH_KEYS = ("rules", "deals", "target", "score", "results", "played", "first", "next")
_KEYS = frozenset((*_MATCH_KEYS, *_DEAL_KEYS, "phase", "match_over"))
_RULE_OPTIONS = tuple(f.name for f in dataclass_fields(Rules) if f.name != "name")
_T = TypeVar("_T")

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
