"""Payload texts the fast path parses: checked by the plain checks and compared with their
canonical text; a ``table_created`` decoded as the full audit does, remembered by its text."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from engine.actions import NewMatch
from events.chain import canonical_json
from events.envelope import BODY_KEYS
from events.mapping import rules_from_wire
from services.audit.decode import _decode
from services.audit.plain_checks import _SHAPES
from services.audit.results import _Failed

_encode_str: Callable[[str], str] = json.encoder.encode_basestring
"""How canonical JSON writes a string (``canonical`` is made with it)."""
_json_decode = json.JSONDecoder().decode
"""A parser made as ``services.store.codec``'s is."""


class _Stored:
    """A stored event as ``_decode`` reads it."""

    __slots__ = ("body", "hash", "version")

    def __init__(self, version: int, body: dict[str, Any], digest: str) -> None:
        self.version = version
        self.body = body
        self.hash = digest


_CREATED: dict[str, tuple[dict[str, Any], NewMatch, list[str]]] = {}
"""``_created`` by ``table_created`` payload text."""

_PAYLOAD_KEYS = {kind: shape.keys - {"type", "v"} for kind, shape in _SHAPES.items()}


def _checked_payload(kind: str, text: str) -> dict[str, Any] | None:
    """A payload text parsed, if its fields pass the plain checks of ``kind`` (whether the
    text is canonical is checked by comparing it, elsewhere)."""
    payload: dict[str, Any] = _json_decode("{" + text + "}")
    if payload.keys() != _PAYLOAD_KEYS[kind] or not _SHAPES[kind].check(payload):
        return None
    return payload


def _reveal_text(reveal: Mapping[str, Any]) -> str:
    """The canonical payload text of a checked ``deal_revealed`` (plain hex and name)."""
    algorithm, number, seed = reveal["algorithm"], reveal["number"], reveal["seed"]
    return f'"algorithm":"{algorithm}","number":{number:d},"seed":"{seed}"'


def _joined_player(text: str) -> tuple[int, str | None] | None:
    """The seat and bot of a ``player_joined`` payload text that passes the plain checks and
    is canonical, else None."""
    payload = _checked_payload("player_joined", text)
    if payload is None:
        return None
    bot = payload["bot"]
    canonical_text = (
        f'"bot":{"null" if bot is None else _encode_str(bot)},'
        f'"name":{_encode_str(payload["name"])},"seat":{payload["seat"]:d}'
    )
    return (payload["seat"], bot) if text == canonical_text else None


def _joined_seat(text: str) -> int | None:
    """The seat of ``_joined_player``, else None."""
    joined = _joined_player(text)
    return None if joined is None else joined[0]


def _canonical_text(text: str) -> bool:
    """Say whether a payload text is the canonical JSON of its fields without braces, none of
    them an envelope field (so the body the store reads from it hashes as the text is)."""
    fields = _json_decode("{" + text + "}")
    if not fields.keys().isdisjoint(BODY_KEYS | {"type", "v"}):
        return False
    return canonical_json(fields).decode("utf-8")[1:-1] == text


def _created(
    table_id: str, text: str, stored: _Stored, command_id: str
) -> tuple[dict[str, Any], NewMatch, list[str]] | None:
    """What a ``table_created``'s payload text gives, remembered by the text (it depends on
    nothing else, and most tables share their rules): the payload as the full audit decodes
    it (``_decode``), its command, and its fields written as canonical JSON (``"key":value``,
    joined by commas they are the text: else the fast path gives up)."""
    try:
        event = _decode(table_id, stored, command_id)
    except _Failed:
        return None
    model = event.model
    if model is None:
        return None
    fields = _json_decode("{" + text + "}")
    items = [
        canonical_json({key: value}).decode("utf-8")[1:-1] for key, value in sorted(fields.items())
    ]
    if ",".join(items) != text or not fields.keys().isdisjoint(BODY_KEYS | {"type", "v"}):
        return None
    rules = rules_from_wire(model.rules)
    command = NewMatch(rules, model.first_dealer, model.deals, model.target_score)
    known = (dict(event.payload), command, items)
    if len(_CREATED) >= 256:
        _CREATED.clear()
    _CREATED[text] = known
    return known
