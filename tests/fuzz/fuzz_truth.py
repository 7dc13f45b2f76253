"""What the fuzz tests check every answer against: the true state of the tables, from the store.

:class:`Truth` reads a table's stored events and secret seeds and folds them
(``services.tables.table.fold_table``), so it knows every hand, the stock and the seed of the
deal in play.  From that it says

* what is hidden from a viewer (:meth:`Truth.hidden`): the other seat's hand (both hands for a
  spectator), every card of the stock, and the deal's seed, until the deal is over;
* where a table stands (:meth:`Truth.marks`): head version and hash, and the length of its
  event stream, so that a rejected request can be shown to have changed nothing.

:func:`leaks` scans an answer for hidden cards and seeds: every card-shaped word of every JSON
string (keys too), less the words of the request itself (an error message may quote its input).
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


def strings(value: Any) -> Iterable[str]:
    """Yield every string in a JSON value, keys included (without recursion: a fuzzed value
    may be nested deeper than Python's stack)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                yield str(key)
                stack.append(inner)
        elif isinstance(item, list | tuple):
            stack.extend(item)


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


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's stack
        return None


def leaks(answer: str | bytes, secrets: Secrets, sent: str = "") -> list[str]:
    """Return the hidden cards and seeds ``answer`` shows that the request ``sent`` did not.

    A JSON answer is scanned string by string (a JSON escape cannot hide a card); any other text
    as it is.
    """
    if not secrets:
        return []
    text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else answer
    parsed = _json_or_none(text)
    words = text if parsed is None else "\n".join(strings(parsed))
    quoted = named_cards(sent) | named_cards("\n".join(strings(_json_or_none(sent))))
    found = sorted((card_words(words) & secrets.cards) - quoted)
    found += sorted(seed for seed in secrets.seeds if seed in words and seed not in sent)
    return found
