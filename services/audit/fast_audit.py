"""The fast path: a clean table certified from its stored text (:func:`audit_packed`).

It certifies only what the full audit would pass, with the same report; anything else goes to
the full audit.  What it checks in cheaper terms: ``docs/audit.md`` ("Module notes").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.actions import NewMatch
from engine.cards import ALL_CARDS, Card
from events.chain import GENESIS_HASH
from events.fairness import deal_context, parse_seed, shuffle, verify
from services.audit.deal_checks import _DEAL_TYPES
from services.audit.decode import _decode, _Decoded
from services.audit.fast_payloads import (
    _CREATED,
    _canonical_text,
    _checked_payload,
    _created,
    _joined_player,
    _json_decode,
    _reveal_text,
    _Stored,
)
from services.audit.fast_redecide import _FastRedecide
from services.audit.fast_text import _FAST_SHAPES
from services.audit.hashing import _SHA256, body_hash
from services.audit.plain_checks import _CARD_OF, _CAUSATION, _ID
from services.audit.results import TableReport, _Failed

if TYPE_CHECKING:
    from services.store.base import Head

_IDS = re.compile(rf"{_ID.pattern}(?:\x1f{_ID.pattern})*")
"""Command ids (``_ID``) joined by 0x1F."""
_TIME_TEXT = "(?:0|[1-9][0-9]{0,14})"
_TIMES = re.compile(rf"{_TIME_TEXT}(?:\x1f{_TIME_TEXT})*")
"""Times joined by 0x1F, each as the fast path takes it: as ``json`` writes it, below 2**53."""
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""A table id JSON writes as it is (every valid one)."""


def audit_packed(
    table_id: str, head: Head, count: int, hashes: bytes, bodies: bytes
) -> TableReport | None:
    """Certify a clean table from its stored form, or return None: the full audit must say.

    ``hashes`` are the raw 32-byte hashes of versions 1 to ``count`` one after the other and
    ``bodies`` their stored bodies joined by the byte 0x1E (what ``_FAST_READ_LUA`` returns).
    A report returned here is the one :func:`audit_table` gives, and says the table is clean;
    None concludes nothing (the table may fail, or hold something this path does not read).
    """
    if count < 1 or len(hashes) != 32 * count or _PLAIN_ID.fullmatch(table_id) is None:
        return None
    try:
        rows = [text.split("\x1f") for text in bodies.decode("utf-8").split("\x1e")]
    except UnicodeDecodeError:
        return None
    if len(rows) != count:
        return None
    try:
        return _FastAudit(table_id, head, rows).run(hashes)
    except Exception:  # what unchecked text can cause (a wrong type, a missing key): give up
        return None


class _FastAudit(_FastRedecide):
    """One table's fast path (see ``audit_packed``); every method returns None or False when
    it cannot certify the table (step 4 is in ``_FastRedecide``)."""

    def __init__(self, table_id: str, head: Head, rows: list[list[str]]) -> None:
        self.table_id = table_id
        self.head = head
        self.rows = rows
        self.starts: list[int] = []  # the first row of each command
        self.deal_rows: list[int] = []  # deal_started, hand_dealt, stakes_settled, deal_revealed
        self.created: dict[int, tuple[dict[str, Any], NewMatch]] = {}  # payload, command
        self.seats: dict[int, tuple[int, str | None]] = {}  # seat and bot of each player_joined
        self.lobby: dict[int, _Decoded] = {}  # each event of the lobby, decoded
        self.payloads: dict[int, dict[str, Any]] = {}  # of deal_started: checked, not compared
        self.decks: dict[int, tuple[Card, ...]] = {}
        self.reveals: dict[int, int] = {}  # the row of each deal's deal_revealed
        self.deals = 0
        self.running: int | None = None
        self.digests = ""

    def run(self, hashes: bytes) -> TableReport | None:
        last = self.read()
        if last is None or self.digests != hashes.hex() or not self.check_deals():
            return None
        status = self.redecide()
        head = self.head
        if status is None or (head.version, head.hash, head.status) != (
            len(self.rows),
            last,
            status,
        ):
            return None
        return TableReport(
            self.table_id, len(self.rows), self.deals, len(self.reveals), self.running, status
        )

    # -- steps 1 and 2 ---------------------------------------------------------------------------

    def read(self) -> str | None:
        """Hash every body; decode a ``table_created`` and check the players; returns the last
        hash.  The other payload texts are checked in steps 3 and 4."""
        table_id = self.table_id
        shapes = _FAST_SHAPES
        sha256 = _SHA256.copy
        digests: list[str] = []
        add = digests.append
        starts = self.starts
        deal_rows = self.deal_rows
        ids: list[str] = []  # of each command, checked below
        times: list[str] = []  # each time that differs from the one before, checked below
        prev = GENESIS_HASH
        last_id = last_time = ""
        for n, row in enumerate(self.rows, 1):
            kind, v, cid, causation, moment, text = row  # ValueError: not six parts
            shape = shapes.get(kind)
            if shape is None or v != shape[0]:
                return None
            if cid != last_id:
                last_id = cid
                starts.append(n - 1)
                ids.append(cid)
            if moment != last_time:
                last_time = moment
                times.append(moment)
            if causation:
                if _CAUSATION.fullmatch(causation) is None:
                    return None
                caused = f'"causation":"{causation}",'
            else:
                caused = ""
            build = shape[1]
            if build is not None:
                digest = sha256()
                digest.update(build(prev, caused, cid, table_id, moment, n, text).encode("utf-8"))
                prev = digest.hexdigest()
                if kind in _DEAL_TYPES:
                    deal_rows.append(n - 1)
                elif kind == "player_joined":
                    joined = _joined_player(text)
                    if joined is None:
                        return None
                    self.seats[n - 1] = joined
            else:  # table_created and the lobby's events: decoded as the full audit does
                if kind == "table_created":
                    digest_of = self.created_hash(n, row, caused, prev)
                else:
                    digest_of = self.lobby_hash(n, row, prev)
                if digest_of is None:
                    return None
                prev = digest_of
            add(prev)
        self.digests = "".join(digests)
        # no part holds 0x1F, so these match when every id and every time does
        if _IDS.fullmatch("\x1f".join(ids)) is None or _TIMES.fullmatch("\x1f".join(times)) is None:
            return None
        if len(set(ids)) != len(ids):  # a command id used twice
            return None
        return prev

    def created_hash(self, n: int, row: list[str], caused: str, prev: str) -> str | None:
        """The hash of the ``table_created`` at version ``n``, from its fields as the full audit
        decodes them (remembered by its text; None if they are not its text)."""
        _, v, cid, _, moment, text = row
        known = _CREATED.get(text)
        if known is None:
            known = self.decode_created(n, row, prev)
            if known is None:
                return None
        payload, command, items = known
        self.created[n - 1] = (payload, command)
        envelope = [
            f'"command_id":"{cid}"',
            f'"table_id":"{self.table_id}"',
            f'"time":{moment}',
            '"type":"table_created"',
            f'"v":{v}',
            f'"version":{n}',
        ]
        if caused:
            envelope.append(caused[:-1])
        whole = ",".join(sorted([*items, *envelope]))  # '"key":…' sort as their keys
        digest = _SHA256.copy()
        digest.update(f"{prev}\n{{{whole}}}".encode())
        return digest.hexdigest()

    def lobby_hash(self, n: int, row: list[str], prev: str) -> str | None:
        """The hash of the lobby's event (``_LOBBY_TYPES``) at version ``n``: its body rebuilt
        from the row, decoded and hashed as the full audit does (they are few: one a command of
        the lobby); None if its payload text is not the canonical JSON of its fields."""
        body = self.body_of(n, row)
        digest = body_hash(prev, body)
        try:
            event = _decode(self.table_id, _Stored(n, body, digest), row[2])
        except _Failed:
            return None
        if not _canonical_text(row[5]):
            return None
        self.lobby[n - 1] = event
        return digest

    def body_of(self, n: int, row: list[str]) -> dict[str, Any]:
        """The body the store reads from a row (``services.store.codec.unpack_body``)."""
        kind, v, cid, causation, moment, text = row
        body: dict[str, Any] = _json_decode("{" + text + "}")
        body["type"] = kind
        body["v"] = int(v)
        body["command_id"] = cid
        if causation:
            body["causation"] = causation
        body["time"] = int(moment)
        body["table_id"] = self.table_id
        body["version"] = n
        return body

    def decode_created(
        self, n: int, row: list[str], prev: str
    ) -> tuple[dict[str, Any], NewMatch, list[str]] | None:
        """``_created`` of the ``table_created`` at version ``n``, its body rebuilt from the row."""
        body = self.body_of(n, row)
        return _created(self.table_id, row[5], _Stored(n, body, body_hash(prev, body)), row[2])

    # -- step 3 ----------------------------------------------------------------------------------

    def check_deals(self) -> bool:
        """``_Audit.check_deals``: commitments and decks (the dealt hands are compared with the
        deck in step 4, as the wire events of the deal's start)."""
        rows = self.rows
        started: dict[int, int] = {}
        dealt: dict[int, list[int]] = {}
        settled: set[int] = set()
        current = 0
        for i in self.deal_rows:
            kind = rows[i][0]
            if kind == "deal_started":
                payload = _checked_payload(kind, rows[i][5])
                if payload is None:
                    return False
                self.payloads[i] = payload
                current = payload["number"]
                if current in started:
                    return False
                started[current] = i
            elif kind == "hand_dealt":
                dealt.setdefault(current, []).append(i)
            elif kind == "stakes_settled":
                if current:
                    settled.add(current)
            elif not self.check_reveal(i, started):
                return False
        self.deals = len(started)
        for number, i in started.items():
            if number in self.reveals:
                continue
            if number in settled:
                return False
            self.running = number
            deck = self.recorded_deck(i, dealt.get(number, []))
            if deck is None:
                return False
            self.decks[number] = deck
        return True

    def check_reveal(self, i: int, started: Mapping[int, int]) -> bool:
        """``_Audit._check_reveal`` of the ``deal_revealed`` of row ``i``: a canonical text, the
        deal's first reveal, its seed hashing to the commitment; then the deal's deck."""
        rows = self.rows
        reveal = _checked_payload(rows[i][0], rows[i][5])
        if reveal is None:
            return False
        number = reveal["number"]
        start = started.get(number)
        algorithm = reveal["algorithm"]
        if rows[i][5] != _reveal_text(reveal) or number in self.reveals or start is None:
            return False
        self.reveals[number] = i
        commit = self.payloads[start]
        seed = parse_seed(reveal["seed"])
        if algorithm != commit["algorithm"] or not verify(seed, commit["commitment"]):
            return False
        self.decks[number] = shuffle(seed, algorithm, deal_context(self.table_id, number))
        return True

    def recorded_deck(self, start: int, hands: list[int]) -> tuple[Card, ...] | None:
        """``_Audit._recorded_deck``: dealt hands, turned cards, unseen cards."""
        rows = self.rows
        dealer = self.payloads[start]["dealer"]
        by_seat = {}
        for i in hands:
            payload = _checked_payload("hand_dealt", rows[i][5])
            if payload is None:
                return None
            by_seat[payload["seat"]] = payload["cards"]
        seen: set[Card] = set()
        cards: dict[int, list[Card]] = {}
        for seat in (0, 1):
            if seat not in by_seat:
                return None
            cards[seat] = [_CARD_OF[c] for c in by_seat[seat]]
            if not seen.isdisjoint(cards[seat]):
                return None
            seen.update(cards[seat])
        deck: list[Card] = []
        for a, b in zip(cards[1 - dealer], cards[dealer], strict=True):
            deck += (a, b)
        for row in rows[start:]:
            if row[0] == "card_turned":  # its text is '"card":"XX","seat":N' (checked in step 4)
                card = _CARD_OF.get(row[5][8:10])
                if card is None or card in seen:
                    return None
                seen.add(card)
                deck.append(card)
        deck += [c for c in ALL_CARDS if c not in seen]
        return tuple(deck)
