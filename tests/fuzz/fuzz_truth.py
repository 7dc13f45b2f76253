"""What the fuzz tests check every answer against: the true state of the tables, from the store.

:class:`Truth` reads a table's stored events and secret seeds and folds them
(``services.tables.table.fold_table``), so it knows every hand, the stock and the seed of the
deal in play.  From that it says

* what is hidden from a viewer (:meth:`Truth.hidden`): the other seat's hand (both hands for a
  spectator), every card of the stock, and the deal's seed, until the deal is over;
* where a table stands (:meth:`Truth.marks`): head version and hash, and the length of its
  event stream, so that a rejected request can be shown to have changed nothing.

:func:`leaks` reads an answer's cards field by field, as the contract puts them (the rules are in
its docstring): cards in card fields, and any card-shaped text elsewhere, but nothing in the ids
and names clients choose; a seed anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.cards import cards_of, format_card, parse_card
from engine.errors import NotationError
from events.base import TABLE_ID_PATTERN
from services.store import RedisEventStore
from services.tables.table import Table, fold_table

_T = TypeVar("_T")
CARD_WORD = re.compile(r"(?<![A-Za-z0-9])([A2-7JQK][CDHS])(?![A-Za-z0-9])")
"""A card in canonical notation (``7H``, ``QS``) standing as a word of its own."""
CARD_RUN = re.compile(r"(?:[A2-7JQK][CDHS])+")
"""Cards in canonical notation run together, as a meld is written (``AH2H3H``, docs/notation.md)."""
CARD_FIELDS = frozenset({"card", "cards", "centre", "hand", "table"})
"""The keys whose values are cards, or lists (of lists) of cards: the events' ``card``, ``cards``,
``hand`` and ``table`` (melds), the commands' too, the views' ``centre`` and each player's
``hand`` and ``table`` (docs/schema/*.json, ``engine.views``)."""
NOTATION_FIELDS = frozenset({"legal_actions"})
"""The keys whose values are actions in engine notation (``take 2H 3H => AH2H3H``)."""
CLIENT_TEXT_FIELDS = frozenset(
    {"command_id", "causation_id", "event_id", "table_id", "next_table_id", "name", "rules"}
    | {"loc", "token", "next_cursor"}
)
"""The keys whose values are texts a client chose, or random text: ids (an event id is
``<table id>:<version>``), a player's or a rule set's name (a lobby row's ``rules``), the request's
field names in a rejection's ``details`` (``loc``), seat tokens and lobby cursors (base64, where
``-7H_`` may turn up).  Their card-like words name no card."""
_TABLE_ID = re.compile(TABLE_ID_PATTERN)


@dataclass(frozen=True)
class Secrets:
    """What one viewer may not see of a table now: cards and seed texts."""

    cards: frozenset[str] = frozenset()
    seeds: frozenset[str] = frozenset()
    deal: int = 0
    """The number of the deal in play (0: none)."""

    def __bool__(self) -> bool:
        return bool(self.cards or self.seeds)

    def throughout(self, later: Secrets) -> Secrets:
        """Return what stayed hidden from this moment to a ``later`` one: the secrets of a
        message sent in between.  Across a new deal nothing is certain (the last deal's cards
        were shown at its end, and are dealt again): nothing is checked."""
        if later.deal != self.deal:
            return Secrets()
        return Secrets(self.cards & later.cards, self.seeds & later.seeds, self.deal)


@dataclass(frozen=True)
class Mark:
    """Where a table stands: head version and hash, and the length of its event stream."""

    version: int
    hash: str
    stream: int


class Truth:
    """Reads the true state of tables from the store, on the event loop that owns the client.

    The fuzzers run in a worker thread (the gateway serves on the loop meanwhile); the ``*_now``
    methods hand a read to the loop and wait for it.
    """

    def __init__(self, store: RedisEventStore, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop

    def _now(self, coroutine: Awaitable[_T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(_await(coroutine), self.loop)
        return future.result(timeout=30)

    async def table(self, table_id: str) -> tuple[Table, dict[str, str]]:
        """Return the table folded from its stored events, and its secret hash."""
        stored = await self.store.read(table_id) if _TABLE_ID.fullmatch(table_id) else []
        secrets = await self.store.secrets(table_id) if stored else {}
        return fold_table(table_id, ((e.version, e.hash, e.body) for e in stored), secrets), secrets

    def over_now(self, table_id: str) -> bool:
        """Say whether the table's match is over (from another thread)."""
        table, _ = self._now(self.table(table_id))
        return table.match is not None and table.match.over

    async def hidden(self, table_id: str, seat: int | None) -> Secrets:
        """Return what ``seat`` (None: a spectator) may not see of the table now."""
        table, secrets = await self.table(table_id)
        deal = None if table.match is None else table.match.deal
        if deal is None or deal.outcome is not None:
            return Secrets()  # no deal in play: its seed is revealed, every card public
        hidden = list(deal.stock)
        for other in (0, 1):
            if other != seat:
                hidden += cards_of(deal.hands[other])
        seed = secrets.get(f"seed:{deal.number}", "")
        cards = frozenset(format_card(c) for c in hidden)
        return Secrets(cards, frozenset({seed} - {""}), deal.number)

    def hidden_now(self, table_id: str, seat: int | None) -> Secrets:
        """:meth:`hidden`, from another thread."""
        return self._now(self.hidden(table_id, seat))

    async def marks(self, table_ids: Iterable[str]) -> dict[str, Mark]:
        """Return where each (valid) table id stands now."""
        out: dict[str, Mark] = {}
        for table_id in sorted(set(table_ids)):
            if not _TABLE_ID.fullmatch(table_id):
                continue
            head = await self.store.head(table_id)
            stream = await self.store.client.xlen(self.store.keys.events(table_id))
            out[table_id] = Mark(head.version, head.hash, int(stream))
        return out

    def marks_now(self, table_ids: Iterable[str]) -> dict[str, Mark]:
        """:meth:`marks`, from another thread."""
        return self._now(self.marks(table_ids))


async def _await(coroutine: Awaitable[_T]) -> _T:
    return await coroutine


def card_words(text: str) -> set[str]:
    """Return the cards named as words of their own in ``text``.

    >>> sorted(card_words('{"hand": ["7H", "QS"], "x": "A7HB KC-2"}'))
    ['7H', 'KC', 'QS']
    """
    return set(CARD_WORD.findall(text))


def named_cards(text: str) -> set[str]:
    """Return the cards ``text`` names in any notation the contract reads (``7h``, ``♥7``),
    canonical: what an answer may quote back of a request.

    >>> sorted(named_cards('{"hand": ["2c", "♠A", "zz"]}'))
    ['2C', 'AS']
    """
    named = set()
    for word in re.findall(r"[A-Za-z0-9♣♦♥♠♧♢♡♤]+", text):
        with contextlib.suppress(NotationError):
            named.add(format_card(parse_card(word)))
    return named


def run_cards(text: str) -> set[str]:
    """Return the cards of the words of ``text`` in canonical notation, alone or run together
    as a meld is written (docs/notation.md).

    >>> sorted(run_cards("take 2H 3H => AH2H3H, c-4Dx 7HB"))
    ['2H', '3H', 'AH']
    """
    found: set[str] = set()
    for word in re.findall(r"[A-Za-z0-9]+", text):
        if CARD_RUN.fullmatch(word):
            found.update(word[i : i + 2] for i in range(0, len(word), 2))
    return found


def card_shaped(text: str) -> bool:
    """Say whether every word of ``text`` is a card (in any notation the contract reads) or a
    meld: a value that stands for cards, whatever its field.

    >>> card_shaped("7h"), card_shaped("QS, AH2H3H"), card_shaped("7H is not in the hand")
    (True, True, False)
    """
    words = re.findall(r"[A-Za-z0-9♣♦♥♠♧♢♡♤]+", text)
    return bool(words) and all(named_cards(w) or CARD_RUN.fullmatch(w.upper()) for w in words)


def fielded(value: Any) -> Iterable[tuple[str, str]]:
    """Yield every string of a JSON value, keys too, with the field it stands under: the nearest
    key above it (a list passes its key on); all of a card field stands under that field.

    Without recursion: a fuzzed value may be nested deeper than Python's stack.

    >>> sorted(fielded({"players": [{"hand": ["7H"], "name": "Ana"}]}))
    [('', 'players'), ('hand', '7H'), ('name', 'Ana'), ('players', 'hand'), ('players', 'name')]
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, field = stack.pop()
        if isinstance(item, str):
            yield field, item
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                yield field, str(key)
                stack.append((inner, field if field in CARD_FIELDS else str(key)))
        elif isinstance(item, list | tuple):
            stack.extend((inner, field) for inner in item)


def shown_cards(field: str, text: str, quoted: set[str]) -> set[str]:
    """Return the cards a string of an answer shows, by the field it stands under:

    * a card field (:data:`CARD_FIELDS`): every card it names, in any notation, even one the
      request named (no answer hands a request's cards back in a card field);
    * a notation field (:data:`NOTATION_FIELDS`): every card of its actions;
    * a client's text (:data:`CLIENT_TEXT_FIELDS`): none;
    * any other field (a message, a field the contract does not have): all its cards if it is
      :func:`card_shaped`, else the cards it names less those the request named (``quoted``):
      a rejection's message may quote its input.
    """
    if field in CLIENT_TEXT_FIELDS:
        return set()
    if field in CARD_FIELDS or card_shaped(text):
        return named_cards(text) | run_cards(text.upper())
    if field in NOTATION_FIELDS:
        return run_cards(text)
    return run_cards(text) - quoted


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's stack
        return None


def _strings(text: str) -> list[tuple[str, str]]:
    """The strings of an answer or a request with their fields: those of its JSON, or the text
    itself, of no field, when it is no JSON."""
    parsed = _json_or_none(text)
    return [("", text)] if parsed is None else list(fielded(parsed))


def leaks(answer: str | bytes, secrets: Secrets, sent: str = "") -> list[str]:
    """Return the hidden cards, then the seeds, that ``answer`` shows (each sorted).

    A JSON answer is read string by string (a JSON escape cannot hide a card), each string by
    the field it stands under (:func:`shown_cards`); any other text as one string of no field.
    A seed is shown wherever it stands, ids and names included, unless the request ``sent``
    held it.  What is caught, then: a hidden card in a card field (a hand, a meld, the centre,
    an event's card) or in a legal action, always; in a field the contract does not have
    (``"stock_top": "7H"``) whenever its value is card-shaped; in prose such as a message,
    unless the request named that card.  What is not: card-like words of the ids and names
    that clients choose (a command id ``c-4D-x9`` in an envelope, a player named ``KS`` in a
    lobby row), which name no card; they come back in answers to other requests than the one
    that chose them, so quoting cannot account for them.

    >>> hidden = Secrets(frozenset({"4D", "KS"}), frozenset({"5e" * 32}), 1)
    >>> leaks('{"command_id": "c-4D-x9", "name": "KS", "hand": ["4D"], "peek": "KS"}', hidden)
    ['4D', 'KS']
    >>> leaks('{"message": "no 4D in your hand", "table_id": "' + "5e" * 32 + '"}', hidden)
    ['4D', '5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e']
    """
    if not secrets:
        return []
    text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else answer
    quoted: set[str] = set()
    for _, string in [("", sent), *_strings(sent)]:  # its raw text, and its JSON's unescaped
        quoted |= named_cards(string) | run_cards(string.upper())
    cards: set[str] = set()
    seeds: set[str] = set()
    for field, string in _strings(text):
        cards |= shown_cards(field, string, quoted) & secrets.cards
        seeds |= {seed for seed in secrets.seeds if seed in string and seed not in sent}
    return sorted(cards) + sorted(seeds)
