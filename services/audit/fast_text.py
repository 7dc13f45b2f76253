"""Text builders of the fast path: the canonical JSON the engine's events are written as, and
what a body's hash covers, written from its stored text."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from engine.cards import ALL_CARDS, Card, format_card
from engine.game_events import (
    CardDeclined,
    CardDiscarded,
    CardTurned,
    CardWasted,
    DealStarted,
    Decline,
    ForceDemanded,
    ForceWaived,
    GameDrawn,
    HandMelded,
    MatchEnded,
    MeldMade,
    Resigned,
    StakesSettled,
    WentOut,
)
from events.domain import TABLE_EVENT_TYPES
from events.fairness import split_deck

_BuildHashed = Callable[[str, str, str, str, str, int, str], str]


def _builder(kind: str, version: int, keys: Iterable[str]) -> _BuildHashed | None:
    """For a move's wire type, a function writing what its hash covers: the hash before, a
    newline and the canonical JSON of the body, from the envelope fields and the payload text
    (``prev, caused, command_id, table_id, time, version, text``; ``caused`` is
    ``"causation":"…",`` or empty).  None if a field sorts among the envelope fields."""
    fields = sorted(set(keys) - {"type", "v"})
    a = [k for k in fields if k < "causation"]  # then causation and command_id
    b = [k for k in fields if "command_id" < k < "table_id"]  # then table_id … version
    c = [k for k in fields if k > "version"]
    tv = f',"type":"{kind}","v":{version},"version":'
    if len(a) + len(b) + len(c) != len(fields) or (c and not b):
        return None
    if not a and not b:  # no payload fields (c is then empty too)

        def none(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            return f'{prev}\n{{{caused}"command_id":"{cid}","table_id":"{tid}","time":{at}{tv}{n}}}'

        return none
    if not a and not c:

        def b_only(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            return (
                f'{prev}\n{{{caused}"command_id":"{cid}",{p},"table_id":"{tid}","time":{at}'
                f"{tv}{n}}}"
            )

        return b_only
    if not b:

        def a_only(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            return (
                f'{prev}\n{{{p},{caused}"command_id":"{cid}","table_id":"{tid}","time":{at}'
                f"{tv}{n}}}"
            )

        return a_only
    kb = f',"{b[0]}":'
    kc = f',"{c[0]}":' if c else ""
    if not c:

        def ab(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            j = p.find(kb)
            return (
                f'{prev}\n{{{p[:j]},{caused}"command_id":"{cid}"{p[j:]},"table_id":"{tid}",'
                f'"time":{at}{tv}{n}}}'
            )

        return ab
    if not a:

        def bc(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
            k = p.find(kc)
            return (
                f'{prev}\n{{{caused}"command_id":"{cid}",{p[:k]},"table_id":"{tid}",'
                f'"time":{at}{tv}{n}{p[k:]}}}'
            )

        return bc

    def abc(prev: str, caused: str, cid: str, tid: str, at: str, n: int, p: str) -> str:
        j = p.find(kb)
        k = p.find(kc, j)
        return (
            f'{prev}\n{{{p[:j]},{caused}"command_id":"{cid}"{p[j:k]},"table_id":"{tid}",'
            f'"time":{at}{tv}{n}{p[k:]}}}'
        )

    return abc


_CARD_JSON: dict[Card, str] = {c: json.dumps(format_card(c)) for c in ALL_CARDS}
_WIRE_ORDER: tuple[Card, ...] = tuple(sorted(ALL_CARDS, key=lambda c: (c % 10, c // 10)))
_CARDS_TEXT: dict[int, str] = {}
_MELD_TEXT: dict[int, tuple[tuple[int, ...], str]] = {}
_CACHE_SIZE = 1 << 16


def _cards_text(mask: int) -> str:
    """The canonical JSON of a set of cards as the wire writes it (rank, then suit)."""
    text = _CARDS_TEXT.get(mask)
    if text is None:
        text = "[" + ",".join([_CARD_JSON[c] for c in _WIRE_ORDER if mask >> c & 1]) + "]"
        if len(_CARDS_TEXT) >= _CACHE_SIZE:
            _CARDS_TEXT.clear()
        _CARDS_TEXT[mask] = text
    return text


def _table_text(table: Iterable[int]) -> str:
    """The canonical JSON of a table as the wire writes it (melds ordered by their cards)."""
    melds = []
    for meld in table:
        info = _MELD_TEXT.get(meld)
        if info is None:
            keys = tuple((c % 10) * 4 + c // 10 for c in _WIRE_ORDER if meld >> c & 1)
            info = (keys, _cards_text(meld))
            if len(_MELD_TEXT) >= _CACHE_SIZE:
                _MELD_TEXT.clear()
            _MELD_TEXT[meld] = info
        melds.append(info)
    melds.sort()
    return "[" + ",".join([text for _, text in melds]) + "]"


def _winner_text(winner: int | None) -> str:
    return "null" if winner is None else f"{winner:d}"


_DECLINED = {Decline.REFUSED: "card_refused", Decline.LEFT: "card_left"}
_BOOL = {True: "true", False: "false"}

_TEXT_OF: dict[type, Callable[[Any], tuple[str, str]]] = {
    CardTurned: lambda e: ("card_turned", f'"card":{_CARD_JSON[e.card]},"seat":{e.seat}'),
    CardDeclined: lambda e: (
        _DECLINED[e.how],
        f'"card":{_CARD_JSON[e.card]},"forceable":{_BOOL[e.forceable]},"seat":{e.seat}',
    ),
    CardWasted: lambda e: ("card_wasted", f'"card":{_CARD_JSON[e.card]}'),
    MeldMade: lambda e: (
        "meld_made",
        f'"card":{_CARD_JSON[e.card]},"hand":{_cards_text(e.hand)},"seat":{e.seat},'
        f'"table":{_table_text(e.table)}',
    ),
    HandMelded: lambda e: (
        "hand_melded",
        f'"hand":{_cards_text(e.hand)},"seat":{e.seat},"table":{_table_text(e.table)}',
    ),
    CardDiscarded: lambda e: (
        "card_discarded",
        f'"card":{_CARD_JSON[e.card]},"seat":{e.seat}',
    ),
    ForceDemanded: lambda e: ("force_demanded", f'"seat":{e.seat}'),
    ForceWaived: lambda e: ("force_waived", f'"seat":{e.seat}'),
    WentOut: lambda e: ("went_out", f'"seat":{e.seat}'),
    Resigned: lambda e: ("resigned", f'"seat":{e.seat}'),
    GameDrawn: lambda e: ("game_drawn", ""),
    StakesSettled: lambda e: (
        "stakes_settled",
        f'"amount":{e.amount},"next_stake":{e.next_stake},'
        f'"scores":[{e.scores[0]},{e.scores[1]}],"winner":{_winner_text(e.winner)}',
    ),
    MatchEnded: lambda e: (
        "match_ended",
        f'"scores":[{e.scores[0]},{e.scores[1]}],"winner":{_winner_text(e.winner)}',
    ),
}
"""For each engine event of a move: its wire type and the canonical JSON of its wire fields but
``type`` and ``v``, without braces -- ``to_wire``'s output, written directly (a test checks
both agree)."""

_TEXT_TYPES = frozenset(
    {
        "card_turned",
        "card_refused",
        "card_left",
        "card_wasted",
        "meld_made",
        "hand_melded",
        "card_discarded",
        "force_demanded",
        "force_waived",
        "went_out",
        "resigned",
        "game_drawn",
        "stakes_settled",
        "match_ended",
    }
)
"""The wire types of ``_TEXT_OF``: the fast path compares them with the engine's as text."""
_DICT_TYPES = frozenset(
    {"table_created", "player_joined", "deal_started", "hand_dealt", "deal_revealed"}
)
"""The other types a table holds: the fast path parses their payloads and checks them field by
field (``_checked_payload``), then compares their texts with what they must be
(``_deal_texts``, ``_reveal_text``, ``_joined_seat``); a ``table_created`` is decoded as the
full audit does (``_created``)."""

_LOBBY_TYPES = frozenset({"player_left", "rematch_agreed", "rematch_opened", "bot_failed"})
"""The types no engine command gives (``seat_checks``): few a table, so the fast path decodes
and hashes them as the full audit does, and checks them with the full audit's code."""

_FAST_SHAPES: dict[str, tuple[str, _BuildHashed | None]] = {}
for _kind in sorted(_TEXT_TYPES | _DICT_TYPES | _LOBBY_TYPES):
    _cls = TABLE_EVENT_TYPES[_kind]
    _slow = _kind == "table_created" or _kind in _LOBBY_TYPES
    _build = None if _slow else _builder(_kind, _cls.VERSION, _cls.model_fields)
    if _build is not None or _slow:
        _FAST_SHAPES[_kind] = (str(_cls.VERSION), _build)
"""Each type the fast path reads: its ``v`` as text and, but for ``table_created`` and the
lobby's types, its ``_builder``."""


def _deal_texts(engine_event: DealStarted, payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The wire types and payload texts of a deal's start (``to_wire``, as ``_TEXT_OF``), with
    the recorded commitment and algorithm (checked: plain hex and name)."""
    non_dealer, dealer, _ = split_deck(engine_event.deck)
    hands = {1 - engine_event.dealer: non_dealer, engine_event.dealer: dealer}
    masks = [sum(1 << c for c in hands[seat]) for seat in (0, 1)]
    return [
        (
            "deal_started",
            f'"algorithm":"{payload["algorithm"]}","commitment":"{payload["commitment"]}",'
            f'"dealer":{engine_event.dealer:d},"number":{engine_event.number:d},'
            f'"stake":{engine_event.stake:d}',
        ),
        ("hand_dealt", f'"cards":{_cards_text(masks[0])},"seat":0'),
        ("hand_dealt", f'"cards":{_cards_text(masks[1])},"seat":1'),
    ]
