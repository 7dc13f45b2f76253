"""Step 2 of the audit, the cheap way: plain checks of a payload's fields that pass exactly
what the contract's models accept and write back unchanged, so most bodies need no pydantic."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.cards import ALL_CARDS, Card, format_card
from events.domain import TABLE_EVENT_TYPES

_CARD_KEY: dict[str, int] = {format_card(c): (c % 10) * 4 + c // 10 for c in ALL_CARDS}
"""Each canonical card text and its place in rank-then-suit order (how events sort cards)."""
_CARD_OF: dict[str, Card] = {format_card(c): c for c in ALL_CARDS}

_ID = re.compile(r"[A-Za-z0-9_-]{8,64}")
_CAUSATION = re.compile(r"[A-Za-z0-9_-]{1,64}(:[1-9][0-9]{0,11})?")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ALGORITHM = re.compile(r"[a-z0-9_.-]{1,40}")
_BOT = re.compile(r"[a-z0-9_-]{1,32}")
_MAX_TIME = 2**53 - 1
_ENVELOPE = ("table_id", "version", "command_id", "time")


def _seat(value: object) -> bool:
    return type(value) is int and 0 <= value <= 1


def _card(value: object) -> bool:
    return type(value) is str and value in _CARD_KEY


def _count(value: object, low: int) -> bool:
    return type(value) is int and value >= low


def _hex64(value: object) -> bool:
    return type(value) is str and _HEX64.fullmatch(value) is not None


def _algorithm(value: object) -> bool:
    return type(value) is str and _ALGORITHM.fullmatch(value) is not None


def _sorted_cards(value: object, low: int, high: int) -> bool:
    """A list of ``low..high`` distinct canonical cards in rank-then-suit order."""
    if type(value) is not list or not low <= len(value) <= high:
        return False
    last = -1
    for text in value:
        key = _CARD_KEY.get(text) if type(text) is str else None
        if key is None or key <= last:
            return False
        last = key
    return True


def _table(value: object) -> bool:
    """A table as events write it: sorted melds of 3-10 sorted cards, no card twice."""
    if type(value) is not list or len(value) > 13:
        return False
    seen: set[str] = set()
    last: list[int] = []
    for meld in value:
        if not _sorted_cards(meld, 3, 10):
            return False
        keys = [_CARD_KEY[c] for c in meld]
        if keys <= last or not seen.isdisjoint(meld):
            return False
        seen.update(meld)
        last = keys
    return True


def _scores(value: object) -> bool:
    return type(value) is list and len(value) == 2 and _count(value[0], 0) and _count(value[1], 0)


def _winner(value: object) -> bool:
    return value is None or _seat(value)


def _name(value: object) -> bool:
    return (
        type(value) is str
        and 1 <= len(value) <= 40
        and value.isprintable()
        and value.strip() == value
    )


_Check = Callable[[Mapping[str, Any]], bool]
_FAST_CHECKS: dict[str, _Check] = {
    "card_turned": lambda b: _seat(b["seat"]) and _card(b["card"]),
    "card_refused": lambda b: (
        _seat(b["seat"]) and _card(b["card"]) and type(b["forceable"]) is bool
    ),
    "card_left": lambda b: _seat(b["seat"]) and _card(b["card"]) and type(b["forceable"]) is bool,
    "card_wasted": lambda b: _card(b["card"]),
    "card_discarded": lambda b: _seat(b["seat"]) and _card(b["card"]),
    "force_demanded": lambda b: _seat(b["seat"]),
    "force_waived": lambda b: _seat(b["seat"]),
    "went_out": lambda b: _seat(b["seat"]),
    "resigned": lambda b: _seat(b["seat"]),
    "game_drawn": lambda b: True,
    "meld_made": lambda b: (
        _seat(b["seat"])
        and _card(b["card"])
        and _sorted_cards(b["hand"], 0, 10)
        and _table(b["table"])
    ),
    "hand_melded": lambda b: (
        _seat(b["seat"]) and _sorted_cards(b["hand"], 0, 10) and _table(b["table"])
    ),
    "hand_dealt": lambda b: _seat(b["seat"]) and _sorted_cards(b["cards"], 10, 10),
    "stakes_settled": lambda b: (
        _winner(b["winner"])
        and _count(b["amount"], 0)
        and _scores(b["scores"])
        and _count(b["next_stake"], 1)
    ),
    "match_ended": lambda b: _winner(b["winner"]) and _scores(b["scores"]),
    "deal_started": lambda b: (
        _count(b["number"], 1)
        and _seat(b["dealer"])
        and _count(b["stake"], 1)
        and _hex64(b["commitment"])
        and _algorithm(b["algorithm"])
    ),
    "deal_revealed": lambda b: (
        _count(b["number"], 1) and _hex64(b["seed"]) and _algorithm(b["algorithm"])
    ),
    "player_joined": lambda b: (
        _seat(b["seat"])
        and _name(b["name"])
        and (b["bot"] is None or (type(b["bot"]) is str and _BOT.fullmatch(b["bot"]) is not None))
    ),
}
"""Plain checks of the payload fields of every event type but ``table_created``.  A payload
that passes (with the right keys and ``v``) is exactly what pydantic would accept and write back
unchanged (``tests/services/test_audit.py`` checks it); anything else goes through
``events.upcast.parse_event``, which upcasts, validates and normalises."""


@dataclass(frozen=True, slots=True)
class _Shape:
    """An event type's payload keys (``type``, ``v`` and fields), its version and its check."""

    keys: frozenset[str]
    bare: frozenset[str]
    caused: frozenset[str]
    version: int
    check: _Check


_SHAPES: dict[str, _Shape] = {}
for _kind, _check in _FAST_CHECKS.items():
    _cls = TABLE_EVENT_TYPES[_kind]
    _keys = frozenset(_cls.model_fields)
    _bare = _keys | frozenset(_ENVELOPE)
    _SHAPES[_kind] = _Shape(_keys, _bare, _bare | {"causation"}, _cls.VERSION, _check)


def fast_payload_ok(payload: Mapping[str, Any]) -> bool:
    """Say whether a payload (no envelope keys) passes the plain checks of its type."""
    kind = payload.get("type")
    shape = _SHAPES.get(kind) if type(kind) is str else None
    if shape is None or payload.keys() != shape.keys:
        return False
    v = payload["v"]
    return type(v) is int and v == shape.version and shape.check(payload)
